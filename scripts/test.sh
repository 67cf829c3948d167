#!/usr/bin/env bash
# Sets up everything the tests need (once; cached outside the repo) and runs them.
#   bash scripts/test.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --tests
# The real servers the remote backends are tested against, built once into the cache
# (in parallel: one compiles, the other mostly downloads). Logs say why one failed.
logs="$(mktemp -d)"
bash scripts/build_llama_server.sh >"$logs/llama.log" 2>&1 &
llama=$!
bash scripts/build_vllm_env.sh >"$logs/vllm.log" 2>&1 &
vllm=$!
for job in "llama:$llama" "vllm:$vllm"; do
  if ! wait "${job#*:}"; then
    echo "building ${job%%:*} failed:" >&2
    tail -n 40 "$logs/${job%%:*}.log" >&2
    exit 1
  fi
done
.venv/bin/python -m pytest "$@"
