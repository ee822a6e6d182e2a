#!/usr/bin/env python3
"""Zoo kernel `wave_width`. Bug class: wavefront width (NUMERICS.md).

Planted bug: the kernel was written for 32-lane warps and runs on a 64-lane wavefront. The
64 columns of a key tile sit one per lane; the row sum of P is a butterfly
(x += shuffle_xor(x, o) for o = 16, 8, 4, 2, 1) that never crosses lane 32, and l takes lane
0's result: only columns 0..31 of each key tile reach l. The P.V product (an MMA) and the row
max (computed before, over all 64 columns) are right, so l is too small and O too large.
Tiles: query tile 128, key tile 64.
Exposed by: a key tile holding visible keys in columns 32..63, i.e. more than 32 keys in a
tile, e.g.
    numprobe attention --mask none --seq 200 --bound 'ratio_to_naive<=2'   (exit 1)
Invisible under: S <= 32 (every visible key in lanes 0..31): --seq 32 passes.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiled  # noqa: E402

BLOCK_Q = 128
BLOCK_K = 64
WARP = 32  # the reduction tree's width, as written for the other architecture


def lane_row_sum(p):
    """The butterfly over lanes: lanes 0..BLOCK_K-1 hold one column each (zero past the tile
    end); xor offsets below WARP only, so lane 0 ends with the sum of lanes 0..WARP-1."""
    lanes = np.zeros((p.shape[0], BLOCK_K), dtype=np.float32)
    lanes[:, :p.shape[1]] = p
    off = WARP // 2
    while off >= 1:  # BUG: should start at BLOCK_K // 2 = 32 on a 64-lane wavefront
        lanes = lanes + lanes[:, np.arange(BLOCK_K) ^ off]
        off //= 2
    return lanes[:, 0]


def head_forward(case, q, k, v, lo, hi):
    T, S, D = q.shape[0], k.shape[0], q.shape[1]
    m = np.full(T, -np.inf, dtype=np.float32)
    l = np.zeros(T, dtype=np.float32)
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
        l[r0:r1] = alpha * l[r0:r1] + lane_row_sum(p)
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
