#!/usr/bin/env python3
"""Detection table of issue 14: every emulator fault and every zoo kernel under the defaults of
`drift` (its growth verdict and breaches), `bisect` (its classification) and `audit` (its failing
classes), with the seconds each took. The expected class is the one the fault or kernel plants
(NUMERICS.md's table), fixed here before anything runs.

    python3 bench/audit_detection.py [--numprobe build/numprobe] [--only emu|zoo] [--quick]

Each row: planted class, drift verdict (growth verdict, breaching points, exit), bisect
classification, audit failing classes, and whether audit named the planted class alone. Also the
audit budget: seconds of a full and a --quick audit of the healthy zoo kernel through
exec-worker and through exec (one process per case) at D=64, Hq=8, Hkv=2 (budget 90 s).
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASE = ["--heads", "8", "--kv-heads", "2", "--head-dim", "64"]

EMU = [  # name, backend flags, planted class
    ("emu healthy", ["--backend", "emu"], ""),
    ("skip-rescale", ["--backend", "emu", "--inject", "skip-rescale"], "rescale or merge frame"),
    ("stale-max", ["--backend", "emu", "--inject", "stale-max"], "rescale or merge frame"),
    ("rowsum-bf16", ["--backend", "emu", "--inject", "rowsum-bf16"], "low-precision accumulation"),
    ("acc-bf16", ["--backend", "emu", "--inject", "acc-bf16"], "low-precision accumulation"),
    ("mask-top-left", ["--backend", "emu", "--inject", "mask-top-left"], "mask geometry"),
    ("no-empty-guard", ["--backend", "emu", "--inject", "no-empty-guard"], "empty or masked split"),
    ("drop-tail-tile", ["--backend", "emu", "--inject", "drop-tail-tile"], "paged or tail tile"),
    ("drop-tail-tile 64x96 opaque", ["--backend", "emu:opaque", "--tile", "64x96", "--inject", "drop-tail-tile"],
     "paged or tail tile"),
    ("finite-sentinel", ["--backend", "emu", "--inject", "finite-sentinel"], "finite sentinel"),
    ("gqa-mod", ["--backend", "emu", "--inject", "gqa-mod"], "GQA mapping"),
    ("index-wrap", ["--backend", "emu", "--inject", "index-wrap"], "index or dispatch threshold"),
    ("wave-width", ["--backend", "emu", "--inject", "wave-width"], "wavefront width"),
    ("p e4m3 (no pre-scale)", ["--backend", "emu", "--p-format", "e4m3fn"], "fp8 scaling"),
    ("kv-scale-ignored", ["--backend", "emu", "--kv-format", "e4m3fn", "--inject", "kv-scale-ignored"], "fp8 scaling"),
    ("decode merge-nan-empty", ["--backend", "emu", "--decode", "--queries", "4", "--inject", "merge-nan-empty"],
     "empty or masked split"),
    ("decode empty-split-nan", ["--backend", "emu", "--decode", "--queries", "4", "--inject", "empty-split-nan"],
     "empty or masked split"),
    ("decode lse-base2-merge", ["--backend", "emu", "--decode", "--queries", "4", "--inject", "lse-base2-merge"],
     "rescale or merge frame"),
    ("decode split-tail-drop", ["--backend", "emu", "--decode", "--queries", "4", "--inject", "split-tail-drop"],
     "paged or tail tile"),
]

ZOO = [("healthy", ""), ("no_empty_guard", "empty or masked split"), ("split_nan", "empty or masked split"),
       ("finite_sentinel", "finite sentinel"), ("skip_rescale", "rescale or merge frame"),
       ("rowsum_bf16", "low-precision accumulation"), ("index_wrap", "index or dispatch threshold"),
       ("mask_top_left", "mask geometry"), ("tail_tile", "paged or tail tile"), ("gqa_mod", "GQA mapping"),
       ("p_fp8", "fp8 scaling"), ("wave_width", "wavefront width")]


def zoo_backend(kernel, worker=True):
    path = os.path.join(ROOT, "examples", "exec", "zoo", kernel + ".py")
    if worker:
        return ["--backend", f"exec-worker:python3 {os.path.join(ROOT, 'examples', 'exec', 'worker.py')} {path}"]
    return ["--backend", f"exec:python3 {path} {{in}}"]


def run(numprobe, cmd, args):
    t0 = time.monotonic()
    p = subprocess.run([numprobe, cmd] + args + ["--json", "-"], capture_output=True, text=True, cwd=ROOT)
    dt = time.monotonic() - t0
    try:
        return p.returncode, json.loads(p.stdout), dt
    except json.JSONDecodeError:
        return p.returncode, None, dt


def row(numprobe, name, flags, planted, quick):
    drift_args = flags + CASE + ["--seq", "128..4096"]
    if "--decode" not in flags:
        drift_args += ["--mask", "causal"]
    rc_d, d, t_d = run(numprobe, "drift", drift_args)
    drift = "error" if d is None else f"{d['growth']['verdict']}, {len(d['breaches'])} breach, rc {rc_d}"
    rc_b, b, t_b = run(numprobe, "bisect", flags + CASE + ["--seq", "4096"])
    bisect = "error" if b is None else b["classification"]
    rc_a, a, t_a = run(numprobe, "audit", flags + CASE + (["--quick"] if quick else []))
    failing = [] if a is None else a["failing"]
    ok = (failing == [planted]) if planted else (a is not None and not failing and rc_a == 0)
    return [name, planted or "(healthy)", drift, f"{t_d:.1f}", bisect, f"{t_b:.1f}",
            ", ".join(failing) or "none", f"{t_a:.1f}", "yes" if ok else "NO"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--numprobe", default=os.path.join(ROOT, "build", "numprobe"))
    ap.add_argument("--only", choices=["emu", "zoo", "budget"])
    ap.add_argument("--quick", action="store_true", help="audit --quick in the table")
    a = ap.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    head = ["kernel", "planted class", "drift default", "s", "bisect classification", "s", "audit failing", "s",
            "named alone"]
    rows = []
    if a.only in (None, "emu"):
        rows += [row(a.numprobe, n, f, c, a.quick) for n, f, c in EMU]
    if a.only in (None, "zoo"):
        rows += [row(a.numprobe, "zoo " + k, zoo_backend(k), c, a.quick) for k, c in ZOO]
    if rows:
        w = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
        for r in [head] + rows:
            print("  ".join(str(x).ljust(w[i]) for i, x in enumerate(r)))
        named = sum(r[-1] == "yes" for r in rows)
        print(f"\n{named} of {len(rows)} rows: audit names the planted class alone (healthy: no class fails)")
    if a.only in (None, "budget"):
        print("\naudit budget (healthy zoo kernel, D=64, Hq=8, Hkv=2; budget 90 s on 2 cores):")
        for label, backend, extra in (("exec-worker, full", zoo_backend("healthy"), []),
                                      ("exec-worker, --quick", zoo_backend("healthy"), ["--quick"]),
                                      ("exec (a process per case), full", zoo_backend("healthy", False), []),
                                      ("exec (a process per case), --quick", zoo_backend("healthy", False), ["--quick"])):
            rc, j, dt = run(a.numprobe, "audit", backend + CASE + extra)
            cases = len(j["trace"]) if j else 0
            print(f"  {label:<36} {dt:6.1f} s  {cases} cases  rc {rc}  ratio to budget {dt / 90:.2f}")


if __name__ == "__main__":
    sys.exit(main())
