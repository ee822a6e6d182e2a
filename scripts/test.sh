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
# A unity build (cmake/numprobe_fast_build.cmake: 16 sources per compiler run) of everything,
# tests included: a cold build in about a third of the compiler time, same results. For an
# edit-compile loop, NUMPROBE_UNITY_BUILD=OFF recompiles one file per edit. Under CI=true a
# compiler warning fails the build (NUMPROBE_WERROR).
werror=OFF
if [ "${CI:-}" = true ]; then werror=ON; fi
scripts/build.sh -DPython3_EXECUTABLE="$(scripts/python_setup.sh)" \
  -DNUMPROBE_UNITY_BUILD="${NUMPROBE_UNITY_BUILD:-ON}" -DNUMPROBE_WERROR="${NUMPROBE_WERROR:-$werror}"
# Tests run side by side; OpenMP threads that spin at barriers on shared cores slow every test
# down (tests/CMakeLists.txt sets this for the GoogleTest tests; here it reaches the others too).
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "$@"
# The Python package (python/): built into a venv against this tree, its pytest suite and the
# examples in examples/python (numpy only).
scripts/python_test.sh
