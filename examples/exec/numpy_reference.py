#!/usr/bin/env python3
"""NumPy attention for `numprobe ... --backend exec:'python3 numpy_reference.py {in}'`.

Computes in float64 (one head at a time), writes o.npy as float32 (or float64 with
--out-dtype float64) and lse.npy as float64. Its error against numprobe's reference is the
float32 rounding of the output: rel_rms <= 2^-24 (the unit roundoff of float32).
Also usable as a worker module: `exec-worker:'python3 worker.py numpy_reference'`.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numprobe_exec  # noqa: E402

OUT_DTYPE = np.float32


def compute(case, q, k, v):
    B, T, S = case["batch"], case["queries"], case["seq"]
    Hq, Hkv, D = case["heads"], case["kv_heads"], case["head_dim"]
    group = Hq // Hkv
    scale, cap = case["scale"], case["softcap"]
    q = q.astype(np.float64).reshape(B, T, Hq, D)
    k = k.astype(np.float64).reshape(B, S, Hkv, D)
    v = v.astype(np.float64).reshape(B, S, Hkv, D)
    visible = numprobe_exec.visible_keys(case)
    any_visible = visible.any(axis=1)
    o = np.zeros((B, T, Hq, D))
    lse = np.full((B, T, Hq), -np.inf)
    for b in range(B):
        for h in range(Hq):
            kv = h // group  # GQA: h / (Hq / Hkv), never h % Hkv
            s = (q[b, :, h, :] @ k[b, :, kv, :].T) * scale
            if cap > 0:
                s = cap * np.tanh(s / cap)
            s = np.where(visible, s, -np.inf)
            m = np.max(s, axis=1, keepdims=True)
            m = np.where(np.isfinite(m), m, 0.0)
            p = np.exp(s - m)
            l = p.sum(axis=1, keepdims=True)
            safe = np.where(l > 0, l, 1.0)
            o[b, :, h, :] = np.where(any_visible[:, None], (p @ v[b, :, kv, :]) / safe, 0.0)
            lse[b, :, h] = np.where(any_visible, np.log(safe[:, 0]) + m[:, 0], -np.inf)
    return o.reshape(B * T, Hq, D).astype(OUT_DTYPE), lse.reshape(B * T, Hq)


def main(argv):
    global OUT_DTYPE
    if "--out-dtype" in argv:
        i = argv.index("--out-dtype")
        OUT_DTYPE = np.dtype(argv[i + 1]).type
        del argv[i:i + 2]
    if len(argv) < 2:
        print("usage: numpy_reference.py IN_DIR [OUT_DIR] [--out-dtype float32|float64]", file=sys.stderr)
        return 2
    in_dir = argv[1]
    out_dir = argv[2] if len(argv) > 2 else in_dir
    case, q, k, v = numprobe_exec.load_case(in_dir)
    o, lse = compute(case, q, k, v)
    numprobe_exec.save_output(out_dir, o, lse)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
