#!/usr/bin/env python3
"""Compare the outputs bench/mma_torch.py measured (cuBLASLt _scaled_mm, torch.matmul, Triton
tl.dot) with numprobe's named MMA models on the same catalogue vectors (issue 31;
docs/hardware.md, "The paths users run").

usage: mma_compare_models.py NUMPROBE VECTORS.json TORCH.json

VECTORS.json is `numprobe mma --emit-vectors`, TORCH.json the output of bench/mma_torch.py on it.
Each model runs the vectors through `numprobe mma --model NAME --run-vectors`; a count is the
number of vectors whose output is the same fp32 value (NaN equal to NaN).
"""
import json
import math
import os
import subprocess
import sys
import tempfile

MODELS = {  # input format -> models to compare with
    "e4m3fn": ["h200-wgmma-e4m3", "h200-mma-e4m3"],
    "e5m2": ["h200-wgmma-e5m2", "h200-mma-e5m2"],
    "f16": ["h200-wgmma-f16", "h200-mma-f16"],
    "bf16": ["h200-wgmma-bf16", "h200-mma-bf16"],
    "tf32": ["h200-wgmma-tf32", "h200-mma-tf32"],
}


def num(x):
    if isinstance(x, str):
        try:
            return float(x)
        except ValueError:
            return None  # "skipped (...)": the implementation could not run that vector
    return float(x)


def same(a, b):
    fa, fb = num(a), num(b)
    if fa is None or fb is None:
        return None
    return (math.isnan(fa) and math.isnan(fb)) or fa == fb


def main():
    numprobe, vectors_path, torch_path = sys.argv[1:4]
    vectors = json.load(open(vectors_path))
    torch = json.load(open(torch_path))
    with tempfile.TemporaryDirectory() as tmp:
        for path in vectors["paths"]:
            fmt = path["input"]
            measured = [p for p in torch["paths"] if p["path"] == path["path"]]
            if not measured:
                continue
            measured = measured[0]
            src = os.path.join(tmp, "v.json")
            json.dump({"paths": [path]}, open(src, "w"))
            for model in MODELS.get(fmt, []):
                out = os.path.join(tmp, "o.json")
                subprocess.run([numprobe, "mma", "--model", model, "--run-vectors", src, "--json", out], check=True)
                predicted = {v["id"]: v["measured"] for v in json.load(open(out))["paths"][0]["vectors"]}
                for impl, outs in measured["outputs"].items():
                    res = [(i, same(o, predicted[i])) for i, o in zip(measured["ids"], outs) if i in predicted]
                    ran = [r for r in res if r[1] is not None]
                    eq = sum(1 for r in ran if r[1])
                    diff = [i for i, r in ran if not r][:4]
                    print(f"{path['path']:28s} {impl:34s} vs {model:16s} {eq:4d}/{len(ran):<4d} equal"
                          + (f"; first different: {', '.join(diff)}" if diff else ""))


if __name__ == "__main__":
    main()
