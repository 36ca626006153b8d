"""Ops that move values around without arithmetic: reshape, transpose, broadcast, join, index."""
from __future__ import annotations

import numpy as np

from .. import kernels
from ..errors import ShapeError
from ..eager.function import Function, graph_root, register


@register("reshape")
class Reshape(Function):
    """z = a viewed with a new shape (same values, same order); the gradient is reshaped back."""
    grad_text = ("grad_output reshaped back",)
    shape_rule = "the new shape must hold exactly as many elements as the input (one -1 may be inferred)"
    shape_fix = "check the product of the sizes, or use -1 for one axis"

    @staticmethod
    def forward(ctx, a, shape):
        ctx.shape = a.shape
        return a.reshape(shape)

    @staticmethod
    def sizes(args: tuple) -> tuple:
        """x.reshape(2, 3), x.reshape((2, 3)), x.reshape(np.int64(6)): the shape as ints."""
        return sizes("reshape", args[0] if len(args) == 1 else args)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.reshape(ctx.shape)


@register("transpose")
class Transpose(Function):
    """z = a with its axes permuted (reversed when axes is None); the gradient is permuted back."""
    grad_text = ("grad_output with the axes permuted back",)
    shape_rule = "axes must be a permutation of range(a.ndim) (a negative axis counts from the end)"
    shape_fix = "give every axis exactly once, e.g. x.transpose(1, 0, 2) or x.transpose(1, 0, -1)"

    @staticmethod
    def forward(ctx, a, axes=None):
        # kept with negative axes resolved (None, the reversal, stays None: traces show it so)
        ctx.axes = None if axes is None else kernels.permutation(axes, a.ndim)
        return a.transpose(ctx.axes)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.transpose(kernels.inverse_permutation(ctx.axes, grad_output.ndim))

    @staticmethod
    def sizes(args: tuple):
        """x.transpose(), x.transpose(1, 0), x.transpose((1, 0)): None or the axes as ints."""
        return sizes("transpose", args[0] if len(args) == 1 else args) if args else None


@register("broadcast_to")
class BroadcastTo(Function):
    """z = a repeated along new or size-1 axes; accumulate_grad sums the gradient back."""
    grad_text = ("grad_output, summed back to a's shape by accumulate_grad",)
    shape_rule = "each input axis must equal the target axis or be 1, aligned from the right"
    shape_fix = "pick a target shape that the input broadcasts to"

    @staticmethod
    def forward(ctx, a, shape):
        return np.broadcast_to(a, shape)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output   # in the output's shape; the reduction is accumulate_grad's job


@register("stop_gradient")
class StopGradient(Function):
    """z = a, with no gradient back to a: x.detach() while aot.capture records fn."""
    grad_text = ()

    @staticmethod
    def forward(ctx, a):
        return a

    @staticmethod
    def backward(ctx, grad_output):
        return ()   # no inputs: the graph starts here, as it does at a detach() leaf

    @classmethod
    def apply(cls, source):
        """A new root of the graph that requires grad, so that the ops after it are recorded
        (eager records only ops on values that require grad) and capture can see them; source
        is not a parent (no gradient flows back), only kept as node.source for capture."""
        return graph_root(cls, source, source=source)


@register("concat")
class Concat(Function):
    """z = [a1, a2, ...] joined along an existing axis; each input gets its slice of the gradient."""
    grad_text = ("the slice of grad_output that came from this input",)
    shape_rule = "all inputs must have the same shape except along the joining axis"
    shape_fix = "reshape the inputs so the other axes agree, or join along another axis"

    @staticmethod
    def forward(ctx, *arrays, axis=0):
        ctx.axis = axis
        ctx.ends = np.cumsum([a.shape[axis] for a in arrays])[:-1]
        return np.concatenate(arrays, axis=axis)

    @staticmethod
    def backward(ctx, grad_output):
        return tuple(np.split(grad_output, ctx.ends, axis=ctx.axis))


@register("stack")
class Stack(Function):
    """z = [a1, a2, ...] stacked along a new axis; input i gets the gradient's i-th slice."""
    grad_text = ("the slice of grad_output that came from this input",)
    shape_rule = "all inputs must have the same shape"
    shape_fix = "reshape or pad the inputs to one shape first"

    @staticmethod
    def forward(ctx, *arrays, axis=0):
        z = np.stack(arrays, axis=axis)
        ctx.axis = axis % z.ndim
        return z

    @staticmethod
    def backward(ctx, grad_output):
        return tuple(np.moveaxis(grad_output, ctx.axis, 0))


@register("getitem")
class GetItem(Function):
    """z = a[index]; the gradient is scattered back (added, so repeated indices sum up)."""
    grad_text = ("grad_output scattered back into zeros of a's shape",)
    shape_rule = "the index must be valid for the input's shape (ints, slices, integer arrays)"
    shape_fix = "check the index against x.shape"

    @staticmethod
    def forward(ctx, a, index):
        index = _plain_index(index)
        ctx.shape, ctx.index = a.shape, index
        return a[index]

    @staticmethod
    def backward(ctx, grad_output):
        grad = np.zeros(ctx.shape, dtype=grad_output.dtype)
        np.add.at(grad, ctx.index, grad_output)   # += would drop repeats: x[[0, 0]] must count twice
        return grad


def _plain_index(index):
    """The index as backward will use it: Variables stand for their (integer) data, and arrays
    and lists are copied, so changing the caller's index after forward cannot move the
    gradient."""
    if isinstance(index, tuple):
        return tuple(_plain_index(i) for i in index)
    data = getattr(index, "data", None)
    if isinstance(data, np.ndarray):
        index = data
    return np.array(index) if isinstance(index, (np.ndarray, list)) else index


def reshape(a, shape):
    return Reshape.apply(a, shape=sizes("reshape", shape))


def transpose(a, axes=None):
    return Transpose.apply(a, axes=None if axes is None else sizes("transpose", axes))


def broadcast_to(a, shape):
    return BroadcastTo.apply(a, shape=sizes("broadcast_to", shape))


def sizes(op: str, shape) -> tuple:
    """A shape (or axes) as a tuple of ints: one integer (Python's or numpy's) or a sequence."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        return (int(shape),)
    try:
        items = tuple(shape)
    except TypeError:
        items = (shape,)
    if not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) for n in items):
        raise ShapeError(f"{op}: {shape!r} is not a shape. Rule: sizes and axes are integers, "
                         f"given as one int or a tuple of ints. Fix: e.g. {op}(x, (2, 3)).")
    return tuple(int(n) for n in items)


def concat(variables, axis: int = 0):
    return Concat.apply(*variables, axis=axis)


def stack(variables, axis: int = 0):
    return Stack.apply(*variables, axis=axis)


def getitem(a, index):
    return GetItem.apply(a, index=index)
