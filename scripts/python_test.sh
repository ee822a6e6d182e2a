#!/usr/bin/env bash
# Builds the numprobe Python package (python/, nanobind + scikit-build-core) into the test venv
# (scripts/python_setup.sh: requirements-test.txt, pinned) and runs its pytest suite and the
# examples (numpy only). The tests compare against the CLI bit for bit,
# so build/numprobe (BUILD_DIR) is built first (a no-op after scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
py=$(scripts/python_setup.sh)
build_dir=${BUILD_DIR:-build}
if [ ! -x "$build_dir/numprobe" ]; then
  scripts/build.sh
fi
cmake --build "$build_dir" --target numprobe -j "$(nproc)" >/dev/null
t0=$SECONDS
launcher=""
command -v ccache >/dev/null && launcher="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
# --no-build-isolation --no-deps: the build tools and numpy are the venv's pinned ones (no index
# needed here). The CMake tree is build-pywheel/ (python/pyproject.toml), kept between runs.
CMAKE_ARGS="$launcher" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
  "$py" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps ./python
echo "python_test: package built and installed in $((SECONDS - t0)) s"
cli="$build_dir/numprobe"
case "$cli" in /*) ;; *) cli="$PWD/$cli" ;; esac  # BUILD_DIR may be absolute
NUMPROBE_CLI="$cli" "$py" -m pytest -q -p no:cacheprovider \
  python/tests examples/python "$@"
