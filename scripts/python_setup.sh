#!/usr/bin/env bash
# Python packages for building and testing the numprobe package (python/): nanobind and
# scikit-build-core (the build), numpy (runtime), pytest (tests). Idempotent; test set-up only,
# called from scripts/setup.sh's test path. The main job (the CLI) needs none of them.
set -euo pipefail
if python3 -c 'import nanobind, scikit_build_core, numpy, pytest' 2>/dev/null; then
  exit 0
fi
echo "python_setup: installing nanobind scikit-build-core numpy pytest"
python3 -m pip install -q nanobind scikit-build-core numpy pytest 2>/dev/null ||
  python3 -m pip install -q --break-system-packages nanobind scikit-build-core numpy pytest
