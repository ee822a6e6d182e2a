#!/usr/bin/env python3
"""Throughput and peak RSS of `scan RELEASE` and `convert` on a synthetic ModelOpt NVFP4 release
(issue 18: "throughput and RSS on a synthetic release of at least 2 GiB"; convert's throughput
within 2x of scan's on the same data).

The release is written here with NumPy from the layout's rule (docs/checkpoints.md): weights
[rows, cols] as uint8 [rows, cols/2] (two e2m1 codes per byte, low nibble first), e4m3 block
scales [rows, cols/16] and an fp32 weight_scale_2, plus a config.json naming quant_method
modelopt. Codes and scales are seeded random (scale codes in 0x20..0x5f: normal e4m3 values), so
the data is what a decoder sees, not what a quantizer would choose.

Every command runs under /usr/bin/time -v in this process's run, one after another, and the
ratios are taken between commands of the same run:
  scan      numprobe scan RELEASE                     (decode + statistics)
  convert   numprobe convert RELEASE --to mxfp4       (decode + re-quantize, report only)
  write     numprobe convert RELEASE --to mxfp4 --write OUT (the same, written as ct-mxfp4)
  plain     numprobe scan BF16 --format mxfp4 on the first weights as bf16 (the scan's own
            quantize path), scaled per element, as the "scan's throughput" baseline

usage: bench/release_bench.py --numprobe build/numprobe [--gib 2] [--dir /tmp/release-bench]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

try:
    import numpy as np
except ImportError:
    print("numpy not importable: no benchmark")
    sys.exit(77)


def write_release(d, gib, rows, cols, rng):
    os.makedirs(d, exist_ok=True)
    per = rows * cols // 2 + rows * cols // 16 + 4
    n = max(1, -(-int(gib * (1 << 30)) // per))  # at least gib
    header = {}
    at = 0
    names = []
    for i in range(n):
        p = f"model.layers.{i}.mlp.up_proj"
        for suffix, dt, shape, size in ((".weight", "U8", [rows, cols // 2], rows * cols // 2),
                                        (".weight_scale", "F8_E4M3", [rows, cols // 16], rows * cols // 16),
                                        (".weight_scale_2", "F32", [], 4)):
            header[p + suffix] = {"dtype": dt, "shape": shape, "data_offsets": [at, at + size]}
            names.append((p + suffix, size, dt))
            at += size
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    path = os.path.join(d, "model.safetensors")
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for name, size, dt in names:
            if dt == "U8":
                f.write(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
            elif dt == "F8_E4M3":
                f.write(rng.integers(0x20, 0x60, size, dtype=np.uint8).tobytes())
            else:
                f.write(np.array([1.0 / 2688], dtype=np.float32).tobytes())
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}}, f)
    return n, os.path.getsize(path)


def write_bf16(path, weights, rows, cols, rng):
    header, at = {}, 0
    for i in range(weights):
        header[f"model.layers.{i}.mlp.up_proj.weight"] = {"dtype": "BF16", "shape": [rows, cols],
                                                          "data_offsets": [at, at + rows * cols * 2]}
        at += rows * cols * 2
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for _ in range(weights):
            x = rng.standard_normal(rows * cols, dtype=np.float32) * 0.02
            f.write((x.view(np.uint32) >> 16).astype(np.uint16).tobytes())


def timed(cmd):
    t0 = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    rss = int(m.group(1)) / 1024 if m else float("nan")
    if p.returncode not in (0, 1):
        print("FAILED:", " ".join(cmd), p.stderr.strip().splitlines()[-3:])
        sys.exit(1)
    return wall, rss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--numprobe", required=True)
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--dir", default="/tmp/release-bench")
    ap.add_argument("--rows", type=int, default=8192)
    ap.add_argument("--cols", type=int, default=8192)
    a = ap.parse_args()
    rng = np.random.default_rng(18)
    shutil.rmtree(a.dir, ignore_errors=True)
    rel = os.path.join(a.dir, "release")
    n, size = write_release(rel, a.gib, a.rows, a.cols, rng)
    elements = n * a.rows * a.cols
    plain_w = 2
    write_bf16(os.path.join(a.dir, "plain.safetensors"), plain_w, a.rows, a.cols, rng)
    print(f"release: {n} weights [{a.rows}, {a.cols}], {size / (1 << 30):.2f} GiB, {elements / 1e9:.2f}G elements")
    runs = {
        "scan": [a.numprobe, "scan", rel, "--json", os.path.join(a.dir, "scan.json")],
        "convert": [a.numprobe, "convert", rel, "--to", "mxfp4", "--json", os.path.join(a.dir, "convert.json")],
        "write": [a.numprobe, "convert", rel, "--to", "mxfp4", "--write", os.path.join(a.dir, "out"),
                  "--json", os.path.join(a.dir, "write.json")],
        "plain": [a.numprobe, "scan", os.path.join(a.dir, "plain.safetensors"), "--format", "mxfp4",
                  "--json", os.path.join(a.dir, "plain.json")],
    }
    res = {}
    for k, cmd in runs.items():
        wall, rss = timed(cmd)
        ne = plain_w * a.rows * a.cols if k == "plain" else elements
        res[k] = (wall, rss, ne / wall / 1e6)
        print(f"bench release {k:8s} wall_s={wall:.2f} peak_rss_mib={rss:.0f} melem_per_s={res[k][2]:.1f}")
    print(f"bench release ratio convert/scan time per element: {res['scan'][2] / res['convert'][2]:.2f}")
    print(f"bench release ratio write/scan time per element: {res['scan'][2] / res['write'][2]:.2f}")
    print(f"bench release ratio write/plain-scan time per element: {res['plain'][2] / res['write'][2]:.2f}")
    shutil.rmtree(a.dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
