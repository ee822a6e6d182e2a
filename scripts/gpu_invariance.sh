#!/usr/bin/env bash
# Issue 30 on the GPU machine: builds numprobe with CUDA (the CLI and split_size_bench) and the
# Python package, then measures batch invariance: our CUDA kernels through the CLI (default, and
# the splits check's fixed split sizes, ragged batches included), PyTorch SDPA's four backends
# and FlexAttention through numprobe.invariance (bench/invariance_gpu.py), and the cost of a
# fixed split size (split_size_bench). Logs under $OUT; a summary table last.
#   scripts/gpu_invariance.sh          # TOMLPP_INCLUDE_DIR defaults to .carry/include when present
set -u
OUT=${OUT:-$PWD/gpu-invariance-out}
mkdir -p "$OUT"
BUILD_DIR=${BUILD_DIR:-build-gpu-invariance}
SITE=${SITE:-/tmp/numprobe-site}
SEQ=${SEQ:-1000}
declare -A RESULT
SKIP=${GPU_INV_SKIP:-}
skip() { [[ ",$SKIP," == *",$1,"* ]]; }
toml=()
if [[ -n "${TOMLPP_INCLUDE_DIR:-}" ]]; then toml=(-DTOMLPP_INCLUDE_DIR="$TOMLPP_INCLUDE_DIR")
elif [[ -d .carry/include/toml++ ]]; then toml=(-DTOMLPP_INCLUDE_DIR="$PWD/.carry/include"); fi
export PYTHONUNBUFFERED=1
step() {  # step NAME COMMAND...: runs it, logs to $OUT/NAME.txt, records pass/FAIL and seconds
  local name=$1 t=$SECONDS rc
  shift
  "$@" > "$OUT/$name.txt" 2>&1
  rc=$?
  RESULT[$name]="$([ $rc -le 1 ] && echo "ran(rc=$rc)" || echo "FAIL(rc=$rc)") $((SECONDS - t))s"
  echo "== $name: ${RESULT[$name]}"
  tail -40 "$OUT/$name.txt"
}
step build bash -c "cmake -S . -B $BUILD_DIR -G Ninja -DCMAKE_BUILD_TYPE=Release -DNUMPROBE_ENABLE_CUDA=ON \
  -DNUMPROBE_ENABLE_HIP=OFF -DNUMPROBE_UNITY_BUILD=OFF -DNUMPROBE_BUILD_TESTS=ON -DNUMPROBE_BUILD_BENCH=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 ${toml[*]} && cmake --build $BUILD_DIR -j $(nproc) --target numprobe split_size_bench $( skip gpu_tests || echo \
  test_gpu_decode_abi test_gpu_quant_decode test_gpu)"
skip gpu_tests || step gpu_tests bash -c "for t in test_gpu_decode_abi test_gpu_quant_decode test_gpu; do $BUILD_DIR/tests/gpu/\$t 2>&1 | grep -E '^\[  (PASSED|FAILED) |^\[  FAILED|tests ran' ; done"
export PYTHONPATH=$SITE NUMPROBE_CLI=$PWD/$BUILD_DIR/numprobe
CASE=(--seq "$SEQ" --heads 8 --kv-heads 8 --head-dim 128 --dtype bf16 --mask none)
BATCHES=${BATCHES:-1,2,8}
# Our decode first: the splits check (the backend's default, splits 1..8, split sizes Bk and 2Bk;
# uniform and ragged batches), then the cost of a fixed split size; then PyTorch's kernels
# (the package is built for them), then our forward kernel's prefill checks.
skip splits || step cuda_splits timeout 150 "$NUMPROBE_CLI" invariance --backend cuda "${CASE[@]}" --checks splits \
  --batch-sizes "$BATCHES" --json "$OUT/cuda_splits.json"
skip bench || step split_size_bench timeout 90 "$BUILD_DIR/bench/split_size_bench" 10
skip package || step package bash -c "CMAKE_ARGS='${toml[*]} -DNUMPROBE_ENABLE_CUDA=OFF' CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
  python3 -m pip install -q --no-build-isolation --no-deps --target $SITE ./python"
skip torch || step torch timeout 300 python3 bench/invariance_gpu.py --seq "$SEQ" --batch-sizes "$BATCHES" \
  --json "$OUT/torch.json" --cli-json "numprobe cuda decode=$OUT/cuda_splits.json"
skip cuda || step cuda timeout 150 "$NUMPROBE_CLI" invariance --backend cuda "${CASE[@]}" --checks repeat,batch,decode,chunk \
  --batch-sizes "$BATCHES" --json "$OUT/cuda.json"
echo
printf '%-18s %s\n' step result
for k in build gpu_tests cuda_splits split_size_bench package torch cuda; do printf '%-18s %s\n' "$k" "${RESULT[$k]:-not run}"; done
