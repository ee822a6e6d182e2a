#!/usr/bin/env python3
"""Zoo kernel `rowsum_bf16`. Bug class: low-precision accumulation (NUMERICS.md).

Planted bug: the running sum l is held in bf16 between key tiles (a register spilled to a
bf16 buffer): after every tile l = bf16(alpha * l + rowsum(P)). Each store rounds l to 8
significant bits, relative error up to 2^-9, and the errors add up over the key tiles, so the
error grows with the number of tiles. O's accumulator and the max stay in float32.
Tiles: query tile 128, key tile 80.
Exposed by: near-uniform attention at long length, where every tile adds a similar amount
to l, e.g.
    numprobe attention --dist diffuse --mask none --seq 8192 --bound 'ratio_to_naive<=2'  (exit 1)
    numprobe drift --dist diffuse --seq 128..8192 ...   (ratio_to_naive rises with length)
Invisible under: lengths of one or two key tiles (--seq 160: ratio ~1), where l is rounded
once or twice, like the naive baseline's one rounding of P.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiled  # noqa: E402

BLOCK_Q = 128
BLOCK_K = 80


def to_bf16(x):
    return x.astype(tiled.ml_dtypes.bfloat16).astype(np.float32)


def head_forward(case, q, k, v, lo, hi):
    T, S, D = q.shape[0], k.shape[0], q.shape[1]
    m = np.full(T, -np.inf, dtype=np.float32)
    l = np.zeros(T, dtype=np.float32)  # holds bf16 values (see the store below)
    acc = np.zeros((T, D), dtype=np.float32)
    for k0 in range(0, S, BLOCK_K):
        k1 = min(k0 + BLOCK_K, S)
        r0, r1 = tiled.active_rows(lo, hi, k0, k1, BLOCK_Q)
        if r0 == r1:
            continue
        s = tiled.logits(q[r0:r1], k[k0:k1], case["scale"], case["softcap"])
        tiled.apply_mask(s, lo[r0:r1], hi[r0:r1], k0, k1)
        m_new = np.maximum(m[r0:r1], s.max(axis=1))
        m_off = np.where(m_new == -np.inf, np.float32(0), m_new)
        alpha = np.exp(m[r0:r1] - m_off)
        p = np.exp(s - m_off[:, None])
        l[r0:r1] = to_bf16(alpha * l[r0:r1] + p.sum(axis=1))  # BUG: l stored in bf16
        acc[r0:r1] = alpha[:, None] * acc[r0:r1] + tiled.round_to(p, case["dtype"]) @ v[k0:k1]
        m[r0:r1] = m_new
    seen = l > 0
    o = np.where(seen[:, None], acc / np.where(seen, l, 1)[:, None], np.float32(0))
    with np.errstate(divide="ignore"):
        lse = np.where(seen, m + np.log(np.where(seen, l, 1)), np.float32(-np.inf))
    return o, lse


def compute(case, q, k, v):
    return tiled.run_heads(case, q, k, v, head_forward)


if __name__ == "__main__":
    sys.exit(tiled.main(compute, sys.argv))
