"""The package against the CLI, bit for bit: inputs(case id) vs the q/k/v.npy that
`numprobe attention --case ID --backend exec:` hands a kernel; quantize vs `numprobe quant
--input X.npy --dump DIR`; kl vs `numprobe kl --json`. Expected values come from the CLI."""
import json

import numpy as np
import pytest

import numprobe

CASES = [
    "attention(T=65,S=65,Hq=4,Hkv=2,D=64,in=bf16,mask=causal,seed=7)",
    "attention(T=17,S=129,Hq=4,Hkv=1,D=32,in=f16,mask=none,seed=3)",
    "attention(T=64,S=64,Hq=2,Hkv=2,D=16,in=bf16,mask=none,dist=llm,seed=11)",
]


@pytest.mark.parametrize("case_id", CASES, ids=CASES)
def test_inputs_bit_exact_vs_cli_dump(cli, tmp_path, case_id):
    # The exec backend writes q/k/v.npy into its case directory; cp saves them. The command
    # writes no o.npy, so the CLI exits 3 (backend failed) after the copy.
    cli("attention", "--case", case_id, "--backend", f"exec:cp {{in}}/q.npy {{in}}/k.npy {{in}}/v.npy {tmp_path}",
        ok=(3,))
    q, k, v = numprobe.inputs(case_id)
    for name, mine in zip("qkv", (q, k, v)):
        theirs = np.load(tmp_path / f"{name}.npy")
        assert mine.dtype == theirs.dtype and mine.shape == theirs.shape
        assert np.array_equal(mine.view(np.uint32), theirs.view(np.uint32)), name
    # A Case (numprobe.cases) gives the same arrays as its id (issue 27 item 5).
    for mine, same in zip(numprobe.inputs(numprobe._cases.Case(case_id)), (q, k, v)):
        assert np.array_equal(mine.view(np.uint32), same.view(np.uint32))


def test_inputs_of_neither_an_id_nor_a_case_is_a_type_error():
    with pytest.raises(TypeError, match="case: expected a case id"):
        numprobe.inputs(42)


QUANT = [("nvfp4", {}), ("nvfp4", {"preset": "torchao"}), ("mxfp4", {"rule": "ceil"}), ("fp8-channel", {}),
         ("int8-channel", {})]


@pytest.mark.parametrize("scheme,conv", QUANT, ids=[f"{s}-{c}" for s, c in QUANT])
def test_quantize_bit_exact_vs_cli_dump(cli, tmp_path, scheme, conv):
    rng = np.random.default_rng(42)
    x = (rng.standard_normal((48, 96)) * np.exp(rng.standard_normal((48, 1)))).astype(np.float32)
    x[3, 5] = 40.0  # an outlier block
    np.save(tmp_path / "x.npy", x)
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in conv.items()]
    cli("quant", "--input", tmp_path / "x.npy", "--scheme", scheme, *flags, "--dump", tmp_path / "d",
        "--json", tmp_path / "q.json")
    r = numprobe.quantize(x, scheme, **conv)
    codes = np.load(tmp_path / "d" / "codes.npy")
    assert np.array_equal(r.codes, codes.astype(np.uint32))
    scales = np.load(tmp_path / "d" / "scales.npy")
    mine = r.scale_codes if scales.dtype == np.uint8 else r.scales.astype(np.float32)
    assert np.array_equal(mine.reshape(scales.shape), scales)
    assert np.array_equal(r.dequant.astype(np.float32), np.load(tmp_path / "d" / "dequant.npy"))
    doc = json.loads((tmp_path / "q.json").read_text())
    point = doc["points"][0] if "points" in doc else doc
    for key in ("sqnr_db", "flushed", "clipped"):
        if key in point:
            assert r.stats[key] == point[key], key


def test_kl_matches_cli(cli, tmp_path):
    rng = np.random.default_rng(3)
    base = rng.standard_normal((200, 500)).astype(np.float32) * 3
    cand = (base + 0.1 * rng.standard_normal(base.shape)).astype(np.float32)
    np.save(tmp_path / "b.npy", base)
    np.save(tmp_path / "c.npy", cand)
    doc = json.loads(cli("kl", tmp_path / "b.npy", tmp_path / "c.npy", "--json", "-").stdout)
    point = doc["points"][0] if "points" in doc else doc
    mine = numprobe.kl(base, cand)
    for key in ("mean", "median", "p99", "max"):
        assert mine["kld"][key] == point["kld"][key], key
    assert mine["top1_agreement"] == point["top1_agreement"]
    assert mine["delta_p"]["rms"] == point["delta_p"]["rms"]


def test_kl_by_position_matches_cli(cli, tmp_path):
    # Two sequences of 100 positions whose candidate error grows with the position: the bins
    # and the growth fit must be the CLI's (`kl --positions 10 --seq-len 100`), value for value.
    rng = np.random.default_rng(5)
    base = rng.standard_normal((2, 100, 300)).astype(np.float32) * 3
    growth = (1 + np.arange(100, dtype=np.float32) / 25)[None, :, None]
    cand = (base + 0.02 * growth * rng.standard_normal(base.shape)).astype(np.float32)
    np.save(tmp_path / "b.npy", base.reshape(200, 300))
    np.save(tmp_path / "c.npy", cand.reshape(200, 300))
    doc = json.loads(cli("kl", tmp_path / "b.npy", tmp_path / "c.npy", "--positions", 10, "--seq-len", 100,
                         "--json", "-").stdout)
    point = doc["points"][0] if "points" in doc else doc
    mine = numprobe.kl(base, cand, positions=10)  # seq_len from the [batch, seq, V] shape
    assert mine["positions"] == point["positions"]
    assert mine["positions"]["fit"]["grows"] is True
