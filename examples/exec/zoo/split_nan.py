#!/usr/bin/env python3
"""Zoo kernel `split_nan`. Bug class: empty or masked split (split-KV merge, NUMERICS.md).

A split-KV (flash-decoding) kernel: the keys are cut into splits of a fixed 240 keys (five
key tiles); each split runs a guarded online softmax and writes its partial (O_i, LSE_i), and
a merge kernel combines them: LSE = log sum exp(LSE_i), O = sum exp(LSE_i - LSE) * O_i.
Planted bug: a split in which a row sees no key writes O_i = acc / l = 0/0 = NaN (with
LSE_i = -inf, which is right). The merge weight exp(-inf - LSE) = 0 is right too, but
0 * NaN = NaN: the empty split poisons a row that has plenty of visible keys elsewhere.
Tiles: query tile 96, key tile 48; split size 240 keys.
Exposed by: causal with T > 1 where the last split starts after a row's position, i.e. S mod
240 < T (early rows see nothing of the short trailing split), e.g.
    numprobe attention --queries 8 --seq 965 --mask causal      (rows 0..2 NaN, exit 1)
and by windows (leading splits empty). Invisible under: --queries 1 (a decode row sees every
split), --mask none, and lengths whose last split every row reaches (--queries 8 --seq 960).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiled  # noqa: E402

BLOCK_Q = 96
BLOCK_K = 48
SPLIT_KEYS = 240


def split_partial(case, q, k, v, lo, hi, s0, s1):
    """One split's pass over keys [s0, s1): (O_i, LSE_i), normalised within the split."""
    T, D = q.shape
    m = np.full(T, -np.inf, dtype=np.float32)
    l = np.zeros(T, dtype=np.float32)
    acc = np.zeros((T, D), dtype=np.float32)
    for k0 in range(s0, s1, BLOCK_K):
        k1 = min(k0 + BLOCK_K, s1)
        r0, r1 = tiled.active_rows(lo, hi, k0, k1, BLOCK_Q)
        if r0 == r1:
            continue
        s = tiled.logits(q[r0:r1], k[k0:k1], case["scale"], case["softcap"])
        tiled.apply_mask(s, lo[r0:r1], hi[r0:r1], k0, k1)
        m_new = np.maximum(m[r0:r1], s.max(axis=1))
        m_off = np.where(m_new == -np.inf, np.float32(0), m_new)  # in-split guard: fine
        alpha = np.exp(m[r0:r1] - m_off)
        p = np.exp(s - m_off[:, None])
        l[r0:r1] = alpha * l[r0:r1] + p.sum(axis=1)
        acc[r0:r1] = alpha[:, None] * acc[r0:r1] + tiled.round_to(p, case["dtype"]) @ v[k0:k1]
        m[r0:r1] = m_new
    with np.errstate(divide="ignore", invalid="ignore"):
        o_i = acc / l[:, None]          # BUG: 0/0 = NaN for a row with no key in this split
        lse_i = m + np.log(l)           # -inf for that row (right)
    return o_i, lse_i


def head_forward(case, q, k, v, lo, hi):
    S = k.shape[0]
    parts = [split_partial(case, q, k, v, lo, hi, s0, min(s0 + SPLIT_KEYS, S))
             for s0 in range(0, S, SPLIT_KEYS)]
    lses = np.stack([p[1] for p in parts])  # [splits, T]
    top = lses.max(axis=0)
    top_off = np.where(top == -np.inf, np.float32(0), top)
    with np.errstate(divide="ignore", invalid="ignore"):
        lse = top_off + np.log(np.exp(lses - top_off).sum(axis=0))  # -inf when every split is empty
        o = np.zeros_like(parts[0][0])
        for o_i, lse_i in parts:
            o += np.exp(lse_i - lse)[:, None] * o_i  # exp(-inf) = 0, but 0 * NaN = NaN
    none = lse == -np.inf
    o[none] = 0  # the merge does handle "every split empty"; one empty split is what it misses
    return o, lse


def compute(case, q, k, v):
    return tiled.run_heads(case, q, k, v, head_forward)


if __name__ == "__main__":
    sys.exit(tiled.main(compute, sys.argv))
