#!/usr/bin/env bash
# Builds the numprobe Python package (python/, nanobind + scikit-build-core) into a venv and runs
# its pytest suite and the examples (numpy only). The tests compare against the CLI bit for bit,
# so build/numprobe (BUILD_DIR) is built first (a no-op after scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/python_setup.sh
build_dir=${BUILD_DIR:-build}
if [ ! -x "$build_dir/numprobe" ]; then
  scripts/build.sh
fi
cmake --build "$build_dir" --target numprobe -j "$(nproc)" >/dev/null
venv=${NUMPROBE_PY_VENV:-/tmp/numprobe-py-venv}
[ -x "$venv/bin/python" ] || python3 -m venv --system-site-packages "$venv"
t0=$SECONDS
launcher=""
command -v ccache >/dev/null && launcher="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
# --no-build-isolation: the build tools come from python_setup.sh (no index needed here). The
# CMake tree is build-pywheel/ (python/pyproject.toml), kept between runs.
CMAKE_ARGS="$launcher" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
  "$venv/bin/python" -m pip install -q --no-build-isolation ./python
echo "python_test: package built and installed in $((SECONDS - t0)) s"
NUMPROBE_CLI="$PWD/$build_dir/numprobe" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
  python/tests examples/python "$@"
