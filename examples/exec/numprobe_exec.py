"""Helpers for numprobe exec adapters (see README.md in this folder).

numprobe writes, per case, into one directory:
  case.json   the case (seq, queries, batch, heads, kv_heads, head_dim, scale, mask, window,
              softcap, dtype, seed, case id, ...)
  q.npy       [B*T, Hq, D]  float32 (float64 when dtype is f64), values exact in `dtype`
  k.npy       [B*S, Hkv, D]
  v.npy       [B*S, Hkv, D]
and reads back
  o.npy       [B*T, Hq, D]  float32, float16, float64 (or bf16 as ml_dtypes writes it)
  lse.npy     [B*T, Hq]     optional; natural log; -inf for a fully masked row (with o = 0)
With batch B > 1 the batch is concatenated along the first axis: row b*T + t, key b*S + s.
Only numpy is needed here.

A kernel that does not implement a case (a mask, T > S, a head dim) refuses it rather than
crashing: raise Unsupported (a NotImplementedError) from compute. The worker answers
`UNSUPPORTED <reason>`; a one-shot command run through run_one_shot() exits 77 with the reason
as its last line. numprobe reports the case as unsupported, not as an error (README.md).
"""
import json
import os
import sys

import numpy as np


UNSUPPORTED_EXIT = 77  # automake's and ctest's "skipped"


class Unsupported(NotImplementedError):
    """Raised by a kernel for a case it does not implement; the message names the feature."""


def run_one_shot(compute, in_dir, out_dir=None):
    """The one-shot form of an adapter: loads the case, runs compute, saves the output. Returns
    the exit status: 0, or 77 with the reason printed last when compute refuses the case."""
    case, q, k, v = load_case(in_dir)
    try:
        o, lse = compute(case, q, k, v)
    except NotImplementedError as e:
        print("unsupported: %s" % (str(e) or type(e).__name__), file=sys.stderr)
        return UNSUPPORTED_EXIT
    save_output(out_dir or in_dir, o, lse)
    return 0


def load_case(directory):
    """Returns (case dict, q, k, v) as stored."""
    with open(os.path.join(directory, "case.json")) as f:
        case = json.load(f)
    q = np.load(os.path.join(directory, "q.npy"))
    k = np.load(os.path.join(directory, "k.npy"))
    v = np.load(os.path.join(directory, "v.npy"))
    return case, q, k, v


def save_output(directory, o, lse=None):
    """Writes o.npy (and lse.npy); write to a temporary name first so a crash leaves no half file."""
    for name, arr in (("o", o), ("lse", lse)):
        if arr is None:
            continue
        tmp = os.path.join(directory, name + ".tmp.npy")
        np.save(tmp, np.ascontiguousarray(arr))
        os.replace(tmp, os.path.join(directory, name + ".npy"))


def visible_keys(case):
    """Boolean [T, S]: key s visible to query t. Causal and window are bottom-right aligned
    (query t sits at absolute position S - T + t); causal-top-left is j <= t."""
    T, S = case["queries"], case["seq"]
    t = np.arange(T)[:, None]
    s = np.arange(S)[None, :]
    pos = S - T + t
    mask = case["mask"]
    if mask == "none":
        return np.ones((T, S), dtype=bool)
    if mask == "causal":
        return s <= pos
    if mask == "causal-top-left":
        return s <= t
    if mask == "window":
        return (s <= pos) & (s > pos - case["window"])
    if mask == "ranges":
        r = np.asarray(case["ranges"], dtype=np.int64)
        return (s >= r[:, 0:1]) & (s < r[:, 1:2])
    raise ValueError("unknown mask " + repr(mask))
