"""Reductions over axes. Backward spreads grad_output back over the reduced axes."""
from __future__ import annotations

import numpy as np

from ..eager.function import Function, register
from ..kernels import averaged_count, divide_total, max_backward

_AXIS_RULE = "axis must be None, an int or a tuple of ints within the input's dimensions"
_AXIS_FIX = "check x.shape and pick an axis in range(-x.ndim, x.ndim)"


def _normalize_axes(axis, ndim: int):
    """None, or a sorted tuple of non-negative axes."""
    if axis is None:
        return None
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    for ax in axes:
        if not -ndim <= ax < ndim:
            raise ValueError(f"axis {ax} is out of range for an input with {ndim} dimensions")
    return tuple(sorted(ax % ndim for ax in axes))


def _expand(grad_output, axes, keepdims: bool):
    """Give grad_output back the reduced axes (as size 1) so it broadcasts over the input."""
    if keepdims or axes is None:
        return grad_output
    return np.expand_dims(grad_output, axes)


@register("sum")
class Sum(Function):
    """z = sum of a over axis; dz/da = 1 everywhere."""
    grad_text = ("grad_output spread back over the summed axes",)
    shape_rule, shape_fix = _AXIS_RULE, _AXIS_FIX

    @staticmethod
    def forward(ctx, a, axis=None, keepdims=False):
        ctx.shape, ctx.axes, ctx.keepdims = a.shape, _normalize_axes(axis, a.ndim), keepdims
        return a.sum(axis=ctx.axes, keepdims=keepdims)

    @staticmethod
    def backward(ctx, grad_output):
        return np.broadcast_to(_expand(grad_output, ctx.axes, ctx.keepdims), ctx.shape)


@register("mean")
class Mean(Function):
    """z = mean of a over axis; dz/da = 1/n, n the number of averaged elements."""
    grad_text = ("grad_output / n spread back over the averaged axes",)
    shape_rule, shape_fix = _AXIS_RULE, _AXIS_FIX

    @staticmethod
    def forward(ctx, a, axis=None, keepdims=False):
        ctx.shape, ctx.axes, ctx.keepdims = a.shape, _normalize_axes(axis, a.ndim), keepdims
        z = a.mean(axis=ctx.axes, keepdims=keepdims)
        ctx.count = averaged_count(a.size, z.size)
        return z

    @staticmethod
    def backward(ctx, grad_output):
        grad = divide_total(_expand(grad_output, ctx.axes, ctx.keepdims), ctx.count)
        return np.broadcast_to(grad, ctx.shape)


@register("max")
class Max(Function):
    """z = max of a over axis; the gradient goes to the maximal entries (ties share it)."""
    grad_text = ("grad_output routed to the maximal entries",)
    shape_rule, shape_fix = _AXIS_RULE, _AXIS_FIX

    @staticmethod
    def forward(ctx, a, axis=None, keepdims=False):
        ctx.axes, ctx.keepdims = _normalize_axes(axis, a.ndim), keepdims
        z = a.max(axis=ctx.axes, keepdims=True)
        ctx.save_for_backward(a, z)
        return z if keepdims else (z.reshape(()) if ctx.axes is None else np.squeeze(z, ctx.axes))

    @staticmethod
    def backward(ctx, grad_output):
        a, z = ctx.saved_tensors
        grad = grad_output if ctx.keepdims or ctx.axes is None else np.expand_dims(grad_output, ctx.axes)
        return max_backward(a, z, grad, ctx.axes)


def sum(a, axis=None, keepdims: bool = False):  # noqa: A001 - the op's name
    return Sum.apply(a, axis=axis, keepdims=keepdims)


def mean(a, axis=None, keepdims: bool = False):
    return Mean.apply(a, axis=axis, keepdims=keepdims)


def max(a, axis=None, keepdims: bool = False):  # noqa: A001 - the op's name
    return Max.apply(a, axis=axis, keepdims=keepdims)
