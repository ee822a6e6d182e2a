#!/usr/bin/env bash
# One command: install, build, and pass the tests, C++ and Python (CPU only; GPU tests skip
# without a device).
# Everything is built into ${BUILD_DIR:-build}: the tests, the benchmarks, and the CUDA and HIP
# kernels whenever their compilers are installed (AUTO: compiled and checked without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
# The tests that run Python (the oracles, the exec kernels) use the test venv's interpreter, so
# they meet the pinned numpy and ml_dtypes (requirements-test.txt) and nothing else.
scripts/build.sh -DPython3_EXECUTABLE="$(scripts/python_setup.sh)"
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "$@"
# The Python package (python/): built into a venv against this tree, its pytest suite and the
# examples in examples/python (numpy only).
scripts/python_test.sh
