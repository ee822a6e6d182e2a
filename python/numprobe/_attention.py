"""Attention cases from Python: the CLI's inputs for a case id, and a given output judged by
the attention probe (the CLI's metrics, worst rows and NaN accounting)."""
import json
from dataclasses import dataclass, field

import numpy as np

from ._arrays import as_f64, dtype_name
from ._core_import import core
from ._shapes import attention_case

# Callables given every Report compare_attention makes (the pytest plugin's JUnit properties).
observers = []


def case_fields(case_id):
    """The fields of a case id (batch, queries, seq, heads, kv_heads, head_dim, scale, dtype,
    mask, window, softcap, dist, logit_shift, seed; plus softmax_scale and the canonical case)."""
    return core.case_fields(case_id)


def case_id(**fields):
    """The canonical id of the case with these fields (the rest at the CLI's defaults)."""
    return core.case_id(fields)


def inputs(case_id):
    """(q, k, v) of a case id (or of a numprobe.cases Case, or anything whose `id` is one), the
    arrays the CLI gives a kernel (`--backend exec:` q.npy, k.npy, v.npy): q [B*T, Hq, D], k and
    v [B*S, Hkv, D], float32 (float64 for f64 cases), every value exact in the case dtype. Equal
    bit for bit to the CLI's (python/tests)."""
    if not isinstance(case_id, str):
        case_id = getattr(case_id, "id", case_id)
    if not isinstance(case_id, str):
        raise TypeError("case: expected a case id (str) or a Case, got %s" % type(case_id).__name__)
    q, k, v = core.inputs(case_id)
    if core.case_fields(case_id)["dtype"] != "f64":
        q, k, v = (a.astype(np.float32) for a in (q, k, v))  # exact: the values are in dtype
    return q, k, v


@dataclass
class Report:
    """One attention point as the CLI's probe reports it."""
    case: str
    metrics: dict
    worst: list
    nonfinite: dict
    gates: list = field(default_factory=list)
    details: dict = field(default_factory=dict, repr=False)

    @property
    def rel_rms(self):
        return self.metrics["rel_rms"]

    @property
    def ratio_to_naive(self):
        return self.metrics["ratio_to_naive"]

    @property
    def passed(self):
        return self.nonfinite["total"] == 0 and all(ok for _, _, ok in self.gates)

    def to_dict(self):
        return {"case": self.case, "metrics": self.metrics, "worst": self.worst, "nonfinite": self.nonfinite,
                "gates": [{"bound": b, "measured": m, "holds": ok} for b, m, ok in self.gates],
                "details": self.details}

    def to_json(self):
        return json.dumps(self.to_dict(), indent=1, default=str)

    def text(self):
        m = self.metrics
        lines = [f"{self.case}",
                 f"  rel_rms {m['rel_rms']:.4g}  naive.rel_rms {m['naive.rel_rms']:.4g}  "
                 f"ratio_to_naive {m['ratio_to_naive']:.4g}  max_abs {m['max_abs']:.4g}  "
                 f"max_ulp {m['max_ulp']:.4g}  lse_max_abs {m['lse_max_abs']:.4g}"]
        if self.nonfinite["total"]:
            lines.append(f"  non-finite: {self.nonfinite['summary']}")
        for b, measured, ok in self.gates:
            lines.append(f"  gate {b}: measured {measured:.4g} {'holds' if ok else 'BREACHED'}")
        if self.worst:
            lines.append("  worst rows (row, batch, query, head, query_tile, key_tile, keys, rel_rms, max_abs):")
            for w in self.worst:
                lines.append(f"    {w['row']:>6} {w['batch']:>3} {w['query']:>6} {w['head']:>3} "
                             f"{w['query_tile']:>4} {w['key_tile']:>4} {w['keys']:>6} "
                             f"{_num(w['rel_rms']):.4g} {_num(w['max_abs']):.4g}")
        return "\n".join(lines)

    __str__ = text


def _num(v):
    """A JSON number of the probe's documents: null or a string ("inf", "nan") when not finite."""
    return float("nan") if v is None else float(v)


def _case_from(case, kw):
    """Fields given by a case id (`case=`) or as keywords; keywords override the id's."""
    if case is None:
        return kw
    fields = case_fields(case)
    out = {k: fields[k] for k in ("mask", "window", "softcap", "scale", "dtype", "dist", "logit_shift", "seed")}
    out.update({k: v for k, v in kw.items() if v is not None})
    return out


def compare_attention(o, q, k, v, *, lse=None, case=None, tile=None, rows="all", worst=5, bounds=(), **case_kw):
    """Judges o (and lse, when given) against the reference on the same inputs, with the CLI's
    attention probe. The case: `case=` a case id, and/or the fields mask, window, softcap,
    scale, dtype (default: q's own dtype, f32 for float32 arrays). tile=(Bq, Bk): the kernel's
    tiles, for tile-aware row sampling and the worst rows' tile indices. rows: "all" or a
    budget of sampled rows. bounds: gate expressions such as "ratio_to_naive<=2"."""
    fields_kw = _case_from(case, case_kw)
    default_dtype = dtype_name(q) or "f64"
    qa, ka, va, fields, lead = attention_case(q, k, v, fields_kw, default_dtype=default_dtype)
    oa = as_f64(o, "o")
    if oa.size != qa.size:
        raise ValueError(f"o: shape {oa.shape} does not match q's {tuple(lead) + qa.shape[1:]}")
    la = None if lse is None else as_f64(lse, "lse")
    if tile is None:
        tq = tk = 0
    else:
        try:
            tq, tk = (int(t) for t in tile)
        except (TypeError, ValueError):
            raise ValueError(f"tile: expected (Bq, Bk), got {tile!r}") from None
    if rows == "all":
        max_rows = 0
    elif isinstance(rows, int) and rows > 0:
        max_rows = rows
    else:
        raise ValueError(f"rows: expected 'all' or a positive count, got {rows!r}")
    if isinstance(bounds, str):
        bounds = [bounds]
    d = core.compare_attention(oa.reshape(-1), None if la is None else la.reshape(-1), qa, ka, va, fields,
                               tq, tk, max_rows, int(worst), list(bounds))
    details = json.loads(d["json"])
    nf = details.get("nonfinite", {})
    nonfinite = {"total": d["nonfinite_total"], "summary": d["nonfinite_summary"], **nf}
    report = Report(case=details.get("case", ""), metrics=dict(d["metrics"]), worst=details.get("worst_rows", []),
                    nonfinite=nonfinite, gates=[tuple(g) for g in d["gates"]], details=details)
    for observe in observers:
        observe(report)
    return report
