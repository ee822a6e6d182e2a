"""numprobe in Python: the C++ reference, formats, metrics and the attention probe, in process.

    import numprobe
    o, lse = numprobe.reference.attention(q, k, v, mask="causal")
    r = numprobe.quantize(w, "nvfp4", preset="modelopt")
    q, k, v = numprobe.inputs("attention(T=128,S=128,Hq=4,Hkv=2,D=64,in=bf16,mask=causal,seed=7)")
    report = numprobe.compare_attention(o, q, k, v, dtype="bf16", mask="causal", tile=(64, 64))
    r = numprobe.drift(kernel, seq="128..4096", tile=(64, 64))   # kernel(q, k, v, case) -> o

A kernel that does not implement a case raises numprobe.Unsupported (or any NotImplementedError):
the case is reported as unsupported (audit: not-applicable), not as an error.

numprobe.acceptance (imported on first use): which units of a causal LM fail first under a weight
format, and which to keep at higher precision to meet a KL bound.
"""
from . import reference, testing
from ._attention import Report, case_fields, case_id, compare_attention, inputs
from ._cases import cases, tile_lengths
from ._kl import kl
from ._probes import Result, Unsupported, audit, drift, invariance
from ._quant import QuantResult, quantize

__all__ = ["reference", "testing", "Report", "case_fields", "case_id", "compare_attention", "inputs",
           "cases", "tile_lengths", "kl", "Result", "Unsupported", "audit", "drift", "invariance", "QuantResult",
           "quantize", "acceptance"]


def __getattr__(name):
    # numprobe.acceptance is imported on first use, so `import numprobe` stays as it was
    if name == "acceptance":
        import importlib
        return importlib.import_module(".acceptance", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | {"acceptance"})
