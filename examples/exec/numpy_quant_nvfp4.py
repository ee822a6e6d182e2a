#!/usr/bin/env python3
"""NVFP4 quantization in NumPy + ml_dtypes under the conventions case.json names, for
`numprobe quant --scheme nvfp4 [--preset P | --scale-division D ...] --backend exec:'python3 numpy_quant_nvfp4.py {in}'`.

An implementation written from the rules in docs/quant-conventions.md, independent of numprobe's
C++ code: the check that `quant --backend exec` hands a quantizer the conventions it is judged
under (case.json "conventions"), and a starting point for wrapping a real NVFP4 quantizer.

  s_t = f32(amax_t / (6 * 448))                      (1 for an all-zero tensor)
  ideal s_b = amax_b / (6 s_t) in float64, one rounding   (scale_arith double)
            = f32(f32(amax_b) / 6) / s_t, each step fp32   (scale_arith fp32)
  ideal s_b = max(ideal, 2^-6)                        (scale_floor min-normal)
  s_b = e4m3fn(ideal), round to nearest even, saturating at 448
  element:  e2m1(x / (s_b s_t)), one rounding        (scale_division exact)
            e2m1(f32(x * r)), r = f32(f32(1 / s_t) / s_b)                     (reciprocal)
            r = rcp(f32(s_b * rcp(f32(1 / s_t)))), rcp an fp32 reciprocal
                with subnormal operands and results flushed to 0            (reciprocal-approx)
            a block whose r is not a positive finite float divides exactly; s_b = 0 codes 0.
With `--definition` after the directory, case.json's conventions are ignored. NaN codes 0; +-inf saturates to +-6. Writes codes.npy (uint8, one code per element),
scales.npy (uint8 e4m3fn codes [grid_rows, grid_cols]), tensor_scale.npy ([1] float32).
"""
import json
import os
import sys

import ml_dtypes
import numpy as np

F32 = np.float32
MIN_NORMAL32 = F32(2.0 ** -126)


def round_to_odd_f32(d):
    """float64 -> float32 rounded to odd (toward zero, last bit set when inexact): a later
    rounding to a format of at most 22 bits is then the direct rounding of d."""
    f = d.astype(F32)
    inexact = (f.astype(np.float64) != d) & np.isfinite(d)
    bits = f.view(np.uint32).copy()
    over = inexact & (np.abs(f.astype(np.float64)) > np.abs(d))
    bits[over] -= 1
    bits[inexact] |= 1
    return bits.view(F32)


def rcp_ftz(a):
    a = np.where(np.abs(a) < MIN_NORMAL32, np.copysign(F32(0), a), a).astype(F32)
    with np.errstate(divide="ignore", over="ignore"):
        r = (F32(1) / a).astype(F32)
    return np.where(np.abs(r) < MIN_NORMAL32, np.copysign(F32(0), r), r).astype(F32)


def quantize(case, x, ignore_conventions=False):
    if case["kind"] != "nvfp4" or case["element"] != "e2m1" or case["scale_format"] != "e4m3fn":
        raise SystemExit("numpy_quant_nvfp4.py: the nvfp4 scheme only")
    conv = {} if ignore_conventions else case.get("conventions", {})
    division = conv.get("scale_division", "exact")
    floor = conv.get("scale_floor", "subnormal")
    arith = conv.get("scale_arith", "double")
    rows, cols = x.shape
    nb = (cols + 15) // 16
    x32 = np.zeros((rows, nb * 16), dtype=F32)
    x32[:, :cols] = x.astype(F32)
    finite = np.isfinite(x32)
    amax_t = float(np.max(np.abs(x32[finite]))) if finite.any() else 0.0
    st = F32(amax_t / (6.0 * 448.0)) if amax_t > 0 else F32(1)
    blocks = x32.reshape(rows, nb, 16)
    amax_b = np.where(np.isfinite(blocks), np.abs(blocks), F32(0)).max(axis=2).astype(F32)
    if arith == "fp32":
        ideal = ((amax_b / F32(6)).astype(F32) / st).astype(F32).astype(np.float64)
    else:
        ideal = amax_b.astype(np.float64) / (6.0 * float(st))
    if floor == "min-normal":
        ideal = np.maximum(ideal, 2.0 ** -6)
    ideal = np.minimum(ideal, 448.0)
    sb = round_to_odd_f32(ideal).astype(ml_dtypes.float8_e4m3fn)
    sbv = sb.astype(F32)

    # The exact quotient, rounded to odd in fp32 so that the e2m1 cast rounds it once.
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        exact = round_to_odd_f32(blocks.astype(np.float64) /
                                 (sbv.astype(np.float64)[:, :, None] * float(st)))
        g = (F32(1) / st).astype(F32)
        if division == "reciprocal":
            r = (g / sbv).astype(F32)
        elif division == "reciprocal-approx":
            r = rcp_ftz((sbv * rcp_ftz(np.array([g]))[0]).astype(F32))
        else:
            r = np.zeros_like(sbv)
        use_r = (r > 0) & np.isfinite(r) & (sbv > 0)
        recip = (blocks * np.where(use_r, r, F32(0))[:, :, None]).astype(F32)
    t = np.where(use_r[:, :, None], recip, exact)
    t = np.clip(t, F32(-6), F32(6))  # saturate (+-inf too)
    codes = t.astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0xF
    codes = np.where(np.isnan(blocks) | (sbv[:, :, None] == 0), 0, codes).astype(np.uint8)
    codes = codes.reshape(rows, nb * 16)[:, :cols]
    return codes, sb.view(np.uint8), np.array([st], dtype=F32)


def save(directory, name, arr):
    tmp = os.path.join(directory, name + ".tmp.npy")
    np.save(tmp, np.ascontiguousarray(arr))
    os.replace(tmp, os.path.join(directory, name + ".npy"))


def main(argv):
    directory = argv[1]
    with open(os.path.join(directory, "case.json")) as f:
        case = json.load(f)
    x = np.load(os.path.join(directory, "x.npy"))
    # `--definition` ignores case.json's conventions (the tests' control: a quantizer that
    # follows the definition must then fail a check under another preset).
    codes, scales, st = quantize(case, x, ignore_conventions="--definition" in argv[2:])
    save(directory, "codes", codes)
    save(directory, "scales", scales)
    save(directory, "tensor_scale", st)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
