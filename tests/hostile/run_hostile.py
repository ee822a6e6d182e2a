#!/usr/bin/env python3
"""Hostile-input tour of the numprobe CLI (issue 15), as a repeatable test.

Each line of cases.txt is one invocation:  EXIT | REGEX | ARGS
  EXIT   the exit code expected (2 input error, 1 finding, 0 pass, 3 backend)
  REGEX  a Python regex that the one-line error (stderr's "numprobe: ..." lines; stdout too
         for exit codes 0 and 1) must match
  ARGS   the arguments after `numprobe`, split like a shell would (shlex); {T} is the folder
         of fixtures this script writes first (truncated and malicious files, FIFOs, ...).
         ARGS may end with ` ;; absent PATH`: that file must not exist afterwards (a report
         left behind by a command that then failed).
A case is a defect when it exits otherwise, runs past the time limit (a hang), dies on a
signal (a crash), or prints an error that does not match. The table at the end gives the
cases, the OK ones and the defects left; the script exits 1 if any defect is left.
No numpy needed: every fixture is written byte by byte here.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import time


def npy(descr, shape, data, version=1, header_extra=""):
    shape_txt = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
    h = "{'descr': '%s', 'fortran_order': False, 'shape': %s, %s}" % (descr, shape_txt, header_extra)
    h = h.encode("latin-1")
    pad = (64 - (10 + len(h) + 1) % 64) % 64
    h = h + b" " * pad + b"\n"
    return b"\x93NUMPY" + bytes([version, 0]) + struct.pack("<H", len(h)) + h + data


def f32(values):
    return struct.pack("<%df" % len(values), *values)


def safetensors(tensors, extra_header=None, data_override=None):
    header, data = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if extra_header:
        header.update(extra_header)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + (data if data_override is None else data_override)


def write(path, content):
    with open(path, "wb" if isinstance(content, bytes) else "w") as f:
        f.write(content)


def make_fixtures(t):
    os.makedirs(os.path.join(t, "dir.npy"))
    os.makedirs(os.path.join(t, "dir.toml"))
    os.mkfifo(os.path.join(t, "fifo.npy"))
    os.mkfifo(os.path.join(t, "fifo.toml"))
    os.mkfifo(os.path.join(t, "fifo.safetensors"))
    os.symlink(os.path.join(t, "loop.npy"), os.path.join(t, "loop.npy"))
    os.symlink(os.path.join(t, "loop.toml"), os.path.join(t, "loop.toml"))
    vals = [((i * 37) % 101 - 50) / 17.0 for i in range(64 * 64)]
    good = npy("<f4", (64, 64), f32(vals))
    write(os.path.join(t, "good.npy"), good)
    write(os.path.join(t, "good2.npy"), npy("<f4", (64, 64), f32([v * 0.9 + 0.01 for v in vals])))
    write(os.path.join(t, "tok15.npy"), npy("<f4", (64,), f32([1.5] + [3.0] * 63)))  # 64 rows of good.npy
    write(os.path.join(t, "truncated.npy"), good[: len(good) // 2])
    write(os.path.join(t, "trailing.npy"), good + b"xxxx")
    write(os.path.join(t, "badmagic.npy"), b"\x93NUMPX" + good[6:])
    write(os.path.join(t, "empty.npy"), b"")
    write(os.path.join(t, "hugehdr.npy"), b"\x93NUMPY\x02\x00" + struct.pack("<I", 0x7FFFFFFF) + b"{}")
    write(os.path.join(t, "hdrpast.npy"), b"\x93NUMPY\x01\x00" + struct.pack("<H", 5000) + b"{'descr'")
    write(os.path.join(t, "nuldescr.npy"), npy("<f\x004", (4,), f32([1, 2, 3, 4])))
    write(os.path.join(t, "bigdim.npy"), npy("<f4", (99999999999999999999999,), b""))
    write(os.path.join(t, "hugeshape.npy"), npy("<f4", (1 << 40, 1 << 30), b""))
    write(os.path.join(t, "negdim.npy"), npy("<f4", (-4,), b""))
    write(os.path.join(t, "fortran.npy"), npy("<f4", (4,), f32([1, 2, 3, 4])).replace(b"False", b"True "))
    write(os.path.join(t, "bigendian.npy"), npy(">f4", (4,), f32([1, 2, 3, 4])))
    write(os.path.join(t, "struct.npy"), b"\x93NUMPY\x01\x00" + struct.pack("<H", 64) +
          b"{'descr': [('a','<f4')], 'fortran_order': False, 'shape': (1,), }".ljust(63) + b"\n")
    write(os.path.join(t, "i32.npy"), npy("<i4", (4, 4), struct.pack("<16i", *range(16))))
    nan_vals = list(vals)
    nan_vals[5] = float("nan")
    nan_vals[77] = float("inf")
    write(os.path.join(t, "nan.npy"), npy("<f4", (64, 64), f32(nan_vals)))
    write(os.path.join(t, "vec.npy"), npy("<f4", (4096,), f32(vals)))
    write(os.path.join(t, "logits_a.npy"), npy("<f4", (8, 64), f32(vals[: 8 * 64])))
    write(os.path.join(t, "logits_b.npy"), npy("<f4", (8, 32), f32(vals[: 8 * 32])))
    write(os.path.join(t, "logits_nan.npy"), npy("<f4", (8, 64), f32(nan_vals[: 8 * 64])))
    st = {"model.layers.0.mlp.down_proj.weight": ("F32", [64, 64], f32(vals))}
    write(os.path.join(t, "good.safetensors"), safetensors(st))
    write(os.path.join(t, "notensors.safetensors"), safetensors({}, {"__metadata__": {"a": "b"}}))
    write(os.path.join(t, "nan.safetensors"), safetensors({"w": ("F32", [64, 64], f32(nan_vals))}))
    write(os.path.join(t, "st_trunc.safetensors"), safetensors(st)[:-100])
    write(os.path.join(t, "st_overlap.safetensors"),
          safetensors({"a": ("F32", [4], f32([1] * 4)), "b": ("F32", [4], f32([1] * 4))},
                      {"b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}}, f32([1] * 8)))
    write(os.path.join(t, "st_hugelen.safetensors"), struct.pack("<Q", 1 << 62) + b"{}")
    write(os.path.join(t, "st_badjson.safetensors"), struct.pack("<Q", 8) + b"{not js}")
    write(os.path.join(t, "st_dtype.safetensors"), safetensors({"w": ("Q7", [4], b"\0" * 4)}))
    # A tensor name with a newline that forges an output line, an ANSI escape and a NUL.
    write(os.path.join(t, "st_evilname.safetensors"),
          safetensors({"w\nnumprobe: all good \x1b[2J\x00cut": ("Q7", [4], b"\0" * 4)}))
    write(os.path.join(t, "st_shape.safetensors"), safetensors({"w": ("F32", [5], f32([1] * 4))}))
    write(os.path.join(t, "st_neg.safetensors"),
          safetensors({}, {"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}}))
    write(os.path.join(t, "st_deep.safetensors"),
          safetensors({}, {"w": {"dtype": "F32", "shape": [[[[1]]]], "data_offsets": [0, 0]}}))
    write(os.path.join(t, "self.json"), json.dumps({"weight_map": {"w": "self.json"}}))
    write(os.path.join(t, "traverse.json"), json.dumps({"weight_map": {"w": "../etc/passwd"}}))
    write(os.path.join(t, "absolute.json"), json.dumps({"weight_map": {"w": "/etc/passwd"}}))
    write(os.path.join(t, "missing_shard.json"), json.dumps({"weight_map": {"w": "nope.safetensors"}}))
    write(os.path.join(t, "garbage.json"), "{{{{")
    write(os.path.join(t, "garbage.toml"), "[[[ this is not toml")
    write(os.path.join(t, "binary.toml"), b"\x00\x01\x02\xff\xfe")
    write(os.path.join(t, "nochecks.toml"), 'title = "x"\n')
    write(os.path.join(t, "unknownprobe.toml"), '[[check]]\nname = "a"\nprobe = "nosuch"\n')
    write(os.path.join(t, "badmetric.toml"),
          '[[check]]\nname = "a"\nprobe = "quant"\nshape = "16x64"\nbounds = [\n  "sqnr_db>=1",\n  "sqnrr>=1",\n]\n')
    vals100 = ",".join(str(i) for i in range(100))
    write(os.path.join(t, "bigsweep.toml"),
          '[[check]]\nname = "a"\nprobe = "quant"\nsweep = { seed = [%s], group = [%s], worst = [%s], axis = [%s], rule = ["floor", "ceil"] }\n'
          % (vals100, vals100, vals100, vals100))
    write(os.path.join(t, "nobasis.toml"), '[[check]]\nname = "a"\nprobe = "quant"\nshape = "16x64"\nbound = "sqnr_db>=1"\n')
    write(os.path.join(t, "quantnan.toml"),
          '[[check]]\nname = "a"\nprobe = "quant"\ninput = "%s"\nbound = "sqnr_db>=1"\nbasis = "x"\n' % os.path.join(t, "nan.npy"))
    write(os.path.join(t, "scanempty.toml"),
          '[[check]]\nname = "a"\nprobe = "scan"\ncheckpoint = "%s"\n' % os.path.join(t, "notensors.safetensors"))
    write(os.path.join(t, "ok.toml"), '[[check]]\nname = "q"\nprobe = "quant"\nshape = "16x64"\nbound = "sqnr_db>=1"\nbasis = "x"\n')
    os.makedirs(os.path.join(t, "garbage_out"))
    write(os.path.join(t, "garbage_out", "journal.jsonl"), b"\x01\x02garbage\n")
    write(os.path.join(t, "result_garbage.json"), "not json")
    write(os.path.join(t, "result_other.json"), json.dumps({"tool": "other"}))
    make_release_fixtures(t)
    make_gguf_fixtures(t)


def gguf_string(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gguf(tensors, kvs=(), version=3, align=32, counts=None):
    """A GGUF image, byte by byte (ggml's gguf.cpp layout): tensors are (name, ne, type, data)
    with offsets laid out at `align`, or (name, ne, type, data, offset) to force one; kvs are
    raw (key, type, value bytes). counts=(n_tensors, n_kv) overrides the header's counts."""
    out = b"GGUF" + struct.pack("<I", version)
    nt, nk = counts if counts else (len(tensors), len(kvs))
    out += struct.pack("<QQ", nt, nk)
    for key, vtype, raw in kvs:
        out += gguf_string(key) + struct.pack("<I", vtype) + raw
    data, at = b"", 0
    for t in tensors:
        name, ne, ttype, blob = t[:4]
        off = t[4] if len(t) > 4 else at
        out += gguf_string(name) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne)
        out += struct.pack("<IQ", ttype, off)
        if len(t) <= 4:
            data += blob + b"\0" * (-len(blob) % align)
            at = len(data)
    out += b"\0" * (-len(out) % align)
    return out + data


def q8_0_blocks(n_blocks, scale=0.01):
    return b"".join(struct.pack("<e", scale) + bytes((i * 7 + 3) % 256 for i in range(32)) for _ in range(n_blocks))


def make_gguf_fixtures(t):
    """GGUF files for cases_gguf.txt (issue 29): one valid llama-shaped file, then one defect each."""
    arch = ("general.architecture", 8, gguf_string("llama"))
    norm = ("blk.0.attn_norm.weight", [64], 0, f32([1.0] * 64))
    q = ("blk.0.attn_q.weight", [64, 4], 8, q8_0_blocks(8))
    write(os.path.join(t, "ok.gguf"), gguf([norm, q], [arch]))
    write(os.path.join(t, "model.bin"), gguf([norm, q], [arch]))  # detected by magic, not by name
    nan = ("blk.0.attn_q.weight", [64, 4], 8, q8_0_blocks(7) + struct.pack("<e", float("nan")) + bytes(32))
    write(os.path.join(t, "nan_scale.gguf"), gguf([norm, nan], [arch]))
    full = gguf([norm, q], [arch])
    write(os.path.join(t, "trunc_header.gguf"), full[:20])
    write(os.path.join(t, "trunc_data.gguf"), full[:-40])
    write(os.path.join(t, "kv_huge.gguf"), gguf([norm], [arch], counts=(1, 1 << 62)))
    write(os.path.join(t, "tensors_huge.gguf"), gguf([norm], [arch], counts=(1 << 61, 1)))
    write(os.path.join(t, "str_huge.gguf"), b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1 << 60) + b"k" * 64)
    write(os.path.join(t, "dims5.gguf"), gguf([("x", [2, 2, 2, 2, 2], 0, f32([1.0] * 32))]))
    write(os.path.join(t, "ne_overflow.gguf"), gguf([("x", [1 << 40, 1 << 40], 0, f32([1.0] * 4))]))
    write(os.path.join(t, "offset_past.gguf"), gguf([("x", [4], 0, f32([1.0] * 4), 1 << 40)]))
    write(os.path.join(t, "overlap.gguf"), gguf([("a", [16], 0, b"", 0), ("b", [16], 0, b"", 32)]) + f32([0.5] * 24))
    write(os.path.join(t, "type99.gguf"), gguf([("x", [32], 99, bytes(64))]))
    write(os.path.join(t, "iq2.gguf"), gguf([("blk.0.attn_q.weight", [256, 1], 16, bytes(66))]))
    write(os.path.join(t, "v1.gguf"), gguf([norm], version=1))
    write(os.path.join(t, "align0.gguf"), gguf([norm], [("general.alignment", 4, struct.pack("<I", 0))]))
    write(os.path.join(t, "align3.gguf"), gguf([norm], [("general.alignment", 4, struct.pack("<I", 3))]))
    write(os.path.join(t, "dup.gguf"), gguf([norm, norm]))
    write(os.path.join(t, "esc_name.gguf"), gguf([("x\x1b[31m\ny", [4], 99, bytes(16))]))
    write(os.path.join(t, "nested.gguf"), gguf([norm], [("k", 9, struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 4, 0))]))
    write(os.path.join(t, "orig_q_wrong.safetensors"),
          safetensors({"model.layers.0.self_attn.q_proj.weight": ("F32", [64, 4], f32([0.5] * 256))}))


def f16(values):
    return struct.pack("<%de" % len(values), *values)


def awq_weight(prefix, out, inn, groups, scales):
    """AWQ GEMM tensors of one weight [out, inn]: nibbles 0..7 in every word, zeros 8."""
    words = out // 8
    return {prefix + ".qweight": ("I32", [inn, words], struct.pack("<%dI" % (inn * words), *([0x76543210] * (inn * words)))),
            prefix + ".qzeros": ("I32", [groups, words], struct.pack("<%dI" % (groups * words), *([0x88888888] * (groups * words)))),
            prefix + ".scales": ("F16", [groups, out], f16(scales))}


def release_dir(t, name, tensors, config=None):
    d = os.path.join(t, name)
    os.makedirs(d)
    write(os.path.join(d, "model.safetensors"), safetensors(tensors))
    if config is not None:
        write(os.path.join(d, "config.json"), json.dumps({"quantization_config": config}))
    return d


def make_release_fixtures(t):
    """Releases, originals and --identify folders for cases_release.txt (issue 27 item 6)."""
    awq_cfg = {"quant_method": "awq", "version": "gemm", "bits": 4, "group_size": 32, "zero_point": True}
    ok_scales = [0.01 * (1 + (i % 5)) for i in range(2 * 16)]
    nan_scales = list(ok_scales)
    nan_scales[21] = float("nan")
    norm = {"model.norm.weight": ("F32", [16], f32([1.0] * 16))}

    def layers(n, nan_layer=None):
        ts = dict(norm)
        for k in range(n):
            ts.update(awq_weight("model.layers.%d.mlp.up_proj" % k, 16, 64, 2,
                                 nan_scales if k == nan_layer else ok_scales))
        return ts
    release_dir(t, "awq_ok", layers(2), awq_cfg)
    release_dir(t, "awq_nan", layers(2, nan_layer=1), awq_cfg)
    release_dir(t, "awq_nan_last", layers(8, nan_layer=7), awq_cfg)
    # Side files that are folders, not JSON files.
    d = release_dir(t, "cfg_is_dir", layers(1))
    os.makedirs(os.path.join(d, "config.json"))
    d = release_dir(t, "hfq_is_dir", layers(1))
    os.makedirs(os.path.join(d, "hf_quant_config.json"))
    d = release_dir(t, "index_is_dir", layers(1), awq_cfg)
    os.makedirs(os.path.join(d, "model.safetensors.index.json"))
    # Originals of awq_ok's [16, 64] weights that are not that weight.
    w = [((i * 13) % 29 - 14) / 100.0 for i in range(16 * 64)]
    names = ["model.layers.%d.mlp.up_proj.weight" % k for k in range(2)]
    write(os.path.join(t, "orig_ok.safetensors"), safetensors({n: ("F32", [16, 64], f32(w)) for n in names}))
    write(os.path.join(t, "orig_transposed.safetensors"), safetensors({n: ("F32", [64, 16], f32(w)) for n in names}))
    write(os.path.join(t, "orig_flat.safetensors"), safetensors({n: ("F32", [1024], f32(w)) for n in names}))
    write(os.path.join(t, "orig_i32.safetensors"),
          safetensors({n: ("I32", [16, 64], struct.pack("<1024i", *range(1024))) for n in names}))
    write(os.path.join(t, "orig_e4m3.safetensors"), safetensors({n: ("F8_E4M3", [16, 64], b"\x38" * 1024) for n in names}))
    # ModelOpt NVFP4: layer 0 packed uint8 codes, layer 1 the weight stored as F32 (or I8) beside
    # its e4m3 block scales and weight_scale_2.
    def nvfp4(prefix, wdtype, wbytes):
        return {prefix + ".weight": (wdtype, [16, 16] if wdtype == "U8" else [16, 32], wbytes),
                prefix + ".weight_scale": ("F8_E4M3", [16, 2], b"\x38" * 32),
                prefix + ".weight_scale_2": ("F32", [], f32([0.01]))}
    # Eight NVFP4 weights in as many shards; the last one's block scale 0x7F is an e4m3 NaN.
    ts = dict(norm)
    for k in range(8):
        ts.update(nvfp4("model.layers.%d.mlp.up_proj" % k, "U8", b"\x21" * 256))
    ts["model.layers.7.mlp.up_proj.weight_scale"] = ("F8_E4M3", [16, 2], b"\x38" * 31 + b"\x7f")
    release_dir(t, "nvfp4_nan_last", ts)
    os.makedirs(os.path.join(t, "empty_out"))  # an existing empty --write folder
    for tag, wd, wb in (("f32w", "F32", f32([0.5] * 512)), ("i8w", "I8", b"\x01" * 512)):
        ts = dict(norm)
        ts.update(nvfp4("model.layers.0.mlp.up_proj", "U8", b"\x21" * 256))
        ts.update(nvfp4("model.layers.1.mlp.up_proj", wd, wb))
        release_dir(t, "nvfp4_" + tag, ts)
    # quant --identify: a constant input (every element 1.0, 32x128): mxfp4 codes are all 6 (4.0
    # under the shared exponent 2^-2), mxfp8's all 0x70 (256 x 2^-8 ... see the case).
    write(os.path.join(t, "ones.npy"), npy("<f4", (32, 128), f32([1.0] * 4096)))
    def ident(name, codes, scales=None):
        d = os.path.join(t, name)
        os.makedirs(d)
        write(os.path.join(d, "codes.npy"), codes)
        if scales is not None:
            write(os.path.join(d, "scales.npy"), scales)
    ident("id_ok", npy("|u1", (32, 128), b"\x06" * 4096))
    ident("id_transposed", npy("|u1", (128, 32), b"\x06" * 4096))
    ident("id_flat", npy("|u1", (4096,), b"\x06" * 4096))
    ident("id_ff", npy("|u1", (32, 128), b"\xff" * 4096))
    ident("id_300", npy("<u2", (32, 128), struct.pack("<4096H", *([300] * 4096))))
    ident("id_bool", npy("|b1", (32, 128), b"\x01" * 4096))
    ident("id_i32scales", npy("|u1", (32, 128), b"\x06" * 4096), npy("<i4", (32, 4), struct.pack("<128i", *([125] * 128))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--numprobe", required=True)
    ap.add_argument("--cases", required=True, action="append", help="a cases file (repeatable)")
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    t = tempfile.mkdtemp(prefix="numprobe_hostile_")
    env = dict(os.environ, NO_COLOR="1", NUMPROBE_MAX_MEMORY="8G")
    try:
        make_fixtures(t)
        cases = []
        for path in a.cases:
            with open(path) as f:
                for n, line in enumerate(f, 1):
                    line = line.rstrip("\n")
                    if not line.strip() or line.lstrip().startswith("#"):
                        continue
                    code, regex, args = (p.strip() for p in line.split(" | ", 2))
                    args, _, after = args.partition(" ;; ")
                    where = "%s:%d" % (os.path.basename(path), n)
                    cases.append((where, int(code), regex, args.strip(), after.strip()))
        ok, defects, t0 = 0, [], time.time()
        for n, code, regex, args, after in cases:
            argv = [os.path.abspath(a.numprobe)] + [x.replace("{T}", t) for x in shlex.split(args)]
            try:
                p = subprocess.run(argv, capture_output=True, timeout=a.timeout, env=env, cwd=t,
                                   stdin=subprocess.DEVNULL)
                rc, out, err = p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
            except subprocess.TimeoutExpired:
                defects.append((n, args, "hang: no exit within %.0f s" % a.timeout))
                continue
            lines = [l for l in err.splitlines() if l.startswith("numprobe")]
            # `run` reports a failing check in its report (stdout), not as one error line.
            is_run = args.split()[:1] == ["run"]
            text = "\n".join(lines + (out.splitlines() if code in (0, 1) or is_run else []))
            why = None
            if rc < 0:
                why = "crash: signal %d" % -rc
            elif rc != code:
                why = "exit %d, expected %d: %s" % (rc, code, (lines[-1] if lines else out.strip()[-200:]))
            elif code == 2 and not is_run and not any(l.startswith("numprobe: error: ") for l in lines):
                why = "no one-line 'numprobe: error:' message"
            elif not re.search(regex, text):
                why = "message does not match /%s/: %s" % (regex, (lines[-1] if lines else text[-200:]))
            elif after.startswith("absent ") and os.path.exists(after[len("absent "):].replace("{T}", t)):
                why = "left %s behind" % after[len("absent "):]
            if why:
                defects.append((n, args, why))
            else:
                ok += 1
                if a.verbose:
                    print("ok   %s: %s -> %d %s" % (n, args, rc, lines[-1] if lines else ""))
        for n, args, why in defects:
            print("DEFECT %s: numprobe %s\n       %s" % (n, args, why))
        print("\nhostile inputs: %d cases, %d OK, %d defects left (%.1f s)" % (len(cases), ok, len(defects), time.time() - t0))
        return 1 if defects else 0
    finally:
        shutil.rmtree(t, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
