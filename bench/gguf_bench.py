#!/usr/bin/env python3
"""GGUF against safetensors, the same bytes through the same commands (issue 29 "Measure").

    python3 bench/gguf_bench.py --numprobe build/numprobe [--gib 1.0] [--dir /tmp/gguf_bench]

Writes a GGUF of at least --gib GiB of Q8_0 linears (4096 x 4096 each, llama names; block
scales drawn from [2^-9, 2^-5], codes seeded), then converts it with numprobe itself to a
compressed-tensors fp8 per-channel release (ct-fp8: one byte per weight, the nearest safetensors
layout to Q8_0's 8.5 bits). Both are then read by the same commands, timed by wall clock:
  scan FILE                              every tensor decoded, statistics per tensor
  convert FILE --to dequant --write OUT  every tensor decoded and written as F32
Prints a table of seconds, input GiB/s and elements/s per command and layout, and the ratio
GGUF / safetensors. Not a CI test: it writes about 6 GiB and runs for minutes.
"""
import argparse
import os
import shutil
import struct
import subprocess
import time

import numpy as np

ROWS = COLS = 4096
Q8_0 = 8


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def write_gguf(path, n_tensors, seed=29):
    rng = np.random.default_rng(seed)
    blocks = ROWS * COLS // 32
    names = []
    for i in range(n_tensors):
        layer, part = divmod(i, 4)
        names.append(f"blk.{layer}.{['attn_v', 'attn_output', 'ffn_up', 'ffn_gate'][part]}.weight")
    head = b"GGUF" + struct.pack("<IQQ", 3, n_tensors, 1)
    head += gguf_string("general.architecture") + struct.pack("<I", 8) + gguf_string("bench")
    size = blocks * 34
    for i, n in enumerate(names):
        head += gguf_string(n) + struct.pack("<I", 2) + struct.pack("<QQ", COLS, ROWS)
        head += struct.pack("<IQ", Q8_0, i * ((size + 31) // 32 * 32))
    head += b"\0" * (-len(head) % 32)
    with open(path, "wb") as f:
        f.write(head)
        for _ in names:
            d = np.exp2(rng.uniform(-9, -5, blocks)).astype(np.float16)
            q = rng.integers(-127, 128, (blocks, 32), dtype=np.int8)
            raw = np.empty((blocks, 34), np.uint8)
            raw[:, :2] = d.view(np.uint8).reshape(blocks, 2)
            raw[:, 2:] = q.view(np.uint8)
            f.write(raw.tobytes())
            f.write(b"\0" * (-size % 32))
    return ROWS * COLS * n_tensors


def timed(cmd):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))} exited {p.returncode}: {p.stderr[-400:]}")
    return dt


def size_of(path):
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path) if f.endswith(".safetensors"))
    return os.path.getsize(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--numprobe", required=True)
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--dir", default="/tmp/gguf_bench")
    a = ap.parse_args()
    shutil.rmtree(a.dir, ignore_errors=True)
    os.makedirs(a.dir)
    n = max(1, int(np.ceil(a.gib * (1 << 30) / (ROWS * COLS // 32 * 34))))
    gguf = os.path.join(a.dir, "bench.gguf")
    elements = write_gguf(gguf, n)
    st = os.path.join(a.dir, "ct_fp8")
    t_make = timed([a.numprobe, "convert", gguf, "--to", "fp8-channel", "--write", st])
    rows = [("convert GGUF --to fp8-channel --write (makes the safetensors release)", "gguf", size_of(gguf), t_make)]
    for label, path in (("gguf", gguf), ("ct-fp8 safetensors", st)):
        rows.append(("scan", label, size_of(path), timed([a.numprobe, "scan", path, "--json", os.devnull])))
    for label, path in (("gguf", gguf), ("ct-fp8 safetensors", st)):
        out = os.path.join(a.dir, "dq_" + label.split()[0])
        rows.append(("convert --to dequant --write", label, size_of(path),
                     timed([a.numprobe, "convert", path, "--to", "dequant", "--write", out, "--json", os.devnull])))
        shutil.rmtree(out, ignore_errors=True)
    print(f"{n} tensors of {ROWS}x{COLS}, {elements / 1e9:.2f} G elements; {os.cpu_count()} CPUs")
    print(f"{'command':<72} {'input':<20} {'GiB':>6} {'s':>7} {'GiB/s':>7} {'Melem/s':>8}")
    for cmd, label, size, dt in rows:
        print(f"{cmd:<72} {label:<20} {size / (1 << 30):6.2f} {dt:7.2f} {size / (1 << 30) / dt:7.3f} {elements / dt / 1e6:8.1f}")
    by = {(c, l): dt for c, l, _, dt in rows}
    for c in ("scan", "convert --to dequant --write"):
        print(f"ratio gguf / safetensors, {c}: {by[(c, 'gguf')] / by[(c, 'ct-fp8 safetensors')]:.2f} (time)")
    shutil.rmtree(a.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
