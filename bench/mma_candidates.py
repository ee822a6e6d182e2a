#!/usr/bin/env python3
"""Candidate models for an MMA path that numprobe's catalogue cannot decide, checked against the
device's outputs offline (issue 31; docs/hardware.md, "fp8 mma.sync with an fp16 accumulator").

Input: the JSON `numprobe mma --run-vectors FILE --json OUT` wrote on the device (each vector with
its "measured" output). Each candidate is a chain of fused sums written here with exact rational
arithmetic (not numprobe's model code): a fused sum aligns its terms to 2^(e_max - F) with
truncation (e_max the largest term exponent, a product's being e_a + e_b) and adds them exactly;
then the result is rounded to a format (fp32 toward zero, fp16 to nearest even, ...). The groups
take the products k mod 4 in {0, 1} first, then {2, 3} (Hopper's fp8 mma.sync order), or k order.

    python3 bench/mma_candidates.py OUT.json [--input e4m3fn]
"""
import argparse
import json
import math
from fractions import Fraction

FORMATS = {  # fraction bits, minimum normal exponent, largest finite
    "f32": (23, -126, Fraction(2**24 - 1, 2**23) * 2**127),
    "f16": (10, -14, Fraction(65504)),
}
INPUT_EMIN = {"e4m3fn": -6, "e5m2": -14, "f16": -14}


def num(x):
    if isinstance(x, str):
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[x]
    return x


def exponent(x, emin):
    return max(math.frexp(abs(x))[1] - 1, emin) if x != 0 else None


def round_to(x, fmt, mode):
    """x (Fraction) rounded to fmt with mode 'rz' or 'rne'; +-inf past the largest finite."""
    if x == 0:
        return Fraction(0)
    bits, emin, top = FORMATS[fmt]
    e = max(math.floor(math.log2(abs(x))), emin)
    while Fraction(2) ** e > abs(x) and e > emin:  # log2 of a Fraction may be off by one
        e -= 1
    while Fraction(2) ** (e + 1) <= abs(x):
        e += 1
    e = max(e, emin)
    q = Fraction(2) ** (e - bits)
    m = x / q
    if mode == "rz":
        r = math.trunc(m)
    else:
        fl = math.floor(m)
        d = m - fl
        r = fl + (1 if d > Fraction(1, 2) or (d == Fraction(1, 2) and fl % 2 == 1) else 0)
    v = r * q
    if abs(v) > top:
        return math.copysign(math.inf, v)
    return v


def fused(terms, bits):
    """terms: (value Fraction, exponent); aligned to 2^(e_max - bits), truncated, added exactly."""
    live = [(v, e) for v, e in terms if v != 0]
    if not live:
        return Fraction(0)
    e_max = max(e for _, e in live)
    q = Fraction(2) ** (e_max - bits)
    return sum(math.trunc(v / q) * q for v, _ in live)


def product_terms(a, b, idx, emin):
    out = []
    for i in idx:
        if a[i] == 0 or b[i] == 0:
            continue
        out.append((Fraction(a[i]) * Fraction(b[i]), exponent(a[i], emin) + exponent(b[i], emin)))
    return out


def c_term(c, fmt):
    return (Fraction(c), exponent(c, FORMATS[fmt][1])) if c != 0 else (Fraction(0), 0)


def interleaved(k):
    return [i for i in range(k) if i % 4 < 2], [i for i in range(k) if i % 4 >= 2]


def candidate_c(k, emin):
    g1, g2 = interleaved(k)

    def run(a, b, c):
        r = round_to(fused(product_terms(a, b, g1, emin), 25), "f32", "rz")
        r = round_to(fused(product_terms(a, b, g2, emin) + [c_term(r, "f32")], 25), "f32", "rz")
        if isinstance(r, float):
            return r
        r = round_to(r, "f16", "rne")
        if isinstance(r, float):
            return r
        return round_to(r + Fraction(c), "f16", "rne")
    return run


def candidates(k, emin):
    g1, g2 = interleaved(k)

    def chain(inter, inter_mode, c_first, c_last_fmt, c_last_mode, final=None):
        def run(a, b, c):
            terms = product_terms(a, b, g1, emin)
            if c_first:
                terms.append(c_term(c, "f16"))
            r = round_to(fused(terms, 25), inter, inter_mode)
            if isinstance(r, float):
                return r
            r = round_to(fused(product_terms(a, b, g2, emin) + [c_term(r, inter)], 25), inter, inter_mode)
            if isinstance(r, float):
                return r
            if not c_first:
                r = round_to(r + Fraction(c), c_last_fmt, c_last_mode)
                if isinstance(r, float):
                    return r
            if final:
                r = round_to(r, *final)
            return r
        return run

    return {
        "F: fp32 chain (toward zero), + C in fp32 (nearest): h200-mma-e4m3 (fp32 accumulator)":
            chain("f32", "rz", False, "f32", "rne"),
        "A: fp16 chain (each half rounded to fp16, nearest), then + C in fp16 (nearest)":
            chain("f16", "rne", False, "f16", "rne"),
        "B: fp32 chain (toward zero), + C in fp32 (nearest), then to fp16 (nearest)":
            chain("f32", "rz", False, "f32", "rne", ("f16", "rne")),
        "C: fp32 chain (toward zero), to fp16 (nearest), then + C in fp16 (nearest)": candidate_c(k, emin),
        "D: C in the first half, fp16 chain (nearest)": chain("f16", "rne", True, None, None),
        "E: C in the first half, fp32 chain (toward zero), then to fp16 (nearest)":
            chain("f32", "rz", True, None, None, ("f16", "rne")),
    }


def same(x, y):
    x, y = float(x), float(y)
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return x == y


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outputs")
    args = ap.parse_args()
    doc = json.load(open(args.outputs))
    for p in doc["paths"]:
        emin = INPUT_EMIN[p["input"]]
        cands = candidates(p["k"], emin)
        counts = {name: 0 for name in cands}
        first = {}
        n = 0
        for v in p["vectors"]:
            a = [num(x) for x in v["a"]]
            b = [num(x) for x in v["b"]]
            c = num(v["c"])
            if any(math.isnan(x) or math.isinf(x) for x in a + b + [c]):
                continue
            n += 1
            m = num(v["measured"])
            for name, f in cands.items():
                got = f(a, b, c)
                if same(got, m):
                    counts[name] += 1
                elif name not in first:
                    first[name] = (v["id"], float(got), m)
        print(f"{p['path']} ({p['input']}, k={p['k']}): {n} finite vectors")
        for name, cnt in counts.items():
            extra = f"   first miss {first[name]}" if name in first else ""
            print(f"  {cnt:6d}/{n}  {name}{extra}")


if __name__ == "__main__":
    main()
