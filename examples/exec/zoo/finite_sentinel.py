#!/usr/bin/env python3
"""Zoo kernel `finite_sentinel`. Bug class: finite sentinel (NUMERICS.md).

Planted bug: the running max starts at the finite sentinel -1e4 instead of -inf (a common
"fix" for exp(-inf - -inf) = NaN). Masked logits are -inf, so fully masked rows still come
out right (l = 0 is read as "no key": O = 0, LSE = -inf). But a row whose every logit lies
below -1e4 keeps m = -1e4, its weights exp(s + 1e4) underflow to 0 once s < -1e4 - 104,
and the row collapses to O = 0, LSE = -inf.
Tiles: query tile 96, key tile 112.
Exposed by: logits shifted far below -1e4, e.g.
    numprobe attention --dist shifted --shift -1e5 --bound 'rel_rms<=0.0625'   (rel_rms 1, exit 1)
The bound is not ratio_to_naive: the naive baseline rounds the shifted scores (|s| ~ 1e5,
bf16 ulp 512) and is itself far off, so a ratio hides the collapse. 2^-4 is far above this
kernel's healthy error there (float32 logits of magnitude 1e5) and far below a collapse (1).
Invisible under: N(0,1) inputs and any shift above -1e4 (--dist shifted --shift -1e3 passes).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiled  # noqa: E402

BLOCK_Q = 96
BLOCK_K = 112
MAX_INIT = np.float32(-1e4)  # BUG: a finite sentinel, not -inf


def head_forward(case, q, k, v, lo, hi):
    T, S, D = q.shape[0], k.shape[0], q.shape[1]
    m = np.full(T, MAX_INIT, dtype=np.float32)
    l = np.zeros(T, dtype=np.float32)
    acc = np.zeros((T, D), dtype=np.float32)
    for k0 in range(0, S, BLOCK_K):
        k1 = min(k0 + BLOCK_K, S)
        r0, r1 = tiled.active_rows(lo, hi, k0, k1, BLOCK_Q)
        if r0 == r1:
            continue
        s = tiled.logits(q[r0:r1], k[k0:k1], case["scale"], case["softcap"])
        tiled.apply_mask(s, lo[r0:r1], hi[r0:r1], k0, k1)
        # m is never -inf, so no guard looks necessary here.
        m_new = np.maximum(m[r0:r1], s.max(axis=1))
        alpha = np.exp(m[r0:r1] - m_new)
        p = np.exp(s - m_new[:, None])
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
