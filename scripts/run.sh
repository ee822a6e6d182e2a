#!/usr/bin/env bash
# One command for a newcomer: install, build, and run the main job on its embedded default
# (no files, no GPU): `numprobe run`, the built-in acceptance scenario (attention, drift and
# quantization checks with their bounds; reports in out/default/), then a drift curve of a
# healthy emulated flash kernel next to one with a real bug class injected.
#   scripts/run.sh [--cuda] [--hip]
# Only what this job needs: the CLI's packages (scripts/setup.sh, no test tools) and the
# numprobe target (no tests, no benchmarks) in build-run/, so the test build in build/ is never
# reconfigured. The GPU kernels are compiled when a GPU is present (nvidia-smi -L, /dev/nvidia0;
# /dev/kfd for HIP) or when asked: --cuda / --hip, or NUMPROBE_ENABLE_CUDA / NUMPROBE_ENABLE_HIP
# = ON|OFF|AUTO (cmake/numprobe_gpu.cmake's AUTO alone compiles them whenever nvcc or hipcc is
# installed, GPU or not: minutes of nvcc a CPU-only first run has no use for).
set -euo pipefail
cd "$(dirname "$0")/.."

cuda=OFF hip=OFF
if nvidia-smi -L >/dev/null 2>&1 || [ -e /dev/nvidia0 ]; then cuda=AUTO; fi
if [ -e /dev/kfd ]; then hip=AUTO; fi
for a in "$@"; do
  case "$a" in
    --cuda) cuda=ON ;;
    --hip) hip=ON ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument '$a' (expected --cuda, --hip)" >&2; exit 2 ;;
  esac
done
cuda=${NUMPROBE_ENABLE_CUDA:-$cuda}
hip=${NUMPROBE_ENABLE_HIP:-$hip}
build=${RUN_BUILD_DIR:-build-run}

scripts/setup.sh
echo "run: building the numprobe target into $build/ (CUDA $cuda, HIP $hip)"
# A unity build: the cold compile is most of a first run (docs/measurements/first_run_2026-12-02.txt).
BUILD_DIR=$build BUILD_TARGET=numprobe scripts/build.sh -DNUMPROBE_BUILD_TESTS=OFF \
  -DNUMPROBE_BUILD_BENCH=OFF -DNUMPROBE_ENABLE_CUDA="$cuda" -DNUMPROBE_ENABLE_HIP="$hip" \
  -DNUMPROBE_UNITY_BUILD=ON
echo
echo "== numprobe run   (the embedded default scenario; reports in out/default/)"
"./$build/numprobe" run --out out/default
echo
echo "== healthy kernel: numprobe drift --backend emu --dist rescale-stress --seq 64..8192"
"./$build/numprobe" drift --backend emu --dist rescale-stress --seq 64..8192 --bound 'ratio_to_naive<=2'
echo
echo "== broken kernel: the same sweep with --inject skip-rescale"
rc=0
"./$build/numprobe" drift --backend emu --dist rescale-stress --seq 64..8192 --bound 'ratio_to_naive<=2' \
  --inject skip-rescale || rc=$?
echo "(exit $rc: 1 means the bound is breached, as it should be for this kernel)"
