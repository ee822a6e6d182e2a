#!/usr/bin/env python3
"""Diffs every command's JSON between two numprobe binaries (issue 16: "the JSON of every
command is diffed before and after").

    bench/json_diff_commands.py OLD_BINARY NEW_BINARY [WORKDIR]

Runs each command once per binary with --json, flattens both documents to path -> value, and
prints, per command: paths only in the old document, paths only in the new one, and values that
differ. Wall times (seconds, *_s, seconds_per_step) and the build identity (version,
git_revision, machine) are left out; everything else must match exactly, numbers included. A
NaN or infinity written as null by the old binary and as "nan"/"inf"/"-inf" by the new one is
counted apart, as the documented schema change (docs/json-schema.md).
"""
import json
import math
import os
import subprocess
import sys

import numpy as np

SMALL = " --heads 2 --kv-heads 1 --head-dim 32 "
IGNORED = {"version", "git_revision", "machine", "seconds", "seconds_per_step", "schema_version"}


def commands(work):
    return [
        ("attention", "attention --backend emu --seq 130 --queries 64" + SMALL),
        ("attention_breach", "attention --backend emu --seq 130 --queries 64 '--bound=rel_rms<=1e-30'" + SMALL),
        ("drift", "drift --backend emu --seq 63..160 --points 63,64,65,129 --tile 64x64" + SMALL),
        ("drift_insufficient", "drift --backend emu --seq 64..128 --points 64,128 --tile 64x64 '--bound=growth.slope<=1'" + SMALL),
        ("bisect", "bisect --backend emu --seq 32..512 --dist diffuse --mask none --inject rowsum-bf16" + SMALL),
        ("audit", "audit --backend emu --quick --seq 1024" + SMALL),
        ("softmax", "softmax --backend emu --vocab 3000 --rows 2 --chunk 1024"),
        ("softmax_sweep", "softmax --backend emu --vocab 1000..3100 --rows 2 --chunk 1024"),
        ("quant", "quant --scheme nvfp4 --shape 32x64"),
        ("quant_mx", "quant --scheme mxfp4 --shape 64x64 --dist outliers"),
        ("kl", f"kl {work}/base.npy {work}/cand.npy"),
        ("scan", f"scan {work}/w.npy --format nvfp4 --vs mxfp4"),
        ("kvcache", "kvcache --seq 256,512 --kv-format e4m3fn --kv-scale tensor,token --scale-mult 1,2^-2 --calib 0"
                    + SMALL + " --queries 2"),
        ("formats", "formats"),
        ("formats_show", "formats show e5m2"),
        ("backends", "backends"),
    ]


def make_inputs(work):
    """kl's two [N, V] logit files and scan's one tensor: seeded, non-constant values."""
    rng = np.random.default_rng(20261201)
    base = rng.normal(size=(8, 64)).astype(np.float32) * 3
    np.save(f"{work}/base.npy", base)
    np.save(f"{work}/cand.npy", (base + rng.normal(size=base.shape).astype(np.float32) * 0.01))
    np.save(f"{work}/w.npy", rng.normal(size=(32, 64)).astype(np.float32))


def flatten(v, path="", out=None):
    out = {} if out is None else out
    if isinstance(v, dict):
        for k, x in v.items():
            if k in IGNORED or k.endswith("_s"):
                continue
            flatten(x, f"{path}.{k}" if path else k, out)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            flatten(x, f"{path}[{i}]", out)
    else:
        out[path] = v
    return out


def run(binary, args):
    p = subprocess.run(f"{binary} {args} --json -", shell=True, capture_output=True, text=True)
    try:
        return p.returncode, json.loads(p.stdout)
    except json.JSONDecodeError:
        return p.returncode, {"__unparsed__": p.stdout[:200] + p.stderr[:200]}


def main():
    old, new = sys.argv[1], sys.argv[2]
    work = sys.argv[3] if len(sys.argv) > 3 else "/tmp/numprobe_json_diff"
    os.makedirs(work, exist_ok=True)
    make_inputs(work)
    total_diff = 0
    for name, args in commands(work):
        rc_old, a = run(old, args)
        rc_new, b = run(new, args)
        fa, fb = flatten(a), flatten(b)
        # The new document's envelope additions (docs/json-schema.md): listed once, not as diffs.
        added_envelope = [k for k in fb if k not in fa and (k in ("command_document", "exit_code")
                                                             or k.startswith("checks["))]
        only_old = sorted(k for k in fa if k not in fb)
        only_new = sorted(k for k in fb if k not in fa and k not in added_envelope)
        convention, changed = [], []
        for k in sorted(set(fa) & set(fb)):
            x, y = fa[k], fb[k]
            if x == y:
                continue
            if x is None and y in ("nan", "inf", "-inf"):
                convention.append(k)
            elif isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
                continue
            else:
                changed.append((k, x, y))
        n = len(only_old) + len(only_new) + len(changed)
        total_diff += n
        print(f"{name:<20} exit {rc_old}->{rc_new}  paths {len(fa)} -> {len(fb)}  "
              f"(+{len(added_envelope)} envelope)  only-old {len(only_old)}  only-new {len(only_new)}  "
              f"changed {len(changed)}  null->string {len(convention)}")
        for k in only_old[:8]:
            print(f"    only old: {k} = {fa[k]!r}"[:160])
        for k in only_new[:8]:
            print(f"    only new: {k} = {fb[k]!r}"[:160])
        for k, x, y in changed[:8]:
            print(f"    changed:  {k}: {x!r} -> {y!r}"[:160])
        for k in convention[:3]:
            print(f"    null->{fb[k]}: {k}")
    print(f"total differences outside the documented schema change: {total_diff}")
    return 0 if total_diff == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
