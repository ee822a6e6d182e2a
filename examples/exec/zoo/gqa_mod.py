#!/usr/bin/env python3
"""Zoo kernel `gqa_mod`. Bug class: GQA mapping (NUMERICS.md).

Planted bug: query head h reads KV head h % Hkv instead of h // (Hq / Hkv). With Hq = 8,
Hkv = 2 the right map is 0,0,0,0,1,1,1,1 and this kernel's 0,1,0,1,0,1,0,1: heads 1, 3, 4
and 6 attend with the other group's K and V, the rest are exact.
Tiles: query tile 64, key tile 64 (the softmax itself is healthy).
Exposed by: any group size > 1 with Hkv > 1 and distinct heads, e.g.
    numprobe attention --heads 8 --kv-heads 2 --bound 'ratio_to_naive<=2'   (exit 1)
    (--dist constant-v makes it exact to read: each KV head has its own constant V)
Invisible under: MHA (--kv-heads equal to --heads) and MQA (--kv-heads 1), where both maps
agree.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiled  # noqa: E402

BLOCK_Q = 64
BLOCK_K = 64


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
    hkv = case["kv_heads"]
    return tiled.run_heads(case, q, k, v, head_forward,
                           kv_head_of=lambda h: h % hkv)  # BUG: h % Hkv, not h // (Hq // Hkv)


if __name__ == "__main__":
    sys.exit(tiled.main(compute, sys.argv))
