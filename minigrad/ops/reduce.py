"""Reductions over axes, each one whole: the eager Function, its aot rule and compilers, its row
of the op table. Backward spreads grad_output back over the reduced axes."""
from __future__ import annotations

import numpy as np

from ..eager.function import Function, register
from ..kernels import (as_array, averaged_count, divide_total, max_backward, plan_call,
                       run_calls)
from ..optable import define
from .shape import BroadcastTo, axis_index

_AXIS_RULE = "axis must be None, an int or a tuple of ints within the input's dimensions"
_AXIS_FIX = "check x.shape and pick an axis in range(-x.ndim, x.ndim)"


def _normalize_axes(axis, ndim: int):
    """None, or a sorted tuple of non-negative axes."""
    if axis is None:
        return None
    axes = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    for ax in map(axis_index, axes):
        if not -ndim <= ax < ndim:
            raise ValueError(f"axis {ax} is out of range for an input with {ndim} dimensions")
    return tuple(sorted(ax % ndim for ax in axes))


def _expand(grad_output, axes, keepdims: bool):
    """Give grad_output back the reduced axes (as size 1) so it broadcasts over the input."""
    if keepdims or axes is None:
        return grad_output
    return np.expand_dims(grad_output, axes)


def _spread(grad_output, ctx):
    """grad_output with the reduced axes put back as size 1, broadcast to the input's shape,
    with recorded ops (reshape, then broadcast_to)."""
    kept = tuple(1 if ctx.axes is None or i in ctx.axes else n for i, n in enumerate(ctx.shape))
    return BroadcastTo.apply(grad_output.reshape(kept), shape=ctx.shape)


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

    @staticmethod
    def differentiable_backward(ctx, grad_output):
        """recorded (create_graph): g spread back over the summed axes"""
        return _spread(grad_output, ctx)


def sum_rule(ctx):
    """y = sum(x, axis): dx = dy spread back over the summed axes; saves nothing (x's shape only)."""
    return [_expand_op(ctx, scale=1.0)]


def _expand_op(ctx, scale: float):
    attrs = ctx.fwd_op.attrs
    return ctx.op("expand", [ctx.d_output], [ctx.d_inputs[0]], shape=ctx.shape(ctx.fwd_op.inputs[0]),
                  axis=attrs.get("axis"), keepdims=attrs.get("keepdims", False), scale=scale)


def _compile_sum(x, axis=None, keepdims=False, **attrs):
    out = as_array(np.add.reduce(x, axis, None, None, keepdims))
    return out, run_calls([(np.add.reduce, (x, axis, None, out, keepdims))])


def _compile_expand(g, shape=None, axis=None, keepdims=False, scale=1.0, **attrs):
    """d sum / d mean: g (with the reduced axes put back as size 1) broadcast to shape, scaled."""
    if not keepdims and axis is not None:
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        g = np.expand_dims(g, tuple(a % len(shape) for a in axes))
    out = np.empty(shape, dtype=g.dtype)
    return plan_call(np.multiply, g, scale, out)


def _capture_reduce(node, v, inputs):
    return node.name, {"axis": node.axes, "keepdims": node.keepdims}


define(Sum, rule=sum_rule, capture=_capture_reduce, saves="nothing",
       compilers={"sum": _compile_sum, "expand": _compile_expand})


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

    @staticmethod
    def differentiable_backward(ctx, grad_output):
        """recorded (create_graph): g / n spread back over the averaged axes"""
        return _spread(grad_output, ctx) / ctx.count


def mean_rule(ctx):
    """y = mean(x, axis): dx = dy / n spread back over the averaged axes."""
    x, y = ctx.fwd_op.inputs[0], ctx.fwd_op.outputs[0]
    n = averaged_count(int(np.prod(ctx.shape(x), dtype=np.int64)),
                       int(np.prod(ctx.shape(y), dtype=np.int64)))
    # n = 0 only when x is empty: dx is empty too, so its scale never multiplies anything
    return [_expand_op(ctx, scale=1.0 / n if n else 0.0)]


def _compile_mean(x, axis=None, keepdims=False, **attrs):
    if x.dtype == np.float16:   # numpy's mean (eager's) sums float16 in float32: 10,000 x 30 is
        return _compile_float16_mean(x, axis, keepdims)   # 3e5, inf in float16 (max 65504)
    out, calls = _compile_sum(x, axis, keepdims)
    # divided (not scaled by 1/n): an empty batch's mean is 0 / 0 = nan, as in eager and numpy
    count = averaged_count(x.size, out.size)
    return out, calls + run_calls([(divide_total, (out, count, out))])


def _compile_float16_mean(x, axis, keepdims):
    total = as_array(np.add.reduce(x, axis, np.float32, None, keepdims))
    out = np.empty(total.shape, np.float16)
    count = averaged_count(x.size, out.size)
    return out, run_calls([(np.add.reduce, (x, axis, np.float32, total, keepdims)),
                           (np.divide, (total, count, out))])


define(Mean, rule=mean_rule, capture=_capture_reduce, saves="nothing",
       compilers={"mean": _compile_mean})


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


def max_rule(ctx):
    """y = max(x, axis): dx = max_backward(dy, x, y), dy routed to the maxima (ties share it);
    saves x and y."""
    x, y = ctx.fwd_op.inputs[0], ctx.fwd_op.outputs[0]
    attrs = ctx.fwd_op.attrs
    return [ctx.op("max_backward", [ctx.d_output, ctx.read(x), ctx.read(y)], [ctx.d_inputs[0]],
                   axis=attrs.get("axis"), keepdims=attrs.get("keepdims", False))]


def _compile_max(x, axis=None, keepdims=False, **attrs):
    out = as_array(np.maximum.reduce(x, axis, None, None, keepdims))
    return out, run_calls([(np.maximum.reduce, (x, axis, None, out, keepdims))])


def _max_backward_into(grad_output, x, y, axes, keepdims, out):
    if not keepdims and axes is not None:   # the reduced axes back, as size 1 (as eager does)
        grad_output, y = np.expand_dims(grad_output, axes), np.expand_dims(y, axes)
    out[...] = max_backward(x, y, grad_output, axes)


def _compile_max_backward(grad_output, x, y, axis=None, keepdims=False, **attrs):
    return plan_call(_max_backward_into, grad_output, x, y, axis, keepdims,
                     np.empty(x.shape, grad_output.dtype))


define(Max, rule=max_rule, capture=_capture_reduce, saves="a and the output",
       compilers={"max": _compile_max, "max_backward": _compile_max_backward})


def sum(a, axis=None, keepdims: bool = False):  # noqa: A001 - the op's name
    return Sum.apply(a, axis=axis, keepdims=keepdims)


def mean(a, axis=None, keepdims: bool = False):
    return Mean.apply(a, axis=axis, keepdims=keepdims)


def max(a, axis=None, keepdims: bool = False):  # noqa: A001 - the op's name
    return Max.apply(a, axis=axis, keepdims=keepdims)
