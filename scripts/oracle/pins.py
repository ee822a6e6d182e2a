"""The oracle peers' pinned versions (requirements-test.txt), checked before any comparison.

An oracle that meets a peer version other than the pinned one stops with one line naming the
package, the version found and the version pinned (exit 2), instead of a wall of mismatches
that are really the peer's change of behaviour (issue 26: ml_dtypes 0.6.0 -> 0.7.0 changed
how float64 is rounded). NUMPROBE_ORACLE_UNPINNED=1 runs against whatever is installed, for
trying a new peer version before moving the pin.

A peer that is not importable is a skip (exit 77, ctest's SKIP_RETURN_CODE) on a developer's
machine, and a failure (exit 2) under CI=true or NUMPROBE_REQUIRE_ORACLES=1, so that a missing
install step cannot turn the oracles into silent skips in CI.
"""
import importlib
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
REQUIREMENTS = os.path.join(ROOT, "requirements-test.txt")


def _truthy(name):
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def pinned_versions(path=REQUIREMENTS):
    """{normalised name: version} of the 'name==version' lines of the requirements file."""
    pins = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            m = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*==\s*([A-Za-z0-9_.+\-]+)", line)
            if m:
                pins[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
    return pins


def require(tool, *modules):
    """Imports each (distribution name, module name) pair, prints the peers' versions as the
    tool's first line, and returns the modules. Exits 77/2 as the module docstring says."""
    try:
        pins = pinned_versions()
    except OSError as exc:
        print(f"{tool}: cannot read the pins: {exc}")
        sys.exit(2)
    loaded, found = [], []
    for dist, module in modules:
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:
            if _truthy("CI") or _truthy("NUMPROBE_REQUIRE_ORACLES"):
                print(f"{tool}: {dist} is not importable ({exc}); run scripts/setup.sh --test")
                sys.exit(2)
            print(f"{tool}: skipped, {dist} is not importable ({exc})")
            sys.exit(77)
        loaded.append(mod)
        found.append((dist, getattr(mod, "__version__", "unknown")))
    print(f"{tool}: " + ", ".join(f"{d} {v}" for d, v in found) +
          f" (pinned in {os.path.relpath(REQUIREMENTS, ROOT)}), python {sys.version.split()[0]}")
    for dist, version in found:
        want = pins.get(re.sub(r"[-_.]+", "-", dist).lower())
        if want is None:
            print(f"{tool}: {dist} has no pin in {REQUIREMENTS}")
            sys.exit(2)
        if version != want and not _truthy("NUMPROBE_ORACLE_UNPINNED"):
            print(f"{tool}: {dist} {version} is not the pinned {want} (requirements-test.txt); "
                  f"run scripts/setup.sh --test, or set NUMPROBE_ORACLE_UNPINNED=1 to compare anyway")
            sys.exit(2)
    return loaded


def version_tuple(version):
    """'0.7.0' -> (0, 7, 0); non-numeric parts end the tuple."""
    out = []
    for part in version.split("."):
        m = re.match(r"\d+", part)
        if not m:
            break
        out.append(int(m.group(0)))
    return tuple(out)
