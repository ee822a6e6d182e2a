#!/usr/bin/env bash
# numprobe as a library: install into a temporary prefix, then configure, build and run the
# consumer project tests/package (find_package(numprobe) + its own GoogleTest), and build the
# example plugin standalone against the installed kernel ABI header.
#   scripts/package_test.sh [BUILD_DIR]      (default: $BUILD_DIR or build)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-${BUILD_DIR:-$root/build}}"
work="$(mktemp -d "${TMPDIR:-/tmp}/numprobe-package.XXXXXX")"
trap 'rm -rf "$work"' EXIT
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" "${gen[@]}" -DNUMPROBE_ENABLE_CUDA=OFF -DNUMPROBE_ENABLE_HIP=OFF
fi
# Only what the install needs: the installed libraries.
cmake --build "$build" --target numprobe_formats numprobe_core numprobe_reference numprobe_metrics \
  -j "${JOBS:-$(nproc)}"
cmake --install "$build" --prefix "$work/prefix"

cmake -S "$root/tests/package" -B "$work/consumer" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix"
cmake --build "$work/consumer" -j "${JOBS:-$(nproc)}"
ctest --test-dir "$work/consumer" --output-on-failure

cmake -S "$root/examples/plugin" -B "$work/plugin" "${gen[@]}" -DCMAKE_PREFIX_PATH="$work/prefix"
cmake --build "$work/plugin"
test -f "$work/plugin/libnumprobe_example_plugin.so"
echo "package test: OK (prefix $work/prefix)"
