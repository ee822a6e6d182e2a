"""numprobe.reference against a float64 NumPy attention written here.

Tolerance: both sides compute in double. The C++ reference's relative error is <= 1e-12
(proved against 50-digit multiprecision in tests/reference); this NumPy version, a plain
evaluation, has relative error of order (S + D) u ~ 300 x 1.1e-16 < 1e-13 for these sizes.
So their relative RMS difference is below 1e-12 + 1e-13; we hold it to 2e-12."""
import numpy as np
import pytest

import numprobe

TOL = 2e-12


def numpy_attention(q, k, v, mask="none", window=0, softcap=0.0, scale=None):
    t, hq, d = q.shape
    s, hkv, _ = k.shape
    scale = 1.0 / np.sqrt(d) if scale is None else scale
    kk = np.repeat(k, hq // hkv, axis=1)  # GQA: head h reads KV head h // (Hq // Hkv)
    vv = np.repeat(v, hq // hkv, axis=1)
    z = np.einsum("thd,shd->hts", q, kk) * scale
    if softcap:
        z = softcap * np.tanh(z / softcap)
    pos = s - t + np.arange(t)[:, None]  # bottom-right alignment
    j = np.arange(s)[None, :]
    visible = np.ones((t, s), bool)
    if mask in ("causal", "window"):
        visible &= j <= pos
    if mask == "window":
        visible &= j > pos - window
    z = np.where(visible[None], z, -np.inf)
    m = np.max(z, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(z - m)
    den = e.sum(-1, keepdims=True)
    o = np.einsum("hts,shd->thd", np.divide(e, den, out=np.zeros_like(e), where=den > 0), vv)
    lse = np.where(den[..., 0] > 0, np.log(np.where(den[..., 0] > 0, den[..., 0], 1)) + m[..., 0], -np.inf)
    return o, lse.T


def rel_rms(a, b):
    return np.sqrt(np.sum((a - b) ** 2) / np.sum(b ** 2))


@pytest.mark.parametrize("t,s", [(63, 63), (64, 64), (65, 65), (17, 129), (129, 100)])
@pytest.mark.parametrize("mask,window,softcap", [("none", 0, 0.0), ("causal", 0, 0.0), ("window", 32, 0.0),
                                                 ("causal", 0, 5.0)])
def test_attention_matches_numpy(t, s, mask, window, softcap):
    rng = np.random.default_rng(1000 * t + s)
    q = rng.standard_normal((t, 4, 32))
    k = rng.standard_normal((s, 2, 32))
    v = rng.standard_normal((s, 2, 32))
    o, lse = numprobe.reference.attention(q, k, v, mask=mask, window=window, softcap=softcap)
    o_np, lse_np = numpy_attention(q, k, v, mask, window, softcap)
    assert o.dtype == np.float64 and o.shape == q.shape and lse.shape == (t, 4)
    assert rel_rms(o, o_np) <= TOL
    finite = np.isfinite(lse_np)
    assert np.array_equal(finite, np.isfinite(lse))
    assert np.max(np.abs(lse[finite] - lse_np[finite])) <= TOL * np.max(np.abs(lse_np[finite]))
    # Rows that see no key (causal with T > S): O = 0 exactly and LSE = -inf (NUMERICS.md).
    assert np.all(o[~finite.any(axis=1)] == 0)


def test_batch_layout_matches_flat():
    rng = np.random.default_rng(5)
    q = rng.standard_normal((2, 40, 2, 16))
    k = rng.standard_normal((2, 70, 1, 16))
    v = rng.standard_normal((2, 70, 1, 16))
    o, lse = numprobe.reference.attention(q, k, v, mask="causal")
    assert o.shape == q.shape and lse.shape == (2, 40, 2)
    for b in range(2):
        ob, _ = numpy_attention(q[b], k[b], v[b], "causal")
        assert rel_rms(o[b], ob) <= TOL


def test_softmax_and_lse_match_numpy():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((3, 1000)) * 4
    x[1, :10] = -np.inf  # masked entries
    m = x.max(-1, keepdims=True)
    e = np.exp(x - m)
    p_np = e / e.sum(-1, keepdims=True)
    lse_np = np.log(e.sum(-1)) + m[:, 0]
    # Both in double over 1000 terms: numpy's pairwise sum errs by < log2(1000) u ~ 1e-15 relative.
    assert np.max(np.abs(numprobe.reference.softmax(x) - p_np) / p_np.max()) <= 1e-13
    assert np.max(np.abs(numprobe.reference.lse(x) - lse_np)) <= 1e-13 * np.max(np.abs(lse_np))
    assert np.all(numprobe.reference.softmax(x)[1, :10] == 0)
