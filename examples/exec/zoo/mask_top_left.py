#!/usr/bin/env python3
"""Zoo kernel `mask_top_left`. Bug class: mask geometry (NUMERICS.md, causal mask).

Planted bug: the causal (and sliding-window) mask is aligned top-left: query t sees keys
j <= t (window: t - W < j <= t), as PyTorch SDPA's is_causal does, instead of bottom-right
j <= S - T + t. The two agree only when T = S. The block skipping follows the same wrong
geometry, so the whole kernel is consistently top-left.
Tiles: query tile 48, key tile 96.
Exposed by: any causal or window case with T != S, e.g.
    numprobe attention --mask causal --queries 3 --seq 128 --bound 'ratio_to_naive<=2'  (exit 1)
    numprobe attention --mask causal --queries 100 --seq 1000 ...                       (exit 1)
Invisible under: T = S (the default --queries 0), and --mask none.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiled  # noqa: E402

BLOCK_Q = 48
BLOCK_K = 96


def spans_top_left(case):
    """[lo, hi) per query row as this kernel sees it."""
    T, S = case["queries"], case["seq"]
    t = np.arange(T, dtype=np.int64)
    lo, hi = tiled.key_spans(case)
    if case["mask"] == "causal":
        hi = np.minimum(t + 1, S)                  # BUG: j <= t, not j <= S - T + t
    elif case["mask"] == "window":
        hi = np.minimum(t + 1, S)                  # BUG: same alignment for the window
        lo = np.clip(t - case["window"] + 1, 0, S)
    return lo, np.maximum(hi, lo)


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
        l[r0:r1] = alpha * l[r0:r1] + p.sum(axis=1)
        acc[r0:r1] = alpha[:, None] * acc[r0:r1] + tiled.round_to(p, case["dtype"]) @ v[k0:k1]
        m[r0:r1] = m_new
    seen = l > 0
    o = np.where(seen[:, None], acc / np.where(seen, l, 1)[:, None], np.float32(0))
    with np.errstate(divide="ignore"):
        lse = np.where(seen, m + np.log(np.where(seen, l, 1)), np.float32(-np.inf))
    return o, lse


def compute(case, q, k, v):
    return tiled.run_heads(case, q, k, v, head_forward, spans=spans_top_left(case))


if __name__ == "__main__":
    sys.exit(tiled.main(compute, sys.argv))
