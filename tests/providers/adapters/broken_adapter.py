#!/usr/bin/env python3
"""Deliberately broken exec adapters for tests/providers (label providers).

usage: broken_adapter.py MODE DIR [SEQ]
Misbehaves as MODE when the case's seq equals SEQ (always when SEQ is absent), otherwise acts
as the NumPy reference adapter. Modes: crash, segv, hang, wrong_shape, wrong_dtype, nan,
garbage, missing, ok.
"""
import json
import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "examples", "exec"))
import numpy as np  # noqa: E402
import numpy_reference  # noqa: E402
import numprobe_exec  # noqa: E402


def main(argv):
    mode, directory = argv[1], argv[2]
    with open(os.path.join(directory, "case.json")) as f:
        case = json.load(f)
    if len(argv) > 3 and case["seq"] != int(argv[3]):
        mode = "ok"
    out = os.path.join(directory, "o.npy")
    shape = (case["batch"] * case["queries"], case["heads"], case["head_dim"])
    if mode == "crash":
        print("adapter crashed on purpose", file=sys.stderr)
        return 7
    if mode == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    if mode == "hang":
        time.sleep(120)
    if mode == "wrong_shape":
        np.save(out, np.zeros((shape[0], shape[1], shape[2] + 1), dtype=np.float32))
        return 0
    if mode == "wrong_dtype":
        np.save(out, np.zeros(shape, dtype=np.int32))
        return 0
    if mode == "nan":
        o = np.zeros(shape, dtype=np.float32)
        o[1, 0, 2] = np.nan
        np.save(out, o)
        return 0
    if mode == "garbage":
        with open(out, "wb") as f:
            f.write(os.urandom(333))
        return 0
    if mode == "missing":
        return 0
    case, q, k, v = numprobe_exec.load_case(directory)
    o, lse = numpy_reference.compute(case, q, k, v)
    numprobe_exec.save_output(directory, o, lse)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
