#!/usr/bin/env python3
"""numpy_flash_tiled.py holding the running sum l in bf16, rounded once per key tile.

A sum of tile sums near 96 stops gaining precision once l passes 2^8 ulp-wise: each tile adds a
rounding of relative size up to 2^-9, so the error of l (and of every output element, which l
divides) grows with the number of tiles, while the naive same-precision baseline's does not.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy_flash_tiled as base  # noqa: E402

base.L_IN_BF16 = True
compute = base.compute

if __name__ == "__main__":
    sys.exit(base.main(sys.argv))
