#!/usr/bin/env python3
"""Checks the test venv as CI meets it (issue 26): run by .ci/run with the venv's interpreter
right after `scripts/setup.sh --test` has built the venv from nothing.

It passes only when:
  - it runs inside a virtual environment that does not see the system's site packages;
  - every package pinned in requirements-test.txt is installed at exactly its pinned version;
  - nothing else is installed (pip itself, setuptools and numprobe's own package aside), so a
    package the tests import without a pin, or an unpinned install step, fails here first.
One line per problem, then exit 2; one summary line and exit 0 when the venv is the pinned set.
"""
import os
import re
import sys
from importlib import metadata

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "oracle"))
import pins  # noqa: E402

UNPINNED_OK = {"pip", "setuptools", "wheel", "numprobe"}


def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def main():
    problems = []
    if sys.prefix == sys.base_prefix:
        problems.append(f"{sys.executable} is not in a virtual environment")
    cfg = os.path.join(sys.prefix, "pyvenv.cfg")
    if os.path.exists(cfg):
        with open(cfg, encoding="utf-8") as f:
            if re.search(r"include-system-site-packages\s*=\s*true", f.read(), re.I):
                problems.append(f"{cfg}: the venv sees the system site packages")
    want = pins.pinned_versions()
    have = {}
    for dist in metadata.distributions():
        have[norm(dist.metadata["Name"])] = dist.version
    for name, version in sorted(want.items()):
        if name not in have:
            problems.append(f"{name}=={version} (requirements-test.txt) is not installed")
        elif have[name] != version:
            problems.append(f"{name} {have[name]} is installed, requirements-test.txt pins {version}")
    for name, version in sorted(have.items()):
        if name not in want and name not in UNPINNED_OK:
            problems.append(f"{name} {version} is installed but not pinned in requirements-test.txt")
    for p in problems:
        print(f"check_setup: {p}")
    if problems:
        return 2
    print(f"check_setup: {sys.prefix}: the {len(want)} pinned packages and nothing else "
          f"(python {sys.version.split()[0]}, no system site packages)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
