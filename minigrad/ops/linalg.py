"""Matrix products, each one whole: the eager Function, its aot rule and compilers, its row of the
op table."""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..eager.function import Function, register
from ..kernels import matmul_backward, matmul_shape, plan_call, result_dtype
from ..optable import NotCapturable, define

_MATMUL_RULE = ("matmul contracts the last axis of a with the second-to-last axis of b: "
                "(..., n, k) @ (..., k, m) -> (..., n, m); a 1-D operand acts as a row (left) or a "
                "column (right), and batch axes broadcast")
_MATMUL_FIX = "transpose one operand (b.T) or reshape it so the inner sizes agree"


@register("matmul")
class MatMul(Function):
    """Z = A @ B; dA = G @ B^T, dB = A^T @ G (both operands saved)."""
    grad_text = ("grad_output @ B^T", "A^T @ grad_output")
    input_names = ("A", "B")
    shape_rule, shape_fix = _MATMUL_RULE, _MATMUL_FIX

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return np.matmul(a, b, out=ctx.out(a, b, shape=matmul_shape))

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        return matmul_backward(a, b, grad_output, need_a, need_b, _grad_buffer(ctx))

    @staticmethod
    def differentiable_backward(ctx, grad_output):
        """recorded (create_graph): G @ B^T, A^T @ G (batch axes are summed back by the walk)"""
        a, b = _matrices(ctx)
        return grad_output @ _swap_last(b), _swap_last(a) @ grad_output


# The aot matmul takes 2-D operands and a transpose attr: C = op(A) @ op(B), op = transpose when
# the attr says "T". dA = G @ B^T, dB = A^T @ G for "NN"; the other three move the transposes.
_MATMUL_GRADS = {   # transpose -> ((a, b, transpose) for dA, (a, b, transpose) for dB)
    "NN": (("G", "B", "NT"), ("A", "G", "TN")),
    "NT": (("G", "B", "NN"), ("G", "A", "TN")),
    "TN": (("B", "G", "NT"), ("A", "G", "NN")),
    "TT": (("B", "G", "TT"), ("G", "A", "TT")),
}


def matmul_rule(ctx):
    """C = A @ B: dA = dC @ B^T, dB = A^T @ dC; saves A and B when they are activations."""
    return _matmul_grads(ctx)


def _matmul_grads(ctx) -> list:
    a, b = ctx.fwd_op.inputs[:2]
    names = {"G": ctx.d_output, "A": ctx.read(a), "B": ctx.read(b)}
    grads = _MATMUL_GRADS[ctx.fwd_op.attrs.get("transpose", "NN")]
    return [ctx.op("matmul", [names[x], names[y]], [ctx.d_inputs[i]], transpose=t)
            for i, (x, y, t) in enumerate(grads) if ctx.needs_grad(i)]


def _compile_matmul(a, b, transpose="NN", **attrs):
    a = a.T if transpose[0] == "T" else a
    b = b.T if transpose[1] == "T" else b
    return plan_call(np.matmul, a, b, np.matmul(a, b))


def _capture_matmul(node, v, inputs):
    """eager matmul and linear (x @ W + b) -> the aot matmul or linear, 2-D operands only."""
    shapes = [x.shape for x in inputs[:2]]
    if any(len(s) != 2 for s in shapes):
        raise NotCapturable(f"capture: {node.name} of shapes {shapes[0]} and {shapes[1]}: the aot "
                           f"matmul takes 2-D operands. Fix: reshape to (rows, features) first.")
    return ("linear" if len(inputs) == 3 else "matmul"), {"transpose": "NN"}


define(MatMul, rule=matmul_rule, compilers={"matmul": _compile_matmul}, capture=_capture_matmul,
       saves="A and B (parameters are read, not saved)")


@register("linear")
class Linear(Function):
    """Y = X @ W + b; dX = G @ W^T, dW = X^T @ G, db = G summed over the batch."""
    grad_text = ("grad_output @ W^T", "X^T @ grad_output", "grad_output summed over the batch")
    input_names = ("X", "W", "b")
    shape_rule = _MATMUL_RULE + "; b must broadcast to X @ W (usually shape (m,))"
    shape_fix = "W has shape (in_features, out_features); check x.shape[-1] == W.shape[0]"

    @staticmethod
    def forward(ctx, x, weight, bias=None):
        ctx.save_for_backward(x, weight)
        ctx.bias_shape = None if bias is None else bias.shape
        operands = (x, weight) if bias is None else (x, weight, bias)
        dtype = result_dtype(operands)   # the dtype of x @ W + b: numpy's promotion of all three
        y = np.matmul(x, weight, out=ctx.out(x, weight, shape=matmul_shape, dtype=dtype))
        if y.dtype != dtype:             # a float64 b after float32 x @ W
            y = y.astype(dtype)
        if bias is not None:
            y += bias   # y is a fresh array, so adding in place is safe and saves a copy
        return y

    @staticmethod
    def backward(ctx, grad_output):
        x, weight = ctx.saved_tensors
        need = ctx.needs_input_grad
        grad_x, grad_w = matmul_backward(x, weight, grad_output, need[0], need[1], _grad_buffer(ctx))
        if ctx.bias_shape is None:
            return grad_x, grad_w
        return grad_x, grad_w, _bias_grad(ctx, grad_output) if need[2] else None

    @staticmethod
    def differentiable_backward(ctx, grad_output):
        """recorded (create_graph): G @ W^T, X^T @ G, G (summed over the batch by the walk)"""
        x, weight = _matrices(ctx)
        grads = (grad_output @ _swap_last(weight), _swap_last(x) @ grad_output)
        return grads if len(ctx.inputs) == 2 else grads + (grad_output,)


def linear_rule(ctx):
    """C = A @ B + bias: as matmul, and d_bias = dC summed over the batch."""
    ops = _matmul_grads(ctx)
    if ctx.needs_grad(2):
        ops.append(ctx.op("sum_to_shape", [ctx.d_output], [ctx.d_inputs[2]],
                          shape=ctx.shape(ctx.fwd_op.inputs[2])))
    return ops


def _compile_linear(a, b, bias, transpose="NN", **attrs):
    a = a.T if transpose[0] == "T" else a
    b = b.T if transpose[1] == "T" else b
    # the dtype of a @ b + bias (as eager linear): a float64 bias after float32 a @ b is float64
    out, calls = plan_call(np.matmul, a, b, np.empty(matmul_shape(a, b), np.result_type(a, b, bias)))
    out += bias
    return out, calls + [(np.add, (out, bias, out))]


define(Linear, rule=linear_rule, compilers={"linear": _compile_linear}, capture=_capture_matmul,
       saves="X and W (parameters are read, not saved)")


def _bias_grad(ctx, grad_output):
    """grad_output summed over the batch axes, written straight into b's gradient buffer when
    b has the usual shape (m,); any other shape is left to accumulate_grad's sum_to_shape."""
    if ctx.bias_shape != grad_output.shape[-1:]:
        return grad_output
    batch_axes = tuple(range(grad_output.ndim - 1))
    out = ctx.grad_buffer(2, ctx.bias_shape, grad_output.dtype)
    return np.add.reduce(grad_output, axis=batch_axes, out=out)


def _matrices(ctx) -> tuple:
    """The two operands of a recorded matmul backward: 1-D operands are refused (numpy's
    promotion of a vector to a row or a column would have to be undone with recorded ops)."""
    a, b = ctx.inputs[:2]
    if a.ndim < 2 or b.ndim < 2:
        raise ShapeError(f"{ctx.name} under create_graph: operands of shapes {a.shape} and "
                         f"{b.shape}. Rule: its differentiable backward takes operands of 2 or "
                         f"more dimensions. Fix: reshape a vector to a row (1, k) or a column "
                         f"(k, 1) before the product.")
    return a, b


def _swap_last(x):
    """x with its last two axes swapped (a batch of transposes), recorded."""
    axes = list(range(x.ndim))
    axes[-2:] = axes[-1], axes[-2]
    return x.transpose(*axes)


def _grad_buffer(ctx):
    return ctx.grad_buffer


def matmul(a, b):
    return MatMul.apply(a, b)


def linear(x, W, b=None):
    """x @ W + b in one op (b optional)."""
    return Linear.apply(x, W) if b is None else Linear.apply(x, W, b)
