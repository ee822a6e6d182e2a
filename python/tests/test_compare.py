"""compare_attention and assert_attention_close: the CLI's attention probe on a given output.

Baseline: the reference output rounded once to bf16 is the best any bf16 kernel can return
(one rounding of the exact value); the naive baseline rounds at least as often (S, P and O), so
ratio_to_naive <= 1 up to sampling noise and the bound 2 holds. A 50% error on one (row, head)
of the 520 adds a relative RMS of about 0.5 / sqrt(520) ~ 2.2%, over 5x the naive baseline's
(a few bf16 roundings, u = 2^-9 ~ 0.2%), so the bound must fail, with that row the worst."""
import numpy as np
import pytest

import numprobe
from numprobe.testing import assert_attention_close

CASE = "attention(T=130,S=130,Hq=4,Hkv=2,D=32,in=bf16,mask=causal,seed=7)"


def bf16(x):
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000).view(np.float32)


@pytest.fixture(scope="module")
def rounded_reference():
    q, k, v = numprobe.inputs(CASE)
    o, lse = numprobe.reference.attention(q, k, v, mask="causal")
    return q, k, v, bf16(o), lse


def test_rounded_reference_passes(rounded_reference):
    q, k, v, o, lse = rounded_reference
    r = assert_attention_close(o, q, k, v, case=CASE, tile=(64, 64), lse=lse)
    assert r.case == CASE
    assert 0 < r.ratio_to_naive <= 2 and r.nonfinite["total"] == 0


def test_perturbed_row_fails_with_report(rounded_reference):
    q, k, v, o, _ = rounded_reference
    bad = o.copy()
    bad[100, 1] *= 1.5  # query 100 sits in query tile 1 (Bq = 64)
    with pytest.raises(AssertionError) as e:
        assert_attention_close(bad, q, k, v, case=CASE, tile=(64, 64))
    msg = str(e.value)
    assert CASE in msg and "ratio_to_naive<=2" in msg and "BREACHED" in msg
    r = numprobe.compare_attention(bad, q, k, v, case=CASE, tile=(64, 64))
    assert (r.worst[0]["row"], r.worst[0]["head"], r.worst[0]["query_tile"]) == (100, 1, 1)
    assert r.worst[0]["key_tile"] == 100 // 64  # causal T == S: the last visible key is 100


def test_nan_is_counted_and_fails(rounded_reference):
    q, k, v, o, _ = rounded_reference
    bad = o.copy()
    bad[3, 0, 5] = np.nan
    r = numprobe.compare_attention(bad, q, k, v, case=CASE, tile=(64, 64))
    assert r.nonfinite["nan"] == 1 and r.metrics["nan_count"] == 1
    with pytest.raises(AssertionError, match="NaN"):
        assert_attention_close(bad, q, k, v, case=CASE)
