#!/usr/bin/env python3
"""The layer check fails on a planted include, naming the file, the line and the rule broken.

    tests/layers/planted_include.py --root REPO

Copies the layer folders of REPO (the ones docs/architecture.md lists) and the table into a
temporary tree, runs scripts/check_layers.py on the copy as it is, then once per plant after
appending one include to one file, and requires each planted run to exit 1 with exactly one new
violation: the planted line. The plants:
  - `#include "probes/kl/kl_probe.hpp"` in src/formats/format.cpp: formats, the bottom layer,
    including probes;
  - `#include "probes/quant/quant_probe.hpp"` in probes/kl/kl_result.cpp: one command family
    including another, not through a shared folder (the probe-folder table).
Comparing each planted run with the clean one keeps the test about the plant alone.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

PLANTS = [
    ("src/formats/format.cpp", "probes/kl/kl_probe.hpp", "(layer formats may not include layer probes)"),
    ("probes/kl/kl_result.cpp", "probes/quant/quant_probe.hpp",
     "(probes/kl/ may not include probes/quant/: not a shared folder it lists)"),
]


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
        failed = 0
        for planted_file, include, rule in PLANTS:
            target = os.path.join(tmp, planted_file)
            with open(target, encoding="utf-8") as f:
                original = f.read()
            line = original.count("\n") + 1
            with open(target, "a", encoding="utf-8") as f:
                f.write(f'#include "{include}"\n')
            rc, planted, text = run_check(script, tmp)
            with open(target, "w", encoding="utf-8") as f:
                f.write(original)
            expected = f"{planted_file}:{line}: includes {include} {rule}"
            print(text, end="")
            new = planted - clean
            if rc != 1 or new != {expected}:
                print(f"FAIL: expected exit 1 and the one new violation\n  {expected}\n"
                      f"got exit {rc} and new violations {sorted(new)}")
                failed += 1
            else:
                print(f"ok: the planted include fails the check: {expected}")
    return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main())
