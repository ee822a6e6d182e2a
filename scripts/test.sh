#!/usr/bin/env bash
# One command: install, build, and pass the tests (CPU only; GPU tests skip without a device).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "$@"
