#!/usr/bin/env python3
"""The layer check fails on a planted upward include, naming the file, the line and the layers.

    tests/layers/planted_include.py --root REPO

Copies the layer folders of REPO (the ones docs/architecture.md lists) and the table into a
temporary tree, runs scripts/check_layers.py on the copy as it is and again after appending
`#include "probes/kl_probe.hpp"` to src/formats/format.cpp (formats, the bottom layer,
including probes), and requires the second run to exit 1 with exactly one new violation: the
planted line. Comparing the two runs keeps the test about the plant alone.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

PLANTED_FILE = "src/formats/format.cpp"
PLANTED_INCLUDE = "probes/kl_probe.hpp"


def run_check(script, root):
    p = subprocess.run([sys.executable, script, "--root", root], capture_output=True, text=True)
    return p.returncode, set(p.stdout.splitlines()), p.stdout + p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    root = os.path.abspath(ap.parse_args().root)
    sys.path.insert(0, os.path.join(root, "scripts"))
    import check_layers

    folders, _ = check_layers.read_table(os.path.join(root, "docs", "architecture.md"))
    with tempfile.TemporaryDirectory(prefix="numprobe_layers_") as tmp:
        for rel in ["docs/architecture.md", "scripts/check_layers.py"] + [
                p.rstrip("/") for ps in folders.values() for p in ps]:
            src, dst = os.path.join(root, rel), os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if os.path.isdir(src) and not os.path.exists(dst):
                shutil.copytree(src, dst)
            elif os.path.isfile(src):
                shutil.copy2(src, dst)
        script = os.path.join(tmp, "scripts", "check_layers.py")
        _, clean, _ = run_check(script, tmp)

        target = os.path.join(tmp, PLANTED_FILE)
        with open(target, encoding="utf-8") as f:
            line = sum(1 for _ in f) + 1
        with open(target, "a", encoding="utf-8") as f:
            f.write(f'#include "{PLANTED_INCLUDE}"\n')
        rc, planted, text = run_check(script, tmp)

    expected = (f"{PLANTED_FILE}:{line}: includes {PLANTED_INCLUDE} "
                f"(layer formats may not include layer probes)")
    print(text, end="")
    new = planted - clean
    if rc != 1 or new != {expected}:
        print(f"FAIL: expected exit 1 and the one new violation\n  {expected}\n"
              f"got exit {rc} and new violations {sorted(new)}")
        return 1
    print(f"ok: the planted include fails the check: {expected}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
