#!/usr/bin/env python3
"""The catalogue of `numprobe mma` through PyTorch and Triton (issue 31; docs/hardware.md).

    numprobe mma --emit-vectors vectors.json
    python3 bench/mma_torch.py vectors.json [--out results.json] [--device cuda:0]

For every path of the vectors file and every vector (a, b of length k, c), computes the dot
product sum_k a_k b_k + c through:
  - torch._scaled_mm (fp8 paths: e4m3 x e4m3, e5m2 x e4m3 where e5m2 x e5m2 is refused), with
    use_fast_accum=True and False; scales 1.0, fp32 output; c added by the bias argument is not
    used (the GEMM has no C input), so vectors with c != 0 are reported as "skipped (c)";
  - torch.matmul in the input dtype (f16, bf16; tf32 with allow_tf32) with fp32 output where the
    dtype allows, else the output cast (recorded);
  - triton tl.dot with an fp32 accumulator initialised to c (when triton is importable).
Each vector is padded to a 16 x 16 (or 16 x 32) tile: row 0 of A holds a, column 0 of B holds b,
everything else zero, so element (0, 0) is the designed dot product.

The result JSON holds, per path and implementation, the outputs in the vectors' order ("nan",
"inf", "-inf" for non-finite). Comparison with a model: feed these outputs to the classifier
(planned: `numprobe mma --measured FILE`, not written yet). Standard library + torch (+ triton).
"""
import argparse
import json
import math
import sys


def decode(x):
    if isinstance(x, str):
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[x]
    return float(x)


def encode(x):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


DTYPES = {"f16": "float16", "bf16": "bfloat16", "tf32": "float32", "e4m3fn": "float8_e4m3fn", "e5m2": "float8_e5m2"}


def tiles(torch, vectors, k, dtype, device):
    n = len(vectors)
    kk = max(k, 16)
    a = torch.zeros((n, 16, kk), dtype=torch.float32)
    b = torch.zeros((n, kk, 16), dtype=torch.float32)
    c = torch.zeros((n,), dtype=torch.float32)
    for i, v in enumerate(vectors):
        a[i, 0, :k] = torch.tensor([decode(x) for x in v["a"]])
        b[i, :k, 0] = torch.tensor([decode(x) for x in v["b"]])
        c[i] = decode(v["c"])
    return a.to(device=device).to(dtype), b.to(device=device).to(dtype), c


def run_scaled_mm(torch, vectors, k, dtype, device, fast):
    a, b, c = tiles(torch, vectors, k, dtype, device)
    one = torch.tensor(1.0, device=device)
    out = []
    for i in range(len(vectors)):
        if c[i].item() != 0.0:
            out.append("skipped (c)")
            continue
        # _scaled_mm wants B column-major: a (16 x K) row-major, b.t().contiguous().t().
        bi = b[i].t().contiguous().t()
        try:
            d = torch._scaled_mm(a[i], bi, scale_a=one, scale_b=one, out_dtype=torch.float32, use_fast_accum=fast)
            out.append(encode(float(d[0, 0].item())))
        except Exception as e:  # noqa: BLE001 - the refusal text is the finding
            out.append(f"refused: {str(e).splitlines()[0][:120]}")
    return out


def run_matmul(torch, vectors, k, dtype, device):
    a, b, c = tiles(torch, vectors, k, dtype, device)
    out = []
    for i in range(len(vectors)):
        d = torch.matmul(a[i], b[i]).float()[0, 0].item() + c[i].item()  # c added in double: recorded
        out.append(encode(float(d)))
    return out


def run_triton(torch, vectors, k, dtype, device):
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def dot_kernel(a_ptr, b_ptr, c_ptr, d_ptr, K: tl.constexpr):
        pid = tl.program_id(0)
        rm = tl.arange(0, 16)
        rk = tl.arange(0, K)
        a = tl.load(a_ptr + pid * 16 * K + rm[:, None] * K + rk[None, :])
        b = tl.load(b_ptr + pid * K * 16 + rk[:, None] * 16 + rm[None, :])
        acc = tl.zeros((16, 16), dtype=tl.float32) + tl.load(c_ptr + pid)
        acc = tl.dot(a, b, acc)
        tl.store(d_ptr + pid * 256 + rm[:, None] * 16 + rm[None, :], acc)

    a, b, c = tiles(torch, vectors, k, dtype, device)
    kk = a.shape[2]
    d = torch.empty((len(vectors), 16, 16), dtype=torch.float32, device=device)
    dot_kernel[(len(vectors),)](a.contiguous(), b.contiguous(), c.to(device), d, K=kk)
    return [encode(float(x)) for x in d[:, 0, 0].cpu().tolist()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("vectors")
    ap.add_argument("--out")
    ap.add_argument("--device", default="cuda:0")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("mma_torch: needs torch", file=sys.stderr)
        return 3
    with open(args.vectors) as f:
        doc = json.load(f)
    if not torch.cuda.is_available():
        print("mma_torch: needs a CUDA device", file=sys.stderr)
        return 3
    results = {"device": torch.cuda.get_device_name(args.device), "torch": torch.__version__, "paths": []}
    seen = set()
    for p in doc["paths"]:
        # torch and Triton here accumulate in fp32: fp16 and s32 accumulator paths are not theirs.
        # The fp32 catalogue depends on the input format and k alone: the mma.sync and wgmma
        # paths carry the same vectors, and torch and Triton run them once.
        if p.get("accumulator", "f32") != "f32":
            continue
        if (p["input"], p["k"]) in seen:
            continue
        seen.add((p["input"], p["k"]))
        dtype = getattr(torch, DTYPES[p["input"]])
        if p["input"] == "tf32":
            torch.backends.cuda.matmul.allow_tf32 = True
        entry = {"path": p["path"], "ids": [v["id"] for v in p["vectors"]], "outputs": {}}
        if p["input"] in ("e4m3fn", "e5m2"):
            for fast in (True, False):
                entry["outputs"][f"_scaled_mm(use_fast_accum={fast})"] = run_scaled_mm(
                    torch, p["vectors"], p["k"], dtype, args.device, fast)
        else:
            entry["outputs"]["matmul"] = run_matmul(torch, p["vectors"], p["k"], dtype, args.device)
        tri = run_triton(torch, p["vectors"], p["k"], dtype, args.device)
        if tri is not None:
            entry["outputs"]["triton tl.dot"] = tri
        results["paths"].append(entry)
        for impl, outs in entry["outputs"].items():
            print(f"{p['path']:<32} {impl:<34} {len(outs)} outputs")
    text = json.dumps(results, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
