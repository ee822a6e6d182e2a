#!/usr/bin/env bash
# One command for the GPU machine: build the CUDA backend, run the gpu tests, compute-sanitizer
# (memcheck, racecheck) on small attention cases, the attention benchmark against PyTorch SDPA
# (flash backend) in the same session, an end-to-end drift run, and print a summary table last.
#
#   scripts/gpu_check.sh                 # logs under $OUT (the device tool's folder) or ./gpu-check-out
#   GPU_CHECK_SKIP=drift,racecheck scripts/gpu_check.sh
#
# Environment: CUDA_ARCHS (default 90), BUILD_DIR (default build-gpu-check), JOBS (default nproc),
# TOMLPP_INCLUDE_DIR (default .carry/include when present: the GPU image lacks toml++).
set -u
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
BUILD_DIR=${BUILD_DIR:-build-gpu-check}
JOBS=${JOBS:-$(nproc)}
CUDA_ARCHS=${CUDA_ARCHS:-90}
SKIP=${GPU_CHECK_SKIP:-}
skip() { [[ ",$SKIP," == *",$1,"* ]]; }
declare -A RESULT
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }

# -------------------------------------------------------------- device and toolchain
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv 2>&1
  nvcc --version 2>&1 | tail -1
  python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))' 2>&1
} | tee "$OUT/device.txt"

# -------------------------------------------------------------- build
stamp "configure + build"
toml=()
if [[ -n "${TOMLPP_INCLUDE_DIR:-}" ]]; then toml=(-DTOMLPP_INCLUDE_DIR="$TOMLPP_INCLUDE_DIR")
elif [[ -d .carry/include/toml++ ]]; then toml=(-DTOMLPP_INCLUDE_DIR="$PWD/.carry/include"); fi
{
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNUMPROBE_ENABLE_CUDA=ON \
    -DNUMPROBE_ENABLE_HIP=OFF -DNUMPROBE_BUILD_BENCH=ON -DNUMPROBE_CUDA_WARN_SPILLS=ON -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS" "${toml[@]}" &&
  cmake --build "$BUILD_DIR" -j "$JOBS" --target test_gpu gpu_attention_bench test_gpu_quant_decode gpu_quant_bench \
    numprobe_cuda_plugin test_gpu_plugin test_gpu_softmax numprobe abi_overhead_bench test_gpu_decode_abi
} > "$OUT/build.log" 2>&1
if [[ $? -eq 0 ]]; then RESULT[build]=ok; else RESULT[build]=FAILED; tail -40 "$OUT/build.log"; fi
# The CLI is needed only for the drift run; a failure there does not stop the rest.
# (numprobe is in the list above: the plugin tests run plugins in its worker process.)
[[ -x "$BUILD_DIR/numprobe" ]] && RESULT[build_cli]=ok || RESULT[build_cli]=FAILED
grep -E "registers|spill" "$OUT/build.log" | grep -i mma | head -5
stamp "build: ${RESULT[build]}"

# -------------------------------------------------------------- gpu tests
if [[ ${RESULT[build]} == ok ]] && ! skip tests; then
  stamp "ctest -L gpu"
  (cd "$BUILD_DIR" && ctest -L gpu -j 8 --output-on-failure --timeout 300) > "$OUT/ctest.log" 2>&1
  RESULT[tests]="$(grep -E "tests passed|tests failed" "$OUT/ctest.log" | tail -1) $(grep -E "^\s+[0-9]+ - " "$OUT/ctest.log" | sed -E 's/ +#.*//; s/^\s+[0-9]+ - //' | head -6 | tr '\n' ' ')"
  grep -E "^\s*[0-9]+ - .*\(Failed|Timeout|SEGFAULT|Exception\)" "$OUT/ctest.log" | head -20
  grep -E "Failure|Expected|rel_rms" "$OUT/ctest.log" | head -40
  # The accuracy record: ratio to naive of every attention case, in one process.
  "$BUILD_DIR/tests/gpu/test_gpu" --gtest_filter='*gpu_attention*' 2>&1 | grep "^\[accuracy\]" \
    > "$OUT/accuracy.txt"
  RESULT[accuracy]=$(sort -k3 -g "$OUT/accuracy.txt" | tail -1 |
    awk -v n="$(wc -l < "$OUT/accuracy.txt")" '{printf "%d cases; worst ratio_to_naive %s (bound 2) on %s", n, $3, $6}')
fi

# -------------------------------------------------------------- benchmark vs torch SDPA
if [[ ${RESULT[build]} == ok ]] && ! skip bench; then
  stamp "bench"
  "$BUILD_DIR/tests/gpu/gpu_attention_bench" 10 2>&1 | tee "$OUT/bench.txt"
  PYTHONUNBUFFERED=1 python3 - <<'EOF' 2>&1 | tee -a "$OUT/bench.txt"
import torch, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
for b, s in ((4, 4096), (1, 16384)):
    q = torch.randn(b, 32, s, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, 8, s, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(b, 8, s, 128, device="cuda", dtype=torch.bfloat16)
    # GQA by expanding K/V outside the timed region (the flash backend then sees MHA shapes).
    k32, v32 = k.repeat_interleave(4, dim=1), v.repeat_interleave(4, dim=1)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        for _ in range(3):
            F.scaled_dot_product_attention(q, k32, v32, is_causal=True)
        torch.cuda.synchronize()
        ms = []
        for _ in range(10):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record(); F.scaled_dot_product_attention(q, k32, v32, is_causal=True); e1.record()
            torch.cuda.synchronize(); ms.append(e0.elapsed_time(e1))
    ms.sort(); med = ms[len(ms) // 2]
    flops = 4.0 * b * 32 * s * s * 128 / 2
    print(f"bench torch_sdpa_flash causal B={b} S={s} Hq=32 Hkv=8 D=128 bf16 ms={med:.4f} tflops={flops / (med * 1e-3) / 1e12:.1f}")
EOF
fi

# -------------------------------------------------------------- quantize bandwidth vs copy
# Each quantize kernel over a 1 GiB fp32 tensor against a device-to-device copy of it, in the
# same process (target >= 70% of the copy's bandwidth for NVFP4 and fp8).
if [[ ${RESULT[build]} == ok ]] && ! skip quantbench; then
  stamp "quant bench"
  # Variants 0 (the library's launch, which the CLI and tests use) and 1 (the previous default,
  # as the before-figure); NUMPROBE_QUANT_VARIANTS=01234 measures more launch variants
  # (bench/gpu_quant/quant_variants.hpp).
  "$BUILD_DIR/bench/gpu_quant_bench" --iters 10 --bytes $((1 << 30)) --variants "${NUMPROBE_QUANT_VARIANTS:-01}" 2>&1 |
    tee "$OUT/quant_bench.txt"
fi
# Bit-exactness record of the quantize kernels and the decode accuracy (from the test binary).
if [[ ${RESULT[build]} == ok ]] && ! skip tests; then
  "$BUILD_DIR/tests/gpu/test_gpu_quant_decode" > "$OUT/quant_decode.log" 2>&1
  RESULT[quant_exact]=$(grep "^\[quant-exact\]" "$OUT/quant_decode.log" | awk '
    { n++; split($0, a, "mismatches "); split(a[2], b, "[/,]"); if (b[1] + b[2] > 0) bad++ }
    END { printf "%d cases, %d with mismatches", n, bad + 0 }')
  RESULT[decode]=$(grep "^\[decode\]" "$OUT/quant_decode.log" | sort -k6 -g -t' ' | awk '
    { n++; for (i = 1; i <= NF; i++) if ($i == "ratio_to_naive") r = $(i + 1); if (r + 0 > w) { w = r + 0; c = $2 } }
    END { printf "%d cases; worst ratio_to_naive %.3f (bound 2) on %s", n, w, c }')
  RESULT[quant_decode_tests]=$(grep -E "^\[  (PASSED|FAILED)  \]" "$OUT/quant_decode.log" | tr '\n' ' ')
fi

# -------------------------------------------------------------- compute-sanitizer
SMALL='*gpu_attention*/attention_T_129_S_129_*mask_causal_seed_11:*gpu_attention*/attention_T_65_S_65_*mask_none_seed_11:*returns_requested_rows*:*scalar_attention_T_65_S_65_*'
if [[ ${RESULT[build]} == ok ]] && ! skip memcheck; then
  stamp "memcheck"
  compute-sanitizer --tool memcheck --error-exitcode 9 "$BUILD_DIR/tests/gpu/test_gpu" \
    --gtest_filter="$SMALL" > "$OUT/memcheck.log" 2>&1
  rc=$?
  RESULT[memcheck]="rc=$rc, $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)"
fi
if [[ ${RESULT[build]} == ok ]] && ! skip racecheck; then
  stamp "racecheck"
  compute-sanitizer --tool racecheck --error-exitcode 9 "$BUILD_DIR/tests/gpu/test_gpu" \
    --gtest_filter='*gpu_attention*/attention_T_129_S_129_*mask_causal_seed_11:*scalar_attention_T_65_S_65_*' \
    > "$OUT/racecheck.log" 2>&1
  rc=$?
  RESULT[racecheck]="rc=$rc, $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$OUT/racecheck.log" | tail -1)"
fi

if [[ ${RESULT[build]} == ok ]] && ! skip memcheck; then
  stamp "memcheck (quantize, decode)"
  compute-sanitizer --tool memcheck --error-exitcode 9 "$BUILD_DIR/tests/gpu/test_gpu_quant_decode" \
    --gtest_filter='*gpu_quantize.*131x301_specials*:*gpu_quantize_paths*:*empty_splits*:*fp8_kv*' \
    > "$OUT/memcheck_quant.log" 2>&1
  rc=$?
  RESULT[memcheck_q]="rc=$rc, $(grep -E 'ERROR SUMMARY' "$OUT/memcheck_quant.log" | tail -1)"
fi
if [[ ${RESULT[build]} == ok ]] && ! skip racecheck; then
  compute-sanitizer --tool racecheck --error-exitcode 9 "$BUILD_DIR/tests/gpu/test_gpu_quant_decode" \
    --gtest_filter='*gpu_quantize.*fp8_block128_131x301_mixed*:*gpu_quantize.*nvfp4_131x301_mixed*:*empty_splits*' \
    > "$OUT/racecheck_quant.log" 2>&1
  rc=$?
  RESULT[racecheck_q]="rc=$rc, $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$OUT/racecheck_quant.log" | tail -1)"
fi

# -------------------------------------------------------------- drift end to end
if [[ ${RESULT[build_cli]:-} == ok ]] && ! skip drift; then
  stamp "drift"
  d0=$(date +%s.%N)
  timeout 240 "$BUILD_DIR/numprobe" drift --backend cuda --seq 128..131072 --points tile \
    --heads 32 --kv-heads 8 --head-dim 128 --mask causal --json "$OUT/drift.json" > "$OUT/drift.txt" 2>&1
  rc=$?
  # Where the time goes: kernel (incl. transfers), reference, naive baseline, inputs.
  python3 -c "
import json; d=json.load(open('$OUT/drift.json')); t={}
for p in d['points']:
    for k,v in p['seconds'].items(): t[k]=t.get(k,0)+v
print('drift split', ' '.join(f'{k} {v:.1f}s' for k,v in t.items()), 'setup', round(d['seconds'] - sum(t.values()), 1), 'total', round(d['seconds'],1), 'verdict', d['growth']['verdict'])
ft = d.get('backend', {}).get('metadata', {}).get('forward_timing')
if ft: print('drift provider', ' '.join(f'{k} {v:.3f}' if isinstance(v, float) else f'{k} {v}' for k, v in ft.items()))
" 2>&1 | tee "$OUT/drift_split.txt"
  RESULT[drift]="rc=$rc, $(awk -v a="$d0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f s wall", b-a}')"
  tail -25 "$OUT/drift.txt"
fi

# -------------------------------------------------------------- CLI end to end on the GPU
if [[ ${RESULT[build_cli]:-} == ok ]] && ! skip cli; then
  stamp "cli: quant --backend cuda, run (default scenario), exec-worker torch SDPA drift"
  "$BUILD_DIR/numprobe" quant --backend cuda --format e2m1 --scheme nvfp4 --shape 1024x4096 --dist llm \
    > "$OUT/quant_cuda.txt" 2>&1; RESULT[quant_cli]="rc=$?"
  (cd "$BUILD_DIR" && timeout 120 ./numprobe run --out "$OUT/run" > "$OUT/run.txt" 2>&1); RESULT[run_default]="rc=$?"
  timeout 180 "$BUILD_DIR/numprobe" drift --backend exec-worker:"python3 examples/exec/worker.py torch_sdpa" \
    --seq 128..16384 --points log:8 --heads 8 --kv-heads 2 --head-dim 128 --mask causal \
    --bound 'ratio_to_naive<=2' > "$OUT/torch_drift.txt" 2>&1; RESULT[torch_sdpa_drift]="rc=$?"
  tail -15 "$OUT/quant_cuda.txt"; tail -12 "$OUT/run.txt"; tail -16 "$OUT/torch_drift.txt"
fi

# -------------------------------------------------------------- quantization conventions (issue 17)
# Each preset and axis through the CLI on the device, on the tie-adversarial input (--dist ties)
# at a ragged shape: the kernels' codes and scales against the reference under the same axes.
if [[ ${RESULT[build_cli]:-} == ok ]] && ! skip conv; then
  stamp "quant conventions on the device"
  : > "$OUT/quant_conv.txt"
  ok=0; bad=0
  while read -r scheme flags; do
    "$BUILD_DIR/numprobe" quant --backend cuda --scheme "$scheme" --shape 257x1000 --dist ties $flags \
      > "$OUT/quant_conv_one.txt" 2>&1
    rc=$?
    line=$(grep -E "bit-exact|MISMATCH|error" "$OUT/quant_conv_one.txt" | head -1)
    echo "$scheme $flags: rc=$rc $line" >> "$OUT/quant_conv.txt"
    if [[ $rc -eq 0 && $line == *bit-exact* ]]; then ok=$((ok + 1)); else bad=$((bad + 1)); fi
  done <<'LIST'
nvfp4 --preset torchao
nvfp4 --preset trtllm
nvfp4 --preset compressed-tensors
nvfp4 --scale-division reciprocal
nvfp4 --scale-floor min-normal
nvfp4 --scale-arith fp32
nvfp4 --scale-division reciprocal-approx --scale-floor min-normal --scale-arith double
mxfp4 --rule even
mxfp4 --rule nearest
mxfp4 --rule rceil
mxfp8 --rule even
mxfp8 --rule nearest
LIST
  cat "$OUT/quant_conv.txt"
  RESULT[quant_conv]="$ok bit-exact, $bad not"
fi

# -------------------------------------------------------------- audit on the GPU (issue 14)
# The healthy CUDA kernel must pass every class; its run-time fault variants must be named alone;
# torch SDPA through exec-worker is a kernel numprobe did not write (tile unknown to it).
if [[ ${RESULT[build_cli]:-} == ok ]] && ! skip audit; then
  stamp "audit: cuda healthy and fault variants, torch SDPA"
  audit_line() {  # name, then numprobe args
    local name=$1; shift
    timeout 240 "$BUILD_DIR/numprobe" audit "$@" --heads 8 --kv-heads 2 --head-dim 64 --json "$OUT/audit_$name.json" \
      > "$OUT/audit_$name.txt" 2>&1
    local rc=$?
    python3 -c "
import json; d=json.load(open('$OUT/audit_$name.json'))
print('audit $name rc=$rc failing=' + ','.join(d['failing']) + ' tile=%s/%s %.1f s' % (d['tile']['k'], d['tile']['source'], d['seconds']))
" 2>/dev/null | tee -a "$OUT/audit.txt" || echo "audit $name rc=$rc (no JSON)" | tee -a "$OUT/audit.txt"
  }
  audit_line cuda --backend cuda
  audit_line cuda_gqa_mod --backend cuda --inject gqa-mod --quick
  audit_line cuda_index_wrap --backend cuda --inject index-wrap --quick
  audit_line cuda_decode_empty_split --backend cuda --decode --queries 4 --inject empty-split-nan --quick
  audit_line torch_sdpa --backend exec-worker:"python3 examples/exec/worker.py torch_sdpa"
  RESULT[audit]=$(awk '{printf "%s; ", $0}' "$OUT/audit.txt")
fi
# Growth verdict false alarms on the healthy CUDA kernel, and its accumulation faults caught.
if [[ ${RESULT[build_cli]:-} == ok ]] && ! skip growth; then
  stamp "growth false alarms (cuda)"
  timeout 300 python3 bench/growth_false_alarms.py --numprobe "$BUILD_DIR/numprobe" --backends cuda --faults cuda \
    --head-dim 128 --seeds ${GROWTH_SEEDS:-13} > "$OUT/growth_false_alarms.txt" 2>&1
  RESULT[growth]="rc=$?, $(grep -iE 'false|total' "$OUT/growth_false_alarms.txt" | tail -2 | tr '\n' ' ')"
  tail -30 "$OUT/growth_false_alarms.txt"
fi

# -------------------------------------------------------------- plugin-ABI overhead
# The built-in kernels are registered through kernel_abi.h: per-call cost of that path against
# the direct entry, same kernel and inputs, in one process (bench/gpu_abi/abi_overhead_bench.cpp).
if [[ ${RESULT[build]} == ok ]] && ! skip abi; then
  stamp "abi overhead"
  timeout 300 "$BUILD_DIR/bench/abi_overhead_bench" ${ABI_ITERS:-400} > "$OUT/abi_bench.txt" 2>&1
  rc=$?
  cat "$OUT/abi_bench.txt"
  RESULT[abi]="rc=$rc, $(grep '^bench abi' "$OUT/abi_bench.txt" |
    sed -E 's/.*op=([^ ]+).* direct_us=([0-9.]+) abi_us=([0-9.]+) ratio=([0-9.]+)( .*verdict=([A-Za-z]+))?.*/\1 \2->\3us x\4 \6/' |
    tr '\n' ';')"
fi

# -------------------------------------------------------------- summary (last)
echo
echo "==================== numprobe gpu_check summary ===================="
printf "%-12s %s\n" "device" "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
for k in build build_cli tests accuracy memcheck racecheck drift quant_cli run_default torch_sdpa_drift audit growth quant_exact decode quant_decode_tests memcheck_q racecheck_q abi; do
  [[ -n "${RESULT[$k]:-}" ]] && printf "%-12s %s\n" "$k" "${RESULT[$k]}"
done
if [[ -f "$OUT/bench.txt" ]]; then
  printf "%-8s %-10s %-12s %-12s %s\n" "S" "B" "ours TF/s" "sdpa TF/s" "ratio"
  for s in 4096 16384; do
    ours=$(grep "numprobe_cuda.* S=$s " "$OUT/bench.txt" | sed -E 's/.*tflops=([0-9.]+).*/\1/')
    ref=$(grep "torch_sdpa_flash.* S=$s " "$OUT/bench.txt" | sed -E 's/.*tflops=([0-9.]+).*/\1/')
    b=$(grep "numprobe_cuda.* S=$s " "$OUT/bench.txt" | sed -E 's/.*B=([0-9]+).*/\1/')
    ratio=$(awk -v a="${ours:-0}" -v b="${ref:-0}" 'BEGIN{ if (b > 0) printf "%.2f", a/b; else print "-" }')
    printf "%-8s %-10s %-12s %-12s %s\n" "$s" "${b:-?}" "${ours:--}" "${ref:--}" "$ratio"
  done
fi
if [[ -f "$OUT/quant_bench.txt" ]]; then
  printf "%-18s %-10s %-10s %-8s %-16s %s\n" "quantize 1GiB" "GB/s" "copy GB/s" "ratio" "ratio with amax" "amax pre-pass ms"
  grep "^bench quant" "$OUT/quant_bench.txt" | while read -r line; do
    f() { echo "$line" | sed -nE "s/.* $1=([^ ]+).*/\1/p"; }
    printf "%-18s %-10s %-10s %-8s %-16s %s\n" "$(f scheme)" "$(f quant_gbs)" "$(f copy_gbs)" "$(f ratio)" "$(f ratio_with_amax)" "$(f amax_ms)"
  done
fi
echo "total        $(( $(date +%s) - t0 )) s; logs in $OUT"
[[ ${RESULT[build]} == ok ]]
