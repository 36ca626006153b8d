"""Smooth activations of modern networks (their math lives in kernels.py, shared with minigrad.aot)."""
from __future__ import annotations

from .. import kernels
from ..eager.function import Function, register


@register("silu")
class Silu(Function):
    """z = a * sigmoid(a); dz/da = s (1 + a (1 - s)), s = sigmoid(a) (the input is saved)."""
    grad_text = ("grad_output * s * (1 + a * (1 - s)), s = sigmoid(a)",)

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return kernels.silu(a, out=ctx.out(a, floating=True))

    @staticmethod
    def backward(ctx, grad_output):
        (a,) = ctx.saved_tensors
        return kernels.silu_backward(a, grad_output, out=ctx.out(grad_output, a))


@register("gelu")
class Gelu(Function):
    """z = 0.5 a (1 + tanh(c (a + 0.044715 a^3))), c = sqrt(2/pi) (tanh approximation; a saved)."""
    grad_text = ("grad_output * gelu'(a)",)

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return kernels.gelu(a, out=ctx.out(a, floating=True))

    @staticmethod
    def backward(ctx, grad_output):
        (a,) = ctx.saved_tensors
        return kernels.gelu_backward(a, grad_output, out=ctx.out(grad_output, a))


def silu(a):
    return Silu.apply(a)


def gelu(a):
    return Gelu.apply(a)
