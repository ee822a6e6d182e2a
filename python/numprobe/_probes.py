"""drift, audit and invariance on a Python kernel, in process: the CLI's sweeps, lengths, inputs and verdicts
(`numprobe drift`, `numprobe audit`) with the kernel called directly instead of through
`--backend exec:`.

    def kernel(q, k, v, case):          # q [B*T, Hq, D], k/v [B*S, Hkv, D]
        ...                              # case: case.json's fields (seq, queries, scale, mask...)
        return o                         # or (o, lse); o [B*T, Hq, D], lse [B*T, Hq]

    r = numprobe.drift(kernel, seq="128..8192", points="tile", tile=(64, 64), dtype="bf16")
    r.exit_code, r.to_dict()["growth"], r.to_html("drift.html")

A kernel refuses a case it does not implement by raising Unsupported (a NotImplementedError):
the case is reported as unsupported, not as an error (audit: the class is not-applicable when
every case that shows it was refused; drift: the point is listed and skipped).
"""
import json

from ._arrays import as_f64
from ._core_import import core

# The CLI's defaults for a case's fields (`numprobe drift --help`), where they differ from an
# attention case's own (mask: causal).
_CASE_DEFAULTS = {"batch": 1, "queries": 0, "heads": 8, "kv_heads": 2, "head_dim": 128, "dtype": "bf16",
                  "mask": "causal", "seed": 7}
_CASE_FIELDS = ("batch", "queries", "heads", "kv_heads", "head_dim", "scale", "dtype", "mask", "window",
                "softcap", "dist", "logit_shift", "seed")
_TORCH_DTYPES = {"bf16": "bfloat16", "f16": "float16", "f32": "float32", "f64": "float64"}


class Unsupported(NotImplementedError):
    """Raised by a kernel for a case it does not implement (a mask, T > S, a head dim); the
    message names the feature. Any NotImplementedError counts the same."""


class Result:
    """A command's result model (the CLI's `--json` document, and its other reports)."""

    def __init__(self, handle):
        self._handle = handle
        self._doc = None

    @property
    def exit_code(self):
        """The CLI's exit status for this result: 0 pass, 1 a finding, 3 a kernel failed."""
        return self._handle.exit_code

    @property
    def passed(self):
        return self.exit_code == 0

    def to_dict(self):
        if self._doc is None:
            self._doc = json.loads(self._handle.render("json"))
        return self._doc

    def _render(self, fmt, path):
        text = self._handle.render(fmt)
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        return text

    def to_json(self, path=None):
        return self._render("json", path)

    def to_html(self, path=None):
        """One self-contained HTML file (inline SVG curves), as `--html`; written to path if given."""
        return self._render("html", path)

    def to_markdown(self, path=None):
        return self._render("md", path)

    def to_junit(self, path=None):
        return self._render("junit", path)

    def to_csv(self, path=None):
        return self._render("csv", path)

    def text(self):
        """The terminal report."""
        return self._handle.render("text")

    __str__ = text

    def __repr__(self):
        return f"<numprobe.Result {self.to_dict().get('command', '')} exit_code={self.exit_code}>"


def _kernel_name(kernel):
    return getattr(kernel, "__qualname__", None) or getattr(kernel, "__name__", None) or type(kernel).__name__


def _to_torch(a, dtype, device):
    import torch  # only when asked for: torch is no dependency of numprobe
    t = torch.from_numpy(a)
    target = getattr(torch, _TORCH_DTYPES.get(dtype, "float32"))
    return t.to(device=device, dtype=target)  # exact: the values are in the case dtype


def _adapter(kernel, kernel_inputs, device):
    """kernel(q, k, v, case) -> o | (o, lse), as the binding's (q, k, v, case.json text) ->
    (o float64 flat, lse float64 flat or None)."""
    if not callable(kernel):
        raise TypeError(f"kernel: expected a callable (q, k, v, case) -> o or (o, lse), got {type(kernel).__name__}")
    if kernel_inputs not in ("numpy", "torch"):
        raise ValueError(f"kernel_inputs: expected 'numpy' or 'torch', got {kernel_inputs!r}")

    def call(q, k, v, case_text):
        case = json.loads(case_text)
        if kernel_inputs == "torch":
            q, k, v = (_to_torch(a, case["dtype"], device) for a in (q, k, v))
        out = kernel(q, k, v, case)
        o, lse = out if isinstance(out, tuple) and len(out) == 2 else (out, None)
        o = as_f64(o, "o").reshape(-1)
        return o, None if lse is None else as_f64(lse, "lse").reshape(-1)

    return call


def _fields(case, case_kw):
    """The base case: the CLI's defaults, then the fields of the id `case` (its T only where it
    differs from S: a sweep sets T = S per length otherwise), then the keywords."""
    unknown = sorted(set(case_kw) - set(_CASE_FIELDS))
    if unknown:
        raise ValueError(f"{unknown[0]}: not a field of an attention case ({', '.join(_CASE_FIELDS)})")
    fields = dict(_CASE_DEFAULTS)
    if case is not None:
        f = core.case_fields(case)
        fields.update({k: f[k] for k in _CASE_FIELDS if k != "queries"})
        fields["queries"] = f["queries"] if f["queries"] != f["seq"] else 0
    fields.update({k: v for k, v in case_kw.items() if v is not None})
    return fields


def _tile(tile):
    if tile is None:
        return 0, 0
    try:
        tq, tk = (int(t) for t in tile)
    except (TypeError, ValueError):
        raise ValueError(f"tile: expected (Bq, Bk), got {tile!r}") from None
    return tq, tk


def _rows(rows):
    if rows == "auto":
        return -1
    if rows == "all":
        return 0
    if isinstance(rows, int) and not isinstance(rows, bool) and rows > 0:
        return rows
    raise ValueError(f"rows: expected 'auto', 'all' or a positive count, got {rows!r}")


def _seq_range(seq):
    if isinstance(seq, int):
        return seq, seq
    text = str(seq)
    lo, sep, hi = text.partition("..")
    try:
        return (int(lo), int(hi)) if sep else (int(lo), int(lo))
    except ValueError:
        raise ValueError(f"seq: expected N or A..B, got {seq!r}") from None


def _bounds(bounds):
    return [bounds] if isinstance(bounds, str) else list(bounds)


def drift(kernel, seq="128..8192", points="tile", tile=None, *, bounds=(), rows="auto", end_to_end=True,
          case=None, kernel_inputs="numpy", device="cuda", **case_kw):
    """Error against sequence length, as `numprobe drift`: the kernel runs at each length of
    `points` ("tile": k*Bk-1, k*Bk, k*Bk+1; "log:N"; or a list "a,b,c") within seq "A..B", on
    the CLI's inputs for each case id, against the float64 reference and the same-precision
    naive baseline. tile=(Bq, Bk): the kernel's tiles (None: inferred, as for an opaque
    kernel). The case: `case=` an id and/or the fields (heads, kv_heads, head_dim, dtype, mask,
    window, softcap, scale, dist, seed, ...), the CLI's defaults otherwise. kernel_inputs:
    "numpy" (float32 arrays, exact in the case dtype) or "torch" (tensors of the case dtype on
    `device`). Returns a Result; exit_code 1 when a bound is breached or a point holds NaN/Inf,
    3 when the kernel raised or returned the wrong shape at some point (the others ran)."""
    lo, hi = _seq_range(seq)
    if isinstance(points, (list, tuple)):
        points = ",".join(str(int(p)) for p in points)
    tq, tk = _tile(tile)
    handle = core.drift(_adapter(kernel, kernel_inputs, device), _kernel_name(kernel), _fields(case, case_kw),
                        lo, hi, str(points), tq, tk, _rows(rows), _bounds(bounds), bool(end_to_end))
    return Result(handle)


def audit(kernel, seq=8192, *, quick=False, tile=None, bounds=(), rows="auto", case=None,
          kernel_inputs="numpy", device="cuda", **case_kw):
    """Every bug class's cheapest discriminating probe against the kernel, as `numprobe audit`:
    a verdict per class (pass, fail, not-applicable) with its evidence, the probes laid out
    across the kernel's tiles (given, inferred, or every common size), lengths up to `seq`.
    Returns a Result; exit_code 1 when a class fails, 3 when a case could not run."""
    _, hi = _seq_range(seq)
    tq, tk = _tile(tile)
    handle = core.audit(_adapter(kernel, kernel_inputs, device), _kernel_name(kernel), _fields(case, case_kw),
                        hi, bool(quick), tq, tk, _rows(rows), _bounds(bounds))
    return Result(handle)


# The CLI's invariance defaults (`numprobe invariance --help`): CPU-sized, every check runs the
# kernel dozens of times.
_INVARIANCE_DEFAULTS = {"heads": 4, "kv_heads": 2, "head_dim": 64}
_INVARIANCE_CHECKS = ("repeat", "batch", "decode", "chunk", "splits")


def _names(value, what):
    if value is None:
        return []
    names = [value] if isinstance(value, str) else list(value)
    names = [n for item in names for n in str(item).split(",") if n]
    for n in names:
        if n not in _INVARIANCE_CHECKS:
            raise ValueError(f"{what}: unknown check {n!r} (known: {', '.join(_INVARIANCE_CHECKS)})")
    return names


def _positive_ints(value, what):
    if value is None:
        return []
    items = [value] if isinstance(value, int) else list(value)
    out = []
    for v in items:
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{what}: expected positive integers, got {v!r}")
        out.append(v)
    return out


def invariance(kernel, checks=None, batch_sizes=(1, 2, 3, 8, 33, 64), *, seq=256, repeats=3, chunks=None,
               decode_lengths=None, require=(), tile=None, bounds=(), ragged=False, case=None,
               kernel_inputs="numpy", device="cuda", **case_kw):
    """Same request, same bits? The checks of `numprobe invariance` on the kernel: "repeat"
    (the same call `repeats` times), "batch" (one sequence alone against the same sequence inside
    batches of `batch_sizes`, first and last, the others distinct seeds), "decode" (a prefill's
    last row against a T = 1 call over the same keys, at lengths crossing the key tile),
    "chunk" (a prefill's last C rows against a T = C call) and "splits" (CLI backends only:
    not-applicable here). checks: a name, a list, or None for every check. Each check is
    invariant (identical bits), within-bound (different bits, both sides within the accuracy
    bound), breaks, or not-applicable. require: checks that must be invariant. ragged=True:
    the kernel reads case["seq_lens"] (member b holds its first seq_lens[b] of S keys, its
    queries aligned to their end), so batch also runs batches of members of other lengths. The case:
    `case=` an id and/or the fields, with S = seq (defaults: 4 heads, 2 KV heads, D = 64).
    Returns a Result whose to_dict()["invariance"] lists the checks (the CLI's --json);
    exit_code 1 when a check breaks or a required one is not invariant. A kernel that raises
    (other than Unsupported) or returns the wrong shape stops the run: RuntimeError naming it
    (the CLI's exit 3)."""
    fields = _fields(case, {**{k: v for k, v in _INVARIANCE_DEFAULTS.items() if case is None}, **case_kw})
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
        raise ValueError(f"seq: expected a positive integer, got {seq!r}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats: expected a positive integer, got {repeats!r}")
    tq, tk = _tile(tile)
    handle = core.invariance(_adapter(kernel, kernel_inputs, device), _kernel_name(kernel), fields, seq,
                             _names(checks, "checks"), _names(require, "require"), repeats,
                             _positive_ints(batch_sizes, "batch_sizes"), _positive_ints(chunks, "chunks"),
                             _positive_ints(decode_lengths, "decode_lengths"), tq, tk, _bounds(bounds),
                             bool(ragged))
    return Result(handle)
