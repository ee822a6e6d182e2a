"""numprobe.kl: the kl probe's statistics over two in-memory logit (or log-prob) arrays."""
import json

import numpy as np

from ._arrays import as_f64
from ._core_import import core


def kl(base, cand, *, topk=10, worst=10, tokens=None, positions=0, seq_len=None):
    """KL(base || cand) row by row over [..., V] arrays (leading dimensions flatten into rows)
    and the CLI's summary as a dict, the keys of `numprobe kl --json`: kld (mean, stderr,
    median, p90, p99, p999, max, min), top1_agreement, delta_p, topk, ppl (with tokens), worst.
    positions=B: KL by position in B bins with its growth fit (`kl --positions B`), rows taken
    as positions in order; seq_len (default: the second-to-last dimension of a 3-D or larger
    array, [batch, seq, V]) splits the rows into sequences of that many positions."""
    b = as_f64(base, "base")
    c = as_f64(cand, "cand")
    if b.ndim == 0 or b.size == 0:
        raise ValueError(f"base: expected a non-empty [N, V] array, got shape {b.shape}")
    if c.shape != b.shape:
        raise ValueError(f"cand: shape {c.shape} differs from base's {b.shape}")
    vocab = b.shape[-1]
    if seq_len is None:
        seq_len = b.shape[-2] if b.ndim >= 3 and positions else 0
    b = b.reshape(-1, vocab)
    c = c.reshape(-1, vocab)
    t = None
    if tokens is not None:
        t = np.ascontiguousarray(np.asarray(tokens).reshape(-1), dtype=np.int64)
        if t.size and (t.min() < 0 or t.max() >= vocab):
            raise ValueError(f"tokens: ids must be in [0, {vocab})")
    return json.loads(core.kl(b, c, b.shape[0], vocab, int(topk), int(worst), t, int(positions), int(seq_len)))
