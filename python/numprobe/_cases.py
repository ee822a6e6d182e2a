"""Cases for parametrized kernel tests: the CLI's tile-crossing lengths and case ids."""
from dataclasses import dataclass

from ._attention import case_fields, case_id, inputs
from ._core_import import core


@dataclass(frozen=True)
class Case:
    """One attention case: `id` is the canonical case id (`numprobe attention --case ID`
    reruns it); inputs() gives the CLI's q, k, v for it."""
    id: str
    tile: tuple = None

    @property
    def fields(self):
        return case_fields(self.id)

    def inputs(self):
        return inputs(self.id)

    def __str__(self):
        return self.id


def _parse_range(text):
    try:
        lo, hi = (int(p) for p in str(text).split(".."))
    except ValueError:
        raise ValueError(f"seq_range: expected LO..HI, got {text!r}") from None
    return lo, hi


def tile_lengths(seq="tile", seq_range="64..4096", tile=(64, 64)):
    """The lengths `numprobe drift --points SEQ --seq RANGE` runs for this key tile: for "tile",
    k*Bk - 1, k*Bk, k*Bk + 1 at log-spaced k; "log:N"; or a comma list."""
    lo, hi = _parse_range(seq_range)
    tile_k = int(tile[1]) if tile else 0
    return list(core.drift_lengths(str(seq), lo, hi, tile_k))


def _as_list(v):
    return list(v) if isinstance(v, (list, tuple)) else [v]


def case_list(seq="tile", tile=(64, 64), seq_range="64..4096", dtype="bf16", **fields):
    """Cases over lengths x every list-valued field (dtype, mask, ...), in that order."""
    grid = [{}]
    for key, values in [("dtype", dtype), *fields.items()]:
        grid = [dict(g, **{key: v}) for g in grid for v in _as_list(values)]
    return [Case(case_id(seq=s, **g), tuple(tile) if tile else None)
            for g in grid for s in tile_lengths(seq, seq_range, tile)]


def cases(seq="tile", tile=(64, 64), seq_range="64..4096", dtype="bf16", **fields):
    """A decorator parametrizing a test's `case` argument over tile-crossing lengths and case
    fields, each test named by its case id (so `-k` reruns one):

        @numprobe.cases(seq="tile", tile=(64, 64), seq_range="64..4096", dtype=["bf16", "f16"])
        def test_kernel(case): ...

    Fields: heads, kv_heads, head_dim, mask, window, softcap, dist, seed, queries, batch; a list
    value adds an axis."""
    import pytest  # only where tests are collected

    cs = case_list(seq, tile, seq_range, dtype, **fields)
    return pytest.mark.parametrize("case", cs, ids=[c.id for c in cs])
