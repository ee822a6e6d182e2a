#!/usr/bin/env python3
"""Exec adapters whose outputs hold NaN or Inf, as real kernel bugs write them (tests/cli,
test_cli_nonfinite). numprobe must judge them (exit 1 with the NaN/Inf report), not call them
backend errors.

usage: nonfinite_adapter.py MODE DIR          (one process per case)
       worker.py nonfinite_adapter.py         (worker mode; MODE from NUMPROBE_TEST_NONFINITE_MODE)

Modes:
  tiled_no_guard:BK  an online-softmax kernel over key tiles of BK keys starting at key 0, with
                     no empty-row guard: a row whose first tile has no visible key computes
                     exp(-inf - -inf) = NaN, which stays in l, O and LSE. These are the fully
                     masked rows, and window rows whose window starts at key BK or later.
  inf_lse:N          correct O; LSE = +inf at flat rows r % N == 0, head r % Hq
  minus_inf_lse:N    correct O; LSE = -inf there (rows that see keys)
  nan_lse:N          correct O; LSE = NaN there
  no_lse             correct O and no lse.npy at all (LSE unknown: not a finding)
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "examples", "exec"))
import numpy as np  # noqa: E402
import numpy_reference  # noqa: E402
import numprobe_exec  # noqa: E402


def tiled_no_guard(case, q, k, v, bk):
    B, T, S = case["batch"], case["queries"], case["seq"]
    Hq, Hkv, D = case["heads"], case["kv_heads"], case["head_dim"]
    group = Hq // Hkv
    q = q.astype(np.float64).reshape(B, T, Hq, D)
    k = k.astype(np.float64).reshape(B, S, Hkv, D)
    v = v.astype(np.float64).reshape(B, S, Hkv, D)
    visible = numprobe_exec.visible_keys(case)
    o = np.empty((B, T, Hq, D))
    lse = np.empty((B, T, Hq))
    with np.errstate(invalid="ignore", divide="ignore"):
        for b in range(B):
            for h in range(Hq):
                kv = h // group
                s = (q[b, :, h, :] @ k[b, :, kv, :].T) * case["scale"]
                s = np.where(visible, s, -np.inf)
                m = np.full(T, -np.inf)
                l = np.zeros(T)
                acc = np.zeros((T, D))
                for j0 in range(0, S, bk):
                    st = s[:, j0:j0 + bk]
                    m_new = np.maximum(m, st.max(axis=1))
                    alpha = np.exp(m - m_new)  # the missing guard: -inf - -inf = NaN
                    p = np.exp(st - m_new[:, None])
                    l = alpha * l + p.sum(axis=1)
                    acc = alpha[:, None] * acc + p @ v[b, j0:j0 + bk, kv, :]
                    m = m_new
                o[b, :, h, :] = acc / l[:, None]
                lse[b, :, h] = m + np.log(l)
    return o.reshape(B * T, Hq, D).astype(np.float32), lse.reshape(B * T, Hq)


def run(mode, case, q, k, v):
    name, _, arg = mode.partition(":")
    if name == "tiled_no_guard":
        return tiled_no_guard(case, q, k, v, int(arg))
    o, lse = numpy_reference.compute(case, q, k, v)
    if name == "no_lse":
        return o, None
    value = {"inf_lse": np.inf, "minus_inf_lse": -np.inf, "nan_lse": np.nan}[name]
    every = int(arg)
    for r in range(0, lse.shape[0], every):
        lse[r, r % case["heads"]] = value
    return o, lse


def compute(case, q, k, v):
    return run(os.environ["NUMPROBE_TEST_NONFINITE_MODE"], case, q, k, v)


def main(argv):
    mode, directory = argv[1], argv[2]
    case, q, k, v = numprobe_exec.load_case(directory)
    o, lse = run(mode, case, q, k, v)
    numprobe_exec.save_output(directory, o, lse)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
