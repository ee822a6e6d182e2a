#!/usr/bin/env bash
# The tensor-core probe on the GPU machine (issue 31; docs/hardware.md): build numprobe with
# CUDA, run `numprobe mma --json` (mma.sync and, on sm_90, wgmma paths), write the catalogue's
# vectors, and (when torch is present) run bench/mma_torch.py on the same vectors and
# bench/mma_chain_triton.py. Everything lands in $OUT (the device tool's folder) or ./gpu-mma-out.
#
#   scripts/gpu_mma.sh
#
# Environment: CUDA_ARCHS (default 90), BUILD_DIR (default build-gpu-mma), JOBS (default nproc),
# DEVICE (default 0), TOMLPP_INCLUDE_DIR (default .carry/include when present).
set -u
OUT=${OUT:-$PWD/gpu-mma-out}
mkdir -p "$OUT"
BUILD_DIR=${BUILD_DIR:-build-gpu-mma}
JOBS=${JOBS:-$(nproc)}
CUDA_ARCHS=${CUDA_ARCHS:-90}
DEVICE=${DEVICE:-0}
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv 2>&1
  nvcc --version 2>&1 | tail -1
} | tee "$OUT/device.txt"
toml=()
if [[ -n "${TOMLPP_INCLUDE_DIR:-}" ]]; then toml=(-DTOMLPP_INCLUDE_DIR="$TOMLPP_INCLUDE_DIR")
elif [[ -d .carry/include/toml++ ]]; then toml=(-DTOMLPP_INCLUDE_DIR="$PWD/.carry/include"); fi
if ! { cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNUMPROBE_ENABLE_CUDA=ON \
         -DNUMPROBE_ENABLE_HIP=OFF -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS" "${toml[@]}" &&
       cmake --build "$BUILD_DIR" -j "$JOBS" --target numprobe test_mma_model test_mma_classify test_mma_agreement test_gpu_mma; } \
     > "$OUT/build.log" 2>&1; then
  tail -30 "$OUT/build.log"; echo "gpu_mma: build failed (log: $OUT/build.log)"; exit 1
fi
"$BUILD_DIR/tests/kernels/test_mma_model" > "$OUT/test_mma_model.log" 2>&1; echo "test_mma_model: exit $?"
"$BUILD_DIR/tests/probes/test_mma_classify" > "$OUT/test_mma_classify.log" 2>&1; echo "test_mma_classify: exit $?"
"$BUILD_DIR/tests/probes/test_mma_agreement" > "$OUT/test_mma_agreement.log" 2>&1; echo "test_mma_agreement: exit $?"
# The findings, and the measured models against the device on 8192 random and adversarial
# dot products per path (and the published models, for comparison).
"$BUILD_DIR/numprobe" mma --device "$DEVICE" --agree 8192 --json "$OUT/mma.json" | tee "$OUT/mma.txt"
echo "numprobe mma: exit ${PIPESTATUS[0]}"
"$BUILD_DIR/tests/gpu/test_gpu_mma" > "$OUT/test_gpu_mma.log" 2>&1; echo "test_gpu_mma: exit $?"
grep -E "equal|no measured model" "$OUT/test_gpu_mma.log"
# The promotion interval under the wgmma fp8 model (CPU; the GPU machine has the cores).
"$BUILD_DIR/numprobe" mma --model h200-wgmma-e4m3 --promotion --samples 32 --json "$OUT/promotion.json" \
  --csv "$OUT/promotion.csv" > "$OUT/promotion.txt"; echo "promotion: exit $?"
# The k-order and extended-sweep vectors (bench/mma_order_vectors.py) through the device paths.
python3 bench/mma_order_vectors.py "$OUT/order_vectors.json" &&
  "$BUILD_DIR/numprobe" mma --device "$DEVICE" --run-vectors "$OUT/order_vectors.json" --json "$OUT/order.json"
echo "mma --run-vectors: exit $?"
"$BUILD_DIR/numprobe" mma --emit-vectors "$OUT/mma_vectors.json"
# The same vectors through PyTorch's fp8 GEMM (both accumulation modes) and Triton's tl.dot.
if python3 -c 'import torch' 2>/dev/null; then
  python3 bench/mma_torch.py "$OUT/mma_vectors.json" --out "$OUT/mma_torch.json" | tee "$OUT/mma_torch.txt"
  echo "mma_torch: exit ${PIPESTATUS[0]}"
else
  echo "mma_torch: skipped (no torch)"
fi
# The attention P.V chain through Triton's wgmma against the model chained as --acc-model chains
# it (fused and separate promotion; docs/hardware.md, "--acc-model in the attention emulator").
if python3 -c 'import triton' 2>/dev/null; then
  python3 bench/mma_chain_triton.py "$BUILD_DIR/numprobe" --keys 512 | tee "$OUT/chain.txt"
  echo "mma_chain_triton: exit ${PIPESTATUS[0]}"
else
  echo "mma_chain_triton: skipped (no triton)"
fi
