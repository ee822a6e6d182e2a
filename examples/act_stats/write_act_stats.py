#!/usr/bin/env python3
"""Write the activation statistics `numprobe scan --act-stats` reads.

For every nn.Linear of a model, forward hooks accumulate each input channel's mean square
activation E[x_j^2] (the statistic AWQ uses) over a text sample, or over random token ids when
no text or tokenizer is at hand. The file is a .safetensors of f32 vectors, one per Linear,
keyed by the Linear's weight name ("model.layers.0.mlp.up_proj.weight"), which is the name
`numprobe scan` looks up first (it also accepts the ".weight" suffix replaced by
".input_sq_mean"). See README.md in this directory.

Importing this file needs only the standard library: torch, transformers and numpy are imported
where they are used, so the module loads (and --synthetic runs, with numpy) without PyTorch.
"""
from __future__ import annotations

import argparse
import json
import struct
import sys
from typing import Dict, Iterable, Optional


def weight_key(module_name: str, prefix: str = "") -> str:
    """The act-stats key of a Linear named `module_name`: its weight's name in the checkpoint."""
    return f"{prefix}{module_name}.weight"


def write_safetensors_f32(path: str, tensors: Dict[str, "object"]) -> None:
    """A minimal safetensors writer for 1-D float32 arrays (numpy), used when the safetensors
    package is missing. Layout: u64 little-endian header length, JSON header padded with spaces
    to a multiple of 8, then the tensors' bytes back to back in header order."""
    import numpy as np

    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(np.asarray(tensors[name], dtype="<f4").reshape(-1))
        header[name] = {"dtype": "F32", "shape": [int(a.size)], "data_offsets": [offset, offset + a.nbytes]}
        blobs.append(a.tobytes())
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def save(path: str, stats: Dict[str, "object"]) -> None:
    """stats: key -> 1-D float array (numpy). safetensors.numpy.save_file when available."""
    import numpy as np

    arrays = {k: np.ascontiguousarray(np.asarray(v, dtype=np.float32).reshape(-1)) for k, v in stats.items()}
    try:
        from safetensors.numpy import save_file
    except ImportError:
        write_safetensors_f32(path, arrays)
    else:
        save_file(arrays, path)


class ActStats:
    """Forward hooks on every nn.Linear of `model` (or the module types given) that accumulate,
    per input channel j, the sum of x_j^2 over all rows (tokens) in float64, and the row count.
    mean_squares() returns E[x_j^2] per Linear, keyed by weight_key()."""

    def __init__(self, model, module_types: Optional[Iterable[type]] = None, prefix: str = ""):
        import torch

        types = tuple(module_types) if module_types else (torch.nn.Linear,)
        self._sums: Dict[str, "torch.Tensor"] = {}
        self._rows: Dict[str, int] = {}
        self._handles = []
        for name, module in model.named_modules():
            if isinstance(module, types):
                self._handles.append(module.register_forward_hook(self._hook(weight_key(name, prefix))))

    def _hook(self, key: str):
        def hook(module, inputs, output):
            x = inputs[0].detach()
            x = x.reshape(-1, x.shape[-1]).double()  # float64 sums: no overflow from bf16 inputs
            s = (x * x).sum(dim=0).cpu()
            if key in self._sums:
                self._sums[key] += s
            else:
                self._sums[key] = s
            self._rows[key] = self._rows.get(key, 0) + x.shape[0]

        return hook

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def mean_squares(self) -> Dict[str, "object"]:
        return {k: (s / max(self._rows[k], 1)).numpy() for k, s in self._sums.items()}


def collect(model, batches, prefix: str = "") -> Dict[str, "object"]:
    """Runs `model` on each batch of input ids under no_grad with the hooks on."""
    import torch

    stats = ActStats(model, prefix=prefix)
    try:
        with torch.no_grad():
            for ids in batches:
                model(input_ids=ids)
    finally:
        stats.remove()
    return stats.mean_squares()


def token_batches(model_name: str, text_file: Optional[str], seq_len: int, batches: int, vocab: int, seed: int):
    """Token ids from a text file through the model's tokenizer, else seeded random ids."""
    import torch

    if text_file:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(model_name)
        with open(text_file, encoding="utf-8") as f:
            ids = tok(f.read(), return_tensors="pt").input_ids[0]
        for i in range(0, min(len(ids), seq_len * batches), seq_len):
            yield ids[i : i + seq_len].unsqueeze(0)
        return
    g = torch.Generator().manual_seed(seed)
    for _ in range(batches):
        yield torch.randint(0, vocab, (1, seq_len), generator=g)


def synthetic(checkpoint: str, seed: int) -> Dict[str, "object"]:
    """numpy only: log-uniform E[x_j^2] in [1e-2, 1e2] for every >= 2-D float tensor of a
    .safetensors file (keyed by its name), to try `scan --act-stats` without a model."""
    import numpy as np

    with open(checkpoint, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    rng = np.random.default_rng(seed)
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or len(info["shape"]) < 2 or info["dtype"] not in ("F32", "F16", "BF16", "F64"):
            continue
        out[name] = 10.0 ** rng.uniform(-2.0, 2.0, size=info["shape"][-1])
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="the .safetensors file to write")
    p.add_argument("--model", help="Hugging Face model name or local directory")
    p.add_argument("--text", help="text file to run through the model (default: random token ids)")
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--batches", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--prefix", default="", help="prepended to every key, when the checkpoint's names carry one")
    p.add_argument("--synthetic", metavar="CHECKPOINT", help="numpy only: random statistics for CHECKPOINT's matrices")
    a = p.parse_args(argv)
    if a.synthetic:
        stats = synthetic(a.synthetic, a.seed)
    elif a.model:
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(a.model, torch_dtype="auto")
        model.eval()
        vocab = int(getattr(model.config, "vocab_size", 32000))
        stats = collect(model, token_batches(a.model, a.text, a.seq_len, a.batches, vocab, a.seed), a.prefix)
    else:
        p.error("give --model (PyTorch) or --synthetic CHECKPOINT (numpy)")
    save(a.out, stats)
    print(f"wrote {len(stats)} tensors to {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
