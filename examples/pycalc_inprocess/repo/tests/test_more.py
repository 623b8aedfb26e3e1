"""Tests of pycalc.py's multiply and divide (see test_basic.py)."""

import random

import pycalc

A, B = random.randint(-1000, 1000), random.randint(1, 1000)


def check(value, expected):
    assert type(value) is type(expected) and value == expected, f"{value!r} != {expected!r}"


def test_multiply():
    check(pycalc.multiply(6, 7), 42)
    check(pycalc.multiply(A, B), A * B)


def test_divide():
    check(pycalc.divide(12, 4), 3.0)
    try:
        pycalc.divide(1, 0)
    except ZeroDivisionError as error:
        assert str(error) == "division by zero"
    else:
        raise AssertionError("divide(1, 0) did not raise ZeroDivisionError")
