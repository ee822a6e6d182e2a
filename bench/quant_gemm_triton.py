#!/usr/bin/env python3
"""numprobe's dequant GEMM (`quant --gemm`, issue 31 item 3) against the same GEMM on the GPU:
a Triton fp8 GEMM with DeepSeek-V3-style promotion (tl.dot on sm_90 is wgmma), on the operands
numprobe quantized, compared bit for bit (docs/hardware.md, "The dequant GEMM").

usage: quant_gemm_triton.py NUMPROBE [--tokens 64] [--n 256] [--k 2048]

For each configuration numprobe runs
    quant --scheme S --shape NxK --gemm TOKENS --acc-model h200-wgmma-e4m3 --acc-promote P --dump DIR
and writes W's and X's e4m3 codes and fp32 scales and its outputs (gemm_y.npy). The kernel reads
the same codes and scales: per output tile it chains tl.dot over K in steps of 32 (P = 1) or 128
elements into an fp32 accumulator `inner` started from zero, and at every promotion (every P
instructions, and at every scale block's end; P = 0: block ends only) does
    s = sx[m, kb] * sw[n // 128, kb];  outer = outer + inner * s;  inner = 0
numprobe rounds the multiply and the add separately, so the kernel compiled with
enable_fp_fusion=False must equal it bit for bit. The default compile contracts the promotion
into an fma, outer = fma(inner, s, outer): it is compared with numprobe's `--acc-fma` run of the
same operands (and, for reference, with the separate form). The count is of outputs with equal
fp32 bits; the exit status is 0 when both pairings are equal everywhere.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np


def run_numprobe(exe, scheme, n, k, tokens, promote, out_dir, fma=False):
    cmd = [exe, "quant", "--scheme", scheme, "--shape", f"{n}x{k}", "--gemm", str(tokens), "--acc-model",
           "h200-wgmma-e4m3", "--acc-promote", str(promote), "--dump", out_dir] + (["--acc-fma"] if fma else [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode not in (0, 1):
        sys.exit(f"numprobe failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")
    load = lambda name: np.load(os.path.join(out_dir, name))
    return {name: load(name + ".npy") for name in ("codes", "scales", "gemm_x_codes", "gemm_x_scales", "gemm_y")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("numprobe")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--k", type=int, default=2048)
    args = ap.parse_args()
    import torch
    import triton
    import triton.language as tl

    if not torch.cuda.is_available():
        sys.exit("quant_gemm_triton: needs a CUDA device")

    @triton.jit
    def gemm(x_ptr, w_ptr, sx_ptr, sw_ptr, y_ptr, M, N, K, sxm, sxk, swn, swk,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PROMOTE_BLOCKS: tl.constexpr,
             SCALE_K: tl.constexpr, W_ROWS: tl.constexpr):
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_k = tl.arange(0, BLOCK_K)
        outer = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        inner = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        steps = K // BLOCK_K
        for i in range(0, steps):
            k0 = i * BLOCK_K
            a = tl.load(x_ptr + offs_m[:, None] * K + (k0 + offs_k)[None, :], mask=offs_m[:, None] < M, other=0.0)
            b = tl.load(w_ptr + offs_n[None, :] * K + (k0 + offs_k)[:, None], mask=offs_n[None, :] < N, other=0.0)
            inner = tl.dot(a, b, inner)
            kb = k0 // SCALE_K
            block_end = ((k0 + BLOCK_K) % SCALE_K) == 0
            if ((i + 1) % PROMOTE_BLOCKS == 0) | block_end:
                sx = tl.load(sx_ptr + offs_m * sxm + kb * sxk, mask=offs_m < M, other=0.0)
                sw = tl.load(sw_ptr + (offs_n // W_ROWS) * swn + kb * swk, mask=offs_n < N, other=0.0)
                s = sx[:, None] * sw[None, :]
                outer = outer + inner * s
                inner = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        tl.store(y_ptr + offs_m[:, None] * N + offs_n[None, :], outer, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))

    dev = torch.device("cuda")
    configs = [("fp8-tensor", 0), ("fp8-tensor", 4), ("fp8-tensor", 1), ("fp8-block128", 0), ("fp8-block128", 1)]
    print(f"device: {torch.cuda.get_device_name(0)}, triton {triton.__version__}, torch {torch.__version__}")
    print(f"{'scheme':14s} {'promote':>7s}  {'off vs separate':>16s}  {'default vs --acc-fma':>20s}"
          f"  {'default vs separate':>19s}")
    total = equal_total = equal_fma = 0
    for scheme, promote in configs:
        with tempfile.TemporaryDirectory() as d:
            arr = run_numprobe(args.numprobe, scheme, args.n, args.k, args.tokens, promote, d)
        with tempfile.TemporaryDirectory() as d:
            fused = run_numprobe(args.numprobe, scheme, args.n, args.k, args.tokens, promote, d, fma=True)
        for name in ("codes", "scales", "gemm_x_codes", "gemm_x_scales"):
            if not np.array_equal(arr[name], fused[name]):
                sys.exit(f"{scheme}: --acc-fma changed {name}; the operands must not depend on it")
        for name in ("scales", "gemm_x_scales"):
            if arr[name].dtype != np.float32:
                sys.exit(f"{scheme}: {name} stored as {arr[name].dtype}; this bench reads fp32 scales")
        x = torch.from_numpy(arr["gemm_x_codes"]).to(dev).view(torch.float8_e4m3fn).contiguous()
        w = torch.from_numpy(arr["codes"]).to(dev).view(torch.float8_e4m3fn).contiguous()
        sx = torch.from_numpy(arr["gemm_x_scales"]).to(dev).contiguous()
        sw = torch.from_numpy(arr["scales"]).to(dev).contiguous()
        M, K = x.shape
        N = w.shape[0]
        scale_k = K // sx.shape[1]
        w_rows = N // sw.shape[0]
        block_k = 32 if promote == 1 else 128
        promote_blocks = (promote * 32) // block_k if promote > 0 else K // block_k
        want = arr["gemm_y"]
        cells = []
        for fusion in (False, True):
            y = torch.full((M, N), float("nan"), device=dev, dtype=torch.float32)  # poisoned
            # BLOCK_M = 64: one warpgroup's wgmma tile (a smaller M may compile to mma.sync, whose fp8
            # arithmetic differs: docs/hardware.md).
            grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
            gemm[grid](x, w, sx, sw, y, M, N, K, sx.stride(0) if sx.shape[0] > 1 else 0,
                       sx.stride(1) if sx.shape[1] > 1 else 0, sw.stride(0) if sw.shape[0] > 1 else 0,
                       sw.stride(1) if sw.shape[1] > 1 else 0, BLOCK_M=64, BLOCK_N=64, BLOCK_K=block_k,
                       PROMOTE_BLOCKS=promote_blocks, SCALE_K=scale_k, W_ROWS=w_rows, enable_fp_fusion=fusion)
            got = y.cpu().numpy()
            eq = int((got.view(np.uint32) == want.view(np.uint32)).sum())
            if not fusion:
                cells.append(f"{eq}/{want.size}")
                total += want.size
                equal_total += eq
            else:
                eq_fma = int((got.view(np.uint32) == fused["gemm_y"].view(np.uint32)).sum())
                equal_fma += eq_fma
                cells += [f"{eq_fma}/{want.size}", f"{eq}/{want.size}"]
        print(f"{scheme:14s} {promote:7d}  {cells[0]:>16s}  {cells[1]:>20s}  {cells[2]:>19s}")
    print(f"total: fusion off vs separate {equal_total}/{total}; default vs --acc-fma {equal_fma}/{total}")
    return 0 if equal_total == total and equal_fma == total else 1


if __name__ == "__main__":
    sys.exit(main())
