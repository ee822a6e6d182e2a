"""A NumPy flash-attention kernel under numprobe's pytest plugin.

The kernel walks the keys in tiles of Bk with the online softmax (running max m, running sum
l, O rescaled when m rises), accumulating in float32 like a GPU kernel, and rounds O to the
case dtype at the end. Each test point is one of the CLI's tile-crossing lengths (S = k*Bk - 1,
k*Bk, k*Bk + 1), named by its case id, so

    pytest examples/python -k 'S=129,'

reruns one, and `numprobe attention --case ID` reruns it in the CLI. A failure prints the
numprobe report (the worst rows with their query and key tile).

Run: pip install ./python && pytest examples/python
"""
import numpy as np

import numprobe
from numprobe.testing import assert_attention_close

TILE = (64, 64)


def round_to_bf16(x):
    """float32 -> nearest bfloat16 (ties to even), kept in float32 (NumPy has no bf16)."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.view(np.float32)


def round_to(x, dtype):
    if dtype == "bf16":
        return round_to_bf16(x)
    if dtype == "f16":
        return x.astype(np.float16).astype(np.float32)
    return x.astype(np.float32)


def flash_attention(q, k, v, *, causal, tile_k=TILE[1]):
    """q [T, Hq, D], k/v [S, Hkv, D] float32 -> O [T, Hq, D] float32 (bottom-right causal)."""
    t, hq, d = q.shape
    s, hkv, _ = k.shape
    scale = np.float32(1.0 / np.sqrt(d))
    k = np.repeat(k, hq // hkv, axis=1).transpose(1, 0, 2)  # [Hq, S, D]
    v = np.repeat(v, hq // hkv, axis=1).transpose(1, 0, 2)
    q = q.transpose(1, 0, 2)                                 # [Hq, T, D]
    m = np.full((hq, t, 1), -np.inf, np.float32)
    l = np.zeros((hq, t, 1), np.float32)
    acc = np.zeros((hq, t, d), np.float32)
    pos = (s - t + np.arange(t))[:, None]
    for j0 in range(0, s, tile_k):
        j = np.arange(j0, min(s, j0 + tile_k))[None, :]
        z = (q @ k[:, j0:j0 + tile_k].transpose(0, 2, 1)) * scale
        if causal:
            z = np.where(j <= pos, z, np.float32(-np.inf))
        m_new = np.maximum(m, z.max(-1, keepdims=True))
        safe = np.where(np.isfinite(m_new), m_new, np.float32(0))  # a row with no key yet
        alpha = np.exp(m - safe)
        p = np.exp(z - safe)
        l = l * alpha + p.sum(-1, keepdims=True)
        acc = acc * alpha + p @ v[:, j0:j0 + tile_k]
        m = m_new
    o = np.divide(acc, l, out=np.zeros_like(acc), where=l > 0)
    return o.transpose(1, 0, 2)


@numprobe.cases(seq="tile", tile=TILE, seq_range="64..4096", dtype=["bf16", "f16"], heads=4, kv_heads=2,
                head_dim=64, mask="causal")
def test_flash_attention(case):
    q, k, v = case.inputs()
    o = round_to(flash_attention(q, k, v, causal=True), case.fields["dtype"])
    # ratio_to_naive <= 2: at most twice the error of the naive same-precision baseline (the
    # framework's untiled computation in the same dtype).
    assert_attention_close(o, q, k, v, "ratio_to_naive<=2", case=case.id, tile=case.tile, rows=512)
