#!/usr/bin/env python3
"""PyTorch scaled_dot_product_attention under numprobe.

    numprobe attention --backend exec:'python3 examples/exec/torch_sdpa.py {in}' --dtype bf16
    numprobe drift --backend exec-worker:'python3 examples/exec/worker.py torch_sdpa' --dtype bf16

Runs on CUDA when available (NUMPROBE_TORCH_DEVICE overrides), in the case's dtype (bf16, f16,
f32, f64: the inputs are exactly representable, so the cast is exact). Writes o.npy as float32
(exact for bf16/f16/f32 outputs). SDPA returns no LSE, so no lse.npy is written.

Masks: SDPA's is_causal=True is TOP-LEFT aligned (key j visible to query i iff j <= i), which
is wrong whenever T != S. numprobe's causal mask is bottom-right (query t sits at absolute
position S - T + t), so this adapter never uses is_causal: it passes an explicit boolean mask
built from the case (numprobe_exec.visible_keys). Fully masked rows (possible with T > S) come
out of SDPA as NaN; numprobe defines them as O = 0, so they are zeroed here, and only there.
Softcap is not an SDPA feature: such cases are refused (ERR), not silently computed without it.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numprobe_exec  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32, "f64": torch.float64}
DEVICE = os.environ.get("NUMPROBE_TORCH_DEVICE", "cuda" if torch.cuda.is_available() else "cpu")


def compute(case, q, k, v):
    if case["dtype"] not in DTYPES:
        raise ValueError("torch_sdpa: dtype %s has no SDPA path" % case["dtype"])
    if case["softcap"] > 0:
        raise ValueError("torch_sdpa: SDPA has no softcap")
    dt = DTYPES[case["dtype"]]
    B, T, S = case["batch"], case["queries"], case["seq"]
    Hq, Hkv, D = case["heads"], case["kv_heads"], case["head_dim"]
    group = Hq // Hkv

    def to_torch(a, rows, heads):
        # [B*rows, H, D] -> [B, H, rows, D]; the float32 values are exact in dt.
        t = torch.from_numpy(np.ascontiguousarray(a)).to(DEVICE).to(dt)
        return t.reshape(B, rows, heads, D).transpose(1, 2)

    qt = to_torch(q, T, Hq)
    kt = to_torch(k, S, Hkv).repeat_interleave(group, dim=1)  # head h reads KV head h // group
    vt = to_torch(v, S, Hkv).repeat_interleave(group, dim=1)
    visible = numprobe_exec.visible_keys(case)  # [T, S], bottom-right aligned
    mask = torch.from_numpy(visible).to(DEVICE)
    with torch.no_grad():
        o = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, is_causal=False,
                                           scale=float(case["scale"]))
    o = o.transpose(1, 2).reshape(B * T, Hq, D).float()
    empty = torch.from_numpy(~visible.any(axis=1)).to(DEVICE)
    if bool(empty.any()):
        o.view(B, T, Hq, D)[:, empty] = 0.0
    if DEVICE.startswith("cuda"):
        torch.cuda.synchronize()
    return o.cpu().numpy(), None


def main(argv):
    if len(argv) < 2:
        print("usage: torch_sdpa.py IN_DIR [OUT_DIR]", file=sys.stderr)
        return 2
    case, q, k, v = numprobe_exec.load_case(argv[1])
    o, lse = compute(case, q, k, v)
    numprobe_exec.save_output(argv[2] if len(argv) > 2 else argv[1], o, lse)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
