#!/usr/bin/env python3
"""Zoo kernel `skip_rescale`. Bug class: rescale or merge frame (NUMERICS.md).

Planted bug: when the running max rises, the accumulator O is rescaled by
alpha = exp(m_old - m_new) but the running sum l is not (l += rowsum(P)): l keeps weights
measured against an older, smaller max, so it is too large and O = acc / l too small. The LSE
is wrong too (m + log l), by log of the same factor.
Tiles: query tile 80, key tile 96.
Exposed by: scores whose max rises tile after tile, e.g.
    numprobe attention --dist rescale-stress --seq 2000 --bound 'ratio_to_naive<=2'  (exit 1)
Invisible under: scores whose max is in the first key tile (alpha = 1 on every later tile),
    numprobe attention --dist max-first --seq 2000 --bound 'ratio_to_naive<=2'       (exit 0)
and under any length that fits one key tile (S <= 96). N(0,1) rows fail as well once their
max rises after the first tile (most rows at S >= 2 tiles).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiled  # noqa: E402

BLOCK_Q = 80
BLOCK_K = 96


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
        l[r0:r1] = l[r0:r1] + p.sum(axis=1)  # BUG: l is not rescaled by alpha
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
