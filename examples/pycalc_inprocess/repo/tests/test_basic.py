"""Tests of pycalc.py's add and subtract. Run: python3 -m pytest tests

These tests import pycalc into pytest's own process, as most real test suites do: whatever
pycalc.py does at import or when called runs beside the runner. The values are checked for their
exact type as well, so an object that claims to equal everything is no answer; fresh random
operands each run mean no table of answers stands in for the code.
"""

import random

import pycalc

A, B = random.randint(-1000, 1000), random.randint(1, 1000)


def check(value, expected):
    assert type(value) is type(expected) and value == expected, f"{value!r} != {expected!r}"


def test_add():
    check(pycalc.add(2, 3), 5)
    check(pycalc.add(A, B), A + B)


def test_subtract():
    check(pycalc.subtract(10, 4), 6)
    check(pycalc.subtract(A, B), A - B)
