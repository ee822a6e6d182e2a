#!/usr/bin/env python3
"""NumPy softmax for `numprobe softmax --backend exec:'python3 numpy_softmax.py {in}'`.

Reads x.npy [R, V] (logits exact in the case dtype, -inf at masked entries) and case.json;
applies the case's softcap (z = cap * tanh(x / cap)) and temperature (z / T) in float64, and
writes y.npy (probabilities, float32 by default), logp.npy (log-probabilities, float64) and
lse.npy (float64). A fully masked row is p = 0, log p = -inf, LSE = -inf (never NaN).
Error against numprobe's reference: p within float32 rounding (p_rel_rms <= 2^-24), log p and
LSE within a few float64 ulps. `--out-dtype float64` writes y.npy in float64 too;
`--probs-only` writes y.npy alone (numprobe then takes log p = log y and reads the LSE off the
output at the row maximum).
"""
import json
import os
import sys

import numpy as np


def compute(case, x):
    """Returns (p, logp, lse) in float64."""
    z = x.astype(np.float64)
    masked = np.isneginf(z)
    cap = case.get("softcap", 0.0) or 0.0
    if cap > 0:
        z = np.where(masked, -np.inf, cap * np.tanh(z / cap))
    z = z / case.get("temperature", 1.0)
    m = np.max(z, axis=1, keepdims=True)
    empty = np.isneginf(m[:, 0])
    m_safe = np.where(np.isneginf(m), 0.0, m)
    e = np.exp(z - m_safe)  # masked entries: exp(-inf) = 0
    s = np.sum(e, axis=1, keepdims=True)
    s_safe = np.where(s == 0, 1.0, s)
    lse = (m_safe + np.log(s_safe))[:, 0]
    lse[empty] = -np.inf
    with np.errstate(divide="ignore"):
        p = e / s_safe
        logp = z - lse[:, None]
    logp[empty, :] = -np.inf
    p[empty, :] = 0.0
    return p, logp, lse


def save(directory, name, arr):
    tmp = os.path.join(directory, name + ".tmp.npy")
    np.save(tmp, np.ascontiguousarray(arr))
    os.replace(tmp, os.path.join(directory, name + ".npy"))


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    out_dtype = np.float64 if "--out-dtype" in argv and "float64" in argv else np.float32
    probs_only = "--probs-only" in argv
    directory = args[0]
    with open(os.path.join(directory, "case.json")) as f:
        case = json.load(f)
    x = np.load(os.path.join(directory, "x.npy"))
    p, logp, lse = compute(case, x)
    save(directory, "y", p.astype(out_dtype))
    if not probs_only:
        save(directory, "logp", logp)
        save(directory, "lse", lse)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
