#!/usr/bin/env python3
"""FP8 (e4m3fn) quantization in NumPy + ml_dtypes for
`numprobe quant --scheme fp8-tensor|fp8-block128|fp8-act1x128[-ue8m0] --backend exec:'python3 numpy_quant_fp8.py {in}'`.

Reads x.npy [M, N] float32 and case.json, and writes codes.npy (uint8, one e4m3fn code per
element), scales.npy ([grid_rows, grid_cols]: float32 values for fp32 scales, uint8 codes for
e8m0 scales) and dequant.npy (float32). The recipe is the one numprobe's reference codec
follows (NUMERICS.md, "Block-scaling schemes"), so the codes and scales must match bit for bit:
  amax  = max |x| over the block's finite values, then max(amax, amax_floor)
  s     = amax / 448 in float64, stored as fp32 (round to nearest even) or, for e8m0, rounded
          up to a power of two; an all-zero block stores s = 1
  code  = e4m3fn(clip(x / s, -448, 448)), the quotient in float64, one rounding to e4m3fn
          (saturating: ml_dtypes alone would turn overflow into NaN)
Supported: element e4m3fn; kinds tensor, block2d and group (axis 1); scale formats f32, e8m0.
"""
import json
import os
import sys

import ml_dtypes
import numpy as np

E4M3_MAX = 448.0


def store_scale(s, fmt):
    """The stored scale (float64 value) and its code array as scales.npy holds it."""
    if fmt == "f32":
        s32 = s.astype(np.float32)
        return s32.astype(np.float64), s32
    if fmt == "e8m0":
        mant, ex = np.frexp(s)  # s = mant * 2^ex, mant in [0.5, 1)
        e = np.where(mant == 0.5, ex - 1, ex)  # ceil(log2(s)) exactly
        e = np.clip(e, -127, 127)
        return np.ldexp(1.0, e), (e + 127).astype(np.uint8)
    raise SystemExit("numpy_quant_fp8.py: scale format %r is not supported" % fmt)


def block_ranges(case):
    rows, cols = case["rows"], case["cols"]
    if case["kind"] == "tensor":
        return [[(0, rows, 0, cols)]]
    g = case["grid"]
    br, bc = g["block_rows"], g["block_cols"]
    if case["kind"] == "group" and case["axis"] != 1:
        raise SystemExit("numpy_quant_fp8.py: group along axis 0 is not supported")
    return [[(r, min(r + br, rows), c, min(c + bc, cols)) for c in range(0, cols, bc)]
            for r in range(0, rows, br)]


def quantize(case, x):
    if case["element"] != "e4m3fn":
        raise SystemExit("numpy_quant_fp8.py: only e4m3fn elements")
    if case["kind"] not in ("tensor", "block2d", "group"):
        raise SystemExit("numpy_quant_fp8.py: kind %r is not supported" % case["kind"])
    if case["rounding"] != "rne" or case["overflow"] != "saturate":
        raise SystemExit("numpy_quant_fp8.py: rne rounding and saturate overflow only")
    x64 = x.astype(np.float64)
    grid = block_ranges(case)
    codes = np.zeros(x.shape, dtype=np.uint8)
    dequant = np.zeros(x.shape, dtype=np.float64)
    scales_stored = []
    floor = case.get("amax_floor", 0.0)
    for grid_row in grid:
        row_scales = []
        for r0, r1, c0, c1 in grid_row:
            blk = x64[r0:r1, c0:c1]
            finite = np.isfinite(blk)
            amax = np.max(np.abs(blk[finite])) if finite.any() else 0.0
            amax = max(amax, floor)
            ideal = np.array([amax / E4M3_MAX if amax > 0 else 1.0])
            s, stored = store_scale(ideal, case["scale_format"])
            s = s[0]
            t = blk / s if s != 0 else np.zeros_like(blk)
            t = np.clip(t, -E4M3_MAX, E4M3_MAX)  # saturate (+-inf too); NaN stays NaN
            q = t.astype(ml_dtypes.float8_e4m3fn)
            codes[r0:r1, c0:c1] = q.view(np.uint8)
            dequant[r0:r1, c0:c1] = q.astype(np.float64) * s
            row_scales.append(stored[0])
        scales_stored.append(row_scales)
    scales = np.array(scales_stored, dtype=np.asarray(scales_stored[0][0]).dtype)
    return codes, scales, dequant.astype(np.float32)


def save(directory, name, arr):
    tmp = os.path.join(directory, name + ".tmp.npy")
    np.save(tmp, np.ascontiguousarray(arr))
    os.replace(tmp, os.path.join(directory, name + ".npy"))


def main(argv):
    directory = argv[1]
    with open(os.path.join(directory, "case.json")) as f:
        case = json.load(f)
    x = np.load(os.path.join(directory, "x.npy"))
    codes, scales, dequant = quantize(case, x)
    save(directory, "codes", codes)
    save(directory, "scales", scales)
    save(directory, "dequant", dequant)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
