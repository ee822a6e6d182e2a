#!/usr/bin/env python3
"""Vectors for the k-order and extended-sweep questions of `numprobe mma` (issue 31;
docs/hardware.md, "Order within a group"), in the layout of `numprobe mma --emit-vectors`, to
run with `numprobe mma --run-vectors FILE --json OUT`.

Each vector names what it asks in its id:
  pair(i,j)+small(s,J)  +2^E at k=i, -2^E at k=j, 2^(E-J) at k=s: kept (2^(E-J)) or dropped (0)?
      With the pair adjacent (j = i+1) a device that adds neighbouring products exactly before
      aligning keeps the small term whatever its fraction bits; moving the pair apart tells the
      tree's shape from the fraction bits.
  c_small(J) with pair(0,2)  the same question with the small term in C (fp32: any J).
  sub(J)  pair(0,2) and a product of subnormal inputs (fp8: 2^(E-J) below the normal range).
The fp16 k16 path runs the same shapes as the control (its F = 25 is measured).
Each set is written twice: for the mma.sync path and, named by its path, for the wgmma one
(which `--run-vectors` runs on sm_90 only).

usage: mma_order_vectors.py OUT.json
"""
import json
import sys


def vec(k, terms, c=0.0, vid=""):
    a = [0.0] * k
    b = [0.0] * k
    for idx, (x, y) in terms.items():
        a[idx] = x
        b[idx] = y
    return {"id": vid, "a": a, "b": b, "c": c}


def main():
    out = {"paths": []}
    for name, wgmma, fmt, k, half_e, min_normal, min_sub in (
        ("e4m3", "wgmma.m64n8k32.f32.e4m3", "e4m3fn", 32, 8, -6, -9),  # E = 16: 2^8 * 2^8
        ("f16", "wgmma.m64n8k16.f32.f16", "f16", 16, 15, -14, -24),    # E = 30: 2^15 * 2^15
    ):
        E = 2 * half_e
        big = 2.0 ** half_e
        vs = []
        pairs = [(0, 1), (0, 2), (0, 3), (0, 4), (0, 8), (1, 2), (2, 3), (3, 4), (0, k // 2), (k // 2 - 1, k // 2), (0, k - 1)]
        for (i, j) in pairs:
            s = next(x for x in (5, 6, 7, 9, 10) if x not in (i, j))
            for J in (8, 12, 16, 20, 24, 26, 28):
                # 2^(E-J) as a product of two normal values: split the exponent
                e = E - J
                ea = max(min(e // 2, half_e), min_normal)
                eb = e - ea
                if eb < min_normal or eb > half_e:
                    continue
                vs.append(vec(k, {i: (big, big), j: (-big, big), s: (2.0 ** ea, 2.0 ** eb)}, 0.0,
                              f"pair({i},{j})+small({s},{J})"))
        for J in (8, 16, 20, 24, 26, 28, 30, 32, 40, 48):
            vs.append(vec(k, {0: (big, big), 2: (-big, big)}, 2.0 ** (E - J), f"pair(0,2)+c_small({J})"))
            vs.append(vec(k, {0: (big, big), 1: (-big, big)}, 2.0 ** (E - J), f"pair(0,1)+c_small({J})"))
        # Subnormal products below the normal range (the sweep's extension).
        for J in range(E - 2 * min_normal, E - 2 * min_sub + 1):
            e = E - J
            eb = min_normal
            ea = e - eb  # below min_normal: a subnormal a
            if ea < min_sub:
                continue
            vs.append(vec(k, {0: (big, big), 2: (-big, big), 5: (2.0 ** ea, 2.0 ** eb)}, 0.0, f"pair(0,2)+sub({J})"))
            vs.append(vec(k, {0: (big, big), 1: (-big, big), 5: (2.0 ** ea, 2.0 ** eb)}, 0.0, f"pair(0,1)+sub({J})"))
        out["paths"].append({"path": name, "input": fmt, "k": k, "vectors": vs})
        out["paths"].append({"path": wgmma, "input": fmt, "k": k, "vectors": vs})
    with open(sys.argv[1], "w") as f:
        json.dump(out, f)
    print(sum(len(p["vectors"]) for p in out["paths"]), "vectors")


if __name__ == "__main__":
    main()
