#!/usr/bin/env python3
"""Oracle for `numprobe quant --preset torchao` on NVFP4 (issue 17).

The expected codes come from torchao's NVFP4 rules written here in numpy, each step an fp32
operation, with ml_dtypes doing the e4m3fn and e2m1 roundings (docs/quant-conventions.md cites
the source: pytorch/ao torchao/prototype/mx_formats/nvfp4_tensor.py, nvfp4_quantize):
  s_t = f32(amax_t) / f32(6 * 448)
  s_b = e4m3fn(clamp(f32(f32(amax_b) / 6) / s_t, 2^-6, 448))
  t   = f32(x) * f32(f32(1 / s_t) / s_b), clamped to [-6, 6], then e2m1 (round to nearest even)
numprobe runs on the same .npy input with --dump; its codes.npy and scales.npy must equal these
bit for bit. The inputs are random and tie-adversarial (elements on E2M1 midpoints times exact
block scales, which a division and a reciprocal multiply round apart). Exit 77 when numpy or
ml_dtypes is missing (ctest: skipped; exit 2 under CI), 2 when either is not the pinned version
(requirements-test.txt), 1 on a mismatch.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import pins

np, mld = pins.require("check_nvfp4_presets", ("numpy", "numpy"), ("ml_dtypes", "ml_dtypes"))

F32 = np.float32


def torchao_nvfp4(x):
    x32 = x.astype(F32)
    rows, cols = x32.shape
    st = F32(np.max(np.abs(x32))) / F32(6 * 448)
    blocks = np.abs(x32).reshape(rows, cols // 16, 16)
    amax_b = blocks.max(axis=2).astype(F32)
    ideal = (amax_b / F32(6)).astype(F32) / st
    ideal = np.clip(ideal.astype(F32), F32(2.0 ** -6), F32(448))
    sb = ideal.astype(mld.float8_e4m3fn)
    sbv = sb.astype(F32)
    g = (F32(1) / st).astype(F32)
    r = (g / sbv).astype(F32)
    t = (x32.reshape(rows, cols // 16, 16) * r[:, :, None]).astype(F32)
    t = np.clip(t, F32(-6), F32(6))
    codes = t.astype(mld.float4_e2m1fn).view(np.uint8) & 0xF
    return codes.reshape(rows, cols), sb.view(np.uint8)


def inputs(rng):
    rows, cols = 64, 256
    yield "normal", rng.standard_normal((rows, cols))
    # Ties: each block's amax is 6 * s with s an e4m3 value times s_t, the rest E2M1
    # midpoints times s; s_t = 13/16 exactly (amax_t = 6 * 448 * 13/16).
    st = 13 / 16
    mids = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    x = np.empty((rows, cols))
    for r in range(rows):
        for b in range(cols // 16):
            s = (1 + rng.integers(0, 8) / 8) * 2.0 ** int(rng.integers(-4, 5)) * st
            blk = rng.choice(mids, 16) * s * rng.choice([-1.0, 1.0], 16)
            blk[rng.integers(0, 16)] = 6 * s
            x[r, b * 16:(b + 1) * 16] = blk
    x[0, 0] = 6 * 448 * st
    yield "ties", x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--numprobe", required=True)
    a = ap.parse_args()
    rng = np.random.default_rng(17)
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        for name, x in inputs(rng):
            x = x.astype(F32)
            path = os.path.join(d, name + ".npy")
            np.save(path, x)
            dump = os.path.join(d, name)
            p = subprocess.run([a.numprobe, "quant", "--input", path, "--scheme", "nvfp4", "--preset", "torchao",
                                "--dump", dump], capture_output=True, text=True)
            if p.returncode != 0:
                print(f"{name}: numprobe exit {p.returncode}: {p.stderr.strip()}")
                bad += 1
                continue
            codes, scales = torchao_nvfp4(x)
            ours_c = np.load(os.path.join(dump, "codes.npy"))
            ours_s = np.load(os.path.join(dump, "scales.npy")).reshape(scales.shape)
            dc = int(np.count_nonzero(ours_c != codes))
            ds = int(np.count_nonzero(ours_s != scales))
            # Control: the definition (exact division) must differ on ties, or the check is blind.
            print(f"{name}: {codes.size} codes, {dc} differ; {scales.size} scales, {ds} differ")
            bad += dc + ds
            if name == "ties":
                q = subprocess.run([a.numprobe, "quant", "--input", path, "--scheme", "nvfp4", "--dump",
                                    dump + "_def"], capture_output=True, text=True)
                dd = int(np.count_nonzero(np.load(os.path.join(dump + "_def", "codes.npy")) != codes))
                print(f"ties control: the definition (exact division) differs in {dd} codes")
                if dd == 0:
                    print("the ties input does not separate the conventions: the check would be blind")
                    bad += 1
    print("PASS" if bad == 0 else "FAIL")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
