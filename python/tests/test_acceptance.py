"""numprobe.acceptance on a tiny NumPy causal LM with one planted fp4-sensitive unit (no torch).

The model: 2 Llama-style decoder layers (RMSNorm, causal attention with q/k/v/o, SwiGLU
gate/up/down), hidden 32, FFN 64, vocab 64, 32 tokens, seeded weights, HF weight names.

The plant, in layer 1's mlp.down_proj: every 16th FFN channel is dead (its up_proj row is zero,
so its activation is exactly 0) and its down_proj column holds an outlier 40x the largest other
weight. Every fp4 block (16 wide for NVFP4, 32 for MXFP4, along the input dimension) then holds
one outlier, the block scale is set by it (amax / 6), and every live weight, below
scale * 0.25 (half of e2m1's smallest step 0.5), flushes to zero: the unit's output is lost
although its weight error is the smallest of all (the outliers dominate its energy). A per-tensor
SQNR table ranks it best; the KL ranking must rank it worst. In fp8 e4m3 the same block keeps
its live weights (e4m3 spans 448 down to 2^-9, a ratio of 2^17 >> 40), so the plant is no worse
than any other unit there: the control that shows the ranking follows the format.
"""
import json
import math
import subprocess
import sys

import numpy as np
import pytest

import numprobe
import numprobe.acceptance as acc

V, D, F, H, L, N = 64, 32, 64, 2, 2, 32
DH = D // H
PLANT = "model.layers.1.mlp.down_proj"
SHAPES = {"self_attn.q_proj": (D, D), "self_attn.k_proj": (D, D), "self_attn.v_proj": (D, D),
          "self_attn.o_proj": (D, D), "mlp.gate_proj": (F, D), "mlp.up_proj": (F, D), "mlp.down_proj": (D, F)}


def _rmsnorm(x):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6)


def _forward(ids, w, emb):
    x = emb[ids]
    n = x.shape[0]
    mask = np.triu(np.full((n, n), -np.inf), 1)
    for layer in range(L):
        p = f"model.layers.{layer}."
        h = _rmsnorm(x)
        q, k, v = ((h @ w[p + f"self_attn.{t}_proj.weight"].T).reshape(n, H, DH).transpose(1, 0, 2) for t in "qkv")
        s = q @ k.transpose(0, 2, 1) / np.sqrt(DH) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        x = x + (s @ v).transpose(1, 0, 2).reshape(n, D) @ w[p + "self_attn.o_proj.weight"].T
        h = _rmsnorm(x)
        g = h @ w[p + "mlp.gate_proj.weight"].T
        u = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
    return _rmsnorm(x) @ w["lm_head.weight"].T


def _weights(seed=7):
    rng = np.random.default_rng(seed)
    w = {f"model.layers.{layer}.{t}.weight": rng.standard_normal(shape) / np.sqrt(shape[1])
         for layer in range(L) for t, shape in SHAPES.items()}
    w["lm_head.weight"] = rng.standard_normal((V, D)) * 2 / np.sqrt(D)
    emb = rng.standard_normal((V, D))
    dead = np.arange(0, F, 16)
    w["model.layers.1.mlp.up_proj.weight"][dead] = 0.0
    d = w[PLANT + ".weight"]
    d[:, dead] = 40.0 * np.sign(d[:, dead]) * np.abs(d).max()
    return w, emb


IDS = np.random.default_rng(1).integers(0, V, N)


def _model():
    w, emb = _weights()
    return acc.from_callable(lambda ids, ws: _forward(ids, ws, emb), w)


@pytest.fixture(scope="module")
def by_linear():
    return acc.sensitivity(_model(), IDS, "nvfp4", by="linear", bound="kld.mean<=1e9", positions=4)


def test_ranking_puts_the_planted_unit_first(by_linear):
    d = by_linear.to_dict()
    assert by_linear.ranking[0] == PLANT
    kl = [r["kld"]["mean"] for r in d["ranking"]]
    assert kl == sorted(kl, reverse=True)
    assert [r["rank"] for r in d["ranking"]] == list(range(1, 16))
    # The plant loses its whole output; every other unit carries a ~10% weight error (e2m1's
    # spacing). Measured: 0.30 against 0.015 for the next (lm_head); 5x leaves room for seeds.
    assert kl[0] > 5 * kl[1]
    # ...while its weight error is the smallest: the per-tensor table would rank it last.
    units = {u["unit"]: u for u in d["units"]}
    assert units[PLANT]["sqnr_db"] == max(u["sqnr_db"] for u in d["units"])


def test_mxfp4_also_flushes_the_plant_and_fp8_does_not():
    m = _model()
    mx = acc.sensitivity(m, IDS, "mxfp4", by="type", bound="kld.mean<=1e9", positions=0)
    assert mx.ranking[0] == "down_proj"  # the plant's type: 32-wide blocks hold one outlier each too
    fp8 = acc.sensitivity(m, IDS, "fp8-block128", by="linear", bound="kld.mean<=1e9", positions=0)
    r = {x["unit"]: x["kld"]["mean"] for x in fp8.to_dict()["ranking"]}
    # e4m3 keeps the live weights: the plant's KL is within the others' spread, not 5x above it
    assert r[PLANT] < 2 * sorted(r.values())[len(r) // 2]
    assert fp8.ranking[0] != PLANT


def test_plan_keeps_the_planted_layer_and_meets_the_bound():
    r = acc.sensitivity(_model(), IDS, "nvfp4", by="layer", bound="kld.mean<=0.1", positions=4)
    d = r.to_dict()
    # Precondition: the bound is breached with everything quantized (measured 0.39) and the plant's
    # layer alone breaches it (0.31), while layer.0 + lm_head together stay under it (0.043).
    assert d["all_quantized"]["kld"]["mean"] > 0.1
    assert r.ranking[0] == "layer.1"
    assert d["plan"]["keep"] == ["layer.1"]
    assert d["plan"]["met"] is True and r.passed and r.exit_code == 0
    assert d["plan"]["kld"]["mean"] <= 0.1
    assert d["plan"]["checks"] == [{"bound": "kld.mean<=0.1", "value": d["plan"]["kld"]["mean"], "ok": True}]
    assert [s["added"] for s in d["plan"]["steps"]] == [None, "layer.1"]
    assert d["plan"]["steps"][0]["kld"] == d["all_quantized"]["kld"]


def test_a_bound_already_met_keeps_nothing():
    r = acc.sensitivity(_model(), IDS, "nvfp4", by="layer", bound=["kld.mean<=1.0", "top1>=0.2"], positions=4)
    d = r.to_dict()
    assert d["all_quantized"]["kld"]["mean"] <= 1.0  # measured 0.39, top-1 0.41
    assert d["plan"]["keep"] == [] and d["plan"]["met"] is True
    assert len(d["plan"]["steps"]) == 1 and d["plan"]["kld"] == d["all_quantized"]["kld"]
    assert d["plan"]["bound"] == "kld.mean<=1.0 and top1>=0.2"


def test_an_impossible_bound_is_reported_as_not_met():
    # Kept units at fp8-block128 still differ from the base (e4m3 has 3 mantissa bits), so the
    # KL of the model with every unit kept is > 0 and kld.mean<=0 cannot hold.
    r = acc.sensitivity(_model(), IDS, "nvfp4", by="layer", bound="kld.mean<=0", keep="fp8-block128", positions=4)
    d = r.to_dict()
    p = d["plan"]
    assert p["met"] is False and not r.passed and r.exit_code == 1
    assert p["keep"] == r.ranking and p["stopped"] == "every unit kept"
    assert p["kld"]["mean"] > 0 and p["checks"][0]["ok"] is False
    assert p["keep_precision"] == "fp8-block128"
    assert "NOT MET (every unit kept)" in str(r)


def test_keeping_every_unit_at_base_restores_the_base_logits_exactly():
    # The same bound with keep="base": once every unit is back, the weights are the originals bit
    # for bit and the logits equal the base's, so the KL is exactly 0 and the bound holds.
    r = acc.sensitivity(_model(), IDS, "nvfp4", by="layer", bound="kld.mean<=0", positions=4)
    p = r.to_dict()["plan"]
    assert p["met"] is True and p["keep"] == r.ranking and p["kld"]["mean"] == 0.0 and p["top1"] == 1.0


def test_max_keep_stops_the_plan_and_says_so():
    r = acc.sensitivity(_model(), IDS, "nvfp4", by="layer", bound="kld.mean<=0", max_keep=1, positions=0)
    p = r.to_dict()["plan"]
    assert p["met"] is False and p["keep"] == ["layer.1"] and p["stopped"] == "max_keep"


def test_json_has_the_stable_keys(by_linear):
    d = json.loads(by_linear.to_json())
    assert {"schema_version", "command", "scheme", "conventions", "by", "tokens", "vocab", "units", "skipped",
            "ranking", "all_quantized", "plan", "positions", "measurements", "seconds"} <= set(d)
    assert {"keep", "bound", "met", "kld", "top1", "steps", "checks", "keep_precision", "stopped"} <= set(d["plan"])
    assert {"mean", "p99"} <= set(d["plan"]["kld"])
    assert {"unit", "rank", "kld", "top1"} <= set(d["ranking"][0])
    assert {"unit", "tensors", "elements", "rel_rms", "sqnr_db"} <= set(d["units"][0])
    assert len(d["positions"]["bins"]) == 4 and {"fit"} <= set(d["positions"])
    assert d["tokens"] == N and d["vocab"] == V and d["measurements"] == 15 + 1
    text = str(by_linear)
    first_row = next(line for line in text.splitlines() if line.strip().startswith("1 "))
    assert PLANT in first_row and "KL by position" in text


def test_units_by_hugging_face_names():
    q, head = "model.layers.12.self_attn.q_proj.weight", "lm_head.weight"
    assert acc.unit_of(q, "linear") == "model.layers.12.self_attn.q_proj"
    assert acc.unit_of(q, "layer") == "layer.12" and acc.unit_of(q, "type") == "q_proj"
    assert acc.unit_of("model.layers.3.mlp.down_proj.weight", "type") == "down_proj"
    assert acc.unit_of(head, "layer") == "lm_head" and acc.unit_of(head, "type") == "lm_head"
    assert acc.unit_of("transformer.h.0.attn.c_attn.weight", "layer") == "transformer.h.0.attn.c_attn"
    with pytest.raises(ValueError, match="by: expected"):
        acc.unit_of(q, "block")


def test_a_custom_unit_function_and_skipped_weights():
    def attention_or_mlp(name):
        if name.startswith("lm_head"):
            return None  # never quantized
        return "attn" if "self_attn" in name else "mlp"

    r = acc.sensitivity(_model(), IDS, "nvfp4", by=attention_or_mlp, bound="kld.mean<=1e9", positions=0)
    d = r.to_dict()
    assert d["skipped"] == ["lm_head.weight"] and d["by"] == "attention_or_mlp"
    assert r.ranking == ["mlp", "attn"]  # the plant is an mlp weight
    assert {u["unit"]: len(u["tensors"]) for u in d["units"]} == {"attn": 8, "mlp": 6}


def test_the_model_is_restored_also_on_error():
    m = _model()
    before = m.weights()
    with pytest.raises(ValueError, match="keep 'no-such-scheme'"):
        acc.sensitivity(m, IDS, "nvfp4", by="layer", bound="kld.mean<=0", keep="no-such-scheme", positions=0)
    after = m.weights()
    assert all(np.array_equal(before[k], after[k]) for k in before)


def test_a_unit_that_makes_the_model_emit_nan_ranks_worst():
    w = {"a.weight": np.linspace(0.1, 1.7, 32).reshape(2, 16), "b.weight": np.linspace(-1, 1, 32).reshape(2, 16)}
    a0 = w["a.weight"].copy()

    def fn(ids, ws):
        logits = np.outer(np.ones(ids.size), np.r_[ws["a.weight"].sum(1), ws["b.weight"].sum(1)])
        return logits * np.nan if not np.array_equal(ws["a.weight"], a0) else logits

    r = acc.sensitivity(acc.from_callable(fn, w), np.arange(4), "nvfp4", by="linear", bound="kld.mean<=1e9",
                        positions=0)
    d = r.to_dict()
    assert r.ranking[0] == "a" and d["ranking"][0]["nonfinite"] == 16 and math.isinf(d["ranking"][0]["kld"]["mean"])
    assert d["ranking"][1]["nonfinite"] == 0 and math.isfinite(d["ranking"][1]["kld"]["mean"])
    assert d["all_quantized"]["nonfinite"] == 16  # so the plan must keep a, and then meets the bound
    assert d["plan"]["keep"] == ["a"] and d["plan"]["met"] is True


def test_errors_name_the_argument():
    m = _model()
    with pytest.raises(ValueError, match="bound: expected METRIC"):
        acc.sensitivity(m, IDS, "nvfp4", bound="kld.mean=0.1")
    with pytest.raises(ValueError, match="bound 'kld.p77<=1'"):
        acc.sensitivity(m, IDS, "nvfp4", by="type", bound="kld.p77<=1", positions=0)
    with pytest.raises(ValueError, match="unknown scheme"):
        acc.sensitivity(m, IDS, "nvfp5", by="type")
    with pytest.raises(TypeError, match="set_weight"):
        acc.sensitivity(object(), IDS)


def test_round_bf16_ties_to_even():
    x = np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -7), 3.0, 2.0 ** -130 * 1.5])
    assert acc.round_bf16(x).tolist() == [1.0, 1 + 2 ** -6, -(1 + 2 ** -7), 3.0, 2.0 ** -130 * 1.5]


def test_the_package_exposes_the_module_lazily_and_imports_no_torch():
    # in a fresh interpreter: this file's own import has already bound numprobe.acceptance here
    code = ("import sys, numprobe; m = numprobe.acceptance; "
            "print(m.__name__, 'torch' in sys.modules, 'acceptance' in numprobe.__all__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["numprobe.acceptance", "False", "True"]
    assert numprobe.acceptance is acc
