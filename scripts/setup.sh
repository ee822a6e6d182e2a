#!/usr/bin/env bash
# Installs numprobe's dependencies from Debian packages and PyPI. Idempotent: packages already
# present are skipped, so a second run is quick. Needs root (or sudo) for apt.
set -euo pipefail

debs=(cmake ninja-build g++ git pkg-config python3 python3-pip
      libcli11-dev libeigen3-dev libboost-dev libfmt-dev googletest libgtest-dev
      libtomlplusplus-dev nlohmann-json3-dev
      clang libomp-dev  # CI's sanitizer + libFuzzer build (clang's OpenMP is libomp)
      chromium)  # headless render test of the HTML report (tests/reports)
# HIP toolchain (compile-only here: no AMD GPU) for the one-source GPU kernels.
if [ "${NUMPROBE_WITH_HIP:-1}" = 1 ]; then
  debs+=(hipcc libamdhip64-dev rocm-device-libs)
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

# Python peers for the oracle tests only (the product is C++).
if ! python3 -c 'import numpy, ml_dtypes' 2>/dev/null; then
  echo "setup: installing numpy ml_dtypes"
  python3 -m pip install -q numpy ml_dtypes 2>/dev/null ||
    python3 -m pip install -q --break-system-packages numpy ml_dtypes
fi
echo "setup: dependencies ready"
