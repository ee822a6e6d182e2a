#!/usr/bin/env bash
# Configures and builds numprobe into ${BUILD_DIR:-build}. Extra arguments go to cmake.
# BUILD_TARGET=name builds that target only (scripts/run.sh: numprobe); unset, everything.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
gen=()
command -v ninja >/dev/null && [ ! -f "$build/CMakeCache.txt" ] && gen=(-G Ninja)
cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} "$@"
cmake --build "$build" -j "$(nproc)" ${BUILD_TARGET:+--target "$BUILD_TARGET"}
