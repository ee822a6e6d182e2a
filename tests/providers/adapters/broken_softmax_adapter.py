#!/usr/bin/env python3
"""Deliberately broken softmax exec adapters for tests/providers.

usage: broken_softmax_adapter.py MODE DIR
Modes: crash, hang, wrong_shape, wrong_dtype, nan, garbage, missing, ok (the NumPy adapter).
"""
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "examples", "exec"))
import numpy as np  # noqa: E402
import numpy_softmax  # noqa: E402


def main(argv):
    mode, directory = argv[1], argv[2]
    with open(os.path.join(directory, "case.json")) as f:
        case = json.load(f)
    x = np.load(os.path.join(directory, "x.npy"))
    out = os.path.join(directory, "y.npy")
    if mode == "crash":
        print("softmax adapter crashed on purpose", file=sys.stderr)
        return 5
    if mode == "hang":
        time.sleep(120)
    if mode == "wrong_shape":
        np.save(out, np.zeros((x.shape[0], x.shape[1] - 1), dtype=np.float32))
        return 0
    if mode == "wrong_dtype":
        np.save(out, np.zeros(x.shape, dtype=np.int32))
        return 0
    if mode == "nan":
        p, _, _ = numpy_softmax.compute(case, x)
        p[1, 7] = np.nan
        np.save(out, p.astype(np.float32))
        return 0
    if mode == "garbage":
        with open(out, "wb") as f:
            f.write(os.urandom(333))
        return 0
    if mode == "missing":
        return 0
    return numpy_softmax.main(["numpy_softmax.py", directory])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
