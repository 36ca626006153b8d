"""Lesson 06 (your own op): check_softplus.

The student completes the backward of a Softplus op, z = log(1 + e^a), dz/da = sigmoid(a). The
check runs minigrad.check.gradcheck in float64 on random inputs, then compares the gradient at
a few edge values (0, tiny, large of both signs, where a careless formula overflows) with the
exact derivative.
"""
from __future__ import annotations

import numpy as np

from ..check import gradcheck
from ..eager.function import Function
from ..eager.variable import create_leaf
from ._report import StudentError, call, failed, passed

CHECK = "check_softplus"
EDGES = np.array([-800.0, -40.0, -1e-8, 0.0, 1e-8, 40.0, 800.0])
EDGE_HINTS = (   # graded: the idea first, the formula only after more failing runs
    "an overflow is harmless when the inf can only lead to the right limit and fatal when it "
    "meets another inf or a 0. In your formula, which exp is inf at a = 800, which at a = -800, "
    "and what does each one meet?",
    "at a = 800, np.exp(a) is inf and inf / inf is nan. Write the sigmoid so that the only exp "
    "that can overflow stands alone in a denominator: 1 / (1 + inf) = 0 is the right limit",
    "1 / (1 + np.exp(-a)): at a = -800 it is 1 / inf = 0, the right limit, and at a = 800 it "
    "is 1 / (1 + 0) = 1")


def _sigmoid(a: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-a) to full precision: e^-|a| never overflows."""
    e = np.exp(-np.abs(a))
    return np.where(a >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def check_softplus(Softplus) -> bool:
    """gradcheck Softplus on random float64 inputs, then test its gradient at edge values."""
    if not (isinstance(Softplus, type) and issubclass(Softplus, Function)):
        return failed(CHECK, "check_softplus(Softplus)",
                      f"got {type(Softplus).__name__}, not a Function subclass.",
                      "pass the class itself: check_softplus(Softplus)")
    apply = Softplus.apply
    rng = np.random.default_rng(6)
    for shape in [(5,), (3, 4), (2, 3, 2)]:
        x = rng.normal(scale=3.0, size=shape)
        case = f"gradcheck(Softplus.apply, x) with x of shape {shape}"
        try:
            call(gradcheck, lambda v: apply(v), x)
        except StudentError as err:
            text = err.description
            if "GradcheckError" in text:
                return failed(CHECK, case, text.split("GradcheckError: ", 1)[1].split(" (line")[0],
                              "dz/da = sigmoid(a) = 1 / (1 + exp(-a)); return grad_output times "
                              "it, one gradient per input")
            return failed(CHECK, case, text)
    case = f"the gradient at a = {EDGES.tolist()}"
    with np.errstate(all="ignore"):   # an overflow that still gives the right number is fine
        a = create_leaf(EDGES, requires_grad=True, name="a")
        try:
            call(lambda: apply(a).sum().backward())
        except StudentError as err:
            return failed(CHECK, case, err.description)
    got, want = a.grad, _sigmoid(EDGES)
    bad = ~np.isclose(got, want, rtol=1e-9, atol=1e-15)   # (nan is never close)
    if bad.any():
        i = int(np.argmax(bad))
        return failed(CHECK, case, f"at a = {EDGES[i]:g} your gradient is {float(got[i]):.6g}, "
                                   f"the exact value is {float(want[i]):.6g}.",
                      EDGE_HINTS)
    return passed(CHECK, "gradcheck on 3 random float64 inputs, and the exact gradient at "
                         "0, +-1e-8, +-40 and +-800")
