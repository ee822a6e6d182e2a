#!/usr/bin/env python3
"""Issue 19's two measurements, each against a baseline measured in the same run.

1. Drift of one NumPy kernel (examples/exec/numpy_reference.py) three ways: in process
   (numprobe.drift), through `--backend exec:` (a process and .npy files per case) and through
   `--backend exec-worker:` (one process per sweep). Same lengths and cases; the points are
   checked equal; the table gives each way's median wall time and its ratio to in-process.
2. The bindings' overhead for a reference over 128K query rows: numprobe.reference.attention's
   wall time (float32 inputs converted, float64 outputs returned) against the C++ reference
   call alone on the same arrays (numprobe._core._time_reference_attention), as a ratio.

    python bench/python_bench.py [--cli build/numprobe] [--repeats 3] [--seq 64..1100]
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

import numpy as np

import numprobe
from numprobe._core_import import core

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "exec"))
import numpy_reference  # noqa: E402

CASE = ["--heads", "4", "--kv-heads", "2", "--head-dim", "64", "--tile", "64x64"]
FIELDS = {"heads": 4, "kv_heads": 2, "head_dim": 64}


def kernel(q, k, v, case):
    return numpy_reference.compute(case, q, k, v)


def cli_drift(cli, backend, seq):
    t0 = time.perf_counter()
    p = subprocess.run([cli, "drift", "--seq", seq, *CASE, "--backend", backend, "--json", "-"],
                       capture_output=True, text=True, check=False)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"python_bench: numprobe drift --backend {backend} exited {p.returncode}: {p.stderr.strip()}")
    return dt, json.loads(p.stdout)


def drift_ways(cli, seq, repeats):
    ref = ROOT / "examples" / "exec" / "numpy_reference.py"
    worker = ROOT / "examples" / "exec" / "worker.py"
    ways = {
        "in-process": None,
        "exec": f"exec:{sys.executable} {ref} {{in}}",
        "exec-worker": f"exec-worker:{sys.executable} {worker} numpy_reference",
    }
    times = {w: [] for w in ways}
    docs = {}
    for _ in range(repeats):  # interleaved, so load drifts hit every way alike
        for way, backend in ways.items():
            if backend is None:
                t0 = time.perf_counter()
                r = numprobe.drift(kernel, seq=seq, tile=(64, 64), **FIELDS)
                times[way].append(time.perf_counter() - t0)
                docs[way] = r.to_dict()
            else:
                dt, docs[way] = cli_drift(cli, backend, seq)
                times[way].append(dt)
    keys = ("case", "rel_rms", "ratio_to_naive", "max_abs")
    base = [[p.get(k) for k in keys] for p in docs["in-process"]["points"]]
    for way in ("exec", "exec-worker"):
        assert [[p.get(k) for k in keys] for p in docs[way]["points"]] == base, f"{way}: points differ"
    n = len(base)
    print(f"drift --seq {seq} ({n} points, Hq=4 Hkv=2 D=64, bf16 causal), median of {repeats}:")
    t_in = statistics.median(times["in-process"])
    for way, ts in times.items():
        med = statistics.median(ts)
        print(f"  {way:12s} {med:8.3f} s   {med / t_in:6.2f}x in-process   ({med / n * 1e3:7.1f} ms/point)")
    print("  points equal in all three ways (case, rel_rms, ratio_to_naive, max_abs)")


def bindings_overhead(repeats, rows):
    rng = np.random.default_rng(7)
    s, h, d = 64, 1, 64
    q = rng.standard_normal((rows, h, d)).astype(np.float32)
    k = rng.standard_normal((s, h, d)).astype(np.float32)
    v = rng.standard_normal((s, h, d)).astype(np.float32)
    fields = {"queries": rows, "seq": s, "heads": h, "kv_heads": h, "head_dim": d, "mask": "none", "dtype": "f64"}
    q64, k64, v64 = (np.ascontiguousarray(a, dtype=np.float64) for a in (q, k, v))
    py, py64, cpp = [], [], []
    for _ in range(repeats):  # interleaved
        cpp.append(core._time_reference_attention(q64.reshape(-1), k64.reshape(-1), v64.reshape(-1), fields))
        # The results are freed outside the timed span, as the C++ timing frees its output after.
        t0 = time.perf_counter()
        o, lse = numprobe.reference.attention(q, k, v)
        py.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        res = numprobe.reference.attention(q64, k64, v64)
        py64.append(time.perf_counter() - t0)
        del o, lse, res
    tc = statistics.median(cpp)
    print(f"reference.attention over {rows} rows (S={s}, D={d}), median of {repeats}:")
    print(f"  C++ call alone          {tc * 1e3:8.2f} ms   (float64 inputs, as the reference takes them)")
    for label, ts, what in (("from Python, float64", py64, "argument checks, outputs to NumPy"),
                            ("from Python, float32", py, "+ the float32->float64 input conversion")):
        tp = statistics.median(ts)
        print(f"  {label:22s}  {tp * 1e3:8.2f} ms   {tp / tc:6.3f}x the C++ call (overhead {100 * (tp - tc) / tc:+.1f}%: {what})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cli", default=os.environ.get("NUMPROBE_CLI", str(ROOT / "build" / "numprobe")))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seq", default="64..1100")
    ap.add_argument("--rows", type=int, default=131072)
    a = ap.parse_args()
    drift_ways(a.cli, a.seq, a.repeats)
    bindings_overhead(max(a.repeats, 5), a.rows)


if __name__ == "__main__":
    main()
