"""Ops that move values around without arithmetic: reshape, transpose, broadcast, join, index.
Each is one whole: the eager Function, its aot rule and compilers, its row of the op table. In a
plan most of them are views: their compilers return a view of the input and no call to run."""
from __future__ import annotations

import numpy as np

from .. import kernels
from ..errors import ShapeError
from ..eager.function import Function, graph_root, register
from ..kernels import plan_call, run_calls
from ..optable import SAME, NotCapturable, define


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

    @staticmethod
    def differentiable_backward(ctx, grad_output):
        """recorded (create_graph): g reshaped back"""
        return grad_output.reshape(ctx.shape)


def reshape_rule(ctx):
    """y = x viewed with another shape: dx = dy viewed with x's shape; saves nothing."""
    return [ctx.op("reshape", [ctx.d_output], [ctx.d_inputs[0]],
                   shape=ctx.shape(ctx.fwd_op.inputs[0]))]


def _compile_reshape(x, shape=None, **attrs):
    y = x.reshape(shape)
    if np.shares_memory(x, y):
        return y, []                           # a view: nothing to run
    return plan_call(_reshape_into, x, y)      # x was not contiguous: copy each run


def _reshape_into(x, out):
    out[...] = x.reshape(out.shape)


define(Reshape, rule=reshape_rule, compilers={"reshape": _compile_reshape}, alias=True,
       capture=lambda node, v, inputs: ("reshape", {"shape": tuple(v.shape)}), saves="nothing")


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
    def differentiable_backward(ctx, grad_output):
        """recorded (create_graph): g permuted back"""
        return grad_output.transpose(*kernels.inverse_permutation(ctx.axes, grad_output.ndim))

    @staticmethod
    def sizes(args: tuple):
        """x.transpose(), x.transpose(1, 0), x.transpose((1, 0)): None or the axes as ints."""
        return sizes("transpose", args[0] if len(args) == 1 else args) if args else None


def transpose_rule(ctx):
    """y = x with axes permuted: dx = dy permuted back (negative axes resolved first, as the
    eager op does); saves nothing."""
    axes = ctx.fwd_op.attrs.get("axes")
    back = kernels.inverse_permutation(axes, len(ctx.shape(ctx.fwd_op.inputs[0])))
    return [ctx.op("transpose", [ctx.d_output], [ctx.d_inputs[0]], axes=back)]


define(Transpose, rule=transpose_rule, alias=True, saves="nothing",
       compilers={"transpose": lambda x, axes=None, **attrs: (x.transpose(axes), [])},
       capture=lambda node, v, inputs: ("transpose", {"axes": node.axes}))


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

    @staticmethod
    def differentiable_backward(ctx, grad_output):
        """recorded (create_graph): g (the walk sums it back to a's shape)"""
        return grad_output


def broadcast_to_rule(ctx):
    """y = x repeated to a larger shape: dx = dy summed back to x's shape; saves nothing."""
    return [ctx.op("sum_to_shape", [ctx.d_output], [ctx.d_inputs[0]],
                   shape=ctx.shape(ctx.fwd_op.inputs[0]))]


def _compile_sum_to_shape(g, shape=None, **attrs):
    """Undo broadcasting: sum g over the axes broadcasting added or stretched (one reduce call).
    (The adjoint of broadcast_to, so it lives in its row; many rules emit it.)"""
    out = np.empty(shape, dtype=g.dtype)
    lead = g.ndim - len(shape)
    padded = (1,) * lead + tuple(shape)
    axes = tuple(i for i in range(g.ndim) if padded[i] == 1 and g.shape[i] != 1) + \
        tuple(range(lead))
    axes = tuple(sorted(set(axes)))
    if not axes:
        return g, []   # nothing was broadcast: the gradient already has the shape
    view = out.reshape(padded)
    return out, run_calls([(np.add.reduce, (g, axes, None, view, True))])


define(BroadcastTo, rule=broadcast_to_rule, alias=True, saves="nothing",
       compilers={"broadcast_to": lambda x, shape=None, **attrs: (np.broadcast_to(x, shape), []),
                  "sum_to_shape": _compile_sum_to_shape},   # (a read-only view: nothing to run)
       capture=lambda node, v, inputs: ("broadcast_to", {"shape": tuple(v.shape)}))


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


def stop_gradient_rule(ctx):
    """y = x with no gradient through (detach): derive never asks; nothing to emit."""
    return []


define(StopGradient, rule=stop_gradient_rule, capture=SAME, alias=True, saves="nothing",
       api=False, compilers={"stop_gradient": lambda x, **attrs: (x, [])})


@register("concat")
class Concat(Function):
    """z = [a1, a2, ...] joined along an existing axis; each input gets its slice of the gradient."""
    grad_text = ("the slice of grad_output that came from this input",)
    shape_rule = "all inputs must have the same shape except along the joining axis"
    shape_fix = "reshape the inputs so the other axes agree, or join along another axis"

    @staticmethod
    def forward(ctx, *arrays, axis=0):
        ctx.axis = axis_index(axis)
        ctx.ends = np.cumsum([a.shape[axis] for a in arrays])[:-1]
        return np.concatenate(arrays, axis=axis)

    @staticmethod
    def backward(ctx, grad_output):
        return tuple(np.split(grad_output, ctx.ends, axis=ctx.axis))


def concat_rule(ctx):
    """y = [a1, a2, ...] joined along axis: each d_ai is the slice of dy that came from ai, all
    written by one op (a temp stands for an input that needs no gradient); saves nothing."""
    inputs = range(len(ctx.fwd_op.inputs))
    return [ctx.op("concat_backward", [ctx.d_output], ctx.grads_or_temps(*inputs),
                   **ctx.fwd_op.attrs)]


# (the compiled calls take the arrays one by one, not as numpy's list: a plan's calls hold arrays
# as their own arguments, so that placement can point them into the shared arena)
def _concat_into(axis, *arrays_then_out):
    np.concatenate(arrays_then_out[:-1], axis=axis, out=arrays_then_out[-1])


def _split_into(grad_output, axis, ends, *outs):
    for piece, out in zip(np.split(grad_output, ends, axis=axis), outs):
        out[...] = piece


def _compile_concat(*arrays, axis=0, ends=(), **attrs):
    out = np.concatenate(arrays, axis=axis)
    return plan_call(_concat_into, axis, *arrays, out)


def _compile_concat_backward(grad_output, axis=0, ends=(), **attrs):
    outs = tuple(np.array(piece) for piece in np.split(grad_output, ends, axis=axis))
    return outs, run_calls([(_split_into, (grad_output, axis, ends, *outs))])


define(Concat, rule=concat_rule, saves="nothing",
       compilers={"concat": _compile_concat, "concat_backward": _compile_concat_backward},
       capture=lambda node, v, inputs: (
           "concat", {"axis": node.axis, "ends": tuple(int(e) for e in node.ends)}))


@register("stack")
class Stack(Function):
    """z = [a1, a2, ...] stacked along a new axis; input i gets the gradient's i-th slice."""
    grad_text = ("the slice of grad_output that came from this input",)
    shape_rule = "all inputs must have the same shape"
    shape_fix = "reshape or pad the inputs to one shape first"

    @staticmethod
    def forward(ctx, *arrays, axis=0):
        z = np.stack(arrays, axis=axis_index(axis))
        ctx.axis = axis % z.ndim
        return z

    @staticmethod
    def backward(ctx, grad_output):
        return tuple(np.moveaxis(grad_output, ctx.axis, 0))


def stack_rule(ctx):
    """y = [a1, a2, ...] stacked along a new axis: d_ai = dy's i-th slice along it, all written
    by one op; saves nothing."""
    inputs = range(len(ctx.fwd_op.inputs))
    return [ctx.op("stack_backward", [ctx.d_output], ctx.grads_or_temps(*inputs),
                   **ctx.fwd_op.attrs)]


def _stack_into(axis, *arrays_then_out):
    slices = np.moveaxis(arrays_then_out[-1], axis, 0)   # (a view of out)
    for i, a in enumerate(arrays_then_out[:-1]):
        slices[i] = a


def _unstack_into(grad_output, axis, *outs):
    for piece, out in zip(np.moveaxis(grad_output, axis, 0), outs):
        out[...] = piece


def _compile_stack(*arrays, axis=0, **attrs):
    return plan_call(_stack_into, axis, *arrays, np.stack(arrays, axis=axis))


def _compile_stack_backward(grad_output, axis=0, **attrs):
    outs = tuple(np.array(piece) for piece in np.moveaxis(grad_output, axis, 0))
    return outs, run_calls([(_unstack_into, (grad_output, axis, *outs))])


define(Stack, rule=stack_rule, saves="nothing",
       compilers={"stack": _compile_stack, "stack_backward": _compile_stack_backward},
       capture=lambda node, v, inputs: ("stack", {"axis": node.axis}))


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


def getitem_rule(ctx):
    """y = x[index]: dx = zeros of x's shape with dy added in at index (repeats sum up);
    saves nothing (the index is an attribute)."""
    return [ctx.op("getitem_backward", [ctx.d_output], [ctx.d_inputs[0]],
                   index=ctx.fwd_op.attrs["index"], shape=ctx.shape(ctx.fwd_op.inputs[0]))]


def _compile_getitem(x, index=None, **attrs):
    def take(x, out):   # (the index stays in the closure: a plan's arguments are its buffers)
        out[...] = x[index]
    return plan_call(take, x, np.array(x[index]))


def _compile_getitem_backward(grad_output, index=None, shape=None, **attrs):
    def scatter(grad_output, out):
        out.fill(0)
        np.add.at(out, index, grad_output)
    return plan_call(scatter, grad_output, np.zeros(shape, grad_output.dtype))


def _capture_getitem(node, v, inputs):
    """Ints and slices only: an index array would be a constant of the plan, and one computed
    from fn's inputs would silently stay at its capture-time value."""
    parts = node.index if isinstance(node.index, tuple) else (node.index,)
    if not all(isinstance(p, (int, np.integer, slice)) or p is None or p is Ellipsis for p in parts):
        raise NotCapturable(
            f"capture: getitem of shape {inputs[0].shape} with the index {node.index!r}: the aot "
            f"getitem takes ints and slices. Rule: an index array would be frozen into the plan "
            f"at its capture-time value. Fix: index with ints and slices, or use an op that takes "
            f"the indices as an input (embedding).")
    return "getitem", {"index": node.index}


define(GetItem, rule=getitem_rule, capture=_capture_getitem, saves="nothing (the index)",
       compilers={"getitem": _compile_getitem, "getitem_backward": _compile_getitem_backward})


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


def axis_index(axis):
    """An axis is an integer, Python's or numpy's; numpy refuses a bool, and so does minigrad:
    `x.sum(True)` (keepdims meant) would otherwise reduce axis 1. Raises ValueError, which the op
    reports as a ShapeError naming the op, the shape and the rule."""
    if isinstance(axis, (bool, np.bool_)):
        raise ValueError(f"axis {axis!r} is a bool, not an axis; keepdims is passed by name, "
                         f"x.sum(axis, keepdims=True)")
    if not isinstance(axis, (int, np.integer)):
        raise ValueError(f"axis {axis!r} is a {type(axis).__name__}, not an integer")
    return axis


def checked_axes(axis):
    """One axis or a tuple of axes, each checked by axis_index."""
    return tuple(map(axis_index, axis)) if isinstance(axis, tuple) else axis_index(axis)


def concat(variables, axis: int = 0):
    return Concat.apply(*variables, axis=axis)


def stack(variables, axis: int = 0):
    return Stack.apply(*variables, axis=axis)


def getitem(a, index):
    return GetItem.apply(a, index=index)
