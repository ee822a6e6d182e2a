#!/usr/bin/env python3
"""False alarms and detections of drift's growth verdict (issue 14 item 5).

Healthy side: `numprobe drift` on healthy kernels over many seeds, every input family and two
masks; counts `grows` verdicts (false alarms), `insufficient` verdicts and breaches of the
FlashAttention bound ratio_to_naive<=2. Detection side: every accumulation fault, each under
the input families that expose it; a fault is caught when the verdict is `grows` or the
ratio_to_naive<=2 bound fails (or NaN/Inf appears).

    python3 bench/growth_false_alarms.py --numprobe build/numprobe            # CPU backends
    python3 bench/growth_false_alarms.py --backends cuda --faults cuda        # on the GPU machine
    python3 bench/growth_false_alarms.py --backends emu --seeds 2 --quick     # smoke run

Backends (--backends, comma list):
  ref            the reference itself (error exactly 0)
  emu            the emulator, default 64x64 tile; emu-QxK for another tile (emu-96x48)
  numpy          examples/exec/numpy_reference.py through exec-worker (float64, f32 output)
  numpy-tiled    bench/growth_kernels/numpy_flash_tiled.py through exec-worker (flash-style,
                 key tile 96, P and O in bf16)
  cuda           the CUDA kernel (GPU machine)
Fault sets (--faults, comma list): emu (states and injected faults on the emulator), numpy
(numpy_flash_l_bf16.py), cuda (the GPU fault variants of the accumulation faults), none.
Prints a table; --out writes it (and --jsonl every sweep's numbers).
"""
import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DISTS = ["normal", "uniform", "llm", "rescale-stress", "max-first", "diffuse", "shifted", "constant-v"]
MASKS = ["causal", "none"]
WORKER = "python3 examples/exec/worker.py "


def backend_args(name, exec_points):
    """numprobe flags for a backend name, and whether it is an exec backend (slow per sweep)."""
    if name == "ref":
        return ["--backend", "ref"], False
    if name == "emu":
        return ["--backend", "emu"], False
    if name.startswith("emu-"):
        return ["--backend", "emu", "--tile", name[4:]], False
    if name == "cuda":
        return ["--backend", "cuda"], False
    if name == "numpy":
        return ["--backend", "exec-worker:" + WORKER + "numpy_reference", "--points", exec_points], True
    if name == "numpy-tiled":
        return ["--backend", "exec-worker:" + WORKER + "bench/growth_kernels/numpy_flash_tiled.py",
                "--points", exec_points], True
    raise SystemExit(f"unknown backend '{name}' (ref, emu, emu-QxK, numpy, numpy-tiled, cuda)")


# Accumulation faults and the families that expose them (NUMERICS.md, "Real bug classes"):
# low-precision running sums under diffuse rows; a broken rescale under rising maxima.
EMU_FAULTS = [
    ("l=bf16", ["--state", "l=bf16"], ["diffuse", "normal", "rescale-stress"]),
    ("l=f16", ["--state", "l=f16"], ["diffuse", "normal", "rescale-stress"]),
    ("o=bf16", ["--state", "o=bf16"], ["diffuse", "normal", "rescale-stress"]),
    ("rowsum-bf16", ["--inject", "rowsum-bf16"], ["diffuse", "normal", "rescale-stress"]),
    ("acc-bf16", ["--inject", "acc-bf16"], ["diffuse", "normal", "rescale-stress"]),
    ("skip-rescale", ["--inject", "skip-rescale"], ["rescale-stress", "normal", "diffuse"]),
    ("stale-max", ["--inject", "stale-max"], ["rescale-stress", "normal", "diffuse"]),
]
CUDA_FAULTS = [(n, ["--backend", "cuda"] + a, d) for n, a, d in EMU_FAULTS if a[0] == "--inject"]
NUMPY_FAULTS = [("numpy l=bf16 per tile",
                 ["--backend", "exec-worker:" + WORKER + "bench/growth_kernels/numpy_flash_l_bf16.py"],
                 ["diffuse", "normal", "rescale-stress"])]


def run_sweep(numprobe, args, common):
    cmd = [numprobe, "drift"] + common + args + ["--bound", "ratio_to_naive<=2", "--json", "-"]
    t0 = time.time()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    out = {"cmd": " ".join(cmd[1:]), "rc": p.returncode, "seconds": round(time.time() - t0, 2)}
    try:
        j = json.loads(p.stdout)
    except json.JSONDecodeError:
        out["error"] = (p.stderr.strip().splitlines() or ["no output"])[-1]
        return out
    g = j["growth"]
    out.update(verdict=g["verdict"], slope=g["slope"], slope_stderr=g["slope_stderr"],
               ratio_slope=g.get("ratio_slope"), ratio_slope_stderr=g.get("ratio_slope_stderr"),
               ratio_at_max=g.get("ratio_at_max"), points=g["points"], nan_points=j["nan_points"],
               bound_fail=any(b["seq"] > 0 for b in j["breaches"]))
    return out


def fmt_max(values):
    v = [x for x in values if isinstance(x, (int, float))]
    return f"{max(v):.3f}" if v else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--numprobe", default=os.path.join(ROOT, "build", "numprobe"))
    ap.add_argument("--backends", default="ref,emu,emu-128x128,emu-16x16,emu-96x48,numpy,numpy-tiled")
    ap.add_argument("--faults", default="emu,numpy", help="emu, numpy, cuda or none (comma list)")
    ap.add_argument("--seeds", type=int, default=13, help="seeds per family and mask (emu, cuda)")
    ap.add_argument("--other-seeds", type=int, default=2, help="seeds per family and mask for ref and emu-QxK")
    ap.add_argument("--exec-seeds", type=int, default=1, help="seeds per family and mask, exec backends")
    ap.add_argument("--fault-seeds", type=int, default=2)
    ap.add_argument("--seq", default="128..4096")
    ap.add_argument("--head-dim", type=int, default=64, help="128 for the CUDA fault variants (compiled for D=128)")
    ap.add_argument("--exec-points", default="log:10")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="normal and diffuse only, causal only")
    ap.add_argument("--out", help="write the table to this file")
    ap.add_argument("--jsonl", help="write every sweep's numbers to this file, one line each as it ends")
    ap.add_argument("--resume", action="store_true", help="with --jsonl: reuse the sweeps already in it")
    ap.add_argument("--table-only", action="store_true",
                    help="with --jsonl: print the table of the sweeps already in it, run nothing")
    a = ap.parse_args()
    if not os.path.exists(a.numprobe):
        sys.exit(f"--numprobe: {a.numprobe} does not exist (build it, or pass the path)")
    dists = ["normal", "diffuse"] if a.quick else DISTS
    masks = ["causal"] if a.quick else MASKS
    common = ["--seq", a.seq, "--heads", "2", "--kv-heads", "1", "--head-dim", str(a.head_dim), "--no-e2e"]

    jobs = []  # (side, label, args)
    for b in [x for x in a.backends.split(",") if x]:
        args, is_exec = backend_args(b, a.exec_points)
        seeds = a.exec_seeds if is_exec else (a.seeds if b in ("emu", "cuda") else a.other_seeds)
        for d in dists:
            for m in masks:
                for s in range(1, seeds + 1):
                    jobs.append(("healthy", b, args + ["--dist", d, "--mask", m, "--seed", str(s)], d))
    fault_sets = {"emu": EMU_FAULTS, "cuda": CUDA_FAULTS, "numpy": NUMPY_FAULTS, "none": []}
    for fs in [x for x in a.faults.split(",") if x]:
        if fs not in fault_sets:
            sys.exit(f"--faults: unknown set '{fs}' (emu, numpy, cuda, none)")
        for name, args, fdists in fault_sets[fs]:
            extra = ["--points", a.exec_points] if fs == "numpy" else []
            for d in fdists:
                for s in range(1, a.fault_seeds + 1):
                    jobs.append(("fault", name, args + extra + ["--dist", d, "--mask", "causal", "--seed", str(s)], d))

    # Cheap sweeps first (healthy ref and emu, then the emulator's faults, other tiles, exec
    # kernels), so a run cut short and resumed has every side represented.
    def cost(j):
        if j[1] in ("ref", "emu"):
            return 0
        if "exec-worker" in " ".join(j[2]):
            return 3
        return 1 if j[0] == "fault" else 2
    jobs.sort(key=cost)
    # --jsonl streams every sweep as it ends; --resume takes the sweeps already there.
    done = {}
    if a.table_only:
        a.resume = True
    if a.resume and a.jsonl and os.path.exists(a.jsonl):
        with open(a.jsonl) as f:
            for line in f:
                r = json.loads(line)
                done[r["cmd"]] = r
    sink = None if a.table_only else open(a.jsonl, "a" if a.resume else "w") if a.jsonl else None

    def one(j):
        key = " ".join(["drift"] + common + j[2] + ["--bound", "ratio_to_naive<=2", "--json", "-"])
        if key in done:
            return j, done[key]
        if a.table_only:
            return j, None
        r = run_sweep(a.numprobe, j[2], common)
        if sink:
            sink.write(json.dumps({"side": j[0], "kernel": j[1], "family": j[3], **r}) + "\n")
            sink.flush()
        return j, r

    t0 = time.time()
    with ThreadPoolExecutor(a.jobs) as ex:
        results = list(ex.map(one, jobs))
    wall = time.time() - t0
    not_run = sum(r is None for _, r in results)
    results = [(j, r) for j, r in results if r is not None]
    if a.table_only:
        wall = sum(r["seconds"] for _, r in results) / max(1, a.jobs)
    if sink:
        sink.close()

    lines = [f"growth verdict false alarms and detections: seq {a.seq}, Hq=2 Hkv=1 D={a.head_dim}, bf16, "
             f"bound ratio_to_naive<=2, {len(results)} sweeps in {wall:.0f} s; rule: growth.rule in the drift JSON",
             ""]
    lines.append(f"{'healthy backend':<16} {'sweeps':>6} {'seeds':>5} {'families':>8} {'masks':>5} {'grows':>5} "
                 f"{'insuff':>6} {'bound':>5} {'errors':>6} {'max slope':>9} {'max ratio slope':>15}")
    total_h = total_grows = 0
    for b in [x for x in a.backends.split(",") if x]:
        rs = [r for j, r in results if j[0] == "healthy" and j[1] == b]
        ok = [r for r in rs if "error" not in r]
        seeds = {j[2][j[2].index("--seed") + 1] for j, _ in results if j[0] == "healthy" and j[1] == b}
        grows = sum(r["verdict"] == "grows" for r in ok)
        total_h += len(ok)
        total_grows += grows
        lines.append(f"{b:<16} {len(rs):>6} {len(seeds):>5} {len(dists):>8} {len(masks):>5} {grows:>5} "
                     f"{sum(r['verdict'] == 'insufficient' for r in ok):>6} {sum(r['bound_fail'] for r in ok):>5} "
                     f"{len(rs) - len(ok):>6} {fmt_max(r['slope'] for r in ok):>9} "
                     f"{fmt_max(r['ratio_slope'] for r in ok):>15}")
    lines.append(f"{'all healthy':<16} {total_h:>6} {'':>5} {'':>8} {'':>5} {total_grows:>5}")
    fault_rows = [j for j, _ in results if j[0] == "fault"]
    if fault_rows:
        lines += ["", f"{'fault':<22} {'family':<15} {'sweeps':>6} {'grows':>5} {'bound':>5} {'nan':>4} "
                      f"{'caught':>6} {'min ratio slope':>15}"]
        seen = []
        for j in fault_rows:
            if (j[1], j[3]) not in seen:
                seen.append((j[1], j[3]))
        caught_all = total_f = 0
        for name, d in seen:
            rs = [r for j, r in results if j[0] == "fault" and j[1] == name and j[3] == d and "error" not in r]
            caught = sum(r["verdict"] == "grows" or r["bound_fail"] or r["nan_points"] > 0 for r in rs)
            caught_all += caught
            total_f += len(rs)
            ratio = [r["ratio_slope"] for r in rs if isinstance(r["ratio_slope"], (int, float))]
            lines.append(f"{name:<22} {d:<15} {len(rs):>6} {sum(r['verdict'] == 'grows' for r in rs):>5} "
                         f"{sum(r['bound_fail'] for r in rs):>5} {sum(r['nan_points'] > 0 for r in rs):>4} "
                         f"{caught:>6} {min(ratio) if ratio else float('nan'):>15.3f}")
        lines.append(f"{'all faults':<22} {'':<15} {total_f:>6} {'':>5} {'':>5} {'':>4} {caught_all:>6}")
        names = list(dict.fromkeys(n for n, _ in seen))
        caught_somewhere = [n for n in names if any(
            r["verdict"] == "grows" or r["bound_fail"] or r["nan_points"] > 0
            for j, r in results if j[0] == "fault" and j[1] == n and "error" not in r)]
        lines.append(f"faults caught under at least one family: {len(caught_somewhere)} of {len(names)}"
                     + (f" (missed: {', '.join(n for n in names if n not in caught_somewhere)})"
                        if len(caught_somewhere) < len(names) else ""))
    if not_run:
        lines.append(f"({not_run} planned sweeps not run: not in {a.jsonl})")
    errors = [(j, r) for j, r in results if "error" in r]
    for j, r in errors[:10]:
        lines.append(f"ERROR {j[1]} {' '.join(j[2][-6:])}: {r['error']}")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    return 1 if total_grows or errors else 0


if __name__ == "__main__":
    sys.exit(main())
