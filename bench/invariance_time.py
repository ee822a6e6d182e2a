#!/usr/bin/env python3
"""Issue 30's time target: a full `numprobe invariance` (every check, the defaults: S = 256,
4 heads, 2 KV heads, D = 64, batches 1,2,3,8,33,64) on an exec-worker NumPy kernel, on this
machine, against the target of 60 s. The baseline measured in the same run is the same command
on the emulator (`--backend emu`), so a loaded machine shows as a slower baseline too.

    bench/invariance_time.py NUMPROBE_BINARY [REPEATS=3]

Prints each run's seconds, the medians, and the exec-worker median against the target.
"""
import os
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
TARGET_S = 60.0


def timed(cmd):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd[:3])}...: exit {r.returncode}: {r.stderr.strip()[-400:]}")
    return dt, r.stdout


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    cli = sys.argv[1]
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    kernel = f"{sys.executable} examples/exec/worker.py examples/exec/zoo/causal_only.py"
    runs = {"exec-worker NumPy (causal_only.py)": [cli, "invariance", "--backend", f"exec-worker:{kernel}"],
            "emu (baseline)": [cli, "invariance", "--backend", "emu"]}
    times = {name: [] for name in runs}
    last = {}
    for _ in range(repeats):
        for name, cmd in runs.items():  # alternating: load drift hits both
            dt, out = timed(cmd)
            times[name].append(dt)
            last[name] = out
    print(f"numprobe invariance, defaults, {os.cpu_count()} cores, {repeats} runs each")
    for name, ts in times.items():
        print(f"  {name}: median {statistics.median(ts):.1f} s  (runs: {', '.join(f'{t:.1f}' for t in ts)})")
    m = statistics.median(times["exec-worker NumPy (causal_only.py)"])
    print(f"  exec-worker / emu: {m / statistics.median(times['emu (baseline)']):.2f}")
    print(f"  exec-worker against the target: {m:.1f} s of {TARGET_S:.0f} s -> {'met' if m < TARGET_S else 'MISSED'}")
    print(last["exec-worker NumPy (causal_only.py)"].strip()[-1500:])


if __name__ == "__main__":
    main()
