"""Lesson 12 (capstone): check_rmsnorm_backward, and with_your_norms to train with it.

The student writes rmsnorm_backward(d_y, x, rstd, weight) -> (d_x, d_weight) for
y = x * rstd * weight, rstd = 1/sqrt(mean(x^2) + eps) over the last axis (rstd of shape
(..., 1)). The check compares it with central differences of that formula in float64 (its own
numpy, not the library's op), then trains two copies of a tiny transformer for a few steps, one
with the library's norms and one whose norms (plain and fused residual) use the student's
backward, and compares the losses at every step.
"""
from __future__ import annotations

import types

import numpy as np

from ..eager.function import Function
from .. import kernels
from ._report import StudentError, call, call_own, failed, passed

CHECK = "check_rmsnorm_backward"
LIBRARY = (kernels.rmsnorm_backward, kernels.rmsnorm_backward_xhat)   # the answer, written out
EPS = 1e-6
HINT = ("x reaches y twice: directly (the normalised row x_hat is x times rstd), and through "
        "rstd, which depends on every x of the row (d rstd / d x_j = -rstd**3 * x_j / D). Add "
        "the two paths; d_weight sums d_y times x_hat over the rows",
        "with g = d_y * weight (the gradient of x_hat): the direct path gives rstd * g, the path "
        "through rstd gives -rstd * x_hat * (a mean over the row of g * x_hat); d_weight has "
        "shape (D,)",
        "with x_hat = x * rstd and g = d_y * weight: d_x = rstd * (g - x_hat * mean(g * x_hat)) "
        "(the mean over the last axis, keepdims=True); d_weight = sum over the rows of "
        "d_y * x_hat, shape (D,)")


def _rstd(x: np.ndarray) -> np.ndarray:
    return 1.0 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + EPS)


class YourRMSNorm(Function):
    """y = x * rstd * weight, with the backward the student wrote."""
    input_names = ("x", "weight")

    @staticmethod
    def forward(ctx, x, weight, backward_fn=None):
        rstd = _rstd(x)
        ctx.backward_fn = backward_fn
        ctx.save_for_backward(x, rstd, weight)
        return x * rstd * weight

    @staticmethod
    def backward(ctx, grad_output):
        x, rstd, weight = ctx.saved_tensors
        d_x, d_weight = ctx.backward_fn(grad_output, x, rstd, weight)
        return d_x, d_weight


def with_your_norms(model, rmsnorm_backward):
    """The model with every RMSNorm (plain and fused residual) using your backward; returned."""
    from ..nn import RMSNorm

    def forward(norm, x, residual=None):
        if residual is not None:
            residual = residual + x          # the fused op's first half, as a plain add
            return residual, YourRMSNorm.apply(residual, norm.weight, backward_fn=rmsnorm_backward)
        return YourRMSNorm.apply(x, norm.weight, backward_fn=rmsnorm_backward)

    for module in model.modules():
        if isinstance(module, RMSNorm):
            module.forward = types.MethodType(forward, module)
    return model


def _central_differences(x, weight, d_y, h=1e-6):
    def loss(x, weight):
        return float((x * _rstd(x) * weight * d_y).sum())
    grads = []
    for k, a in enumerate((x, weight)):
        g = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            plus, minus = [x.copy(), weight.copy()], [x.copy(), weight.copy()]
            plus[k][idx] += h
            minus[k][idx] -= h
            g[idx] = (loss(*plus) - loss(*minus)) / (2 * h)
        grads.append(g)
    return grads


def _against_differences(rmsnorm_backward) -> bool | None:
    rng = np.random.default_rng(12)
    for shape in [(3, 4), (2, 3, 5)]:
        x, weight = rng.normal(size=shape), rng.normal(size=shape[-1:])
        d_y = rng.normal(size=shape)
        case = f"x of shape {shape}, weight of shape {shape[-1:]}"
        try:
            result = call_own(rmsnorm_backward, LIBRARY, d_y, x.copy(), _rstd(x), weight.copy())
        except StudentError as err:
            return failed(CHECK, case, err.description, HINT)
        if not (isinstance(result, tuple) and len(result) == 2):
            return failed(CHECK, case, f"your function returned {type(result).__name__}, not a "
                                       f"pair (d_x, d_weight).", "return d_x, d_weight")
        want = _central_differences(x, weight, d_y)
        for name, got, expected in zip(("d_x", "d_weight"), result, want):
            if np.shape(got) != expected.shape:
                return failed(CHECK, case, f"{name} has shape {np.shape(got)}, want "
                                           f"{expected.shape}.", HINT)
            if not np.allclose(got, expected, rtol=1e-5, atol=1e-7):
                return failed(CHECK, case, f"{name} differs from central differences:\n"
                                           f"yours   {np.ravel(got)[:4]}\n"
                                           f"numeric {np.ravel(expected)[:4]}", HINT)
    return None


def _train_losses(model, steps: int) -> list:
    from .. import data, optim
    opt = optim.Adam(model.parameters(), lr=3e-3)
    rng, losses = np.random.default_rng(0), []
    for _ in range(steps):
        loss = model(*data.sort_digits(8, 4, seed=rng))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def check_rmsnorm_backward(rmsnorm_backward, steps: int = 30) -> bool:
    """Central differences in float64; then `steps` training steps: the library's losses?"""
    from ..nn import TinyTransformer

    if not callable(rmsnorm_backward):
        return failed(CHECK, "check_rmsnorm_backward(rmsnorm_backward)",
                      f"got {type(rmsnorm_backward).__name__}, not a function.",
                      "pass the function itself: check_rmsnorm_backward(rmsnorm_backward)")
    verdict = _against_differences(rmsnorm_backward)
    if verdict is not None:
        return verdict
    sizes = dict(vocab=11, dim=8, n_layers=2, n_heads=2, hidden=12, seed=0, dtype=np.float64)
    theirs = _train_losses(TinyTransformer(**sizes), steps)
    case = f"{steps} training steps of a 2-layer TinyTransformer with your norms"
    try:
        mine = call(_train_losses, with_your_norms(TinyTransformer(**sizes), rmsnorm_backward),
                    steps)
    except StudentError as err:
        return failed(CHECK, case, err.description, HINT)
    for step, (a, b) in enumerate(zip(mine, theirs)):
        if not np.isclose(a, b, rtol=1e-9):
            return failed(CHECK, case, f"at step {step} the loss is {a:.10f} with your backward, "
                                       f"{b:.10f} with the library's.", HINT)
    return passed(CHECK, f"equal to central differences (float64), and {steps} training steps "
                         f"with your backward in all 5 norms give the library's losses "
                         f"({theirs[0]:.4f} -> {theirs[-1]:.4f})")
