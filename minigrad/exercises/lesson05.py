"""Lesson 05 (accumulate_grad and broadcasting): check_sum_to_shape.

The student writes sum_to_shape(grad, shape): the gradient of an input that numpy broadcast up
to grad.shape. The check compares it with minigrad.kernels.sum_to_shape and with what
broadcasting itself implies: the result r must satisfy, for every x of `shape`,

    sum(grad * broadcast_to(x, grad.shape)) == sum(r * x)

(summing a broadcast copy back is the transpose of broadcasting).
"""
from __future__ import annotations

import numpy as np

from ..kernels import sum_to_shape as reference
from ._report import StudentError, call_own, failed, passed

CHECK = "check_sum_to_shape"

# (grad shape, input shape): the cases a student is most likely to get wrong come first.
FIXED = [
    ((4, 3), (4, 3)),        # nothing to do
    ((4, 3), (3,)),          # a bias: one leading axis added
    ((4, 3), (1, 3)),        # the same axis, kept as size 1
    ((4, 3), (4, 1)),        # a stretched last axis
    ((4, 3), ()),            # a scalar
    ((4, 3), (1, 1)),
    ((2, 4, 3), (3,)),       # two leading axes
    ((2, 4, 3), (4, 1)),     # a leading axis and a stretched one
    ((2, 1, 3), (1, 3)),     # a size-1 axis that was size 1 in grad too
    ((5,), (1,)),
]


def _random_cases(rng, count: int) -> list:
    cases = []
    for _ in range(count):
        shape = tuple(int(n) for n in rng.choice([1, 2, 3], size=int(rng.integers(0, 4))))
        grown = tuple(int(rng.integers(2, 5)) if n == 1 and rng.random() < 0.6 else n
                      for n in shape)
        leading = tuple(int(n) for n in rng.integers(1, 4, size=int(rng.integers(0, 3))))
        cases.append((leading + grown, shape))
    return cases


def check_sum_to_shape(sum_to_shape) -> bool:
    """Compare sum_to_shape(grad, shape) with the library and with broadcasting's transpose."""
    rng = np.random.default_rng(5)
    cases = FIXED + _random_cases(rng, 60)
    for grad_shape, shape in cases:
        grad = rng.normal(size=grad_shape)
        before = grad.copy()
        case = f"sum_to_shape(grad of shape {grad_shape}, {shape})"
        try:
            got = call_own(sum_to_shape, (reference,), grad, shape)
        except StudentError as err:
            return failed(CHECK, case, err.description)
        if not np.array_equal(grad, before):
            return failed(CHECK, case, "your function changed grad in place.",
                          "build the result with grad.sum(...); a gradient array may be shared "
                          "by several inputs (add hands the same array to both)")
        if not isinstance(got, np.ndarray) and not np.isscalar(got):
            return failed(CHECK, case, f"returned {type(got).__name__}, not an array.",
                          "return the summed array")
        got = np.asarray(got)
        if got.shape != tuple(shape):
            return failed(CHECK, case, f"result has shape {got.shape}, expected {shape}.",
                          "sum over the leading axes that broadcasting added, then, with "
                          "keepdims=True, over the axes where shape has a 1 and grad does not")
        want = reference(grad, shape)
        if not np.allclose(got, want, rtol=1e-12, atol=1e-12):
            return failed(CHECK, case, f"got  {np.round(got, 4).tolist()}\n"
                                       f"want {np.round(want, 4).tolist()}",
                          "each input element gets the sum of the gradient over every place "
                          "broadcasting copied it to, nothing else")
        x = rng.normal(size=shape)
        forward = float((grad * np.broadcast_to(x, grad_shape)).sum())
        if not np.isclose(forward, float((got * x).sum()), rtol=1e-10, atol=1e-10):
            return failed(CHECK, case, "sum(grad * broadcast_to(x)) != sum(result * x).",
                          "summing back must undo broadcasting exactly")
    return passed(CHECK, f"{len(cases)} shape pairs (fixed and random): equal to "
                         f"minigrad.kernels.sum_to_shape and to broadcasting's transpose")
