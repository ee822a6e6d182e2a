#!/usr/bin/env python3
"""Zoo kernel `healthy`: a FlashAttention-2-style forward pass with no planted bug.

Tiles: query tile 112, key tile 80 (neither a power of two).
Numerics, as a bf16/f16 GPU kernel has them:
- S = scale * Q K^T in float32, softcap in float32;
- running max m, running sum l and the accumulator O in float32, rescaled by
  alpha = exp(m_old - m_new) whenever the max rises;
- P = exp(S - m_new) summed into l in float32, then held in the input dtype for P.V;
- a row that has seen no visible key keeps m = -inf: the exponent's offset is guarded to 0
  so exp(-inf - -inf) never arises (NUMERICS.md, online softmax);
- O = acc / l written in the input dtype; LSE = m + log(l) (natural log) in float32;
  a fully masked row is O = 0, LSE = -inf.
Expected: ratio_to_naive <= 2 at every length, mask, bf16 and f16 (see README.md here).

    numprobe attention --backend exec:'python3 examples/exec/zoo/healthy.py {in}'
    numprobe drift --backend exec-worker:'python3 examples/exec/worker.py examples/exec/zoo/healthy.py'
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiled  # noqa: E402

BLOCK_Q = 112
BLOCK_K = 80


def head_forward(case, q, k, v, lo, hi):
    T, S, D = q.shape[0], k.shape[0], q.shape[1]
    dtype = case["dtype"]
    m = np.full(T, -np.inf, dtype=np.float32)
    l = np.zeros(T, dtype=np.float32)
    acc = np.zeros((T, D), dtype=np.float32)
    for k0 in range(0, S, BLOCK_K):
        k1 = min(k0 + BLOCK_K, S)
        r0, r1 = tiled.active_rows(lo, hi, k0, k1, BLOCK_Q)
        if r0 == r1:
            continue  # no query tile sees this key tile: the block is skipped
        s = tiled.logits(q[r0:r1], k[k0:k1], case["scale"], case["softcap"])
        tiled.apply_mask(s, lo[r0:r1], hi[r0:r1], k0, k1)
        m_old = m[r0:r1]
        m_new = np.maximum(m_old, s.max(axis=1))
        # Empty-row guard: with no visible key yet m_new = -inf; offset by 0 instead so that
        # p = exp(-inf) = 0 and alpha = exp(-inf) = 0, never exp(-inf - -inf) = NaN.
        m_off = np.where(m_new == -np.inf, np.float32(0), m_new)
        alpha = np.exp(m_old - m_off)
        p = np.exp(s - m_off[:, None], out=s)
        l[r0:r1] = alpha * l[r0:r1] + p.sum(axis=1)
        p_lp = tiled.round_to(p, dtype)  # P in the input dtype for the P.V MMA
        acc[r0:r1] = alpha[:, None] * acc[r0:r1] + p_lp @ v[k0:k1]
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
