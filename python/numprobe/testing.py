"""Assertions for kernel tests: the numprobe report is the failure message."""
from ._attention import compare_attention
from ._probes import invariance


def assert_attention_close(o, q, k, v, bound="ratio_to_naive<=2", *, lse=None, case=None, tile=None, rows="all",
                           **case_kw):
    """Raises AssertionError carrying the report when a bound is breached or o (or lse) holds a
    NaN/Inf finding; returns the Report otherwise. bound: one expression or a list
    ("ratio_to_naive<=2": at most twice the error of the naive same-precision baseline)."""
    bounds = [bound] if isinstance(bound, str) else list(bound)
    report = compare_attention(o, q, k, v, lse=lse, case=case, tile=tile, rows=rows, bounds=bounds, **case_kw)
    if not report.passed:
        raise AssertionError("numprobe: attention out of bounds\n" + report.text())
    return report


def assert_invariant(kernel, checks="batch", *, case=None, **kw):
    """Raises AssertionError carrying the report unless every check named in `checks` (a name
    or a list: repeat, batch, decode, chunk) is invariant, bit for bit, on the kernel (and no
    other check breaks); returns the Result otherwise. kw: numprobe.invariance's arguments
    (batch_sizes, seq, repeats, tile, bounds, case fields...)."""
    result = invariance(kernel, checks=checks, require=checks, case=case, **kw)
    if not result.passed:
        raise AssertionError("numprobe: not invariant\n" + result.text())
    return result
