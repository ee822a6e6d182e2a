"""pytest plugin (entry point pytest11 "numprobe"): the measured values of every attention
comparison a test makes go into its JUnit properties (numprobe.rel_rms, ...); a failing
assert_attention_close carries the report in its message, which pytest prints."""
import pytest

_PROPS = ("rel_rms", "ratio_to_naive", "max_abs", "nonfinite")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    from . import _attention  # the package is imported only when a test runs

    reports = []
    _attention.observers.append(reports.append)
    try:
        yield
    finally:
        _attention.observers.remove(reports.append)
    for r in reports:
        item.user_properties.append(("numprobe.case", r.case))
        for key in _PROPS:
            if key in r.metrics:
                item.user_properties.append((f"numprobe.{key}", r.metrics[key]))
