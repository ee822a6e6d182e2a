#!/usr/bin/env bash
# GPU checks of the serving features (issues 8 and 9) in one device call: build, the gpu tests of
# split-KV decode through the provider knobs, the CUDA plugin (device-memory path) and the looped
# softmax, then CLI runs whose numbers go into the report. Output: $OUT/serving.log (summary),
# $OUT/tests.log, $OUT/cli.log, $OUT/build.log.
#
#   OUT=/tmp/o tests/gpu/serving_gpu_check.sh          # SERVING_SKIP=build,tests,cli,memcheck
set -u
OUT=${OUT:-$PWD/serving-out}
mkdir -p "$OUT"
B=${BUILD_DIR:-build-serving}
SKIP=${SERVING_SKIP:-}
skip() { [[ ",$SKIP," == *",$1,"* ]]; }
t0=$(date +%s)
log() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$OUT/serving.log"; }
toml=()
[[ -d .carry/include/toml++ ]] && toml=(-DTOMLPP_INCLUDE_DIR="$PWD/.carry/include")

if ! skip build; then
  log "build"
  { cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNUMPROBE_ENABLE_CUDA=ON \
      -DNUMPROBE_ENABLE_HIP=OFF -DCMAKE_CUDA_ARCHITECTURES=90 "${toml[@]}" &&
    cmake --build "$B" -j "$(nproc)" --target numprobe numprobe_cuda_plugin test_gpu_plugin \
      test_gpu_quant_decode test_gpu_softmax; } > "$OUT/build.log" 2>&1
  rc=$?
  log "build rc=$rc"
  [[ $rc -ne 0 ]] && { grep -E "error|FAILED" "$OUT/build.log" | head -30 | tee -a "$OUT/serving.log"; exit 1; }
fi
NP="$B/numprobe"
[[ -x "$NP" ]] || NP="$B/src/cli/numprobe"
[[ -x "$NP" ]] || NP=$(find "$B" -name numprobe -type f -perm -u+x | head -1)
PLUGIN=$(find "$B" -name libnumprobe_cuda_plugin.so | head -1)
log "numprobe=$NP plugin=$PLUGIN"

if ! skip tests; then
  log "tests"
  for t in "test_gpu_quant_decode --gtest_filter=*decode*" "test_gpu_plugin" "test_gpu_softmax"; do
    set -- $t
    bin=$(find "$B/tests/gpu" -name "$1" -type f | head -1)
    timeout 150 "$bin" "${@:2}" > "$OUT/$1.log" 2>&1
    rc=$?
    cat "$OUT/$1.log" >> "$OUT/tests.log"
    log "$1 rc=$rc: $(grep -E '^\[  (PASSED|FAILED)  \]' "$OUT/$1.log" | tr '\n' ' ')"
    grep -E "^\[  FAILED  \]|Failure|error:" "$OUT/$1.log" | head -12 | tee -a "$OUT/serving.log"
  done
  # Numbers for the report (worst ratios, fault evidence).
  grep -h "^\[decode-provider" "$OUT/test_gpu_quant_decode.log" | sort -k4 -g | tail -3 >> "$OUT/serving.log"
  grep -h "^\[plugin\]" "$OUT/test_gpu_plugin.log" | sort -k3 -g | tail -2 >> "$OUT/serving.log"
  grep -h "^\[softmax" "$OUT/test_gpu_softmax.log" | sort -t' ' -k4 -g | tail -4 >> "$OUT/serving.log"
  grep -h "^\[softmax-fault\]\|^\[decode-provider-fp8\]\|^\[decode-fp8p\]" "$OUT"/test_gpu_*.log | sort -u >> "$OUT/serving.log"
fi

run() {  # run CMD...: prints the command, its exit code and the output to cli.log
  echo "\$ $*" >> "$OUT/cli.log"
  timeout 60 "$@" >> "$OUT/cli.log" 2>&1
  local rc=$?
  echo "exit $rc" >> "$OUT/cli.log"
  log "exit $rc: ${*:2}"
}
if ! skip cli; then
  log "cli"
  run "$NP" attention --decode --queries 4 --splits 8 --backend cuda --seq 5000
  run "$NP" attention --decode --queries 8 --splits 64 --backend cuda --seq 40 --mask causal
  run "$NP" attention --decode --queries 2 --split-size 512 --backend cuda --seq 70000 --kv-format e4m3fn --kv-scale tensor
  run "$NP" attention --decode --queries 2 --splits 4 --backend cuda --seq 1000 --page-size 16
  run "$NP" attention --decode --queries 4 --splits 1 --backend cuda --seq 4096 --p-format e4m3fn --p-prescale 448 --acc-promote 4
  run "$NP" attention --queries 4 --backend emu --tile 64x128 --state p=f32 --seq 4096 --p-format e4m3fn --p-prescale 448 --acc-promote 4
  run "$NP" drift --decode --queries 1 --splits 16 --backend cuda --seq 128..16384 --points tile --json "$OUT/drift_decode.json"
  run "$NP" drift --backend "plugin:$PLUGIN" --seq 128..16384 --points tile --json "$OUT/drift_plugin.json"
  run "$NP" drift --decode --splits 4 --backend "plugin:$PLUGIN" --seq 128..4096 --json "$OUT/drift_plugin_decode.json"
  run "$NP" drift --backend cuda --seq 128..16384 --points tile --json "$OUT/drift_cuda.json"
  run "$NP" softmax --backend cuda --vocab 262144 --chunk 1024 --rows 8
  run "$NP" softmax --backend cuda --vocab 128256 --mask all
  run "$NP" softmax --backend cuda --vocab 128256 --mask first-chunk --inject no-empty-guard
  run "$NP" softmax --backend cuda --vocab 128256 --inject rowsum-bf16
  run "$NP" softmax --backend cuda --vocab 3000 --dist shifted --inject finite-sentinel
  run "$NP" softmax --backend cuda --vocab 1024..262144 --chunk 4096
  # plugin vs cuda on the same drift points: identical metrics expected (same kernel).
  python3 - "$OUT/drift_plugin.json" "$OUT/drift_cuda.json" <<'EOF' 2>&1 | tee -a "$OUT/serving.log"
import json, sys
def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if "second" not in k and not k.endswith("_ms")}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x
def pts(p):
    return [strip(x) for x in json.load(open(p))["points"]]
a, b = pts(sys.argv[1]), pts(sys.argv[2])
same = sum(1 for x, y in zip(a, b) if json.dumps(x, sort_keys=True) == json.dumps(y, sort_keys=True))
print(f"drift plugin vs cuda: {len(a)} / {len(b)} points, {same} identical (timings removed)")
for x, y in zip(a, b):
    print("  seq", x.get("seq"), "plugin rel_rms", x.get("rel_rms", x.get("kernel", {}).get("rel_rms") if isinstance(x.get("kernel"), dict) else None),
          "cuda", y.get("rel_rms", y.get("kernel", {}).get("rel_rms") if isinstance(y.get("kernel"), dict) else None))
EOF
fi
if ! skip memcheck && command -v compute-sanitizer > /dev/null; then
  log "memcheck"
  timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 "$NP" softmax --backend cuda --vocab 5000 --chunk 1024 --rows 2 --mask first-chunk > "$OUT/memcheck.log" 2>&1
  log "memcheck softmax rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log")"
  timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 "$NP" attention --backend "plugin:$PLUGIN" --seq 300 --heads 2 --kv-heads 1 >> "$OUT/memcheck.log" 2>&1
  log "memcheck plugin rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)"
  timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 "$NP" attention --decode --queries 3 --splits 5 --backend cuda --seq 700 --heads 2 --kv-heads 1 --p-format e4m3fn --acc-promote 2 >> "$OUT/memcheck.log" 2>&1
  log "memcheck decode fp8-P rc=$? $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)"
fi
log "done"
