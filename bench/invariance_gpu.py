"""Issue 30's measurement on the GPU machine: `numprobe.invariance` on PyTorch's attention
kernels (SDPA's flash, efficient, cuDNN and math backends, and FlexAttention), bf16, through the
Python API (each side a call of the kernel on torch tensors of the case dtype on the device).
Our own CUDA kernels run through the CLI (`numprobe invariance --backend cuda`), default and
with a fixed split size; their JSON is read from --cli-json files.

    python3 bench/invariance_gpu.py --seq 1000 --json out.json [--cli-json cuda.json ...]

Prints one Markdown table: a row per kernel, per check its verdict, max ulp (bf16) and first
differing position. Mask none (so the decode and chunk checks compare the same keys whatever
T is, with no mask alignment question between the backends); Hq = Hkv = 8 heads, D = 128.
"""
import argparse
import json
import sys
import time

import numprobe

CHECKS = ("repeat", "batch", "decode", "chunk", "splits")


def sdpa_kernel(backend_name):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel as use_backend
    backend = getattr(SDPBackend, backend_name)

    def kernel(q, k, v, case):
        B, T, S = case["batch"], case["queries"], case["seq"]
        Hq, Hkv, D = case["heads"], case["kv_heads"], case["head_dim"]
        if case["mask"] != "none":
            raise numprobe.Unsupported("this harness runs mask none only")
        qt = q.reshape(B, T, Hq, D).transpose(1, 2)
        kt = k.reshape(B, S, Hkv, D).transpose(1, 2)
        vt = v.reshape(B, S, Hkv, D).transpose(1, 2)
        if Hq != Hkv:
            kt = kt.repeat_interleave(Hq // Hkv, dim=1)
            vt = vt.repeat_interleave(Hq // Hkv, dim=1)
        with use_backend([backend]):
            o = torch.nn.functional.scaled_dot_product_attention(qt.contiguous(), kt.contiguous(), vt.contiguous(),
                                                                 scale=case["scale"])
        return o.transpose(1, 2).reshape(B * T, Hq, D).float().cpu().numpy()

    kernel.__qualname__ = f"sdpa_{backend_name.lower()}"
    return kernel


def flex_kernel():
    import torch
    from torch.nn.attention.flex_attention import flex_attention
    # Every check calls it at new shapes (batch sizes, T = 1, T = C): without a higher limit,
    # dynamo stops recompiling after 8 shapes and the rest run the unfused eager implementation.
    torch._dynamo.config.recompile_limit = 256
    compiled = torch.compile(flex_attention, dynamic=False)

    def kernel(q, k, v, case):
        B, T, S = case["batch"], case["queries"], case["seq"]
        Hq, Hkv, D = case["heads"], case["kv_heads"], case["head_dim"]
        if case["mask"] != "none":
            raise numprobe.Unsupported("this harness runs mask none only")
        qt = q.reshape(B, T, Hq, D).transpose(1, 2).contiguous()
        kt = k.reshape(B, S, Hkv, D).transpose(1, 2).contiguous()
        vt = v.reshape(B, S, Hkv, D).transpose(1, 2).contiguous()
        o = compiled(qt, kt, vt, scale=case["scale"], enable_gqa=Hq != Hkv)
        return o.transpose(1, 2).reshape(B * T, Hq, D).float().cpu().numpy()

    kernel.__qualname__ = "flex_attention"
    return kernel


def first_text(c):
    f = c.get("first")
    if not f:
        return "-"
    return f"row {f['row']} h{f['head']} d{f['dim']}"


def cell(c):
    if c is None:
        return "-"
    v = c["verdict"]
    if v in ("invariant", "not-applicable"):
        return v
    ulp = c["max_ulp"]
    return f"{v}: {c['differing']}/{c['compared']}, max {ulp:g} ulp, first {first_text(c)}"


def row(name, inv):
    by = {c["name"]: c for c in inv}
    return f"| {name} | " + " | ".join(cell(by.get(n)) for n in CHECKS) + " |"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, default=1000)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--batch-sizes", default="1,2,3,8,33,64")
    ap.add_argument("--kernels", default="FLASH_ATTENTION,EFFICIENT_ATTENTION,CUDNN_ATTENTION,MATH,flex")
    ap.add_argument("--json", help="write every result document here")
    ap.add_argument("--cli-json", nargs="*", default=[], help="NAME=FILE: `numprobe invariance --json` documents")
    a = ap.parse_args()
    sizes = [int(x) for x in a.batch_sizes.split(",")]
    rows, docs = [], {}
    for name in a.kernels.split(","):
        kernel = flex_kernel() if name == "flex" else sdpa_kernel(name)
        t0 = time.time()
        try:
            r = numprobe.invariance(kernel, checks=["repeat", "batch", "decode", "chunk"], batch_sizes=sizes,
                                    seq=a.seq, heads=a.heads, kv_heads=a.heads, head_dim=a.head_dim, dtype="bf16",
                                    mask="none", kernel_inputs="torch", device="cuda")
        except Exception as e:  # a backend the device or build lacks: say so, go on
            print(f"{name}: {type(e).__name__}: {e}", file=sys.stderr)
            rows.append(f"| {name} | " + " | ".join(["error"] * len(CHECKS)) + " |")
            continue
        doc = r.to_dict()
        docs[name] = doc
        inv = doc["invariance"]
        rows.append(row(kernel.__qualname__, inv))
        print(f"{rows[-1]}  (exit {r.exit_code}, {time.time() - t0:.1f} s)", flush=True)
        if a.json:  # after every kernel: a timeout keeps what ran
            with open(a.json, "w", encoding="utf-8") as f:
                json.dump(docs, f, indent=1)
    for item in a.cli_json:
        name, _, path = item.partition("=")
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            print(f"{name}: {path}: {e}", file=sys.stderr)
            continue
        docs[name] = doc
        rows.append(row(name, doc["invariance"]))
    print(f"bf16, mask none, Hq = Hkv = {a.heads}, D = {a.head_dim}, S = {a.seq}, batch sizes {a.batch_sizes}")
    print("| kernel | " + " | ".join(CHECKS) + " |")
    print("|---" * (len(CHECKS) + 1) + "|")
    print("\n".join(rows))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(docs, f, indent=1)


if __name__ == "__main__":
    main()
