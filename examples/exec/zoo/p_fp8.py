#!/usr/bin/env python3
"""Zoo kernel `p_fp8`. Bug class: fp8 scaling (NUMERICS.md, FP8 attention).

A two-pass fp8 kernel: pass 1 runs the online softmax statistics (max m and sum l, float32,
over the unquantized P); pass 2 forms the normalised P = exp(S - m) / l, quantises it to
e4m3fn for the P.V MMA, and accumulates O = sum e4m3(P) V directly (V stays in the input
dtype, so P's quantization is the only fp8 point in play).
Planted bug: P is cast to e4m3fn with no pre-scale. e4m3fn's smallest subnormal is 2^-9 ~
2e-3, and RNE sends everything below 2^-10 to 0: a diffuse row, where each P ~ 1/S, loses its
mass in the numerator only, while l (and so the LSE) is exact.
Tiles: query tile 112, key tile 48.
Exposed by: diffuse rows at lengths where 1/S < 2^-10, e.g.
    numprobe attention --dist diffuse --mask none --seq 4096 --bound 'rel_rms<=0.0625'  (exit 1)
The bound has an fp8 basis (e4m3's unit roundoff 2^-4): against a bf16 naive baseline any fp8
P is ~10x off by design, so ratio_to_naive<=2 would fail it everywhere.
Invisible under: short rows where P stays above 2^-9 (--mask none --seq 32, same bound, passes).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiled  # noqa: E402

BLOCK_Q = 112
BLOCK_K = 48


def to_e4m3(x):
    return x.astype(tiled.ml_dtypes.float8_e4m3fn).astype(np.float32)  # BUG: no pre-scale


def masked_logits(case, q, k, lo, hi, k0, k1, r0, r1):
    s = tiled.logits(q[r0:r1], k[k0:k1], case["scale"], case["softcap"])
    return tiled.apply_mask(s, lo[r0:r1], hi[r0:r1], k0, k1)


def head_forward(case, q, k, v, lo, hi):
    T, S, D = q.shape[0], k.shape[0], q.shape[1]
    m = np.full(T, -np.inf, dtype=np.float32)
    l = np.zeros(T, dtype=np.float32)
    tiles = [(k0, min(k0 + BLOCK_K, S)) for k0 in range(0, S, BLOCK_K)]
    for k0, k1 in tiles:  # pass 1: row statistics
        r0, r1 = tiled.active_rows(lo, hi, k0, k1, BLOCK_Q)
        if r0 == r1:
            continue
        s = masked_logits(case, q, k, lo, hi, k0, k1, r0, r1)
        m_new = np.maximum(m[r0:r1], s.max(axis=1))
        m_off = np.where(m_new == -np.inf, np.float32(0), m_new)
        l[r0:r1] = np.exp(m[r0:r1] - m_off) * l[r0:r1] + np.exp(s - m_off[:, None]).sum(axis=1)
        m[r0:r1] = m_new
    seen = l > 0
    m_off = np.where(seen, m, np.float32(0))
    inv_l = np.where(seen, np.float32(1) / np.where(seen, l, 1), np.float32(0))
    o = np.zeros((T, D), dtype=np.float32)
    for k0, k1 in tiles:  # pass 2: normalised P in fp8, P.V
        r0, r1 = tiled.active_rows(lo, hi, k0, k1, BLOCK_Q)
        if r0 == r1:
            continue
        s = masked_logits(case, q, k, lo, hi, k0, k1, r0, r1)
        p = np.exp(s - m_off[r0:r1, None]) * inv_l[r0:r1, None]
        o[r0:r1] += to_e4m3(p) @ v[k0:k1]
    with np.errstate(divide="ignore"):
        lse = np.where(seen, m + np.log(np.where(seen, l, 1)), np.float32(-np.inf))
    return o, lse


def compute(case, q, k, v):
    return tiled.run_heads(case, q, k, v, head_forward)


if __name__ == "__main__":
    sys.exit(tiled.main(compute, sys.argv))
