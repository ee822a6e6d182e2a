"""The high-precision references, in float64 (relative error <= 1e-12 against a 50-digit
multiprecision evaluation: tests/reference), and the same-precision naive baselines.

Semantics are numprobe's (NUMERICS.md): logits = scale * q.k, then softcap (cap * tanh(x/cap)),
then the mask; causal and window masks are bottom-right aligned; GQA head h reads KV head
h // (Hq // Hkv); a fully masked row gives O = 0 and LSE = -inf.
"""

from ._arrays import as_f64
from ._core_import import core
from ._shapes import attention_case


def _reshaped(o, lse, lead):
    return o.reshape(*lead, *o.shape[1:]), lse.reshape(*lead, lse.shape[1])


def attention(q, k, v, *, mask="none", window=0, softcap=0.0, scale=None):
    """(o, lse) in float64 of attention over q [T, Hq, D] (or [B, T, Hq, D]) and k, v
    [S, Hkv, D] (or [B, S, Hkv, D]), on the inputs exactly as given. scale None: 1/sqrt(D)."""
    qa, ka, va, fields, lead = attention_case(q, k, v, dict(mask=mask, window=window, softcap=softcap,
                                                              scale=scale or 0.0))
    return _reshaped(*core.reference_attention(qa, ka, va, fields), lead)


def naive_attention(q, k, v, *, dtype="bf16", mask="none", window=0, softcap=0.0, scale=None):
    """The naive same-precision baseline as a framework computes it in `dtype` without tiling
    (S = QK^T and O = PV with fp32 accumulation rounded to dtype; softmax in fp32 rounded to
    dtype). Inputs are rounded to dtype first (identity for inputs already in it)."""
    qa, ka, va, fields, lead = attention_case(q, k, v, dict(mask=mask, window=window, softcap=softcap,
                                                              scale=scale or 0.0, dtype=dtype))
    return _reshaped(*core.naive_attention(qa, ka, va, fields), lead)


def _softmax_parts(x, softcap, temperature):
    a = as_f64(x, "x")
    if a.ndim == 0 or a.shape[-1] == 0:
        raise ValueError(f"x: expected [..., V] with V > 0, got shape {a.shape}")
    rows = a.reshape(-1, a.shape[-1])
    p, logp, lse = core.reference_softmax(rows, rows.shape[0], rows.shape[1], float(softcap), float(temperature))
    return p.reshape(a.shape), logp.reshape(a.shape), lse.reshape(a.shape[:-1])


def softmax(x, *, softcap=0.0, temperature=1.0):
    """Softmax over the last axis in float64 (compensated sums); -inf entries are masked."""
    return _softmax_parts(x, softcap, temperature)[0]


def log_softmax(x, *, softcap=0.0, temperature=1.0):
    return _softmax_parts(x, softcap, temperature)[1]


def lse(x, *, softcap=0.0, temperature=1.0):
    """log(sum(exp(z))) over the last axis; -inf for a fully masked row."""
    return _softmax_parts(x, softcap, temperature)[2]


__all__ = ["attention", "naive_attention", "softmax", "log_softmax", "lse"]
