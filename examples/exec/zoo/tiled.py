"""Plumbing shared by the zoo kernels: case I/O, the per-row visible key span, dtype rounding,
the logits of one tile, and the loop over (batch, head). The numerics that differ between
kernels -- the online softmax over key tiles, where each bug is planted -- live in each
kernel's own file, not here.

A kernel file defines `head_forward(case, q, k, v, lo, hi) -> (o [T, D] float32, lse [T])`
for one (batch, head) and calls `run_heads`; `main(compute)` gives it the one-shot form
(`python3 KERNEL.py {in}`), and `compute` is what `worker.py KERNEL.py` calls.

Conventions (numprobe's, examples/exec/README.md):
- query t sits at absolute position S - T + t (bottom-right); causal sees keys j <= pos,
  window keys pos - W < j <= pos, ranges keys [r0, r1); causal-top-left j <= t;
- GQA: query head h reads KV head h // (Hq // Hkv);
- a row with no visible key is O = 0, LSE = -inf.
"""
import os
import sys

import numpy as np

try:
    import ml_dtypes
except ImportError:  # bf16 and fp8 kernels need it; f16/f32 ones run without
    ml_dtypes = None

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numprobe_exec  # noqa: E402


def key_spans(case):
    """Per query row t, the visible keys are [lo[t], hi[t]) (every numprobe mask is an
    interval). int64 positions: the zoo's index_wrap kernel is the one that narrows them."""
    T, S = case["queries"], case["seq"]
    t = np.arange(T, dtype=np.int64)
    pos = S - T + t
    mask = case["mask"]
    lo = np.zeros(T, dtype=np.int64)
    hi = np.full(T, S, dtype=np.int64)
    if mask == "causal":
        hi = pos + 1
    elif mask == "causal-top-left":
        hi = t + 1
    elif mask == "window":
        hi = pos + 1
        lo = pos - case["window"] + 1
    elif mask == "ranges":
        r = np.asarray(case["ranges"], dtype=np.int64).reshape(T, 2)
        lo, hi = r[:, 0].copy(), r[:, 1].copy()
    elif mask != "none":
        raise ValueError("unknown mask " + repr(mask))
    lo = np.clip(lo, 0, S)
    hi = np.clip(hi, 0, S)
    return lo, np.maximum(hi, lo)


def low_precision(dtype):
    """The numpy dtype a bf16/f16 kernel holds P and O in; None for a float32 kernel."""
    if dtype == "bf16":
        return ml_dtypes.bfloat16
    if dtype == "f16":
        return np.float16
    return None


def round_f16(x):
    """float32 -> float32 holding the nearest float16 (round to nearest even), the value
    numpy's float16 cast gives (`python3 tiled.py --self-test` checks it), at a fraction of its
    cost: numpy converts to float16 element by element."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32)
    # Normal range: drop 13 of float32's 23 fraction bits, rounding half to even.
    normal = ((u + np.uint32(0xFFF) + ((u >> np.uint32(13)) & np.uint32(1))) &
              np.uint32(0xFFFFE000)).view(np.float32)
    # Below 2^-14 float16 is subnormal with a fixed quantum 2^-24; rint rounds half to even.
    sub = np.rint(x * np.float32(2.0 ** 24)) * np.float32(2.0 ** -24)
    a = np.abs(x)
    out = np.where(a < np.float32(2.0 ** -14), sub, normal)
    return np.where(a >= np.float32(65520.0), np.copysign(np.float32(np.inf), x), out)


def round_to(x, dtype):
    """x (float32) rounded to the case dtype, round to nearest even, back in float32."""
    if dtype == "bf16":
        return x.astype(ml_dtypes.bfloat16).astype(np.float32)
    if dtype == "f16":
        return round_f16(x)
    return x


def logits(q_rows, k_tile, scale, cap):
    """S = scale * Q K^T in float32 (the MMA accumulates in fp32), then the softcap."""
    s = (q_rows @ k_tile.T) * np.float32(scale)
    if cap > 0:
        c = np.float32(cap)
        s = c * np.tanh(s / c)
    return s


def apply_mask(s, lo_rows, hi_rows, k0, k1):
    """Sets the logits of keys k0 + j that a row does not see to -inf, in place. Only the band
    of rows whose span does not cover the whole tile is touched (the diagonal and window-edge
    blocks: interior blocks need no mask, as in a GPU kernel)."""
    need = (lo_rows > k0) | (hi_rows < k1)
    if not need.any():
        return s
    idx = np.nonzero(need)[0]
    a, b = idx[0], idx[-1] + 1
    j = np.arange(k0, k1, dtype=np.int64)[None, :]
    vis = (j >= lo_rows[a:b, None]) & (j < hi_rows[a:b, None])
    s[a:b][~vis] = -np.inf
    return s


def active_rows(lo, hi, k0, k1, bq):
    """The rows of the query tiles that see at least one key of [k0, k1), as one range
    [r0, r1) (a tile-granular block skip: rows of an active query tile that see no key of
    this key tile are still computed, as a GPU kernel computes the whole block)."""
    T = lo.shape[0]
    sees = (lo < k1) & (hi > k0) & (hi > lo)
    if not sees.any():
        return 0, 0
    idx = np.nonzero(sees)[0]
    r0 = (idx[0] // bq) * bq
    r1 = min(T, (idx[-1] // bq + 1) * bq)
    return r0, r1


def run_heads(case, q, k, v, head_forward, kv_head_of=None, spans=None):
    """Runs head_forward for every (batch, query head); returns o [B*T, Hq, D] in the case's
    dtype (bf16 via ml_dtypes, f16, else float32) and lse [B*T, Hq] float32. A kernel with its
    own GQA mapping or mask geometry passes kv_head_of(h) or spans = (lo, hi)."""
    B, T, S = case["batch"], case["queries"], case["seq"]
    Hq, Hkv, D = case["heads"], case["kv_heads"], case["head_dim"]
    group = Hq // Hkv
    if kv_head_of is None:
        kv_head_of = lambda h: h // group  # noqa: E731
    q = q.astype(np.float32).reshape(B, T, Hq, D)
    k = k.astype(np.float32).reshape(B, S, Hkv, D)
    v = v.astype(np.float32).reshape(B, S, Hkv, D)
    lo, hi = key_spans(case) if spans is None else spans
    o = np.zeros((B, T, Hq, D), dtype=np.float32)
    lse = np.full((B, T, Hq), -np.inf, dtype=np.float32)
    for b in range(B):
        for h in range(Hq):
            g = kv_head_of(h)
            kh = np.ascontiguousarray(k[b, :, g, :])
            vh = np.ascontiguousarray(v[b, :, g, :])
            oh, lh = head_forward(case, np.ascontiguousarray(q[b, :, h, :]), kh, vh, lo, hi)
            o[b, :, h, :] = oh
            lse[b, :, h] = lh
    lp = low_precision(case["dtype"])
    o = o.reshape(B * T, Hq, D)
    return (o.astype(lp) if lp is not None else o), lse.reshape(B * T, Hq)


def self_test():
    """round_f16 against numpy's float16 cast on random magnitudes over every binade, the
    subnormals, ties and the overflow edge; returns the number of mismatches."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(1 << 20) * np.exp2(rng.integers(-30, 18, 1 << 20))).astype(np.float32)
    ties = (np.arange(1, 4096, dtype=np.float32) + np.float32(0.5)) * np.float32(2.0 ** -24)
    edge = np.array([65504, 65519.99, 65520, 7e4, 2.0 ** -14, 2.0 ** -25, 2.0 ** -26, 0, -0.0,
                     np.inf, -np.inf], dtype=np.float32)
    x = np.concatenate([x, ties, -ties, edge])
    got = round_f16(x)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).astype(np.float32)
    bad = ~((got == want) | (np.isnan(got) & np.isnan(want)))
    return int(bad.sum())


def main(compute, argv):
    if len(argv) < 2:
        print("usage: %s IN_DIR [OUT_DIR]" % os.path.basename(argv[0]), file=sys.stderr)
        return 2
    # A case the kernel refuses (numprobe_exec.Unsupported) exits 77: unsupported, not a crash.
    return numprobe_exec.run_one_shot(compute, argv[1], argv[2] if len(argv) > 2 else None)


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        n = self_test()
        print("round_f16 mismatches against numpy float16: %d" % n)
        sys.exit(1 if n else 0)
