"""numprobe.quantize: one tensor through formats::quantize, with the CLI's conventions and
statistics (`numprobe quant --input X.npy --dump DIR` gives the same codes and scales)."""
import json
from dataclasses import dataclass, field

import numpy as np

from ._arrays import as_f64
from ._core_import import core

_CONVENTIONS = ("preset", "scale_division", "scale_floor", "scale_arith", "rule", "format", "scale_format",
                "axis", "group", "rounding", "overflow", "seed")


@dataclass
class QuantResult:
    """codes: one unpacked element code per input (uint32, row-major, the input's shape);
    scales: each block's stored scale as a value (NVFP4: without the tensor scale);
    scale_codes: the same as the scale format's codes; dequant: exact dequantized values
    (float64 holds every product); stats: the CLI's JSON document (`quant --json`)."""
    codes: np.ndarray
    scales: np.ndarray
    dequant: np.ndarray
    stats: dict
    scale_codes: np.ndarray = field(repr=False, default=None)
    multipliers: np.ndarray = field(repr=False, default=None)
    zero_points: np.ndarray = field(repr=False, default=None)
    tensor_scale: float = 1.0


def quantize(x, scheme, **conventions):
    """Quantizes x (viewed as 2D [rows, cols]: leading dimensions flatten into rows, a vector is
    one row) under `scheme` (numprobe formats lists them). Conventions: preset, scale_division,
    scale_floor, scale_arith, rule; and format, scale_format, axis, group, rounding ("rne",
    "rtz", "stochastic"), overflow, seed (7, as the CLI)."""
    a = as_f64(x, "x")
    shape = a.shape
    if a.ndim == 0 or a.size == 0:
        raise ValueError(f"x: expected a non-empty array, got shape {shape}")
    rows = a.reshape(1, -1) if a.ndim == 1 else a.reshape(-1, shape[-1])
    args = core.QuantArgs()
    if not isinstance(scheme, str):
        raise ValueError(f"scheme: expected a scheme name, got {type(scheme).__name__}")
    args.scheme = scheme
    for key, value in conventions.items():
        if key not in _CONVENTIONS:
            raise ValueError(f"{key}: not a quantization convention (expected one of {', '.join(_CONVENTIONS)})")
        setattr(args, key, value)
    d = core.quantize(rows, rows.shape[0], rows.shape[1], args)
    return QuantResult(codes=d["codes"].reshape(shape), scales=d["scales"], dequant=d["dequant"].reshape(shape),
                       stats=json.loads(d["report_json"]), scale_codes=d["scale_codes"],
                       multipliers=d["multipliers"], zero_points=d["zero_points"], tensor_scale=d["tensor_scale"])
