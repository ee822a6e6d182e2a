"""Attention shapes: q [T, Hq, D] or [B, T, Hq, D]; k, v [S, Hkv, D] or [B, S, Hkv, D] (the
layout of the exec files, numprobe's flat rows b*T + t). Returns the flattened arrays and the
case fields the C++ side takes."""
from ._arrays import as_f64

_CASE_KEYS = ("mask", "window", "softcap", "scale", "dtype", "dist", "logit_shift", "seed")


def attention_case(q, k, v, case, default_dtype="f64"):
    """(q, k, v) flattened to [B*T, Hq, D] / [B*S, Hkv, D] float64, the case dict, and q's
    leading shape (to give outputs back in the caller's layout)."""
    qa, ka, va = (as_f64(x, n, ndim=(3, 4)) for x, n in ((q, "q"), (k, "k"), (v, "v")))
    batch = qa.shape[0] if qa.ndim == 4 else 1
    if ka.ndim != qa.ndim or va.ndim != qa.ndim:
        raise ValueError(f"k, v: expected {qa.ndim} dimensions like q, got {ka.shape} and {va.shape}")
    if ka.shape != va.shape:
        raise ValueError(f"v: shape {va.shape} differs from k's {ka.shape}")
    if qa.ndim == 4 and ka.shape[0] != batch:
        raise ValueError(f"k: batch {ka.shape[0]} differs from q's {batch}")
    lead = qa.shape[:-2]
    heads, head_dim = qa.shape[-2:]
    kv_heads = ka.shape[-2]
    if ka.shape[-1] != head_dim:
        raise ValueError(f"k: head_dim {ka.shape[-1]} differs from q's {head_dim}")
    qa = qa.reshape(-1, heads, head_dim)
    ka = ka.reshape(-1, kv_heads, head_dim)
    va = va.reshape(-1, kv_heads, head_dim)
    fields = {"batch": batch, "queries": qa.shape[0] // batch, "seq": ka.shape[0] // batch,
              "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim, "dtype": default_dtype}
    for key, value in case.items():
        if key not in _CASE_KEYS:
            raise ValueError(f"{key}: not a case field (expected one of {', '.join(_CASE_KEYS)})")
        if value is None:
            continue
        fields[key] = value
    if fields.get("window") and "mask" not in case:
        fields["mask"] = "window"
    return qa, ka, va, fields, lead
