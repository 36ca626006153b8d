"""Softmax family and losses, each one whole: the eager Function, its aot rule and compilers, its
row of the op table (the math lives in kernels.py)."""
from __future__ import annotations

import numpy as np

from .. import kernels
from ..errors import DtypeError, ShapeError, TargetError
from ..eager.function import Function, register
from ..kernels import along_axis_compiler, plan_call
from ..optable import SAME, define
from .shape import checked_axes


def _along_axis_backward_compiler(kernel):
    def compile_(grad_output, y, axis=-1, **attrs):
        return plan_call(kernel, y, grad_output, axis, kernel(y, grad_output, axis))
    return compile_


def _capture_along_axis(node, v, inputs):
    return node.name, {"axis": node.axis}


@register("softmax")
class Softmax(Function):
    """z = exp(a) / sum(exp(a)) along axis; saves its output, which is all backward needs."""
    grad_text = ("z * (grad_output - sum(grad_output * z))",)
    shape_rule = "axis must be within the input's dimensions"
    shape_fix = "use axis=-1 for the last axis"

    @staticmethod
    def forward(ctx, a, axis=-1):
        axis = checked_axes(axis)
        z = kernels.softmax(a, axis, out=ctx.out(a, floating=True))
        ctx.axis = axis
        ctx.save_for_backward(z)
        return z

    @staticmethod
    def backward(ctx, grad_output):
        (z,) = ctx.saved_tensors
        return kernels.softmax_backward(z, grad_output, ctx.axis, out=ctx.out(grad_output, z))

    @staticmethod
    def differentiable_backward(ctx, grad_output):
        """recorded (create_graph): z (g - sum(g z)), z = softmax a recomputed from the input"""
        z = ctx.inputs[0].softmax(ctx.axis)
        return z * (grad_output - (grad_output * z).sum(axis=ctx.axis, keepdims=True))


def softmax_rule(ctx):
    """y = softmax(x): dx = y * (dy - sum(dy * y)); saves y."""
    return [ctx.op("softmax_backward", [ctx.d_output, ctx.read(ctx.fwd_op.outputs[0])],
                   [ctx.d_inputs[0]], axis=ctx.fwd_op.attrs["axis"])]


define(Softmax, rule=softmax_rule, capture=_capture_along_axis, saves="the output",
       compilers={"softmax": along_axis_compiler(kernels.softmax),
                  "softmax_backward": _along_axis_backward_compiler(kernels.softmax_backward)})


@register("log_softmax")
class LogSoftmax(Function):
    """z = a - log(sum(exp(a))) along axis; saves its output."""
    grad_text = ("grad_output - softmax(a) * sum(grad_output)",)
    shape_rule = Softmax.shape_rule
    shape_fix = Softmax.shape_fix

    @staticmethod
    def forward(ctx, a, axis=-1):
        axis = checked_axes(axis)
        z = kernels.log_softmax(a, axis, out=ctx.out(a, floating=True))
        ctx.axis = axis
        ctx.save_for_backward(z)
        return z

    @staticmethod
    def backward(ctx, grad_output):
        (z,) = ctx.saved_tensors
        return kernels.log_softmax_backward(z, grad_output, ctx.axis,
                                            out=ctx.out(grad_output, z))

    @staticmethod
    def differentiable_backward(ctx, grad_output):
        """recorded (create_graph): g - softmax(a) sum(g)"""
        probs = ctx.inputs[0].softmax(ctx.axis)
        return grad_output - probs * grad_output.sum(axis=ctx.axis, keepdims=True)


def log_softmax_rule(ctx):
    """y = log_softmax(x): dx = dy - exp(y) * sum(dy); saves y."""
    return [ctx.op("log_softmax_backward", [ctx.d_output, ctx.read(ctx.fwd_op.outputs[0])],
                   [ctx.d_inputs[0]], axis=ctx.fwd_op.attrs["axis"])]


define(LogSoftmax, rule=log_softmax_rule, capture=_capture_along_axis, saves="the output",
       compilers={"log_softmax": along_axis_compiler(kernels.log_softmax),
                  "log_softmax_backward": _along_axis_backward_compiler(
                      kernels.log_softmax_backward)})


@register("cross_entropy")
class CrossEntropy(Function):
    """L = -mean_i log softmax(logits_i)[t_i]; dL/dlogits = (softmax - onehot(t)) / N."""
    grad_text = ("(softmax(logits) - onehot(t)) / N * grad_output", "none (class indices)")
    input_names = ("logits", "t")

    @staticmethod
    def forward(ctx, logits, targets):
        check_class_targets(logits, targets)
        n = logits.shape[0]
        log_probs = kernels.log_softmax(logits, 1)
        probs = np.exp(log_probs, out=ctx.out(logits, floating=True, kind="saved"))
        ctx.save_for_backward(probs, targets)
        picked = log_probs[np.arange(n), targets]
        return kernels.mean_total(picked, -n, out=ctx.out(shape=(), dtype=picked.dtype))   # -mean

    @staticmethod
    def backward(ctx, grad_output):
        probs, targets = ctx.saved_tensors
        n = probs.shape[0]
        scale = kernels.divide_total(grad_output, n)   # (n may not fit float16)
        grad = np.multiply(probs, scale, out=ctx.out(probs))   # scale is 0-d
        grad[np.arange(n), targets] -= scale
        return grad, None

    @staticmethod
    def differentiable_backward(ctx, grad_output):
        """recorded (create_graph): (softmax(logits) - onehot(t)) / N * g"""
        logits, targets = ctx.inputs
        onehot = np.zeros(logits.shape, logits.dtype)
        onehot[np.arange(logits.shape[0]), targets.data] = 1
        return (logits.softmax(1) - onehot) * (grad_output / logits.shape[0]), None


def cross_entropy_rule(ctx):
    """L = -mean log softmax(logits)[t]: d_logits = (softmax(logits) - onehot(t)) / N * dL;
    saves the logits (softmax is recomputed in backward) and the targets."""
    logits, targets = ctx.fwd_op.inputs
    return [ctx.op("cross_entropy_backward", [ctx.d_output, ctx.read(logits), ctx.read(targets)],
                   [ctx.d_inputs[0]])]


def _checked_cross_entropy(logits, targets, out):
    # Targets may be new data on every run: checked each time with the eager op's check (numpy
    # would read -1 as the last class, and raise a bare IndexError past the end).
    check_class_targets(logits, targets)
    kernels.cross_entropy(logits, targets, out)


def _compile_cross_entropy(logits, targets, **attrs):
    return plan_call(_checked_cross_entropy, logits, targets, np.empty((), logits.dtype))


def _compile_cross_entropy_backward(grad_output, logits, targets, **attrs):
    return plan_call(kernels.cross_entropy_backward, logits, targets, grad_output,
                     np.empty_like(logits))


define(CrossEntropy, rule=cross_entropy_rule, capture=SAME, saves="logits and targets",
       compilers={"cross_entropy": _compile_cross_entropy,
                  "cross_entropy_backward": _compile_cross_entropy_backward})


@register("mse")
class MSE(Function):
    """L = mean((pred - target)^2); dL/dpred = 2 (pred - target) / n."""
    grad_text = ("2 (pred - target) / n * grad_output", "-2 (pred - target) / n * grad_output")
    input_names = ("pred", "target")
    shape_fix = "give prediction and target the same shape (e.g. y.reshape(-1, 1))"

    @staticmethod
    def forward(ctx, pred, target):
        check_mse_shapes(pred, target)
        diff = np.subtract(pred, target, out=ctx.out(pred, target, kind="saved"))
        ctx.save_for_backward(diff)
        return (diff * diff).mean()

    @staticmethod
    def backward(ctx, grad_output):
        (diff,) = ctx.saved_tensors
        grad = np.multiply(diff, kernels.divide_total(2 * grad_output, diff.size),
                           out=ctx.out(diff), dtype=diff.dtype)
        return grad, np.negative(grad, out=ctx.out(grad))

    @staticmethod
    def differentiable_backward(ctx, grad_output):
        """recorded (create_graph): 2 (pred - target) / n * g, and its negative"""
        pred, target = ctx.inputs
        grad = (pred - target) * (grad_output * (2 / pred.size))
        return grad, -grad


def mse_rule(ctx):
    """L = mean((p - t)^2): dp = 2 (p - t) / n * dL, dt = -dp, each summed back to its
    operand's shape where p and t broadcast; saves p and t."""
    pred, target = ctx.fwd_op.inputs
    d_diff = ctx.broadcast_temp("d_mse_diff")
    ops = [ctx.op("mse_backward", [ctx.d_output, ctx.read(pred), ctx.read(target)], [d_diff])]
    if ctx.needs_grad(0):
        ops += ctx.to_input_shape(0, "identity", [d_diff])
    if ctx.needs_grad(1):
        ops += ctx.to_input_shape(1, "neg", [d_diff])
    return ops


def _compile_mse(pred, target, **attrs):
    check_mse_shapes(pred, target)
    return plan_call(kernels.mse, pred, target, np.empty((), np.result_type(pred, target)))


def _compile_mse_backward(grad_output, pred, target, **attrs):
    return plan_call(kernels.mse_backward, pred, target, grad_output,
                     np.empty(np.broadcast_shapes(pred.shape, target.shape), pred.dtype))


define(MSE, rule=mse_rule, capture=SAME, saves="pred and target",
       compilers={"mse": _compile_mse, "mse_backward": _compile_mse_backward})


def check_mse_shapes(pred: np.ndarray, target: np.ndarray) -> None:
    """mse compares prediction and target element by element: the shapes must be equal (also run
    by aot plans). Broadcasting would be a silent wrong loss: (4, 1) against (4,) is 16 terms."""
    if pred.shape != target.shape:
        raise ShapeError(f"mse: prediction of shape {pred.shape} and target of shape "
                         f"{target.shape}. Rule: the loss averages (pred - target)^2 element by "
                         f"element, so both have the same shape; broadcasting them would compare "
                         f"every prediction with every target. Fix: reshape one to the other's "
                         f"shape, e.g. target.reshape({pred.shape}) or pred.reshape(-1).")


def check_class_targets(logits: np.ndarray, targets: np.ndarray) -> None:
    if logits.ndim != 2:
        raise ShapeError(f"cross_entropy: logits must have shape (N, C), got {logits.shape}. "
                         f"Fix: reshape to (batch, classes), e.g. logits.reshape(-1, C).")
    if targets.ndim == 0:   # (a Python int arrives here as a float: it took the logits' dtype)
        raise ShapeError(f"cross_entropy: targets is a single number, for logits {logits.shape}. "
                         f"Rule: one class index per row, shape ({logits.shape[0]},). Fix: "
                         f"np.array([t]) for one row, or the array of all the rows' classes.")
    if targets.dtype.kind not in "iu":
        raise DtypeError(f"cross_entropy: targets must be integer class indices, got dtype "
                         f"{targets.dtype}. Fix: targets.astype(np.int64) (one index per row, "
                         f"not one-hot vectors or probabilities).")
    n, classes = logits.shape
    if targets.shape != (n,):
        raise ShapeError(f"cross_entropy: targets must have shape ({n},) to match logits "
                         f"{logits.shape}, got {targets.shape}. Fix: one class index per row.")
    if n and (targets.min() < 0 or targets.max() >= classes):
        bad = (targets < 0) | (targets >= classes)
        raise TargetError(f"cross_entropy: target {targets[bad][0]} (row {np.flatnonzero(bad)[0]}) "
                          f"is outside [0, {classes}) for logits with {classes} classes. "
                          f"Fix: targets must be class indices 0..{classes - 1}.")


def softmax(a, axis: int = -1):
    return Softmax.apply(a, axis=axis)


def log_softmax(a, axis: int = -1):
    return LogSoftmax.apply(a, axis=axis)


def cross_entropy(logits, targets):
    return CrossEntropy.apply(logits, targets)


def mse(pred, target):
    return MSE.apply(pred, target)
