"""GGUF releases through the CLI (issue 29 items 2 and 3), with llama.cpp's own gguf-py as the
writer and the oracle: a small llama-family GGUF written by gguf.GGUFWriter, its Q/K rows permuted
as llama.cpp's converter permutes them (LlamaModel.permute in convert_hf_to_gguf.py, restated
below), its linears quantized by gguf.quants.quantize, beside the Hugging Face original as
safetensors. Expected values come from gguf-py (dequantize) and NumPy, never from the CLI."""
import json
import struct

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

Q = gguf.GGMLQuantizationType
HEADS, KV_HEADS, HEAD_DIM, HIDDEN, FFN, LAYERS = 4, 2, 16, 64, 96, 2


def permute(w, n_head, n_head_kv):
    """llama.cpp's rotary row order: per head, rows (0, d/2, 1, d/2+1, ...)."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_safetensors(path, tensors):
    header, blobs, at = {}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, dtype=np.float32)
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [at, at + a.nbytes]}
        blobs.append(a.tobytes())
        at += a.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, h in header.items():
        b, e = h["data_offsets"]
        assert h["dtype"] == "F32", (name, h["dtype"])
        out[name] = np.frombuffer(raw[8 + n + b:8 + n + e], dtype=np.float32).reshape(h["shape"])
    return out


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """(gguf path, original safetensors path, {gguf name: (original name, stored bytes, qtype)})."""
    d = tmp_path_factory.mktemp("gguf")
    rng = np.random.default_rng(29)
    hf, stored = {}, {}
    w = gguf.GGUFWriter(str(d / "tiny.gguf"), "llama")
    w.add_block_count(LAYERS)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_context_length(256)

    def add(gname, hname, a, qtype, perm=None):
        hf[hname] = a
        data = permute(a, *perm) if perm else a
        q = gguf.quants.quantize(data.astype(np.float32), qtype)
        w.add_tensor(gname, q, raw_dtype=qtype)
        stored[gname] = (hname, q, qtype)

    add("token_embd.weight", "model.embed_tokens.weight", rng.standard_normal((128, HIDDEN)).astype(np.float32), Q.Q8_0)
    for i in range(LAYERS):
        b, m = f"blk.{i}.", f"model.layers.{i}."
        add(b + "attn_norm.weight", m + "input_layernorm.weight", 1 + 0.1 * rng.standard_normal(HIDDEN).astype(np.float32), Q.F32)
        add(b + "attn_q.weight", m + "self_attn.q_proj.weight",
            rng.standard_normal((HEADS * HEAD_DIM, HIDDEN)).astype(np.float32), Q.Q4_0, (HEADS, HEADS))
        add(b + "attn_k.weight", m + "self_attn.k_proj.weight",
            rng.standard_normal((KV_HEADS * HEAD_DIM, HIDDEN)).astype(np.float32), Q.Q4_1, (HEADS, KV_HEADS))
        add(b + "attn_v.weight", m + "self_attn.v_proj.weight",
            rng.standard_normal((KV_HEADS * HEAD_DIM, HIDDEN)).astype(np.float32), Q.Q5_0)
        add(b + "attn_output.weight", m + "self_attn.o_proj.weight",
            rng.standard_normal((HIDDEN, HEADS * HEAD_DIM)).astype(np.float32), Q.Q8_0)
        add(b + "ffn_gate.weight", m + "mlp.gate_proj.weight", rng.standard_normal((FFN, HIDDEN)).astype(np.float32), Q.Q5_1)
        add(b + "ffn_up.weight", m + "mlp.up_proj.weight", rng.standard_normal((FFN, HIDDEN)).astype(np.float32), Q.Q4_0)
        add(b + "ffn_down.weight", m + "mlp.down_proj.weight", rng.standard_normal((HIDDEN, FFN)).astype(np.float32), Q.F16)
        add(b + "ffn_norm.weight", m + "post_attention_layernorm.weight", np.ones(HIDDEN, np.float32), Q.F32)
    add("output_norm.weight", "model.norm.weight", np.ones(HIDDEN, np.float32), Q.F32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    write_safetensors(d / "original.safetensors", hf)
    return d / "tiny.gguf", d / "original.safetensors", stored


def oracle(q, qtype, shape):
    return gguf.quants.dequantize(q, qtype).reshape(shape).astype(np.float32)


def test_scan_lists_every_tensor_with_its_type(cli, model):
    path, _, stored = model
    doc = json.loads(cli("scan", path, "--json", "-").stdout)
    checks = doc
    got = {t["name"]: t for t in checks["tensors"]}
    assert set(got) == set(stored)
    for name, (hname, q, qtype) in stored.items():
        t = got[name]
        assert t["type"] == qtype.name
        assert t["original_name"] == hname
        values = gguf.quants.dequantize(q, qtype)
        assert t["stats"]["abs_max"] == pytest.approx(float(np.abs(values).max()), rel=0, abs=0)
        assert t["stats"]["nonfinite"] == 0


def test_scan_against_the_original_undoes_the_rotary_permutation(cli, model):
    path, orig, stored = model
    doc = json.loads(cli("scan", path, "--against", orig, "--json", "-").stdout)
    checks = doc
    got = {t["name"]: t for t in checks["tensors"]}
    hf = read_safetensors(orig)
    for name, (hname, q, qtype) in stored.items():
        x = hf[hname].astype(np.float64)
        deq = gguf.quants.dequantize(q, qtype).astype(np.float64)
        if name.endswith(("attn_q.weight", "attn_k.weight")):
            deq_hf_order = np.empty_like(deq)
            n = HEADS if "attn_q" in name else KV_HEADS
            # Stored row h*d + 2i + s holds original row h*d + s*d/2 + i.
            for r in range(deq.shape[0]):
                h, j = divmod(r, HEAD_DIM)
                deq_hf_order[h * HEAD_DIM + (j % 2) * (HEAD_DIM // 2) + j // 2] = deq[r]
            deq = deq_hf_order
        deq = deq.reshape(x.shape)
        sqnr = 10 * np.log10((x ** 2).sum() / ((deq - x) ** 2).sum()) if qtype != Q.F32 else None
        a = got[name]["against"]
        if sqnr is None:
            assert a["sqnr_db"] is None or a["sqnr_db"] == "inf" or a["sqnr_db"] > 300
        else:
            # Both sums are over the same float32 values in double: equal to ~1e-12 relative.
            assert a["sqnr_db"] == pytest.approx(sqnr, rel=1e-9), name
    # A 4-bit weight against its own original sits near 4-bit SQNR; against rows in the wrong
    # order it would be near 0 dB: the permutation was undone.
    assert got["blk.0.attn_q.weight"]["against"]["sqnr_db"] > 15


def test_convert_dequant_is_gguf_py_bit_for_bit(cli, model, tmp_path):
    path, _, stored = model
    cli("convert", path, "--to", "dequant", "--write", tmp_path / "out")
    index = json.loads((tmp_path / "out" / "model.safetensors.index.json").read_text())
    out = {}
    for f in sorted(set(index["weight_map"].values())):
        out.update(read_safetensors(tmp_path / "out" / f))
    assert set(out) == set(stored)  # the release's own names
    for name, (_, q, qtype) in stored.items():
        want = gguf.quants.dequantize(q, qtype).astype(np.float32)
        got = out[name]
        assert got.shape == want.shape, name
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), name


def test_convert_to_nvfp4_serves_hugging_face_names(cli, model, tmp_path):
    path, orig, _ = model
    cli("convert", path, "--to", "nvfp4", "--write", tmp_path / "nv")
    cfg = json.loads((tmp_path / "nv" / "config.json").read_text())
    assert cfg["num_attention_heads"] == HEADS and cfg["num_key_value_heads"] == KV_HEADS
    assert cfg["hidden_size"] == HIDDEN and cfg["num_hidden_layers"] == LAYERS
    assert cfg["quantization_config"]
    # The written release reads back as ModelOpt NVFP4 under Hugging Face names, and against the
    # original its q_proj is a 4-bit-over-4-bit error, not a permuted one.
    doc = json.loads(cli("scan", tmp_path / "nv", "--against", orig, "--json", "-").stdout)
    checks = doc
    got = {t["name"]: t for t in checks["tensors"]}
    assert "model.layers.0.self_attn.q_proj.weight" in got
    assert checks["layout"] == "modelopt-nvfp4"
    assert got["model.layers.0.self_attn.q_proj.weight"]["against"]["sqnr_db"] > 12
    assert not checks["missing_in_original"]


def test_hostile_gguf_is_exit_2_naming_the_file(cli, model, tmp_path):
    path, _, _ = model
    raw = bytearray(path.read_bytes())
    bad = tmp_path / "truncated.gguf"
    bad.write_bytes(bytes(raw[: len(raw) // 2]))
    p = cli("scan", bad, ok=(2,))
    assert "truncated.gguf" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    huge = bytearray(raw)
    huge[16:24] = struct.pack("<Q", 1 << 62)  # kv_count
    bad2 = tmp_path / "huge_kv.gguf"
    bad2.write_bytes(bytes(huge))
    p = cli("scan", bad2, ok=(2,))
    assert "huge_kv.gguf" in p.stderr
