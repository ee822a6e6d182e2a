"""numprobe.drift and numprobe.audit on Python callables: the same sweep as the CLI's on the same
kernel through `--backend exec:` (same lengths, case ids and metrics, bit for bit), verdicts
that separate a healthy kernel from one with a real bug class, and the backend-failure rules
(a raising kernel or a wrong shape is exit 3 for that point, the others run; NaN is a finding).

The kernels are NumPy attention written here from the case definition (float64 arithmetic,
output rounded to float32), so their error against the reference is float32 rounding:
rel_rms <= 2^-24 per element, far under the bf16 naive baseline (~3e-3, ratio ~1e-5). The
bugs are real classes of NUMERICS.md: a partial last key tile dropped, and GQA mapping query
head h to kv head h % Hkv instead of h // (Hq / Hkv)."""
import json
import pathlib
import sys

import numpy as np
import pytest

import numprobe

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "exec"))
import numpy_reference  # noqa: E402
import numprobe_exec  # noqa: E402

SMALL = {"heads": 4, "kv_heads": 2, "head_dim": 32}
TILE = 64


def attention(q, k, v, case, *, kv_of=None, keep=None):
    """Exact-arithmetic attention (float64) of case.json's case, O rounded to float32.
    kv_of(h, group, Hkv): the kv head of query head h; keep(S) -> bool[S]: keys the kernel reads."""
    B, T, S = case["batch"], case["queries"], case["seq"]
    Hq, Hkv, D = case["heads"], case["kv_heads"], case["head_dim"]
    group = Hq // Hkv
    q = q.astype(np.float64).reshape(B, T, Hq, D)
    k = k.astype(np.float64).reshape(B, S, Hkv, D)
    v = v.astype(np.float64).reshape(B, S, Hkv, D)
    visible = numprobe_exec.visible_keys(case)
    if keep is not None:
        visible = visible & keep(S)[None, :]
    o = np.zeros((B, T, Hq, D))
    for b in range(B):
        for h in range(Hq):
            kv = kv_of(h, group, Hkv) if kv_of else h // group
            s = np.where(visible, (q[b, :, h] @ k[b, :, kv].T) * case["scale"], -np.inf)
            m = s.max(axis=1, keepdims=True)
            p = np.exp(s - np.where(np.isfinite(m), m, 0.0))
            l = p.sum(axis=1, keepdims=True)
            o[b, :, h] = np.where(l > 0, (p @ v[b, :, kv]) / np.where(l > 0, l, 1.0), 0.0)
    return o.reshape(B * T, Hq, D).astype(np.float32)


def healthy(q, k, v, case):
    return attention(q, k, v, case)


def drops_tail_tile(q, k, v, case):
    """Reads whole key tiles only: the keys of a partial last tile are never seen."""
    return attention(q, k, v, case, keep=lambda s: np.arange(s) < max(TILE, s // TILE * TILE))


def gqa_modulo(q, k, v, case):
    return attention(q, k, v, case, kv_of=lambda h, group, hkv: h % hkv)


def reference_kernel(q, k, v, case):
    return numpy_reference.compute(case, q, k, v)  # the exec example's kernel, o and lse


def test_drift_equals_cli_exec_bit_for_bit(cli):
    seq, hi = "64..520", 520
    args = ["drift", "--seq", seq, "--tile", "64x64", "--heads", 4, "--kv-heads", 2, "--head-dim", 32,
            "--bound", "ratio_to_naive<=2", "--json", "-"]
    ref = ROOT / "examples" / "exec" / "numpy_reference.py"
    theirs = json.loads(cli(*args, "--backend", f"exec:{sys.executable} {ref} {{in}}").stdout)
    mine = numprobe.drift(reference_kernel, seq=seq, tile=(64, 64), bounds="ratio_to_naive<=2", **SMALL)
    doc = mine.to_dict()
    assert mine.exit_code == 0 and theirs["exit_code"] == 0
    assert [p["case"] for p in doc["points"]] == [p["case"] for p in theirs["points"]]
    assert max(p["seq"] for p in doc["points"]) <= hi and len(doc["points"]) >= 9
    for a, b in zip(doc["points"], theirs["points"]):
        for key in ("rel_rms", "ratio_to_naive", "max_abs", "lse_max_abs", "naive_rel_rms"):
            if key in b:
                assert a[key] == b[key], (a["case"], key)
    assert doc["growth"] == theirs["growth"]
    assert doc["tile_pattern"] == theirs["tile_pattern"]


def test_drift_separates_a_tail_tile_bug():
    good = numprobe.drift(healthy, seq="64..600", tile=(64, 64), bounds="ratio_to_naive<=2", **SMALL)
    assert good.exit_code == 0, good.text()
    # float32 rounding of O against the bf16 naive baseline: a ratio far below 1
    assert max(p["ratio_to_naive"] for p in good.to_dict()["points"]) < 0.01
    bad = numprobe.drift(drops_tail_tile, seq="64..600", tile=(64, 64), bounds="ratio_to_naive<=2", **SMALL)
    doc = bad.to_dict()
    assert bad.exit_code == 1
    # Every length with a 63-key partial tile breaches; every multiple of the tile is exact.
    breached = {b["seq"] for b in doc["breaches"]}
    assert breached == {p["seq"] for p in doc["points"] if p["seq"] % TILE == TILE - 1}
    assert all(p["ratio_to_naive"] < 0.01 for p in doc["points"] if p["seq"] % TILE == 0)


def test_drift_kernel_failures_are_backend_errors_and_the_sweep_goes_on():
    def flaky(q, k, v, case):
        if case["seq"] % TILE == 1:
            raise RuntimeError("launch failed")
        if case["seq"] % TILE == 63:
            return healthy(q, k, v, case)[:-1]  # one row short
        return healthy(q, k, v, case)

    r = numprobe.drift(flaky, seq="64..300", tile=(64, 64), **SMALL)
    doc = r.to_dict()
    assert r.exit_code == 3
    errors = {e["seq"]: e["error"] for e in doc["point_errors"]}
    assert {s % TILE for s in errors} == {1, 63}
    assert all("flaky raised RuntimeError: launch failed" in m for s, m in errors.items() if s % TILE == 1)
    assert all("values of o, expected" in m for s, m in errors.items() if s % TILE == 63)
    assert {p["seq"] % TILE for p in doc["points"]} == {0}  # the multiples still ran


def test_drift_nan_is_a_finding():
    def nan_at_256(q, k, v, case):
        o = healthy(q, k, v, case)
        if case["seq"] == 256:
            o[5, 1, 3] = np.nan
        return o

    r = numprobe.drift(nan_at_256, seq="200..300", tile=(64, 64), **SMALL)
    assert r.exit_code == 1
    assert r.to_dict()["nan_points"] == 1


def test_drift_keyboard_interrupt_stops_the_sweep():
    calls = []

    def interrupted(q, k, v, case):
        calls.append(case["seq"])
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        numprobe.drift(interrupted, seq="64..600", tile=(64, 64), **SMALL)
    assert len(calls) == 1


def test_audit_healthy_passes_and_gqa_modulo_fails():
    good = numprobe.audit(healthy, seq=512, quick=True, tile=(64, 64), **SMALL)
    assert good.exit_code == 0, good.text()
    bad = numprobe.audit(gqa_modulo, seq=512, quick=True, tile=(64, 64), **SMALL)
    assert bad.exit_code == 1
    verdicts = {c["name"]: c["verdict"] for c in bad.to_dict()["classes"]}
    failing = [n for n, v in verdicts.items() if v == "fail"]
    assert any("gqa" in n.lower() or "head" in n.lower() for n in failing), verdicts


def test_result_reports(tmp_path):
    r = numprobe.drift(healthy, seq="64..200", tile=(64, 64), **SMALL)
    html = r.to_html(tmp_path / "d.html")
    assert (tmp_path / "d.html").read_text() == html
    assert html.lstrip().lower().startswith("<!doctype html") and "<svg" in html
    assert json.loads(r.to_json())["points"] == r.to_dict()["points"]
    assert "growth" in r.text() and "<testcase" in r.to_junit()
    assert r.to_dict()["backend"]["name"] == "python:healthy[tile=64x64]"


@pytest.mark.parametrize("kw,place", [({"tile": (64,)}, "tile"), ({"rows": 0}, "rows"), ({"seq": "9..3"}, "seq"),
                                      ({"heads": 3}, "kv_heads"), ({"bounds": "nope<=1"}, "bound"),
                                      ({"colour": "red"}, "colour")])
def test_bad_arguments_raise_value_error_naming_them(kw, place):
    args = {"seq": "64..128", **SMALL, **kw}
    with pytest.raises(ValueError, match=place):
        numprobe.drift(healthy, **args)


def test_cli_exec_nan_in_an_unsampled_row_is_a_finding(cli, tmp_path):
    # An exec kernel computes every row; the probe samples 16 of 1000. One NaN in row 500 (no
    # tile edge, no mask edge: not a row the sampler favours) must still fail the case.
    script = tmp_path / "nan_kernel.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT / 'examples' / 'exec')!r})\n"
        "import numprobe_exec, numpy_reference\n"
        "case, q, k, v = numprobe_exec.load_case(sys.argv[1])\n"
        "o, lse = numpy_reference.compute(case, q, k, v)\n"
        "o[500, 1, 3] = float('nan')\n"
        "numprobe_exec.save_output(sys.argv[1], o, lse)\n")
    p = cli("attention", "--seq", 1000, "--heads", 4, "--kv-heads", 2, "--head-dim", 32, "--rows", 16,
            "--backend", f"exec:{sys.executable} {script} {{in}}", "--json", "-", ok=(1,))
    nf = json.loads(p.stdout)["result"]["nonfinite"]
    assert nf["nan"] == 1 and nf["total"] == 1
    assert nf["rows_unsampled"] == 1 and sum(nf["rows_by_kind"].values()) == 0  # row 500 was not sampled


def test_a_kernel_that_is_no_callable_is_refused_before_any_work():
    with pytest.raises(TypeError, match="kernel: expected a callable"):
        numprobe.drift(42, seq="64..128", **SMALL)
    with pytest.raises(TypeError, match="kernel: expected a callable"):
        numprobe.audit("not a kernel", seq=128, **SMALL)


def causal_only(q, k, v, case):
    """A kernel that implements causal attention only and says so (issue 27)."""
    if case["mask"] != "causal":
        raise numprobe.Unsupported("mask=%s: causal only" % case["mask"])
    if case["queries"] > case["seq"]:
        raise NotImplementedError("T > S")
    return healthy(q, k, v, case)


def test_unsupported_cases_are_verdicts_not_errors():
    # drift: refused lengths are listed and skipped, not errors (exit 0 when the rest hold).
    def short_only(q, k, v, case):
        if case["seq"] > 200:
            raise numprobe.Unsupported("S > 200")
        return healthy(q, k, v, case)

    r = numprobe.drift(short_only, seq="64..400", points=[64, 128, 256, 400], tile=(64, 64), **SMALL)
    d = r.to_dict()
    assert r.exit_code == 0, r.text()
    assert [p["seq"] for p in d["unsupported_points"]] == [256, 400]
    assert d["unsupported_points"][0]["reason"].endswith("S > 200")
    assert d["point_errors"] == []
    # audit: a causal-only kernel exits 0 with its refusals listed; no class passes without
    # evidence, and none is inconclusive (nothing crashed).
    a = numprobe.audit(causal_only, seq=512, quick=True, tile=(64, 64), **SMALL)
    d = a.to_dict()
    assert a.exit_code == 0, a.text()
    assert d["unsupported"] and not d["errors"]
    assert {c["verdict"] for c in d["classes"]} <= {"pass", "not-applicable"}, d["classes"]
    assert d["baseline"]["verdict"] == "pass"


def test_audit_of_a_kernel_that_always_raises_has_no_pass():
    def broken(q, k, v, case):
        raise RuntimeError("launch failed")

    a = numprobe.audit(broken, seq=512, quick=True, tile=(64, 64), **SMALL)
    d = a.to_dict()
    assert a.exit_code == 3, a.text()
    assert "pass" not in {c["verdict"] for c in d["classes"]}, d["classes"]
    assert d["baseline"]["verdict"] == "inconclusive"
