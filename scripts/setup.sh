#!/usr/bin/env bash
# Installs numprobe's dependencies from Debian packages (and PyPI for --test). Idempotent:
# packages already present are skipped, so a second run is quick. Needs root (or sudo) for apt.
#   scripts/setup.sh          what scripts/run.sh needs to build the numprobe CLI: a compiler,
#                             cmake, ninja and the declared -dev header packages
#   scripts/setup.sh --test   that, plus what only the tests and CI use (scripts/test.sh): the
#                             Python packages pinned in requirements-test.txt, in the test venv
#                             ${NUMPROBE_VENV:-.venv} (scripts/python_setup.sh)
set -euo pipefail

with_tests=0
case "${1:-}" in
  "") ;;
  --test) with_tests=1 ;;
  -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "setup.sh: unknown argument '$1' (expected --test or nothing)" >&2; exit 2 ;;
esac

# The CLI: cmake/numprobe_dependencies.cmake's packages; python3 stages the per-layer include
# directories (cmake/numprobe_layers.cmake). g++ brings OpenMP (libgomp).
debs=(cmake ninja-build g++ python3
      libcli11-dev libeigen3-dev libboost-dev libfmt-dev libtomlplusplus-dev nlohmann-json3-dev)
if [ "$with_tests" = 1 ]; then
  debs+=(git pkg-config python3-pip python3-venv
         googletest libgtest-dev  # the test binaries
         clang libomp-dev  # CI's sanitizer + libFuzzer build (clang's OpenMP is libomp)
         chromium  # headless render test of the HTML report (tests/reports)
         openmpi-bin libopenmpi-dev)  # run/scan --mpi and its mpirun tests (optional at build time)
  # HIP toolchain (compile-only here: no AMD GPU) for the one-source GPU kernels.
  if [ "${NUMPROBE_WITH_HIP:-1}" = 1 ]; then
    debs+=(hipcc libamdhip64-dev rocm-device-libs)
  fi
fi

missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The oracle peers (numpy, ml_dtypes) and the Python package's build and test tools, pinned,
# in the test venv: requirements-test.txt, the one list the tests read.
if [ "$with_tests" = 1 ]; then "$(dirname "$0")/python_setup.sh" >/dev/null; fi
echo "setup: dependencies ready$([ "$with_tests" = 1 ] && echo ' (with the test tools)')"
