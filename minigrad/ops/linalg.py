"""Matrix products."""
from __future__ import annotations

import numpy as np

from ..eager.function import Function, register
from ..kernels import matmul_backward, matmul_shape, result_dtype

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


def _bias_grad(ctx, grad_output):
    """grad_output summed over the batch axes, written straight into b's gradient buffer when
    b has the usual shape (m,); any other shape is left to accumulate_grad's sum_to_shape."""
    if ctx.bias_shape != grad_output.shape[-1:]:
        return grad_output
    batch_axes = tuple(range(grad_output.ndim - 1))
    out = ctx.grad_buffer(2, ctx.bias_shape, grad_output.dtype)
    return np.add.reduce(grad_output, axis=batch_axes, out=out)


def _grad_buffer(ctx):
    return ctx.grad_buffer


def matmul(a, b):
    return MatMul.apply(a, b)


def linear(x, W, b=None):
    """x @ W + b in one op (b optional)."""
    return Linear.apply(x, W) if b is None else Linear.apply(x, W, b)
