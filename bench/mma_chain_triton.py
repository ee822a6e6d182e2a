#!/usr/bin/env python3
"""Chained fp8 P.V on the GPU (Triton tl.dot, wgmma on sm_90) against numprobe's MMA model,
chained the way `--acc-model` chains it in the attention emulator (issue 31 item 3;
docs/hardware.md, "--acc-model in the attention emulator").

usage: mma_chain_triton.py NUMPROBE [--keys 1024] [--model h200-wgmma-e4m3]

Each configuration is one flash-attention P.V loop with the softmax taken out: P (64 query rows
x S keys, e4m3 values in [0, 1] as exp(s - m) is) and V (S keys x 64 channels, e4m3) are
inputs, and so is alpha, the per-row, per-key-tile rescale factor (1 on most tiles, an fp32
value below 1 on the others). Per key tile of 64: acc = alpha * acc (fp32), acc = tl.dot(p, v,
acc); with promotion every N tiles, acc2 = alpha * acc2 and acc2 += acc, acc = 0 (vLLM's
two-level accumulation). The CPU side runs the same chain, instruction by instruction (K = 32),
through `numprobe mma --model NAME --run-vectors`, each instruction's C the previous output.
The count is of output elements whose fp32 bits are equal.

With promotion the CPU chain runs both ways: `fused` (the emulator's --acc-fma: the promotion
acc2 * alpha + acc rounded once) and separate (two roundings). Whether Triton contracts the
promotion into an fma depends on the loop (measured: every tile yes, every 4 tiles no), so the
kernel as compiled by default must equal one of the two bit for bit (the line says which), and
the kernel with enable_fp_fusion=False must equal the separate one.
"""
import fractions
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import triton
import triton.language as tl

BM, BN, D, K = 64, 64, 64, 32


@triton.jit
def pv_chain(P, V, A, O, S: tl.constexpr, PROMOTE: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
             D: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rd = tl.arange(0, D)
    acc = tl.zeros([BM, D], dtype=tl.float32)
    acc2 = tl.zeros([BM, D], dtype=tl.float32)
    NT: tl.constexpr = S // BN
    for t in range(NT):
        alpha = tl.load(A + rm * NT + t)
        acc = acc * alpha[:, None]
        if PROMOTE > 0:
            acc2 = acc2 * alpha[:, None]
        p = tl.load(P + rm[:, None] * S + t * BN + rn[None, :])
        v = tl.load(V + (t * BN + rn)[:, None] * D + rd[None, :])
        acc = tl.dot(p, v, acc)
        if PROMOTE > 0:
            if (t + 1) % PROMOTE == 0:
                acc2 = acc2 + acc
                acc = tl.zeros([BM, D], dtype=tl.float32)
    if PROMOTE > 0:
        acc = acc + acc2
    tl.store(O + rm[:, None] * D + rd[None, :], acc)


def make_inputs(s, v_dist, seed):
    g = torch.Generator().manual_seed(seed)
    scores = -torch.rand(BM, s, generator=g) * 6.0  # exp(s - m) in (e^-6, 1]
    p = torch.exp(scores).to(torch.float8_e4m3fn)
    v = torch.randn(s, D, generator=g)
    if v_dist == "positive":
        v = v.abs()
    v = (v * (448.0 / v.abs().max())).to(torch.float8_e4m3fn)
    nt = s // BN
    alpha = torch.ones(BM, nt)
    rescale = torch.rand(BM, nt, generator=g) < 0.3
    alpha[rescale] = torch.rand(int(rescale.sum()), generator=g) * 0.75 + 0.25
    alpha[:, 0] = 0.0  # the first tile: acc starts from zero either way
    return p, v, alpha.to(torch.float32)


def fma32(x, y, z):
    """fp32 fma elementwise: x * y + z rounded once to nearest even (exactly, through fractions)."""
    out = np.empty(x.shape, np.float32)
    for i, (a, b, c) in enumerate(zip(x.ravel().tolist(), y.ravel().tolist(), z.ravel().tolist())):
        exact = fractions.Fraction(a) * fractions.Fraction(b) + fractions.Fraction(c)
        r = np.float32(float(exact))  # may be double-rounded: settle among its neighbours
        cands = [np.nextafter(r, np.float32(-np.inf)), r, np.nextafter(r, np.float32(np.inf))]
        best = min(cands, key=lambda f: (abs(fractions.Fraction(float(f)) - exact), int(f.view(np.uint32)) & 1))
        out.flat[i] = best
    return out


def run_model(numprobe, model, p, v, alpha, promote, fused=False):
    """The chain on the CPU, one `numprobe mma --run-vectors` call per instruction. fused: the
    promotion as fma(outer, alpha, inner) (the emulator's --acc-fma)."""
    s = p.shape[1]
    pf = p.to(torch.float32).numpy().astype(np.float64)
    vf = v.to(torch.float32).numpy().astype(np.float64)
    al = alpha.numpy()
    inner = np.zeros((BM, D), np.float32)
    outer = np.zeros((BM, D), np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "v.json")
        for t in range(s // BN):
            inner = (al[:, t:t + 1] * inner).astype(np.float32)
            promotes = promote > 0 and (t + 1) % promote == 0
            if promote > 0 and not (fused and promotes):
                outer = (al[:, t:t + 1] * outer).astype(np.float32)
            for st in range(BN // K):
                k0 = t * BN + st * K
                vecs = [{"a": pf[r, k0:k0 + K].tolist(), "b": vf[k0:k0 + K, d].tolist(), "c": float(inner[r, d])}
                        for r in range(BM) for d in range(D)]
                with open(path, "w") as f:
                    json.dump({"paths": [{"input": "e4m3fn", "k": K, "vectors": vecs}]}, f)
                out = subprocess.run([numprobe, "mma", "--model", model, "--run-vectors", path, "--json", "-"],
                                     check=True, capture_output=True, text=True).stdout
                got = json.loads(out)["paths"][0]["vectors"]
                inner = np.array([float(x["measured"]) for x in got], np.float32).reshape(BM, D)
            if promotes:
                if fused:
                    outer = fma32(outer, np.broadcast_to(al[:, t:t + 1], (BM, D)).astype(np.float32), inner)
                else:
                    outer = (outer + inner).astype(np.float32)
                inner = np.zeros((BM, D), np.float32)
    return (inner + outer).astype(np.float32) if promote > 0 else inner


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("numprobe")
    ap.add_argument("--keys", type=int, default=1024)
    ap.add_argument("--model", default="h200-wgmma-e4m3")
    ap.add_argument("--only-promote", type=int, default=0, help="run this promotion interval only (0: 0, 1 and 4)")
    args = ap.parse_args()
    print(f"device: {torch.cuda.get_device_name()}, triton {triton.__version__}")
    rows = []
    for v_dist in ("normal", "positive"):
        for promote in ((0, 1, 4) if not args.only_promote else (args.only_promote,)):
            p, v, alpha = make_inputs(args.keys, v_dist, 1000 + promote)
            out = torch.full((BM, D), float("nan"), device="cuda")  # poisoned
            ck = pv_chain[(1,)](p.cuda(), v.cuda(), alpha.cuda(), out, S=args.keys, PROMOTE=promote, BM=BM, BN=BN, D=D,
                                num_warps=4)
            if os.environ.get("OUT"):  # the compiled IR, to read what the compiler made of the loop
                with open(os.path.join(os.environ["OUT"], f"pv_chain_promote{promote}.ttgir"), "w") as f:
                    f.write(ck.asm["ttgir"])
            torch.cuda.synchronize()
            dev = out.cpu().numpy()
            sep = run_model(args.numprobe, args.model, p, v, alpha, promote)
            cpu = run_model(args.numprobe, args.model, p, v, alpha, promote, fused=True) if promote > 0 else sep
            eq = int(np.sum(dev.view(np.uint32) == cpu.view(np.uint32)))
            eq_sep = int(np.sum(dev.view(np.uint32) == sep.view(np.uint32)))
            if promote > 0:
                # The kernel with fp fusion off against the separate (two-rounding) promotion.
                nofuse = torch.full((BM, D), float("nan"), device="cuda")
                pv_chain[(1,)](p.cuda(), v.cuda(), alpha.cuda(), nofuse, S=args.keys, PROMOTE=promote, BM=BM, BN=BN,
                               D=D, num_warps=4, enable_fp_fusion=False)
                torch.cuda.synchronize()
                nf = nofuse.cpu().numpy()
                eq2 = int(np.sum(nf.view(np.uint32) == sep.view(np.uint32)))
                print(f"         promote={promote}: default kernel vs fused promotion {eq}/{dev.size}, vs separate "
                      f"{eq_sep}/{dev.size}; enable_fp_fusion=False vs separate {eq2}/{dev.size}", flush=True)
                rows.append((v_dist, -promote, eq2, dev.size, 0.0))
            best, which = (eq, "fused") if eq >= eq_sep else (eq_sep, "separate")
            if promote == 0:
                which = "one level"
            diff = np.abs(dev.astype(np.float64) - (cpu if which == "fused" else sep).astype(np.float64))
            rows.append((v_dist, promote, best, dev.size, float(diff.max())))
            print(f"{v_dist:8s} promote={promote}  equal bits {best}/{dev.size} ({which} chain)  "
                  f"max |device - model| {diff.max():.3e}",
                  flush=True)
    total = sum(r[2] for r in rows)
    print(f"TOTAL equal {total}/{sum(r[3] for r in rows)} ({args.model}, S={args.keys}, tile 64, D={D})")
    return 0 if total == sum(r[3] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
