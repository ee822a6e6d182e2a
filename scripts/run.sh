#!/usr/bin/env bash
# One command for a newcomer: install, build, and run the main job on its embedded default
# (no files, no GPU): drift curves of a healthy emulated flash kernel and of one with a
# skipped rescale, side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
echo
echo "== healthy kernel: numprobe drift --backend emu --dist rescale-stress --seq 128..16384"
./build/numprobe drift --backend emu --dist rescale-stress --seq 128..16384 --bound ratio_to_naive\<=2
echo
echo "== broken kernel (skip-rescale): the same sweep"
./build/numprobe drift --backend emu --dist rescale-stress --seq 128..16384 --bound ratio_to_naive\<=2 \
  --inject skip-rescale || echo "(exit $?: the bound is breached, as it should be)"
