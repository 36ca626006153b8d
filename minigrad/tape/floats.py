"""The elementary functions the tape's rules are written with, for one float or an array alike.

Every result is numpy's IEEE 754 value: exp(710) is inf, 1e200 ** 2 is inf, 1 / 0 is inf,
log(0) is -inf, log(-1), sin(inf) and (-2) ** 0.5 are nan, and a nan in gives a nan out. So the
scalar Tape (on Python floats) and TensorTape (on arrays) compute the same numbers, and the
same numbers as the eager engine.

Why two roads: a numpy call on one float costs ten times the arithmetic, so a float goes through
Python's `math`. But `math` raises where IEEE has an answer (OverflowError, "math domain error",
ZeroDivisionError); there, and only there, numpy supplies the value. An array goes straight to
numpy, written into `out` when given (TensorTape's pool buffers).
"""
from __future__ import annotations

import math

import numpy as np

MATH_REFUSALS = (OverflowError, ValueError, ZeroDivisionError)


def ieee(numpy_function, *floats) -> float:
    """numpy's value at floats where Python's arithmetic raised (overflow, a pole, a domain)."""
    with np.errstate(all="ignore"):
        return float(numpy_function(*(np.float64(x) for x in floats)))


def _elementwise(math_function, numpy_function):
    """One function of one input: math on a float, numpy on an array (see the module text)."""
    def function(x, out=None):
        if x.__class__ is float:
            try:
                return math_function(x)
            except MATH_REFUSALS:
                return ieee(numpy_function, x)
        return numpy_function(x, out=out)
    function.__name__ = function.__qualname__ = numpy_function.__name__
    return function


exp = _elementwise(math.exp, np.exp)
log = _elementwise(math.log, np.log)
sin = _elementwise(math.sin, np.sin)
cos = _elementwise(math.cos, np.cos)
tanh = _elementwise(math.tanh, np.tanh)


def divide(a, b, out=None):
    """a / b; a zero divisor gives ±inf (or nan for 0 / 0), as numpy."""
    if a.__class__ is float and b.__class__ is float:
        try:
            return a / b
        except ZeroDivisionError:
            return ieee(np.divide, a, b)
    return np.divide(a, b, out=out)


def power(a, p, out=None):
    """a ** p; where Python raises (0 ** -1, overflow) or goes complex ((-2) ** 0.5), numpy's value.
    A result that is not finite is numpy's too: at infinities the two disagree ((-inf) ** 0.5 is
    inf in Python, nan in numpy, which takes the square root)."""
    if a.__class__ is float and p.__class__ is float:
        try:
            y = a ** p
        except MATH_REFUSALS:
            return ieee(np.power, a, p)
        if y.__class__ is complex or y - y != 0.0:     # complex, or inf or nan
            return ieee(np.power, a, p)
        return y
    return np.power(a, p, out=out)


def relu(a, out=None):
    """max(a, 0), keeping a nan (as np.maximum does; `a if a > 0 else 0` would turn it into 0),
    and +0.0 for -0.0 (as np.maximum, and IEEE's maximum: 1 / relu(-0.0) is +inf, not -inf)."""
    if a.__class__ is float:
        return 0.0 if a <= 0.0 else a
    return np.maximum(a, 0.0, out=out)
