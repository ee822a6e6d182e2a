#!/usr/bin/env python3
"""Zoo kernel `no_empty_guard`. Bug class: empty or masked rows (NUMERICS.md, online softmax).

Planted bug: the online softmax subtracts the running max with no guard for a row that has
not seen a visible key yet. Such a row has m_new = -inf after a fully masked key tile, and
exp(-inf - -inf) = NaN poisons its l and O for good.
Tiles: query tile 64, key tile 48.
Exposed by: rows whose first computed key tiles are all masked for them -- fully masked rows
(causal with T > S: rows t < T - S see no key) and sliding windows (a row's window starts
after key tiles its query tile still computes), e.g.
    numprobe attention --queries 300 --seq 200 --mask causal   (NaN rows, exit 1)
    numprobe attention --mask window --window 100 --seq 1000   (NaN rows, exit 1)
Invisible under: causal with T <= S and no mask (every computed row sees key 0 in its first
key tile), so a default `--mask causal` run passes.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiled  # noqa: E402

BLOCK_Q = 64
BLOCK_K = 48


def head_forward(case, q, k, v, lo, hi):
    T, S, D = q.shape[0], k.shape[0], q.shape[1]
    m = np.full(T, -np.inf, dtype=np.float32)
    l = np.zeros(T, dtype=np.float32)
    acc = np.zeros((T, D), dtype=np.float32)
    with np.errstate(invalid="ignore"):
        for k0 in range(0, S, BLOCK_K):
            k1 = min(k0 + BLOCK_K, S)
            r0, r1 = tiled.active_rows(lo, hi, k0, k1, BLOCK_Q)
            if r0 == r1:
                continue
            s = tiled.logits(q[r0:r1], k[k0:k1], case["scale"], case["softcap"])
            tiled.apply_mask(s, lo[r0:r1], hi[r0:r1], k0, k1)
            m_new = np.maximum(m[r0:r1], s.max(axis=1))
            alpha = np.exp(m[r0:r1] - m_new)  # BUG: -inf - -inf = NaN for a row with no key yet
            p = np.exp(s - m_new[:, None])    # BUG: same, on every logit of that row
            l[r0:r1] = alpha * l[r0:r1] + p.sum(axis=1)
            acc[r0:r1] = alpha[:, None] * acc[r0:r1] + tiled.round_to(p, case["dtype"]) @ v[k0:k1]
            m[r0:r1] = m_new
    # The epilogue does treat l == 0 as a fully masked row; a NaN l is not 0 and passes through.
    empty = l == 0
    o = acc / np.where(empty, 1, l)[:, None]
    o[empty] = 0
    with np.errstate(divide="ignore", invalid="ignore"):
        lse = np.where(empty, np.float32(-np.inf), m + np.log(l))
    return o, lse


def compute(case, q, k, v):
    return tiled.run_heads(case, q, k, v, head_forward)


if __name__ == "__main__":
    sys.exit(tiled.main(compute, sys.argv))
