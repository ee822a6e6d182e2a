#!/usr/bin/env python3
"""Zoo kernel `causal_only`: the healthy kernel, for causal attention with T <= S only.

Many real kernels implement part of the cases: the Triton fused-attention tutorial and
JAX Pallas' flash kernel take causal (or no mask) with T = S, PyTorch SDPA takes a window only
through an explicit mask. This one implements bottom-right causal attention with T <= S and
declares every other case unsupported (numprobe_exec.Unsupported, a NotImplementedError): the
worker answers `UNSUPPORTED <reason>`, the one-shot form exits 77. numprobe then reports those
cases as unsupported, not as errors (audit: the classes that need them are not-applicable).

Tiles and numerics: those of healthy.py (query tile 112, key tile 80, float32 state).

    numprobe audit --backend exec-worker:'python3 examples/exec/worker.py examples/exec/zoo/causal_only.py'
    numprobe attention --mask window --window 64 --backend exec:'python3 examples/exec/zoo/causal_only.py {in}'
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import healthy  # noqa: E402
import tiled  # noqa: E402  (puts examples/exec on the path)
import numprobe_exec  # noqa: E402


def compute(case, q, k, v):
    if case["mask"] != "causal":
        raise numprobe_exec.Unsupported("mask=%s (this kernel implements causal attention only)" % case["mask"])
    if case["queries"] > case["seq"]:
        raise numprobe_exec.Unsupported("T=%d > S=%d (causal with T <= S only)" % (case["queries"], case["seq"]))
    return healthy.compute(case, q, k, v)


if __name__ == "__main__":
    sys.exit(tiled.main(compute, sys.argv))
