"""numprobe.acceptance: which parts of a causal LM fail first under a weight format, and what to
keep at higher precision to meet a KL bound.

    import numprobe.acceptance as acc
    r = acc.sensitivity(acc.from_torch(model), ids, "nvfp4", by="layer", bound="kld.mean<=0.05")
    print(r)                       # the ranking, the plan, the KL-by-position curve of the plan
    r.to_dict()["plan"]["keep"]    # the units to keep at `keep` precision (default: the base weights)

A per-tensor error table (SQNR, flushes) cannot say which tensor matters: on SmolLM2-135M the
worst eight tensors under NVFP4 lie within 0.02 dB of each other. What matters is how far the
model's output distribution moves, so each unit is measured by the KL divergence of the model's
logits with only that unit quantized, against the base model's (numprobe.kl: mean, p99, top-1
agreement). This is the one-at-a-time sensitivity analysis of mixed-precision work (HAWQ, Dong
et al. 2019, ranks layers by a Hessian proxy instead; measuring the output's KL directly, as
llama.cpp's `perplexity --kl-divergence` does for a whole model, needs no gradients).

The plan is greedy: start from every unit quantized; while the bound is breached, give the
worst-ranked unit not yet kept its higher precision back (`keep`) and measure again. Units do not
add up exactly (two units' errors can cancel or compound), which is why every step is measured
rather than predicted from the ranking.

A unit is one linear (by="linear"), every linear of one decoder layer (by="layer") or one kind
of projection across layers (by="type": q_proj ... down_proj, lm_head), by the Hugging Face
Llama/Qwen/Mistral names (model.layers.N.self_attn.q_proj.weight); or whatever a function of
the weight's name returns (None: the weight is never quantized).

The model is anything with three methods (no torch needed, so CI tests this with NumPy):
    logits(ids) -> array [N, V]     the model's logits for token ids [N]
    weights() -> {name: array}      the weights that may be quantized, as they are now (copies)
    set_weight(name, array)         replaces one of them
from_torch(module) wraps an nn.Module (its nn.Linear weights, named module.weight) and
from_callable(fn, weights) wraps fn(ids, weights) -> logits. The model's weights are restored
when sensitivity() returns, also on an error.
"""
import json
import math
import re
import time

import numpy as np

from ._kl import kl as _kl
from ._quant import quantize as _quantize

SCHEMA_VERSION = 1

_LINEAR = re.compile(r"(?:^|\.)layers\.(\d+)\.(self_attn|mlp)\.(q|k|v|o|gate|up|down)_proj(?:\.weight)?$")
_HEAD = re.compile(r"(?:^|\.)lm_head(?:\.weight)?$")
_BOUND = re.compile(r"^\s*([A-Za-z0-9_.]+)\s*(<=|>=|<|>)\s*([-+]?(?:[0-9.]+(?:[eE][-+]?[0-9]+)?|inf))\s*$")
_OPS = {"<=": lambda v, x: v <= x, ">=": lambda v, x: v >= x, "<": lambda v, x: v < x, ">": lambda v, x: v > x}
_METRIC_ALIASES = {"top1": "top1_agreement"}


# -- units ---------------------------------------------------------------------------------------

def unit_of(name, by="layer"):
    """The unit a weight belongs to: by="linear" (the module, name less '.weight'), "layer"
    ("layer.N"; "lm_head") or "type" ("q_proj" ... "down_proj"; "lm_head"). A name outside the
    Llama/Qwen/Mistral pattern is a unit of its own, so nothing is dropped silently."""
    base = name[:-len(".weight")] if name.endswith(".weight") else name
    if by == "linear":
        return base
    if by not in ("layer", "type"):
        raise ValueError(f"by: expected 'linear', 'layer', 'type' or a function of the weight name, got {by!r}")
    m = _LINEAR.search(name)
    if m:
        return f"layer.{m.group(1)}" if by == "layer" else f"{m.group(3)}_proj"
    if _HEAD.search(name):
        return "lm_head"
    return base


def _natural(s):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


# -- model adapters ------------------------------------------------------------------------------

class CallableModel:
    """fn(ids, weights) -> logits [N, V] over a dict of NumPy weights that this object owns."""

    def __init__(self, fn, weights):
        if not callable(fn):
            raise TypeError(f"fn: expected a callable (ids, weights) -> logits, got {type(fn).__name__}")
        self._fn = fn
        self._w = {str(k): np.array(v, copy=True) for k, v in weights.items()}

    def logits(self, ids):
        return self._fn(ids, self._w)

    def weights(self):
        return {k: v.copy() for k, v in self._w.items()}

    def set_weight(self, name, array):
        old = self._w[name]
        self._w[name] = np.asarray(array, dtype=old.dtype).reshape(old.shape)


def from_callable(fn, weights):
    """The protocol over fn(ids, weights) -> logits [N, V]; weights: {name: array}."""
    return CallableModel(fn, weights)


class TorchModel:
    """An nn.Module causal LM: logits from module(ids[None]) (its .logits, or the output itself),
    its nn.Linear weights by module name + '.weight'. A set weight is cast to the parameter's
    dtype (a bf16 model runs bf16-rounded dequantized values, as a fake-quantized deployment
    does). A weight tied to another parameter (SmolLM2's lm_head shares the input embedding) is
    untied on its first set: quantizing lm_head then leaves the embedding table at its base
    values, as a deployment that quantizes only linears does."""

    def __init__(self, module, device=None):
        import torch  # only here: torch is no dependency of numprobe
        self._torch = torch
        self.module = module
        params = list(module.parameters())
        self._device = torch.device(device) if device is not None else (params[0].device if params else None)
        self._linears = {n + ".weight": m for n, m in module.named_modules() if isinstance(m, torch.nn.Linear)}
        if not self._linears:
            raise ValueError("module: no nn.Linear weights to quantize")
        counts = {}
        for _, p in module.named_parameters(remove_duplicate=False):
            counts[p.data_ptr()] = counts.get(p.data_ptr(), 0) + 1
        self._tied = {n for n, m in self._linears.items() if counts.get(m.weight.data_ptr(), 0) > 1}

    @property
    def tied(self):
        """The linear weights that share storage with another parameter (untied when set)."""
        return sorted(self._tied)

    def logits(self, ids):
        torch = self._torch
        x = torch.as_tensor(np.asarray(ids, dtype=np.int64), device=self._device)[None]
        with torch.no_grad():
            out = self.module(x)
        t = getattr(out, "logits", out)
        if isinstance(t, (tuple, list)):
            t = t[0]
        return t[0].float().cpu().numpy()

    def weights(self):
        # float32 holds bf16 and f16 exactly; .copy(): the numpy view would follow later writes
        return {n: m.weight.detach().float().cpu().numpy().copy() for n, m in self._linears.items()}

    def set_weight(self, name, array):
        torch = self._torch
        mod = self._linears[name]
        w = mod.weight
        t = torch.from_numpy(np.ascontiguousarray(array)).to(device=w.device, dtype=w.dtype).reshape(w.shape)
        if name in self._tied:
            mod.weight = torch.nn.Parameter(t, requires_grad=False)
            self._tied.discard(name)
        else:
            with torch.no_grad():
                w.copy_(t)


def from_torch(module, device=None):
    """The protocol over a torch causal LM (a Hugging Face *ForCausalLM or any nn.Module whose
    forward takes ids [1, N] and returns logits [1, N, V] or an object with .logits)."""
    return TorchModel(module, device)


def _as_model(model):
    if not hasattr(model, "set_weight") and hasattr(model, "named_modules"):  # an nn.Module
        return from_torch(model)
    missing = [m for m in ("logits", "weights", "set_weight") if not callable(getattr(model, m, None))]
    if missing:
        raise TypeError(f"model: expected logits(ids), weights() and set_weight(name, array); "
                        f"{type(model).__name__} lacks {', '.join(missing)} (wrap it with from_torch or from_callable)")
    return model


# -- bounds and precisions -----------------------------------------------------------------------

def _parse_bounds(bound):
    texts = [bound] if isinstance(bound, str) else list(bound)
    if not texts:
        raise ValueError("bound: expected at least one bound such as 'kld.mean<=0.05'")
    out = []
    for b in texts:
        m = _BOUND.match(b)
        if not m:
            raise ValueError(f"bound: expected METRIC<=VALUE (e.g. kld.mean<=0.05, kld.p99<=0.5, top1>=0.9), got {b!r}")
        path = _METRIC_ALIASES.get(m.group(1), m.group(1))
        out.append((b.strip(), path.split("."), m.group(2), float(m.group(3))))
    keys = _kl(np.zeros((2, 2)), np.zeros((2, 2)), topk=1)  # a typo fails now, not after the ranking
    for b, path, _, _ in out:
        _metric(keys, path, b)
    return out


def _metric(doc, path, text):
    v = doc
    for part in path:
        if not isinstance(v, dict) or part not in v:
            raise ValueError(f"bound {text!r}: {'.'.join(path)} is not a key of numprobe.kl's result")
        v = v[part]
    return float(v)


def round_bf16(a):
    """a rounded to bfloat16 (8 significant bits, round to nearest even; subnormals below 2^-126
    on bf16's fixed 2^-133 grid), returned as float64."""
    a = np.asarray(a, dtype=np.float64)
    m, e = np.frexp(a)  # a = m * 2^e, 0.5 <= |m| < 1
    normal = np.ldexp(np.rint(np.ldexp(m, 8)), e - 8)
    sub = np.rint(np.ldexp(a, 133)) * 2.0 ** -133
    return np.where(np.abs(a) < 2.0 ** -126, sub, normal)


# -- the measurement -----------------------------------------------------------------------------

def _summary(k):
    kd = k["kld"]
    return {"kld": {"mean": kd["mean"], "stderr": kd["stderr"], "p99": kd["p99"], "max": kd["max"]},
            "top1": k["top1_agreement"]}


_NONFINITE = {"kld": {"mean": math.inf, "stderr": math.inf, "p99": math.inf, "max": math.inf}, "top1": 0.0}


class _Bench:
    """Holds the model in one configuration (each weight base, quantized or kept) and measures."""

    def __init__(self, model, ids, orig, positions):
        self.model, self.ids, self.orig, self.positions = model, ids, orig, positions
        self.state = {n: "base" for n in orig}
        self.arrays = {"quant": {}, "keep": {}}
        self.count = 0
        base = np.asarray(model.logits(ids))
        if base.ndim != 2 or base.shape[0] != ids.size:
            raise ValueError(f"model.logits: expected [N={ids.size}, V], got shape {base.shape}")
        if not np.isfinite(base).all():
            raise ValueError("model.logits: the base model's logits are not all finite")
        self.base = np.ascontiguousarray(base, dtype=np.float64)  # converted once, not per call

    def configure(self, state):
        for n, s in state.items():
            if self.state[n] != s:
                self.model.set_weight(n, self.orig[n] if s == "base" else self.arrays[s][n])
                self.state[n] = s

    def measure(self, state):
        self.configure(state)
        self.count += 1
        cand = np.asarray(self.model.logits(self.ids))
        if cand.shape != self.base.shape:
            raise ValueError(f"model.logits: shape {cand.shape} differs from the base logits' {self.base.shape}")
        bad = int(np.size(cand) - np.count_nonzero(np.isfinite(cand)))
        if bad:  # checked before the metric: a unit that makes the model emit NaN ranks worst
            return dict(_NONFINITE, nonfinite=bad), None
        k = _kl(self.base, cand, topk=min(10, self.base.shape[1]), positions=self.positions)
        return dict(_summary(k), nonfinite=0), k

    def restore(self):
        self.configure({n: "base" for n in self.orig})


def _precision(model_arrays, names, spec, conventions, label):
    """{name: array} of `names` at precision `spec`: a numprobe scheme, 'bf16' or 'base'."""
    out = {}
    for n in names:
        w = model_arrays[n]
        if spec == "base":
            out[n] = w
        elif spec == "bf16":
            out[n] = round_bf16(w)
        else:
            try:
                out[n] = _quantize(w, spec, **conventions).dequant.reshape(np.shape(w))
            except ValueError as e:
                raise ValueError(f"{label} {spec!r} on {n}: {e}") from None
    return out


def sensitivity(model, ids, scheme="nvfp4", *, by="layer", bound="kld.mean<=0.05", keep="base",
                conventions=None, keep_conventions=None, positions=8, max_keep=None, progress=None):
    """Ranks the units of `model` by the KL of the model with only that unit quantized under
    `scheme` (numprobe.quantize(w, scheme, **conventions).dequant), then plans which units to
    keep at `keep` precision ('base': the model's own weights; 'bf16'; or a numprobe scheme such
    as 'fp8-block128') so that every `bound` holds (a string or a list, each METRIC<=X or >=X over
    numprobe.kl's keys: kld.mean, kld.p99, top1_agreement alias top1, ...). The default bound
    is a placeholder, not a published standard: set your own. max_keep: stop the plan after
    that many kept units (met is then False if the bound still fails). progress: called with a
    line of text after each measurement. Returns an Acceptance."""
    t0 = time.perf_counter()
    model = _as_model(model)
    ids = np.asarray(ids).reshape(-1)
    if ids.size < 2:
        raise ValueError(f"ids: expected at least 2 token ids, got {ids.size}")
    if not isinstance(scheme, str):
        raise ValueError(f"scheme: expected a numprobe scheme name, got {type(scheme).__name__}")
    bounds = _parse_bounds(bound)
    conventions = dict(conventions or {})
    unit_fn = by if callable(by) else (lambda n: unit_of(n, by))
    orig = model.weights()
    if not orig:
        raise ValueError("model.weights: no weights to quantize")
    units, skipped = {}, []
    for n in orig:
        u = unit_fn(n)
        if u is None:
            skipped.append(n)
        else:
            units.setdefault(str(u), []).append(n)
    if not units:
        raise ValueError("by: the unit function mapped every weight to None")
    say = progress or (lambda line: None)
    bench = _Bench(model, ids, orig, max(0, min(int(positions), ids.size)))
    try:
        quant = _precision(orig, [n for ns in units.values() for n in ns], scheme, conventions, "scheme")
        bench.arrays["quant"] = quant
        unit_rows = []
        for u, names in units.items():
            err = sum(float(np.sum((quant[n] - np.asarray(orig[n], np.float64)) ** 2)) for n in names)
            energy = sum(float(np.sum(np.asarray(orig[n], np.float64) ** 2)) for n in names)
            unit_rows.append({"unit": u, "tensors": names, "elements": int(sum(np.size(orig[n]) for n in names)),
                              "rel_rms": math.sqrt(err / energy) if energy > 0 else 0.0,
                              "sqnr_db": 10 * math.log10(energy / err) if err > 0 and energy > 0 else math.inf})
        none = {n: "base" for n in orig}

        ranking = []
        for u, names in units.items():
            m, _ = bench.measure({**none, **{n: "quant" for n in names}})
            ranking.append(dict(unit=u, **m))
            say(f"rank {u}: kld mean {m['kld']['mean']:.4g} p99 {m['kld']['p99']:.4g} top1 {m['top1']:.4f}")
        ranking.sort(key=lambda r: (-r["kld"]["mean"], _natural(r["unit"])))
        for i, r in enumerate(ranking):
            r["rank"] = i + 1

        everything = {**none, **{n: "quant" for ns in units.values() for n in ns}}
        state = dict(everything)
        m, k = bench.measure(state)
        all_quant = dict(m)
        say(f"all quantized: kld mean {m['kld']['mean']:.4g} p99 {m['kld']['p99']:.4g} top1 {m['top1']:.4f}")
        kept, steps = [], [dict(added=None, **m)]

        def holds(k):
            if k is None:
                return [(b, math.inf, False) for b, _, _, _ in bounds]
            return [(b, v, _OPS[op](v, x)) for b, path, op, x in bounds for v in [_metric(k, path, b)]]

        checks = holds(k)
        limit = len(ranking) if max_keep is None else min(int(max_keep), len(ranking))
        for r in ranking:
            if all(ok for _, _, ok in checks) or len(kept) >= limit:
                break
            names = units[r["unit"]]
            bench.arrays["keep"].update(_precision(orig, names, keep, dict(keep_conventions or {}), "keep"))
            state.update({n: "keep" for n in names})
            kept.append(r["unit"])
            m, k = bench.measure(state)
            checks = holds(k)
            steps.append(dict(added=r["unit"], **m))
            say(f"keep {r['unit']}: kld mean {m['kld']['mean']:.4g} p99 {m['kld']['p99']:.4g} top1 {m['top1']:.4f}")
        met = all(ok for _, _, ok in checks)
        plan = {"keep": kept, "keep_precision": keep, "bound": " and ".join(b for b, _, _, _ in bounds),
                "met": met, "checks": [{"bound": b, "value": v, "ok": ok} for b, v, ok in checks],
                "kld": dict(m["kld"]), "top1": m["top1"], "nonfinite": m["nonfinite"], "steps": steps,
                "stopped": "bound met" if met else ("max_keep" if len(kept) < len(ranking) else "every unit kept")}
        pos = (k.get("positions") or {}) if k is not None else {}
    finally:
        bench.restore()
    doc = {"schema_version": SCHEMA_VERSION, "command": "acceptance", "scheme": scheme, "conventions": conventions,
           "by": by if isinstance(by, str) else getattr(by, "__name__", "custom"), "tokens": int(ids.size),
           "vocab": int(bench.base.shape[1]), "units": unit_rows, "skipped": skipped, "ranking": ranking,
           "all_quantized": all_quant, "plan": plan, "positions": pos, "measurements": bench.count,
           "seconds": time.perf_counter() - t0}
    return Acceptance(doc)


# -- the result model ----------------------------------------------------------------------------

def _g(v):
    """A number of the KL document in 3 digits (the document writes nan and inf as strings)."""
    return f"{v:.3g}" if isinstance(v, (int, float)) else str(v)


class Acceptance:
    """sensitivity()'s result: to_dict() (stable keys: units, ranking, all_quantized,
    plan{keep, bound, met, kld{mean, p99}, top1, steps}, positions{bins, fit}), to_json(path),
    text() and str(), as numprobe.Result; exit_code 0 when the plan meets the bound, else 1."""

    def __init__(self, doc):
        self._doc = doc

    def to_dict(self):
        return self._doc

    def to_json(self, path=None):
        text = json.dumps(self._doc, indent=1)
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        return text

    @property
    def exit_code(self):
        return 0 if self._doc["plan"]["met"] else 1

    @property
    def passed(self):
        return self.exit_code == 0

    @property
    def ranking(self):
        """The unit names, worst first."""
        return [r["unit"] for r in self._doc["ranking"]]

    @property
    def keep(self):
        return list(self._doc["plan"]["keep"])

    def text(self, top=20):
        d, p = self._doc, self._doc["plan"]
        conv = ",".join(f"{k}={v}" for k, v in d["conventions"].items()) or "default"
        a = d["all_quantized"]
        ntens = sum(len(u["tensors"]) for u in d["units"])
        urow = {u["unit"]: u for u in d["units"]}
        lines = [f"acceptance: {d['scheme']} ({conv} conventions), by {d['by']}: {len(d['units'])} units over "
                 f"{ntens} tensors, {d['tokens']} tokens, vocab {d['vocab']}; {d['measurements']} forward passes, "
                 f"{d['seconds']:.1f} s",
                 f"all quantized: KL mean {a['kld']['mean']:.4g} +- {a['kld']['stderr']:.2g}  p99 {a['kld']['p99']:.4g}"
                 f"  top-1 {a['top1']:.4f}",
                 "ranking (KL of the model with only that unit quantized; rel_rms/sqnr: the unit's weight error):",
                 f"  {'rank':>4s}  {'unit':32s} {'tensors':>7s} {'kld_mean':>10s} {'stderr':>8s} {'kld_p99':>10s} "
                 f"{'top1':>7s} {'rel_rms':>9s} {'sqnr_db':>8s}"]
        rows = d["ranking"] if top is None else d["ranking"][:top]
        for r in rows:
            u = urow[r["unit"]]
            lines.append(f"  {r['rank']:4d}  {r['unit'][-32:]:32s} {len(u['tensors']):7d} {r['kld']['mean']:10.4g} "
                         f"{r['kld']['stderr']:8.2g} {r['kld']['p99']:10.4g} {r['top1']:7.4f} {u['rel_rms']:9.3e} "
                         f"{u['sqnr_db']:8.2f}")
        if len(rows) < len(d["ranking"]):
            lines.append(f"  ... {len(d['ranking']) - len(rows)} more (to_dict()['ranking'] has all)")
        verdict = "MET" if p["met"] else f"NOT MET ({p['stopped']})"
        lines.append(f"plan: {p['bound']} {verdict}; keep {len(p['keep'])} of {len(d['units'])} units at "
                     f"{p['keep_precision']}: {', '.join(p['keep']) or '(none)'}")
        for s in p["steps"]:
            lines.append(f"  {'+ ' + s['added'] if s['added'] else 'all quantized':34s} KL mean {s['kld']['mean']:.4g}"
                         f"  p99 {s['kld']['p99']:.4g}  top-1 {s['top1']:.4f}")
        for c in p["checks"]:
            lines.append(f"  {'PASS' if c['ok'] else 'FAIL'} {c['bound']}  measured {c['value']:.4g}")
        pos = d["positions"]
        if pos.get("bins"):
            fit = pos["fit"]
            lines.append(f"KL by position, the plan ({len(pos['bins'])} bins): slope {_g(fit['slope_per_1k'])} "
                         f"nats/1k positions, t {_g(fit['slope_t'])}, last/first {_g(fit['last_over_first'])}  "
                         f"{'GROWS' if fit['grows'] else 'flat'}")
            lines.append("  " + "  ".join(f"[{b['lo']}-{b['hi']}] {b['kld_mean']:.3g}" for b in pos["bins"]))
        return "\n".join(lines)

    def __str__(self):
        return self.text()

    def __repr__(self):
        p = self._doc["plan"]
        return (f"<numprobe.acceptance.Acceptance {self._doc['scheme']} by {self._doc['by']}: "
                f"keep {len(p['keep'])}, met={p['met']}>")
