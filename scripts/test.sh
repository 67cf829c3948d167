#!/usr/bin/env bash
# Sets up everything the tests need (once; cached outside the repo) and runs them.
#   bash scripts/test.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --tests
# The real servers the remote backends are tested against, built once into the cache.
bash scripts/build_llama_server.sh >/dev/null &
llama=$!
bash scripts/build_vllm_env.sh >/dev/null &
vllm=$!
wait $llama
wait $vllm
.venv/bin/python -m pytest "$@"
