"""Smooth activations of modern networks, each one whole: the eager Function, its aot rule and
compilers, its row of the op table (the math lives in kernels.py, shared by all three)."""
from __future__ import annotations

from .. import kernels
from ..eager.function import Function, register
from ..kernels import activation_compiler, grad_compiler
from ..optable import SAME, define


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


def silu_rule(ctx):
    """y = silu x: dx = silu_backward(dy, x); saves the input x."""
    return [ctx.op("silu_backward", [ctx.d_output, ctx.read(ctx.fwd_op.inputs[0])],
                   [ctx.d_inputs[0]])]


define(Silu, rule=silu_rule, capture=SAME, cheap=True, saves="a",
       compilers={"silu": activation_compiler(kernels.silu),
                  "silu_backward": grad_compiler(kernels.silu_backward)})


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


def gelu_rule(ctx):
    """y = gelu x: dx = gelu_backward(dy, x); saves the input x."""
    return [ctx.op("gelu_backward", [ctx.d_output, ctx.read(ctx.fwd_op.inputs[0])],
                   [ctx.d_inputs[0]])]


define(Gelu, rule=gelu_rule, capture=SAME, cheap=True, saves="a",
       compilers={"gelu": activation_compiler(kernels.gelu),
                  "gelu_backward": grad_compiler(kernels.gelu_backward)})


def silu(a):
    return Silu.apply(a)


def gelu(a):
    return Gelu.apply(a)
