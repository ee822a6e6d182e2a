"""Shared fixtures: the numprobe CLI the package is checked against (bit for bit)."""
import os
import pathlib
import subprocess

import pytest

pytest_plugins = ["pytester"]

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cli():
    """Runs the CLI (NUMPROBE_CLI, else build/numprobe: scripts/python_test.sh builds it) and
    returns the CompletedProcess. A missing CLI fails the tests that need it, never skips them."""
    path = pathlib.Path(os.environ.get("NUMPROBE_CLI", ROOT / "build" / "numprobe"))
    if not path.is_file():
        pytest.fail(f"numprobe CLI not found at {path} (set NUMPROBE_CLI)")

    def run(*args, ok=(0,)):
        p = subprocess.run([str(path), *map(str, args)], capture_output=True, text=True, timeout=300)
        assert p.returncode in ok, f"numprobe {' '.join(map(str, args))} exited {p.returncode}: {p.stderr}"
        return p

    return run
