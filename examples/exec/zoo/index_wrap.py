#!/usr/bin/env python3
"""Zoo kernel `index_wrap`. Bug class: index or dispatch threshold (NUMERICS.md).

Planted bug: the kernel body evaluates the causal/window mask from 16-bit position
registers: the query position S - T + t and the key position k0 + j are held in int16. Both
wrap at 32768 to negative values, so a query past position 32767 (pos - 65536 < 0) no longer
sees any key below 32768: it attends to keys [32768, pos] only. The launcher's block skipping
uses 64-bit positions and is right, so nothing changes below 2^15.
Tiles: query tile 128, key tile 128; the mask is applied on every key tile (no interior fast
path), as a simple kernel does.
Exposed by: causal or window masks at lengths past 32768, e.g.
    numprobe attention --mask causal --queries 64 --seq 33000 --bound 'ratio_to_naive<=2'  (exit 1)
Invisible under: any length <= 32768 (--queries 64 --seq 32000 passes) and --mask none (no
position is read).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiled  # noqa: E402

BLOCK_Q = 128
BLOCK_K = 128


def visible16(case, rows, k0, k1):
    """The mask from 16-bit positions (the bug): [len(rows), k1 - k0] booleans."""
    T, S = case["queries"], case["seq"]
    mask = case["mask"]
    qpos = (S - T + rows).astype(np.int16)                           # BUG: wraps at 32768
    kpos = np.arange(k0, k1, dtype=np.int64).astype(np.int16)       # BUG: wraps at 32768
    qp, kp = qpos.astype(np.int32)[:, None], kpos.astype(np.int32)[None, :]
    if mask == "causal":
        return kp <= qp
    if mask == "window":
        return (kp <= qp) & (kp > qp - case["window"])
    if mask == "causal-top-left":
        return kp <= rows.astype(np.int16).astype(np.int32)[:, None]
    if mask == "ranges":
        r = np.asarray(case["ranges"], dtype=np.int64).reshape(T, 2)[rows].astype(np.int16)
        return (kp >= r[:, 0:1].astype(np.int32)) & (kp < r[:, 1:2].astype(np.int32))
    return None  # mask none: no position is read


def head_forward(case, q, k, v, lo, hi):
    T, S, D = q.shape[0], k.shape[0], q.shape[1]
    m = np.full(T, -np.inf, dtype=np.float32)
    l = np.zeros(T, dtype=np.float32)
    acc = np.zeros((T, D), dtype=np.float32)
    for k0 in range(0, S, BLOCK_K):
        k1 = min(k0 + BLOCK_K, S)
        r0, r1 = tiled.active_rows(lo, hi, k0, k1, BLOCK_Q)  # 64-bit block skip: right
        if r0 == r1:
            continue
        s = tiled.logits(q[r0:r1], k[k0:k1], case["scale"], case["softcap"])
        vis = visible16(case, np.arange(r0, r1, dtype=np.int64), k0, k1)
        if vis is not None:
            s[~vis] = -np.inf
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
