#!/usr/bin/env python3
"""Deliberately broken quant exec adapters for tests/providers.

usage: broken_quant_adapter.py MODE DIR
Modes: crash, hang, wrong_shape (codes), wrong_dtype (codes as int32), nan (a NaN scale),
garbage (codes.npy is random bytes), missing (no scales.npy), flip (one code off by one: a
bit mismatch, not an error), ok (the NumPy fp8 adapter).
"""
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "examples", "exec"))
import numpy as np  # noqa: E402
import numpy_quant_fp8  # noqa: E402


def main(argv):
    mode, directory = argv[1], argv[2]
    if mode == "crash":
        print("quant adapter crashed on purpose", file=sys.stderr)
        return 9
    if mode == "hang":
        time.sleep(120)
    with open(os.path.join(directory, "case.json")) as f:
        case = json.load(f)
    x = np.load(os.path.join(directory, "x.npy"))
    codes, scales, dequant = numpy_quant_fp8.quantize(case, x)
    save = numpy_quant_fp8.save
    if mode == "wrong_shape":
        codes = codes[:, :-1]
    if mode == "wrong_dtype":
        codes = codes.astype(np.int32)
    if mode == "nan":
        scales = scales.astype(np.float32)
        scales.flat[0] = np.nan
    if mode == "flip":
        codes.flat[5] ^= 1
    save(directory, "codes", codes)
    if mode != "missing":
        save(directory, "scales", scales)
    if mode == "garbage":
        with open(os.path.join(directory, "codes.npy"), "wb") as f:
            f.write(os.urandom(200))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
