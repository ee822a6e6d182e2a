#!/usr/bin/env python3
"""Oracle test of numprobe's element codecs against ml_dtypes and numpy, bit for bit.

It generates seeded inputs, runs tests/formats/oracle_dump (our codecs) on them, and compares:
  1. decode of every code of every 4/6/8-bit format (and every bf16/f16 code) with ml_dtypes
     (numpy for f16; numpy's sign extension for the integers);
  2. RNE encode from float32 inputs, and from the same values as float64 (float64 values exact
     in float32), with ml_dtypes' own cast (numpy for f16/f32; for tf32 an independent numpy
     bit-manipulation rounding written here): a single rounding in every ml_dtypes version;
  3. RNE encode from arbitrary float64 inputs with an exact integer rounding written here (its
     result mapped to a code by ml_dtypes; the exact rounding is first checked against
     ml_dtypes on every float32 input), and, where the pinned ml_dtypes rounds float64 once
     (0.7.0 and later, measured here on every input), with ml_dtypes' float64 cast itself;
  4. the saturate policy and toward-zero against the same exact rounding, clamped.
Inputs: >= 2^20 seeded random values per format and input type spanning every binade from
below the smallest subnormal to beyond max, every midpoint between adjacent codes (ties), and
each tie and code nudged by one input ulp either way, plus zeros, infinities and NaNs.

The peers' versions are pinned (requirements-test.txt, scripts/oracle/pins.py): the first line
names them, and another version is refused. ml_dtypes conventions, which numprobe follows by
default: e4m3fn/e4m3fnuz/e5m2fnuz overflow and +-inf -> NaN (e4m3fn keeps the sign: 0x7F/0xFF;
fnuz: 0x80); e5m2, bf16, f16 -> +-inf; fp6/fp4 saturate to +-max (also for +-inf) and give a
zero of the NaN's sign for NaN; e8m0: NaN, zero and negatives -> 0xFF, positive values below
2^-127 -> 0x00, ties round up to the larger power of two, 2^128 and inf -> 0xFF.
ml_dtypes before 0.7.0 rounded float64 through float32 (a double rounding: e2m1(-3.4999999999999996)
is 0xe there, 0xd correctly rounded; e8m0(8.816207631167155e-39) 0x1 there, 0x0 nearer) and
rounded float32 subnormals in (2^-127, 2^-126) up to e8m0 0x01; numprobe is correctly rounded in
both places (docs/oracles.md). Integers round to nearest even and saturate (ml_dtypes' int4 cast
truncates and wraps), so they are checked against numpy clip(rint(x)).

Exit 0 when everything matches, 1 on a mismatch, 2 when a peer is not the pinned version (or is
missing under CI), 77 when a peer is missing elsewhere.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import pins

np, mld = pins.require("check_formats", ("numpy", "numpy"), ("ml_dtypes", "ml_dtypes"))
# ml_dtypes 0.7.0 rounds a float64 once (jax-ml/ml_dtypes#401); earlier versions go through
# float32 first, and round float32 subnormals up to e8m0 0x01. Both measured below, not assumed.
MLD_F64_SINGLE_ROUNDING = pins.version_tuple(mld.__version__) >= (0, 7)

np.seterr(all="ignore")  # overflow to inf and NaN comparisons are the point here

SEED = 20240531

# name: (ml_dtypes type or None, mantissa bits, emin (exponent of the smallest normal), storage bits)
FLOATS = {
    "f32": (np.float32, 23, -126, 32),
    "tf32": (None, 10, -126, 32),
    "bf16": (mld.bfloat16, 7, -126, 16),
    "f16": (np.float16, 10, -14, 16),
    "e4m3fn": (mld.float8_e4m3fn, 3, -6, 8),
    "e4m3fnuz": (mld.float8_e4m3fnuz, 3, -7, 8),
    "e5m2": (mld.float8_e5m2, 2, -14, 8),
    "e5m2fnuz": (mld.float8_e5m2fnuz, 2, -15, 8),
    "e2m3": (mld.float6_e2m3fn, 3, 0, 6),
    "e3m2": (mld.float6_e3m2fn, 2, -2, 6),
    "e2m1": (mld.float4_e2m1fn, 1, 0, 4),
    "e8m0": (mld.float8_e8m0fnu, 0, -127, 8),
}
INTS = {"int8": (-128, 127, 8), "int4": (-8, 7, 4), "uint4": (0, 15, 4)}

FAILURES = []
COUNTS = {}


def fail(what, idx, inputs, ours, ref):
    rows = [f"  x={float(inputs[i])!r} ours=0x{int(ours[i]):x} ref=0x{int(ref[i]):x}" for i in idx[:8]]
    FAILURES.append(f"{what}: {len(idx)} mismatches\n" + "\n".join(rows))


def count(what, n):
    COUNTS[what] = COUNTS.get(what, 0) + int(n)


class Dump:
    def __init__(self, exe, tmp):
        self.exe, self.tmp = exe, tmp

    def _run(self, *args):
        subprocess.run([self.exe, *args], check=True)

    def decode(self, fmt):
        out = os.path.join(self.tmp, "dec.f64")
        self._run("decode", fmt, out)
        return np.fromfile(out, dtype=np.float64)

    def encode(self, fmt, x, rounding="rne", policy="default"):
        ext = ".f32" if x.dtype == np.float32 else ".f64"
        inp, out = os.path.join(self.tmp, "in" + ext), os.path.join(self.tmp, "out.u32")
        x.tofile(inp)
        self._run("encode", fmt, inp, out, rounding, policy)
        return np.fromfile(out, dtype=np.uint32)


# ---- references written here ------------------------------------------------------------

def exact_round(x, mb, emin, rtz=False):
    """Round float64 |x| to the grid of a float format with mb mantissa bits and smallest
    normal exponent emin, with an unbounded exponent, exactly (integer arithmetic on the
    significand). Returns the rounded magnitude as float64 (finite inputs only)."""
    a = np.abs(x)
    bits = a.view(np.uint64)
    be = (bits >> np.uint64(52)).astype(np.int64)
    m = (bits & np.uint64((1 << 52) - 1)) | np.where(be > 0, np.uint64(1 << 52), np.uint64(0))
    lsb_exp = np.where(be == 0, 1, be) - 1075
    qe = np.maximum(np.where(be == 0, -1023, be - 1023), emin) - mb
    s = qe - lsb_exp
    sc = np.clip(s, 1, 63).astype(np.uint64)
    q = m >> sc
    rem = m & ((np.uint64(1) << sc) - np.uint64(1))
    half = np.uint64(1) << (sc - np.uint64(1))
    up = (rem > half) | ((rem == half) & ((q & np.uint64(1)) == 1))
    if rtz:
        up[:] = False
    q = np.where(s >= 64, np.uint64(0), q + up.astype(np.uint64))
    out = np.ldexp(q.astype(np.float64), qe)
    return np.where(s <= 0, a, out)


def tf32_from_f32_bits(x32):
    """tf32 RNE of float32 inputs by bit manipulation on the fp32 pattern: add 0xFFF plus the
    kept lsb, clear the low 13 bits (carries reach the exponent, and inf, as they should)."""
    u = x32.view(np.uint32).astype(np.uint64)
    lsb = (u >> np.uint64(13)) & np.uint64(1)
    r = ((u + np.uint64(0xFFF) + lsb) & np.uint64(0xFFFFE000)).astype(np.uint32)
    nan = np.isnan(x32)
    r[nan] = np.where(np.signbit(x32[nan]), 0xFFC00000, 0x7FC00000).astype(np.uint32)
    return r


def codes_of(fmt, values):
    """Codes of values that are already on the format's grid (or inf/NaN/overflowed by one
    step), as the oracle library writes them."""
    t, mb, emin, bits = FLOATS[fmt]
    v = np.asarray(values, dtype=np.float64)
    if fmt == "f32":
        return v.astype(np.float32).view(np.uint32).astype(np.uint32)
    if fmt == "tf32":  # an on-grid tf32 value is an f32 with the low 13 bits zero
        r = v.astype(np.float32).view(np.uint32).copy()
        nan = np.isnan(v)
        r[nan] = np.where(np.signbit(v[nan]), 0xFFC00000, 0x7FC00000).astype(np.uint32)
        return r
    # Exact in float32, so ml_dtypes' float64 -> float32 step does not round.
    c = v.astype(np.float32).astype(t)
    return c.view(np.uint16 if bits == 16 else np.uint8).astype(np.uint32)


def max_of(fmt):
    t = FLOATS[fmt][0]
    if fmt == "f32":
        return float(np.finfo(np.float32).max)
    if fmt == "tf32":
        return (2 - 2.0 ** -10) * 2.0 ** 127
    if fmt == "f16":
        return 65504.0
    return float(mld.finfo(t).max)


def reference_value(fmt, x, policy="default", rtz=False):
    """The value our encode must produce, from the exact rounding plus the conventions.
    Overflowed values are left one grid step beyond max: codes_of() applies the format's
    default overflow to them as ml_dtypes does."""
    t, mb, emin, bits = FLOATS[fmt]
    finite = np.isfinite(x)
    r = np.where(finite, exact_round(np.where(finite, x, 0.0), mb, emin, rtz), np.abs(x))
    r = np.copysign(r, x)
    if fmt == "e8m0":  # no zero: positive values below 2^-127 become 2^-127
        r = np.where((x > 0) & (r == 0), 2.0 ** -127, r)
    if fmt in ("e2m3", "e3m2", "e2m1"):  # no NaN: ml_dtypes gives a zero of the opposite sign
        r = np.where(np.isnan(x), np.copysign(0.0, -x), r)
    # Saturate clamps finite overflow and inf; toward zero carries finite overflow to max in
    # the formats checked with it (IEEE 754 7.4, or their saturating default).
    if policy == "saturate" or rtz:
        mx = max_of(fmt)
        lo = 0.0 if fmt == "e8m0" else -mx
        keep = np.isnan(r) | ((fmt == "e8m0") & (x <= 0))
        r = np.where(keep, r, np.clip(r, lo, mx))
    return r


# ---- inputs -----------------------------------------------------------------------------

def finite_grid(fmt):
    """Every finite value of a <= 16-bit float format (sorted, unique, no -0)."""
    t, mb, emin, bits = FLOATS[fmt]
    codes = np.arange(1 << bits, dtype=np.uint16 if bits == 16 else np.uint8)
    vals = codes.view(t).astype(np.float64)
    vals = vals[np.isfinite(vals)]
    return np.unique(vals)


def random_binades(rng, n, lo_exp, hi_exp, dtype):
    """n values, uniformly random sign, binade in [lo_exp, hi_exp] and full random mantissa."""
    e = rng.integers(lo_exp, hi_exp + 1, size=n)
    if dtype == np.float64:
        mant = rng.integers(0, 1 << 52, size=n, dtype=np.uint64)
        f = 1.0 + mant.astype(np.float64) * 2.0 ** -52  # exact: 53 bits
    else:
        mant = rng.integers(0, 1 << 23, size=n, dtype=np.uint64)
        f = 1.0 + mant.astype(np.float64) * 2.0 ** -23
    x = np.ldexp(f, e) * np.where(rng.random(n) < 0.5, -1.0, 1.0)
    if dtype == np.float32:  # keep to float32's range; subnormal floats round (still floats)
        with np.errstate(over="ignore"):
            x = x[np.abs(x) <= np.finfo(np.float32).max].astype(np.float32)
    return x


def nudge(x, dtype):
    x = x.astype(dtype)
    with np.errstate(over="ignore"):
        return np.concatenate([x, np.nextafter(x, dtype(np.inf)), np.nextafter(x, dtype(-np.inf))])


def inputs_for(fmt, dtype, rng, n_random):
    t, mb, emin, bits = FLOATS[fmt]
    if fmt in ("f32", "tf32"):
        max_exp = 127
    else:
        max_exp = int(np.floor(np.log2(float(mld.finfo(t).max if t is not np.float16 else 65504))))
    lo = emin - mb - 3
    parts = [random_binades(rng, n_random, lo, max_exp + 2, dtype)]
    if bits <= 16:
        g = finite_grid(fmt)
        g = np.concatenate([g, [g[-1] + (g[-1] - g[-2]) * (2 if fmt == "e8m0" else 1)]])
        mids = (g[1:] + g[:-1]) / 2  # exact in float64: adjacent codes differ in few bits
        pts = np.concatenate([g, mids, -g, -mids])
    else:  # f32/tf32: midpoints of random adjacent codes in every binade
        q = random_binades(rng, 1 << 16, emin - mb, max_exp, np.float64)
        qv = exact_round(q, mb, emin) * np.sign(q)
        ulp = np.ldexp(1.0, np.maximum(np.floor(np.log2(np.abs(qv))).astype(int), emin) - mb)
        pts = np.concatenate([qv, qv + ulp / 2 * np.sign(qv), qv - ulp / 2 * np.sign(qv)])
        mx = (2 - 2.0 ** -mb) * 2.0 ** 127
        pts = np.concatenate([pts, [mx, mx + 2.0 ** (127 - mb - 1), -mx - 2.0 ** (127 - mb - 1)]])
    if dtype == np.float32:
        with np.errstate(over="ignore"):
            pts = pts[np.abs(pts) <= np.finfo(np.float32).max]
        pts = pts[pts.astype(np.float32).astype(np.float64) == pts]  # exact float32 points only
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 2.0 ** -149,
                        3.4e38, -3.4e38], dtype=np.float64)
    if dtype == np.float64:
        special = np.concatenate([special, [1e-300, -1e-300, 5e-324, 1e300, -1e300, 2.0 ** -1074 * 3]])
    return np.concatenate([parts[0], nudge(pts, dtype), special.astype(dtype)])


# ---- the checks ---------------------------------------------------------------------------

def same_value(a, b):
    """Equal as values, including the sign of zero; NaN equals NaN."""
    both_nan = np.isnan(a) & np.isnan(b)
    return both_nan | ((a == b) & (np.signbit(a) == np.signbit(b)))


def check_decode(dump):
    for fmt, (t, mb, emin, bits) in FLOATS.items():
        if bits > 16:
            continue
        ours = dump.decode(fmt)
        codes = np.arange(1 << bits, dtype=np.uint16 if bits == 16 else np.uint8)
        ref = codes.view(t).astype(np.float64)
        bad = np.nonzero(~same_value(ours, ref))[0]
        count("decode codes", len(ref))
        if len(bad):
            fail(f"decode {fmt}", bad, codes, ours.view(np.uint64), ref.view(np.uint64))
    for fmt, (lo, hi, bits) in INTS.items():
        ours = dump.decode(fmt)
        codes = np.arange(1 << bits, dtype=np.int64)
        ref = np.where(codes > hi, codes - (1 << bits), codes).astype(np.float64)  # two's complement
        if fmt == "int4":  # ml_dtypes agrees with the two's-complement reading
            ref_mld = np.arange(16, dtype=np.uint8).view(mld.int4).astype(np.float64)
            assert np.array_equal(ref, ref_mld)
        bad = np.nonzero(ours != ref)[0]
        count("decode codes", len(ref))
        if len(bad):
            fail(f"decode {fmt}", bad, codes, ours, ref)


def oracle_codes_f32(fmt, x32):
    """The independent library's RNE codes for float32 inputs."""
    t, mb, emin, bits = FLOATS[fmt]
    if fmt == "tf32":
        return tf32_from_f32_bits(x32)
    if fmt == "f32":
        return x32.view(np.uint32).astype(np.uint32)
    c = x32.astype(t)
    return c.view(np.uint16 if bits == 16 else np.uint8).astype(np.uint32)


def compare(what, x, ours, ref):
    bad = np.nonzero(ours != ref)[0]
    count(what, len(x))
    if len(bad):
        fail(what, bad, x, ours, ref)


def check_encode(dump, n_random):
    rng = np.random.default_rng(SEED)
    for fmt in FLOATS:
        t, mb, emin, bits = FLOATS[fmt]
        # float32 inputs: ml_dtypes' own cast is single-rounded, so it is the oracle.
        x32 = inputs_for(fmt, np.float32, rng, n_random)
        ours32 = dump.encode(fmt, x32)
        x32d = x32.astype(np.float64)
        exact32 = codes_of(fmt, reference_value(fmt, x32d))
        if fmt == "e8m0" and not MLD_F64_SINGLE_ROUNDING:
            # ml_dtypes < 0.7 rounds float32 subnormals in (2^-127, 2^-126) up to 2^-126 (0x01)
            # even when they are nearer 2^-127 (1.03 * 2^-127 -> 0x01): those inputs are judged
            # by the exact rounding alone.
            dev = (x32d > 2.0 ** -127) & (x32d < 2.0 ** -126)
            count("(info) ml_dtypes e8m0 f32-subnormal inputs judged by exact rounding only",
                  np.count_nonzero(dev))
            compare("encode rne f32->e8m0 (subnormal f32 inputs, exact)", x32[dev], ours32[dev],
                    exact32[dev])
            x32, x32d, ours32, exact32 = x32[~dev], x32d[~dev], ours32[~dev], exact32[~dev]
        ref32 = oracle_codes_f32(fmt, x32)
        compare(f"encode rne f32->{fmt}", x32, ours32, ref32)
        # The same values as float64 (exact in float32): ml_dtypes' float64 cast rounds them
        # once in every version, so it is the oracle for our float64 path too.
        if t is not None and fmt not in ("f32", "f16"):
            with np.errstate(over="ignore", invalid="ignore"):
                ref32d = x32d.astype(t).view(np.uint16 if bits == 16 else np.uint8)
            compare(f"encode rne f64 (exact in f32)->{fmt} vs ml_dtypes", x32d,
                    dump.encode(fmt, x32d), ref32d.astype(np.uint32))
        # The exact rounding written here must agree with the oracle on every float32 input
        # before it may judge float64 inputs.
        compare(f"exact-rounding self-check {fmt}", x32d, exact32, ref32)
        # float64 inputs against the exact rounding, each policy and toward-zero.
        x64 = inputs_for(fmt, np.float64, rng, n_random)
        ours64 = dump.encode(fmt, x64)
        ref64 = codes_of(fmt, reference_value(fmt, x64))
        compare(f"encode rne f64->{fmt}", x64, ours64, ref64)
        if t is not None and fmt not in ("f32", "f16"):
            with np.errstate(over="ignore", invalid="ignore"):
                mld_codes = x64.astype(t).view(np.uint16 if bits == 16 else np.uint8)
                via32 = x64.astype(np.float32).astype(t).view(mld_codes.dtype)
            count(f"(info) ml_dtypes f64->{fmt} differs from its f32 cast (double rounding avoided)",
                  np.count_nonzero(mld_codes != via32))
            if MLD_F64_SINGLE_ROUNDING:
                # ml_dtypes >= 0.7 rounds float64 once: its cast is a second, independent
                # oracle for every float64 input, ties and their one-ulp neighbours included.
                compare(f"encode rne f64->{fmt} vs ml_dtypes", x64, ours64,
                        mld_codes.astype(np.uint32))
            else:
                # Older ml_dtypes round through float32: count where that differs from us, and
                # confirm every such difference is that float32 step, input for input.
                count(f"(info) ml_dtypes f64->{fmt} double-rounding differences",
                      np.count_nonzero(mld_codes.astype(np.uint32) != ours64))
                compare(f"ml_dtypes f64->{fmt} is its f32 cast", x64,
                        mld_codes.astype(np.uint32), via32.astype(np.uint32))
        compare(f"encode rne saturate f64->{fmt}", x64, dump.encode(fmt, x64, "rne", "saturate"),
                codes_of(fmt, reference_value(fmt, x64, "saturate")))
        if fmt not in ("e4m3fn", "e4m3fnuz", "e5m2fnuz", "e8m0"):
            # Toward zero with the format's default policy: IEEE formats carry finite
            # overflow to max (IEEE 754 7.4), formats without inf saturate by default.
            xf = x64[np.isfinite(x64)]
            compare(f"encode rtz f64->{fmt}", xf, dump.encode(fmt, xf, "rtz"),
                    codes_of(fmt, reference_value(fmt, xf, rtz=True)))
    for fmt, (lo, hi, bits) in INTS.items():
        x = np.concatenate([rng.normal(0, hi * 0.7, n_random), np.arange(lo - 3, hi + 3, 0.5),
                            [np.nan, np.inf, -np.inf, 1e300, -1e300, -0.0]])
        with np.errstate(invalid="ignore"):
            ref = np.clip(np.nan_to_num(np.rint(x), nan=0.0, posinf=hi, neginf=lo), lo, hi)
        refc = (ref.astype(np.int64) & ((1 << bits) - 1)).astype(np.uint32)
        compare(f"encode rne f64->{fmt}", x, dump.encode(fmt, x), refc)


def check_round_float(dump, n_random):
    """round_float_to (fast float paths) equals the oracle's rounding of float32 inputs."""
    rng = np.random.default_rng(SEED + 1)
    for fmt in ("bf16", "f16", "tf32", "e4m3fn", "e2m1"):
        x32 = inputs_for(fmt, np.float32, rng, n_random // 4)
        path = os.path.join(dump.tmp, "rf.f32")
        out = os.path.join(dump.tmp, "rfo.f32")
        x32.tofile(path)
        subprocess.run([dump.exe, "roundf", fmt, path, out], check=True)
        ours = codes_of(fmt, np.fromfile(out, dtype=np.float32).astype(np.float64))
        ref = codes_of(fmt, reference_value(fmt, x32.astype(np.float64)))
        compare(f"round_float_to {fmt}", x32, ours, ref)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dump", required=True, help="path of the oracle_dump executable")
    ap.add_argument("--random", type=int, default=1 << 20, help="random inputs per format and type")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        dump = Dump(args.dump, tmp)
        check_decode(dump)
        check_encode(dump, args.random)
        check_round_float(dump, args.random)
    print(f"ml_dtypes {mld.__version__}, numpy {np.__version__}, seed {SEED}, "
          f"float64 cast {'single' if MLD_F64_SINGLE_ROUNDING else 'double (through float32)'} rounding")
    for what, n in COUNTS.items():
        print(f"  {what}: {n}")
    if FAILURES:
        print("\n".join(FAILURES))
        print(f"check_formats: FAILED ({len(FAILURES)} checks)")
        return 1
    print("check_formats: all codes match")
    return 0


if __name__ == "__main__":
    sys.exit(main())
