#!/usr/bin/env python3
"""Replays recorded burn-in timings through two judges (docs/burnin.md, "Timing on a shared host").

runs.tar.gz holds one JSON line per run: the rep_seconds of each device (7 repetitions), from
  numprobe burnin --backend emu --seq 64 --decode-seq 256 --reps 7 --devices N [--fault ...] --json F
on the 2-core CI host (files q*: a quiet host; the others: next to two busy NumPy processes).
File names say the fleet: slow (device 1 does four times the work), bit4/flaky3 (hash faults only:
no throughput outlier is right), healthy. Both judges are written here from docs/burnin.md's rule
(k = 5 MADs, MAD floored at 0.05 of the median), apart from numprobe's C++.
"""
import json
import statistics
import sys
import tarfile


def judge(values, k=5.0, floor=0.05):
    m = statistics.median(values)
    used = max(statistics.median([abs(x - m) for x in values]), floor * m)
    return [i for i, x in enumerate(values) if abs(x - m) > k * used]


def median_throughput(row):
    return [statistics.median([1.0 / s for s in dev]) for dev in row]


def relative_speed(row):
    reps = len(row[0])
    fleet = [statistics.median([dev[i] for dev in row]) for i in range(reps)]
    return [statistics.median([fleet[i] / dev[i] for i in range(reps)]) for dev in row]


def main(path):
    with tarfile.open(path) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            rows = [json.loads(line) for line in tar.extractfile(member).read().decode().splitlines()]
            want = [1] if "slow" in member.name else []
            windows3 = sum(judge(median_throughput([d[s:s + 3] for d in row])) != want
                           for row in rows for s in range(5))
            print(f"{member.name:20} runs {len(rows):4} devices {len(rows[0])}:"
                  f" median throughput, windows of 3: {windows3}/{5 * len(rows)} wrong;"
                  f" median throughput, 7: {sum(judge(median_throughput(r)) != want for r in rows)} wrong;"
                  f" relative speed, 7: {sum(judge(relative_speed(r)) != want for r in rows)} wrong")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs.tar.gz")
