#!/usr/bin/env python3
"""A tiled (flash-style) NumPy attention, written as a third party would write it, for the
growth false-alarm benchmark (bench/growth_false_alarms.py).

    numprobe drift --points log:16 \
        --backend exec-worker:'python3 examples/exec/worker.py bench/growth_kernels/numpy_flash_tiled.py'

One pass over key tiles of KEY_TILE keys with an online softmax: scores, running max m, running
sum l and the accumulator O in float32; P rounded to bf16 before P.V (as tensor-core kernels
feed the MMA); the output rounded to bf16. This is the healthy form. numpy_flash_l_bf16.py is
the same kernel holding l in bf16, rounded once per tile, the mild form of the bug in issue 14
(ratio_to_naive rising with length while rel_rms falls under --dist diffuse).
"""
import os
import sys

import ml_dtypes
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "exec"))
import numprobe_exec  # noqa: E402

KEY_TILE = 96          # not a power of two: not the emulator's tile
L_IN_BF16 = False      # numpy_flash_l_bf16.py sets it


def bf16(x):
    return x.astype(ml_dtypes.bfloat16).astype(np.float32)


def compute(case, q, k, v):
    B, T, S = case["batch"], case["queries"], case["seq"]
    Hq, Hkv, D = case["heads"], case["kv_heads"], case["head_dim"]
    group = Hq // Hkv
    scale, cap = np.float32(case["scale"]), case["softcap"]
    q = q.astype(np.float32).reshape(B, T, Hq, D)
    k = k.astype(np.float32).reshape(B, S, Hkv, D)
    v = v.astype(np.float32).reshape(B, S, Hkv, D)
    visible = numprobe_exec.visible_keys(case)
    o = np.zeros((B, T, Hq, D), dtype=np.float32)
    lse = np.full((B, T, Hq), -np.inf)
    for b in range(B):
        for h in range(Hq):
            kv = h // group
            m = np.full((T, 1), -np.inf, dtype=np.float32)
            l = np.zeros((T, 1), dtype=np.float32)
            acc = np.zeros((T, D), dtype=np.float32)
            for j0 in range(0, S, KEY_TILE):
                j1 = min(S, j0 + KEY_TILE)
                s = (q[b, :, h, :] @ k[b, j0:j1, kv, :].T) * scale
                if cap > 0:
                    s = np.float32(cap) * np.tanh(s / np.float32(cap))
                s = np.where(visible[:, j0:j1], s, -np.inf)
                m_new = np.maximum(m, s.max(axis=1, keepdims=True))
                safe_m = np.where(np.isfinite(m_new), m_new, 0.0).astype(np.float32)
                alpha = np.where(np.isfinite(m), np.exp(m - safe_m), 0.0).astype(np.float32)
                p = np.exp(s - safe_m).astype(np.float32)
                l = l * alpha + p.sum(axis=1, keepdims=True)
                if L_IN_BF16:
                    l = bf16(l)
                acc = acc * alpha + bf16(p) @ v[b, j0:j1, kv, :]
                m = m_new
            seen = l[:, 0] > 0
            o[b, :, h, :] = bf16(np.where(seen[:, None], acc / np.where(l > 0, l, 1.0), 0.0))
            lse[b, :, h] = np.where(seen, np.log(np.where(seen, l[:, 0], 1.0)) + m[:, 0], -np.inf)
    return o.reshape(B * T, Hq, D), lse.reshape(B * T, Hq)


def main(argv):
    if len(argv) < 2:
        print("usage: numpy_flash_tiled.py IN_DIR [OUT_DIR]", file=sys.stderr)
        return 2
    case, q, k, v = numprobe_exec.load_case(argv[1])
    o, lse = compute(case, q, k, v)
    numprobe_exec.save_output(argv[2] if len(argv) > 2 else argv[1], o, lse)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
