#!/usr/bin/env python3
"""Wall time of the same numprobe commands under two binaries, interleaved, as a ratio
(issue 16: scan, kl and drift unchanged within noise after the redesign).

    bench/cli_time_ratio.py OLD_BINARY NEW_BINARY [REPEATS=5] [WORKDIR]

Each command runs REPEATS times per binary, old and new alternating so that load drifts hit
both alike; the table shows each binary's median and new/old. The noise estimate is the
spread of the old binary's own runs (max/min), measured in the same run.
"""
import os
import statistics
import subprocess
import sys
import time

import numpy as np


def inputs(work):
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(7)
    if not os.path.exists(f"{work}/base.npy"):
        base = rng.normal(size=(512, 32000)).astype(np.float32) * 3
        np.save(f"{work}/base.npy", base)
        np.save(f"{work}/cand.npy", base + rng.normal(size=base.shape).astype(np.float32) * 0.05)
        np.save(f"{work}/w.npy", rng.normal(size=(4096, 4096)).astype(np.float32))


def commands(work):
    # A file in the work folder, never /dev/null: numprobe writes reports atomically, and a
    # numprobe before issue 16 renamed its temporary over the target, device or not.
    out = f"{work}/out.json"
    return [
        ("kl 512x32000", f"kl {work}/base.npy {work}/cand.npy --json {out}"),
        ("scan 4096^2 nvfp4", f"scan {work}/w.npy --format nvfp4 --json {out}"),
        ("scan 4096^2 int4-awq (quantize path)", f"scan {work}/w.npy --format int4-awq --json {out}"),
        ("drift emu 128..4096", "drift --backend emu --seq 128..4096 --points log:6 --heads 4 --kv-heads 2 "
                                f"--head-dim 64 --json {out}"),
    ]


def timed(cmd):
    t = time.perf_counter()
    p = subprocess.run(cmd, shell=True, capture_output=True)
    return time.perf_counter() - t, p.returncode


def main():
    old, new = sys.argv[1], sys.argv[2]
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    work = sys.argv[4] if len(sys.argv) > 4 else "/tmp/numprobe_time_ratio"
    inputs(work)
    print(f"{'command':<34} {'old s':>8} {'new s':>8} {'new/old':>8} {'old spread':>10}")
    for name, args in commands(work):
        to, tn = [], []
        for _ in range(reps):
            a, rc_a = timed(f"{old} {args}")
            b, rc_b = timed(f"{new} {args}")
            if rc_a != rc_b:
                print(f"{name}: exit codes differ ({rc_a} vs {rc_b})")
            to.append(a)
            tn.append(b)
        mo, mn = statistics.median(to), statistics.median(tn)
        print(f"{name:<34} {mo:8.3f} {mn:8.3f} {mn / mo:8.3f} {max(to) / min(to):10.3f}")


if __name__ == "__main__":
    main()
