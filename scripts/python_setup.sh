#!/usr/bin/env bash
# The test venv: every Python package the tests, the oracles (scripts/oracle/) and the Python
# package's build use, at the versions pinned in requirements-test.txt, in a virtual environment
# of their own (${NUMPROBE_VENV:-.venv}, created with `python3 -m venv`: no system site
# packages, so nothing the machine happens to have installed can stand in for a pin).
# Idempotent: a venv stamped with the current requirements file is left as it is. Test set-up
# only, called from scripts/setup.sh --test; the main job (the CLI) needs none of it.
# Prints the venv's python path last.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${NUMPROBE_VENV:-$root/.venv}
req=$root/requirements-test.txt
stamp=$venv/numprobe-requirements.txt
if [ -x "$venv/bin/python" ] && cmp -s "$req" "$stamp"; then
  echo "$venv/bin/python"
  exit 0
fi
if [ ! -x "$venv/bin/python" ]; then
  echo "python_setup: creating the test venv $venv" >&2
  python3 -m venv "$venv" >&2
fi
echo "python_setup: installing requirements-test.txt (pinned) into $venv" >&2
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req" >&2
cp "$req" "$stamp"
echo "$venv/bin/python"
