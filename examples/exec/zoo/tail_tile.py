#!/usr/bin/env python3
"""Zoo kernel `tail_tile`. Bug class: paged or tail tile (NUMERICS.md).

Planted bug: the key loop runs over S // 96 full key tiles (the grid is computed with a
floor division); a partial last key tile is never visited, so the last S mod 96 keys are
dropped for every row (a row that sees only those keys comes out as fully masked).
Tiles: query tile 64, key tile 96.
Exposed by: lengths not a multiple of 96 (k*96 + 1 drops one key, k*96 - 1 drops 95), e.g.
    numprobe attention --mask none --seq 1000 --bound 'ratio_to_naive<=2'   (exit 1)
Invisible under: S a multiple of 96 (--seq 960 passes).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiled  # noqa: E402

BLOCK_Q = 64
BLOCK_K = 96


def head_forward(case, q, k, v, lo, hi):
    T, S, D = q.shape[0], k.shape[0], q.shape[1]
    m = np.full(T, -np.inf, dtype=np.float32)
    l = np.zeros(T, dtype=np.float32)
    acc = np.zeros((T, D), dtype=np.float32)
    n_tiles = S // BLOCK_K  # BUG: floor, not ceil: the partial tail tile is skipped
    for kt in range(n_tiles):
        k0, k1 = kt * BLOCK_K, (kt + 1) * BLOCK_K
        r0, r1 = tiled.active_rows(lo, hi, k0, k1, BLOCK_Q)
        if r0 == r1:
            continue
        s = tiled.logits(q[r0:r1], k[k0:k1], case["scale"], case["softcap"])
        tiled.apply_mask(s, lo[r0:r1], hi[r0:r1], k0, k1)
        m_new = np.maximum(m[r0:r1], s.max(axis=1))
        m_off = np.where(m_new == -np.inf, np.float32(0), m_new)
        alpha = np.exp(m[r0:r1] - m_off)
        p = np.exp(s - m_off[:, None])
        l[r0:r1] = alpha * l[r0:r1] + p.sum(axis=1)
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
