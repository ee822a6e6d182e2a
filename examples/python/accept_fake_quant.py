#!/usr/bin/env python3
"""fp4 migration acceptance, end to end: fake-quantize a causal LM's linear weights with numprobe,
run the original and the quantized model on the same text, and judge the difference by KL.

    python examples/python/accept_fake_quant.py [--model DIR] [--schemes nvfp4,mxfp4]
        [--preset modelopt,torchao] [--text FILE] [--seq 512] [--device cuda] [--json OUT]
        [--sensitivity [linear|layer|type]] [--kl-bound kld.mean<=0.05] [--keep-precision base]

For each scheme and convention asked for, every nn.Linear weight (lm_head included unless
--keep-head) is replaced by numprobe.quantize(w, scheme, **conventions).dequant: the exact
dequantized values of that scheme's codes, cast back to the weight's dtype (bf16 holds every
fp4 x e4m3 x fp32 product only approximately, so the cast is reported as its own row: the
"bf16 cast" line compares the dequant in float64 against what the model really runs).

The report per run: numprobe.kl of the base logits against the quantized ones (mean, p99,
p999, max, top-1 agreement, delta-p), the KL-by-position curve with its growth fit, and the
scan's per-tensor table (SQNR, flushed, outlier blocks) sorted by the tensor's error. Exit 1
when --bound is given and breached (e.g. --bound kld.p99<=0.05).

--sensitivity answers which units fail first, which the per-tensor table cannot (its SQNRs lie
within hundredths of a dB of each other on a real model): after the runs above, numprobe.acceptance
quantizes one unit at a time (a linear, a decoder layer, or a projection type across layers),
ranks the units by the KL of the model with only that unit quantized, and plans which units to
keep at --keep-precision (base, bf16 or a scheme such as fp8-block128) so that --kl-bound holds,
adding the worst-ranked unit back one at a time and measuring again; exit 1 when even that
cannot meet the bound. It costs one forward pass per unit and per plan step.

--model DIR loads a local Hugging Face checkpoint (nothing is downloaded: transformers runs with
local_files_only). Without it a small Llama config with random initialisation is built
(seeded), which exercises every step but says nothing about a real model's tolerance.
Needs torch and transformers (not numprobe's dependencies).
"""
import argparse
import json
import sys
import time

import numpy as np

import numprobe

SAMPLE = ("The quick brown fox jumps over the lazy dog. Numerics validation compares a kernel "
          "against a high-precision reference, across tile boundaries and number formats, and "
          "reports where the error grows. ") * 8


def load_model(args, torch, transformers):
    if args.model:
        tok = transformers.AutoTokenizer.from_pretrained(args.model, local_files_only=True)
        model = transformers.AutoModelForCausalLM.from_pretrained(args.model, local_files_only=True,
                                                                  torch_dtype=getattr(torch, args.dtype))
        return model, tok
    torch.manual_seed(args.seed)
    cfg = transformers.LlamaConfig(vocab_size=4096, hidden_size=512, intermediate_size=1536, num_hidden_layers=4,
                                   num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=4096)
    model = transformers.LlamaForCausalLM(cfg).to(getattr(torch, args.dtype))
    return model, None


def token_ids(args, tok, vocab):
    text = open(args.text, encoding="utf-8").read() if args.text else SAMPLE
    if tok is not None:
        ids = tok(text, return_tensors="np")["input_ids"][0]
    else:  # no tokenizer for a random model: the text's bytes, spread over the vocabulary
        ids = np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int64) * 13 % vocab
    while ids.size < args.seq:
        ids = np.concatenate([ids, ids])
    return ids[: args.seq]


def logits_of(model, ids, torch, device):
    with torch.no_grad():
        out = model(torch.from_numpy(ids)[None].to(device))
    return out.logits[0].float().cpu().numpy().astype(np.float64)


def linear_weights(model, torch, keep_head):
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear) and not (keep_head and name.endswith("lm_head")):
            yield name + ".weight", mod


def fake_quantize(model, scheme, conv, torch, keep_head):
    """Replaces each linear weight by its dequantized codes; returns the scan rows and the
    originals (to restore)."""
    rows, saved = [], {}
    for name, mod in linear_weights(model, torch, keep_head):
        w = mod.weight.data
        r = numprobe.quantize(w, scheme, **conv)  # bf16 is read exactly (no float16 detour)
        dq = torch.from_numpy(r.dequant.reshape(w.shape)).to(device=w.device, dtype=w.dtype)
        cast = float(np.sqrt(np.mean((dq.double().cpu().numpy() - r.dequant.reshape(w.shape)) ** 2)) /
                     max(np.sqrt(np.mean(r.dequant ** 2)), 1e-300))
        s = r.stats
        rows.append({"tensor": name, "shape": list(w.shape), "sqnr_db": s["sqnr_db"], "rel_rms": s["rel_rms"],
                     "flushed": s["flushed"], "clipped": s["clipped"], "outlier_blocks": s["outlier_blocks"],
                     "outlier_flushed": s["outlier_flushed"], "cast_rel_rms": cast})
        saved[name] = w.clone()
        mod.weight.data.copy_(dq)
    return rows, saved


def restore(model, saved, torch, keep_head):
    for name, mod in linear_weights(model, torch, keep_head):
        mod.weight.data.copy_(saved[name])


def print_run(label, k, rows, worst):
    kd = k["kld"]
    print(f"\n== {label}")
    print(f"  KL mean {kd['mean']:.4g} +- {kd['stderr']:.2g}  median {kd['median']:.4g}  p99 {kd['p99']:.4g}  "
          f"p999 {kd['p999']:.4g}  max {kd['max']:.4g}")
    print(f"  top-1 agreement {k['top1_agreement']:.4f}  delta-p rms {k['delta_p']['rms']:.4g}")
    pos = k.get("positions", {})
    if pos.get("bins"):
        fit = pos["fit"]
        print(f"  KL by position ({len(pos['bins'])} bins): slope {fit['slope_per_1k']:.3g} nats/1k positions, "
              f"t {fit['slope_t']:.3g}, last/first {fit['last_over_first']:.3g}  "
              f"{'GROWS' if fit['grows'] else 'flat'}")
        print("    " + "  ".join(f"[{b['lo']}-{b['hi']}] {b['kld_mean']:.3g}" for b in pos["bins"]))
    print(f"  tensors, worst {worst} of {len(rows)} by rel_rms:")
    print(f"    {'tensor':48s} {'sqnr_db':>8s} {'rel_rms':>9s} {'flushed':>8s} {'clipped':>8s} {'outl.blk':>8s} "
          f"{'outl.fl':>8s} {'cast':>9s}")
    for r in sorted(rows, key=lambda r: -r["rel_rms"])[:worst]:
        print(f"    {r['tensor'][-48:]:48s} {r['sqnr_db']:8.2f} {r['rel_rms']:9.3e} {r['flushed']:8d} {r['clipped']:8d} "
              f"{r['outlier_blocks']:8d} {r['outlier_flushed']:8d} {r['cast_rel_rms']:9.2e}")


def main(argv=None):
    ap = argparse.ArgumentParser(description="fp4 migration acceptance of a causal LM (numprobe)")
    ap.add_argument("--model", help="local Hugging Face checkpoint directory (default: a random small Llama)")
    ap.add_argument("--schemes", default="nvfp4,mxfp4")
    ap.add_argument("--preset", default="default", help="comma list of convention presets (default, modelopt, torchao, ...)")
    ap.add_argument("--text", help="a UTF-8 text file (default: a built-in sample)")
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--positions", type=int, default=8, help="KL-by-position bins")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--keep-head", action="store_true", help="leave lm_head unquantized")
    ap.add_argument("--worst", type=int, default=8)
    ap.add_argument("--bound", action="append", default=[], help="e.g. kld.p99<=0.05 (exit 1 when breached)")
    ap.add_argument("--json", help="write every run's KL and tensor table to this file")
    ap.add_argument("--sensitivity", nargs="?", const="layer", choices=("linear", "layer", "type"),
                    help="rank units by KL, one at a time, and plan what to keep (default unit: layer)")
    ap.add_argument("--kl-bound", action="append", default=None,
                    help="the plan's bound, repeatable (default kld.mean<=0.05, a placeholder: set your own)")
    ap.add_argument("--keep-precision", default="base", help="a kept unit's precision: base, bf16 or a scheme")
    args = ap.parse_args(argv)
    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"accept_fake_quant: needs torch and transformers ({e})", file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        args.device = "cpu"
    model, tok = load_model(args, torch, transformers)
    model = model.to(args.device).eval()
    ids = token_ids(args, tok, model.config.vocab_size)
    print(f"model: {args.model or 'random Llama (4 layers, hidden 512, vocab 4096)'}  {args.dtype} on {args.device}, "
          f"{ids.size} tokens")
    base = logits_of(model, ids, torch, args.device)
    runs, breached = [], False
    for scheme in args.schemes.split(","):
        for preset in args.preset.split(","):
            conv = {} if preset == "default" else {"preset": preset}
            t0 = time.perf_counter()
            rows, saved = fake_quantize(model, scheme, conv, torch, args.keep_head)
            cand = logits_of(model, ids, torch, args.device)
            restore(model, saved, torch, args.keep_head)
            k = numprobe.kl(base, cand, positions=args.positions, tokens=np.concatenate([ids[1:], ids[-1:]]))
            label = f"{scheme} ({preset} conventions), {len(rows)} linear weights, {time.perf_counter() - t0:.1f} s"
            print_run(label, k, rows, args.worst)
            for b in args.bound:
                metric, _, limit = b.partition("<=")
                v = k
                for part in metric.split("."):
                    v = v[part]
                ok = float(v) <= float(limit)
                breached |= not ok
                print(f"  {'PASS' if ok else 'FAIL'} {b}  measured {float(v):.4g}")
            runs.append({"scheme": scheme, "preset": preset, "kl": k, "tensors": rows})
    if args.sensitivity:  # after the runs above: from_torch unties a tied lm_head when it sets it
        from numprobe import acceptance
        wrapped = acceptance.from_torch(model)

        def unit(name):  # --keep-head: lm_head is never quantized here either
            if args.keep_head and name.endswith("lm_head.weight"):
                return None
            return acceptance.unit_of(name, args.sensitivity)
        unit.__name__ = args.sensitivity
        for scheme in args.schemes.split(","):
            for preset in args.preset.split(","):
                conv = {} if preset == "default" else {"preset": preset}
                r = acceptance.sensitivity(wrapped, ids, scheme, by=unit, bound=args.kl_bound or ["kld.mean<=0.05"],
                                           keep=args.keep_precision, conventions=conv, positions=args.positions)
                print(f"\n== sensitivity, {scheme} ({preset} conventions)")
                print(r.text(top=args.worst))
                breached |= not r.passed
                runs.append({"scheme": scheme, "preset": preset, "sensitivity": r.to_dict()})
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"model": args.model or "random-llama", "tokens": int(ids.size), "runs": runs}, f, indent=1,
                      default=str)
    return 1 if breached else 0


if __name__ == "__main__":
    sys.exit(main())
