#!/usr/bin/env python3
"""Random and adversarial dot products for one MMA path, in numprobe mma's vectors layout
(--emit-vectors / --run-vectors), for paths that have no model yet (issue 31; docs/hardware.md):
run them on the device with `numprobe mma --run-vectors FILE --json OUT`, then compare candidate
models offline. Four families, as in numprobe's --agree: random (products below 2^8), cancel
(pairs x*y, -x*y), spread (exponents over the format's range) and subnormal (subnormal inputs
and C). C is a value of the accumulator (f32 or f16).

    python3 bench/mma_random_vectors.py --path mma.sync.m16n8k32.f16.e4m3 --input e4m3fn --k 32 \
        --accumulator f16 --count 4096 --seed 7 > vectors.json
"""
import argparse
import json
import random

import ml_dtypes
import numpy as np

DTYPES = {"e4m3fn": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2, "f16": np.float16,
          "bf16": ml_dtypes.bfloat16}


def value(rng, dtype, lo, hi):
    """A finite value of dtype with exponent in [lo, hi] and a random fraction and sign."""
    info = ml_dtypes.finfo(dtype)
    while True:
        x = (1 + rng.random()) * 2.0 ** rng.randint(lo, hi) * rng.choice((-1, 1))
        y = float(np.array(x).astype(dtype))
        if np.isfinite(y) and abs(y) <= float(info.max):
            return y


def subnormal(rng, dtype):
    info = ml_dtypes.finfo(dtype)
    tiny = float(info.smallest_subnormal)
    return rng.randint(1, 2 ** int(info.nmant) - 1) * tiny * rng.choice((-1, 1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--path", required=True)
    ap.add_argument("--input", required=True, choices=sorted(DTYPES))
    ap.add_argument("--k", type=int, required=True)
    ap.add_argument("--accumulator", default="f32", choices=("f32", "f16"))
    ap.add_argument("--count", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    dt = DTYPES[args.input]
    info = ml_dtypes.finfo(dt)
    emin, emax = int(info.minexp), int(info.maxexp) - 1
    acc = np.float16 if args.accumulator == "f16" else np.float32
    cap = 3 if args.accumulator == "f16" else 8  # products below 2^8 (f16: sums of 32 stay finite)
    vectors = []
    for i in range(args.count):
        fam = ("random", "cancel", "spread", "subnormal")[i % 4]
        a = [0.0] * args.k
        b = [0.0] * args.k
        if fam == "random":
            a = [value(rng, dt, max(emin, -8), min(emax, cap)) for _ in range(args.k)]
            b = [value(rng, dt, max(emin, -8), min(emax, cap)) for _ in range(args.k)]
            c = 0.0 if rng.random() < 0.25 else float(acc(value(rng, np.float16, -10, 12)))
        elif fam == "cancel":
            a = [value(rng, dt, max(emin, -8), -2) for _ in range(args.k)]
            b = [value(rng, dt, max(emin, -8), 0) for _ in range(args.k)]
            for _ in range(args.k // 2):
                p, q = rng.randrange(args.k), rng.randrange(args.k)
                if p == q:
                    continue
                a[p] = value(rng, dt, 2, min(emax, cap + 1))
                b[p] = value(rng, dt, 0, min(emax, cap))
                a[q], b[q] = -a[p], b[p]
            c = 0.0 if rng.random() < 0.5 else float(acc(value(rng, np.float16, -12, 4)))
        elif fam == "spread":
            hi = min(emax, 7 if args.accumulator == "f16" else 40)
            a = [value(rng, dt, emin, hi) for _ in range(args.k)]
            b = [value(rng, dt, emin, hi) for _ in range(args.k)]
            c = 0.0 if rng.random() < 1 / 3 else float(acc(value(rng, np.float16, -14, 15)))
        else:
            for j in range(args.k):
                a[j] = subnormal(rng, dt) if rng.random() < 1 / 3 else value(rng, dt, emin, emin + 6)
                b[j] = subnormal(rng, dt) if rng.random() < 1 / 3 else value(rng, dt, 0, min(emax, 8))
            small = 2.0 ** -24 if args.accumulator == "f16" else 2.0 ** -140
            c = 0.0 if rng.random() < 0.5 else rng.randint(1, 1000) * small
        vectors.append({"id": f"{fam}({i})", "a": a, "b": b, "c": c})
    json.dump({"paths": [{"path": args.path, "input": args.input, "k": args.k, "vectors": vectors}]},
              __import__("sys").stdout)


if __name__ == "__main__":
    main()
