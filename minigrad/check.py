"""Checking gradients: gradcheck by central differences, and detect_anomaly for NaN/Inf in backward."""
from __future__ import annotations

from contextlib import contextmanager, nullcontext
from typing import Callable, Iterator

import numpy as np

from .errors import DtypeError, GradcheckError
from .modes import modes, no_grad
from .eager.higher import grad
from .eager.variable import Variable, create_leaf


def gradcheck(fn: Callable[..., Variable], *inputs, eps: float = 1e-6, atol: float = 1e-5,
              rtol: float = 1e-3) -> bool:
    """Compare backward's gradients of fn with central differences (f(x+eps) - f(x-eps)) / 2 eps.

    inputs: float64 arrays (differentiated) or Variables (differentiated when they require
    grad). A non-scalar output is reduced with fixed random weights, sum(w * fn(...)), so every
    output element is checked. Returns True, or raises GradcheckError naming the input, the
    index and both values.
    """
    arrays, wanted, names = [], [], []
    for i, x in enumerate(inputs):
        array = x.data if isinstance(x, Variable) else np.asarray(x)
        if array.dtype != np.float64:
            raise DtypeError(f"gradcheck: input {i} has dtype {array.dtype}; central differences "
                             f"need float64 (eps={eps} is below float32's resolution). Fix: "
                             f"pass np.asarray(x, dtype=np.float64).")
        arrays.append(array.copy())
        wanted.append(x.requires_grad if isinstance(x, Variable) else True)
        name = getattr(x, "name", None)
        names.append(f"input {i} ({name!r}, shape {array.shape})" if name
                     else f"input {i} (shape {array.shape})")

    if not any(wanted):   # a check that checks nothing would pass whatever backward does
        raise GradcheckError(
            f"gradcheck: none of the {len(inputs)} inputs is differentiated (a Variable is "
            f"checked only when it requires grad), so nothing would be compared and gradcheck "
            f"would pass whatever backward computes. Fix: pass float64 arrays, or Variables "
            f"made with requires_grad=True; a parameter fn reads from its closure is not checked: "
            f"pass it as an input.")
    leaves = [create_leaf(a, requires_grad=w) for a, w in zip(arrays, wanted)]
    out = fn(*leaves)
    # A scalar output is checked as is; a larger one through a fixed random projection.
    weights = (np.ones(out.shape) if out.size == 1
               else np.random.default_rng(0).standard_normal(out.shape))
    (out * weights).sum().backward()

    allocator = modes.allocator

    def objective() -> float:
        # Inside an arena or pool scope, each evaluation gets a nested scope of its own, so the
        # thousands of evaluations do not pile up on the arena.
        with no_grad(), (allocator.scope() if allocator is not None else nullcontext()):
            return float((fn(*[create_leaf(a) for a in arrays]).data * weights).sum())

    for i, (leaf, array) in enumerate(zip(leaves, arrays)):
        if not wanted[i]:
            continue
        analytic = leaf.grad if leaf.grad is not None else np.zeros_like(array)
        for index in np.ndindex(array.shape):
            original = array[index]
            array[index] = original + eps
            plus = objective()
            array[index] = original - eps
            minus = objective()
            array[index] = original
            numeric = (plus - minus) / (2 * eps)
            if not abs(analytic[index] - numeric) <= atol + rtol * abs(numeric):
                raise GradcheckError(
                    f"gradcheck: {names[i]} at index {index}: backward gives "
                    f"{analytic[index]:.8g}, central differences give {numeric:.8g} "
                    f"(tolerance atol={atol} + rtol={rtol} * |numeric|). The backward of an op "
                    f"between this input and the output disagrees with its forward.")
    return True


@contextmanager
def detect_anomaly() -> Iterator[None]:
    """Record where each op is created and stop at the first backward that makes NaN or Inf.

    The AnomalyError names the op and the file and line that created it. Slower: use it to
    debug, not to train.
    """
    previous, modes.anomaly = modes.anomaly, True
    try:
        yield
    finally:
        modes.anomaly = previous


def gradgradcheck(fn: Callable[..., Variable], *inputs, eps: float = 1e-6, atol: float = 1e-5,
                  rtol: float = 1e-3, seed: int = 0) -> bool:
    """Check second derivatives: the gradient of a create_graph gradient against central
    differences of the first gradient.

    The first gradient is the vector-Jacobian product g(x, u) = u^T d fn(x) / dx, u a random
    cotangent of fn's output shape; the scalar s = sum_i r_i . g_i (r random) is differentiated
    with mg.grad(..., create_graph=True)'s gradient, d s / d (x, u), and compared, element by
    element, with (s(x + eps) - s(x - eps)) / 2 eps, each s computed by a plain first gradient.
    inputs: float64 arrays, all differentiated. Returns True or raises GradcheckError.
    """
    arrays = [np.array(x, dtype=np.float64) for x in inputs]
    rng = np.random.default_rng(seed)
    out_shape = fn(*[create_leaf(a) for a in arrays]).shape
    cotangent = rng.standard_normal(out_shape)
    weights = [rng.standard_normal(a.shape) for a in arrays]

    def s_of(values: list, create_graph: bool):
        *leaves, u = [create_leaf(a, requires_grad=True) for a in values]
        first = grad(fn(*leaves), leaves, u, create_graph=create_graph, allow_unused=True)
        s = sum((g * r).sum() for g, r in zip(first, weights))
        return s, leaves + [u]

    s, wrt = s_of(arrays + [cotangent], True)
    analytic = grad(s, wrt, allow_unused=True) if s.requires_grad else [np.zeros(1)] * len(wrt)
    values = arrays + [cotangent]
    for i, array in enumerate(values):
        exact = analytic[i].data if s.requires_grad else np.zeros_like(array)
        for index in np.ndindex(array.shape):
            original = array[index]
            array[index] = original + eps
            plus = s_of(values, False)[0].item()
            array[index] = original - eps
            minus = s_of(values, False)[0].item()
            array[index] = original
            numeric = (plus - minus) / (2 * eps)
            if not abs(exact[index] - numeric) <= atol + rtol * abs(numeric):
                what = f"input {i}" if i < len(arrays) else "the cotangent u"
                raise GradcheckError(
                    f"gradgradcheck: {what} (shape {array.shape}) at index {index}: the gradient "
                    f"of the create_graph gradient gives {exact[index]:.8g}, central differences "
                    f"of the first gradient give {numeric:.8g} (tolerance atol={atol} + "
                    f"rtol={rtol} * |numeric|). The differentiable_backward of an op between "
                    f"this input and the output disagrees with its backward.")
    return True
