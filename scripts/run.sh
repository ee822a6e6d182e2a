#!/usr/bin/env bash
# One command for a newcomer: install, build, and run the main job on its embedded default
# (no files, no GPU): `numprobe run`, the built-in acceptance scenario (attention, drift and
# quantization checks with their bounds; reports in out/default/), then a drift curve of a
# healthy emulated flash kernel next to one with a real bug class injected.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
echo
echo "== numprobe run   (the embedded default scenario; reports in out/default/)"
./build/numprobe run --out out/default
echo
echo "== healthy kernel: numprobe drift --backend emu --dist rescale-stress --seq 64..8192"
./build/numprobe drift --backend emu --dist rescale-stress --seq 64..8192 --bound 'ratio_to_naive<=2'
echo
echo "== broken kernel: the same sweep with --inject skip-rescale"
rc=0
./build/numprobe drift --backend emu --dist rescale-stress --seq 64..8192 --bound 'ratio_to_naive<=2' \
  --inject skip-rescale || rc=$?
echo "(exit $rc: 1 means the bound is breached, as it should be for this kernel)"
