#!/usr/bin/env python3
"""numprobe.audit on real GPU attention kernels (issue 27, "Measure"): PyTorch SDPA under each
of its fused backends, FlexAttention (compiled), a Triton flash-attention forward written here in the style of Triton's
fused-attention tutorial (its own BLOCK_M/BLOCK_N), healthy and with four planted bugs, and a
kernel that declares the cases it does not implement. Prints one row per kernel: the baseline,
the verdict of every class, the exit code and the seconds.

    python3 bench/real_kernel_audit.py [--seq 2048] [--json OUT.json]     # needs torch, triton, a GPU

Every kernel takes numprobe's case as it is (case.json's names, NUMERICS.md's semantics):
bottom-right causal and window masks, GQA head h -> KV head h // (Hq / Hkv), a fully masked
row O = 0 and LSE = -inf. What a kernel does not implement it refuses with NotImplementedError,
which numprobe records as unsupported (a verdict, not a crash).
"""
import argparse
import json
import math
import sys
import time

import numprobe
import torch
import triton
import triton.language as tl

DT = {"bf16": torch.bfloat16, "f16": torch.float16}
LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
SHORT = {"pass": "ok", "fail": "FAIL", "inconclusive": "inc", "not-applicable": "n/a"}


def shape(case):
    return (case["batch"], case["queries"], case["seq"], case["heads"], case["kv_heads"], case["head_dim"])


# ---------------------------------------------------------------------------------- SDPA
def sdpa(backend, causal_only=False):
    """F.scaled_dot_product_attention restricted to one fused backend. The fused backends take
    no explicit mask (flash, cuDNN) and is_causal is top-left, so they implement no mask and
    causal with T = S only; the rest is declared unsupported. `causal_only` also refuses the
    unmasked case (a kernel that implements one mask)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    be = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
          "cudnn": SDPBackend.CUDNN_ATTENTION}[backend]

    def kernel(q, k, v, case):
        b, t, s, hq, hkv, d = shape(case)
        if case["dtype"] not in DT:
            raise NotImplementedError(f"dtype {case['dtype']}")
        if case["softcap"]:
            raise NotImplementedError("softcap")
        mask = case["mask"]
        if causal_only and mask != "causal":
            raise NotImplementedError(f"mask {mask}: causal only")
        if mask not in ("none", "causal") or (mask == "causal" and t != s):
            raise NotImplementedError(f"mask {mask} with T={t}, S={s}: is_causal is top-left, no explicit mask")
        qq = q.reshape(b, t, hq, d).transpose(1, 2)
        kk = k.reshape(b, s, hkv, d).transpose(1, 2).repeat_interleave(hq // hkv, dim=1)
        vv = v.reshape(b, s, hkv, d).transpose(1, 2).repeat_interleave(hq // hkv, dim=1)
        try:
            with sdpa_kernel(be), torch.no_grad():
                o = torch.nn.functional.scaled_dot_product_attention(qq, kk, vv, is_causal=mask == "causal",
                                                                     scale=case["scale"])
        except RuntimeError as e:  # the backend has no kernel for this shape or dtype
            if "No available kernel" in str(e) or "not supported" in str(e).lower():
                raise NotImplementedError(f"{backend}: {str(e).splitlines()[0][:120]}") from None
            raise
        return o.transpose(1, 2).reshape(b * t, hq, d).float()

    kernel.__name__ = f"sdpa_{backend}" + ("_causal_only" if causal_only else "")
    return kernel


# ---------------------------------------------------------------------------------- FlexAttention
_FLEX = {}


def flex():
    """torch's FlexAttention (compiled once, dynamic shapes): every mask numprobe has, as a
    mask_mod over absolute positions (bottom-right: query t sits at S - T + t), softcap as a
    score_mod, GQA natively. Returns O only."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    if "fn" not in _FLEX:
        _FLEX["fn"] = torch.compile(flex_attention, dynamic=True)

    def kernel(q, k, v, case):
        b, t, s, hq, hkv, d = shape(case)
        if case["dtype"] not in DT:
            raise NotImplementedError(f"dtype {case['dtype']}")
        mask, off, w = case["mask"], s - t, int(case["window"])
        if mask == "causal-top-left":
            off = 0
        if mask in ("causal", "causal-top-left"):
            def mask_mod(bb, hh, qi, kv):
                return kv <= qi + off
        elif mask == "window":
            def mask_mod(bb, hh, qi, kv):
                return (kv <= qi + off) & (kv > qi + off - w)
        elif mask == "none":
            mask_mod = None
        else:
            raise NotImplementedError(f"mask {mask}")
        cap = float(case["softcap"])
        score_mod = None
        if cap:
            def score_mod(score, bb, hh, qi, kv):
                return cap * torch.tanh(score / cap)
        bm = None if mask_mod is None else create_block_mask(mask_mod, b, None, t, s, device=q.device)
        qq = q.reshape(b, t, hq, d).transpose(1, 2)
        kk = k.reshape(b, s, hkv, d).transpose(1, 2)
        vv = v.reshape(b, s, hkv, d).transpose(1, 2)
        with torch.no_grad():
            o = _FLEX["fn"](qq, kk, vv, score_mod=score_mod, block_mask=bm, scale=case["scale"],
                            enable_gqa=hq != hkv)
        return o.transpose(1, 2).reshape(b * t, hq, d).float()

    kernel.__name__ = "flex_attention"
    return kernel


# ---------------------------------------------------------------------------------- Triton
@triton.jit
def _fwd(Q, K, V, O, L, stride_qt, stride_qh, stride_ks, stride_kh, stride_ot, stride_oh, stride_lt,
         T, S, group, qk_scale, offset, window,
         MASK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr,
         BUG: tl.constexpr):
    # One program per (query block, head). MASK: 0 none, 1 causal (offset = S - T, bottom-right),
    # 2 window. BUG: 0 healthy, 1 skip the rescale, 2 running sum in bf16, 3 drop the tail tile,
    # 4 causal top-left (the caller passes offset 0), 5 P cast to fp8 e5m2 without a scale before
    # P.V (issue 27 item 2: wrong everywhere, and still to be named "fp8 scaling").
    pid_m = tl.program_id(0)
    h = tl.program_id(1)
    kvh = h // group
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    q = tl.load(Q + offs_m[:, None] * stride_qt + h * stride_qh + offs_d[None, :], mask=offs_m[:, None] < T,
                other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    n_end = S
    if BUG == 3:
        n_end = (S // BLOCK_N) * BLOCK_N
    pos = offs_m + offset
    for start_n in range(0, n_end, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = tl.load(K + offs_n[None, :] * stride_ks + kvh * stride_kh + offs_d[:, None], mask=offs_n[None, :] < S,
                    other=0.0)
        s = tl.dot(q, k) * qk_scale
        valid = offs_n[None, :] < S
        if MASK == 1:
            valid = valid & (offs_n[None, :] <= pos[:, None])
        if MASK == 2:
            valid = valid & (offs_n[None, :] <= pos[:, None]) & (offs_n[None, :] > pos[:, None] - window)
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp2(s - m_safe[:, None])
        alpha = tl.exp2(m_i - m_safe)
        if BUG == 1:
            alpha = tl.where(m_i == float("-inf"), 0.0, 1.0)
        l_i = l_i * alpha + tl.sum(p, 1)
        if BUG == 2:
            l_i = l_i.to(tl.bfloat16).to(tl.float32)
        acc = acc * alpha[:, None]
        v = tl.load(V + offs_n[:, None] * stride_ks + kvh * stride_kh + offs_d[None, :], mask=offs_n[:, None] < S,
                    other=0.0)
        if BUG == 5:
            p = p.to(tl.float8e5).to(tl.float32)
        acc += tl.dot(p.to(v.dtype), v)
        m_i = m_new
    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    o = acc / l_safe[:, None]
    tl.store(O + offs_m[:, None] * stride_ot + h * stride_oh + offs_d[None, :], o.to(O.dtype.element_ty),
             mask=offs_m[:, None] < T)
    lse = tl.where(l_i == 0.0, float("-inf"), (m_i + tl.log2(l_safe)) * 0.6931471805599453)
    tl.store(L + offs_m * stride_lt + h, lse, mask=offs_m < T)


BUGS = {0: "healthy", 1: "skip-rescale", 2: "rowsum-bf16", 3: "drop-tail-tile", 4: "causal-top-left",
        5: "p-e5m2-unscaled"}


def triton_flash(bug=0, block_m=64, block_n=32):
    def kernel(q, k, v, case):
        b, t, s, hq, hkv, d = shape(case)
        if case["dtype"] not in DT:
            raise NotImplementedError(f"dtype {case['dtype']}")
        if case["softcap"]:
            raise NotImplementedError("softcap")
        if d not in (16, 32, 64, 128):
            raise NotImplementedError(f"head_dim {d}")
        mask = case["mask"]
        kinds = {"none": 0, "causal": 1, "causal-top-left": 1, "window": 2}
        if mask not in kinds:
            raise NotImplementedError(f"mask {mask}")
        offset = 0 if mask == "causal-top-left" or (bug == 4 and mask == "causal") else s - t
        o = torch.empty(b * t, hq, d, device=q.device, dtype=q.dtype)
        lse = torch.empty(b * t, hq, device=q.device, dtype=torch.float32)
        for i in range(b):
            qb, kb, vb = q[i * t:(i + 1) * t], k[i * s:(i + 1) * s], v[i * s:(i + 1) * s]
            ob, lb = o[i * t:(i + 1) * t], lse[i * t:(i + 1) * t]
            grid = (triton.cdiv(t, block_m), hq)
            _fwd[grid](qb, kb, vb, ob, lb, qb.stride(0), qb.stride(1), kb.stride(0), kb.stride(1), ob.stride(0),
                       ob.stride(1), lb.stride(0), t, s, hq // hkv, case["scale"] * LOG2E, offset,
                       max(int(case["window"]), 0), MASK=kinds[mask], BLOCK_M=block_m, BLOCK_N=block_n, D=d, BUG=bug)
        return o.float(), lse

    kernel.__name__ = f"triton_flash_{BUGS[bug]}"
    return kernel


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--json")
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    kernels = [sdpa("flash"), sdpa("efficient"), sdpa("cudnn"), sdpa("flash", causal_only=True), flex()]
    kernels += [triton_flash(bug) for bug in BUGS]
    if a.only:
        kernels = [k for k in kernels if a.only in k.__name__]
    rows, docs = [], {}
    for k in kernels:
        t0 = time.time()
        try:
            r = numprobe.audit(k, seq=a.seq, quick=True, kernel_inputs="torch", heads=4, kv_heads=2, head_dim=64,
                               dtype="bf16", mask="causal")
            doc = r.to_dict()
            code = r.exit_code
        except Exception as e:  # the harness itself failed: say so, go on
            rows.append((k.__name__, f"harness error: {e}", "", "", time.time() - t0))
            continue
        secs = time.time() - t0
        docs[k.__name__] = doc
        classes = " ".join(f"{c['name'].split()[0]}={SHORT.get(c['verdict'], c['verdict'])}" for c in doc["classes"])
        failing = ", ".join(doc.get("failing", []))
        rows.append((k.__name__, doc["baseline"]["verdict"], failing or "-", code, secs, classes,
                     len(doc.get("unsupported", []))))
        print(f"== {k.__name__}: exit {code}, baseline {doc['baseline']['verdict']}, failing [{failing}], "
              f"{secs:.1f} s", flush=True)
        print(r.text(), flush=True)
    print("\nkernel                        baseline  failing classes                         exit  seconds  refused")
    for row in rows:
        if len(row) == 5:
            print(f"{row[0]:<30}{row[1]}")
            continue
        name, base, failing, code, secs, classes, refused = row
        print(f"{name:<30}{base:<10}{failing:<40}{code:<6}{secs:<9.1f}{refused}")
    print("\nper class (ok pass, FAIL, inc inconclusive, n/a not-applicable):")
    for row in rows:
        if len(row) == 7:
            print(f"{row[0]:<30}{row[5]}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": [list(r) for r in rows], "docs": docs}, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
