"""Tests of pycalc.py. Run: python3 -m pytest tests

The code under test runs in a Python process of its own (`compute` below), started isolated
(`-I`: no PYTHONPATH, no user site, not the current folder on sys.path), and this file judges
what it returns: whatever pycalc.py does to its own process (patch pytest, print results, exit
early) never reaches the pytest process that writes the report. Fresh random operands each run
mean no table of answers can stand in for the code.
"""

import json
import random
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
A, B = random.randint(-1000, 1000), random.randint(1, 1000)

WORKER = """
import json, sys
sys.path.insert(0, sys.argv[1])
import pycalc
out = []
for op, *args in json.loads(sys.argv[2]):
    try:
        out.append({"value": getattr(pycalc, op)(*args)})
    except Exception as error:
        out.append({"error": str(error)})
sys.stdout.write("\\n" + json.dumps(out) + "\\n")
"""


def compute(calls):
    """Runs `calls` ([operation, *operands]) against pycalc.py in an isolated process."""
    run = subprocess.run(
        [sys.executable, "-I", "-c", WORKER, str(REPO), json.dumps(calls)],
        capture_output=True,
        text=True,
        timeout=10,
    )
    lines = run.stdout.strip().splitlines()
    try:
        out = json.loads(lines[-1])
    except (IndexError, ValueError):
        printed = "\n".join(lines[:20])
        raise AssertionError(f"pycalc.py gave no answer (exit {run.returncode}); it printed:\n{printed}")
    assert isinstance(out, list) and len(out) == len(calls), "one answer per call"
    return out


def test_add():
    assert compute([["add", 2, 3], ["add", A, B]]) == [{"value": 5}, {"value": A + B}]


def test_subtract():
    assert compute([["subtract", 10, 4], ["subtract", A, B]]) == [{"value": 6}, {"value": A - B}]


def test_multiply():
    assert compute([["multiply", 6, 7], ["multiply", A, B]]) == [{"value": 42}, {"value": A * B}]


def test_divide():
    assert compute([["divide", 12, 4], ["divide", 1, 0]]) == [{"value": 3.0}, {"error": "division by zero"}]
