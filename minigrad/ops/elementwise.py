"""Elementwise ops. Backward returns gradients in the output's (broadcast) shape; accumulate_grad
sums them back to each input's shape, so no op here deals with broadcasting itself."""
from __future__ import annotations

import numpy as np

from .. import kernels
from ..errors import DtypeError
from ..eager.function import Function, register


@register("add")
class Add(Function):
    """z = a + b; saves nothing: dz/da = dz/db = 1."""
    grad_text = ("grad_output", "grad_output")

    @staticmethod
    def forward(ctx, a, b):
        return np.add(a, b, out=ctx.out(a, b))

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, grad_output


@register("sub")
class Sub(Function):
    """z = a - b"""
    grad_text = ("grad_output", "-grad_output")

    @staticmethod
    def forward(ctx, a, b):
        return np.subtract(a, b, out=ctx.out(a, b))

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, np.negative(grad_output, out=ctx.out(grad_output))


@register("mul")
class Mul(Function):
    """z = a * b; each input's gradient needs the other input, so both are saved."""
    grad_text = ("grad_output * b", "grad_output * a")

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return np.multiply(a, b, out=ctx.out(a, b))

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        return (np.multiply(grad_output, b, out=ctx.out(grad_output, b)),
                np.multiply(grad_output, a, out=ctx.out(grad_output, a)))


@register("div")
class Div(Function):
    """z = a / b; dz/da = 1/b, dz/db = -a/b^2."""
    grad_text = ("grad_output / b", "-grad_output * a / b^2")

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return np.divide(a, b, out=ctx.out(a, b, floating=True))

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        grad_a = np.divide(grad_output, b, out=ctx.out(grad_output, b))
        return grad_a, np.negative(grad_a * a / b, out=ctx.out(grad_a, a))


@register("neg")
class Neg(Function):
    """z = -a"""
    grad_text = ("-grad_output",)

    @staticmethod
    def forward(ctx, a):
        return np.negative(a, out=ctx.out(a))

    @staticmethod
    def backward(ctx, grad_output):
        return np.negative(grad_output, out=ctx.out(grad_output))


@register("pow")
class Pow(Function):
    """z = a ** p for a constant p; dz/da = p * a^(p-1)."""
    grad_text = ("grad_output * p * a^(p-1)",)

    @staticmethod
    def forward(ctx, a, exponent):
        exponent = _check_exponent(a, exponent)
        ctx.exponent = exponent
        ctx.save_for_backward(a)
        return np.power(a, exponent, out=ctx.out(a, exponent),
                        dtype=np.result_type(a.dtype, exponent))   # numpy 1.x: f32 0-d ** 2.0 is f64

    @staticmethod
    def backward(ctx, grad_output):
        (a,) = ctx.saved_tensors
        return kernels.pow_backward(a, ctx.exponent, grad_output,
                                    out=ctx.out(grad_output, a))


def _check_exponent(a: np.ndarray, exponent):
    """The exponent of a ** p: a plain number (a numpy scalar becomes a Python number, which
    would otherwise upcast float32 under numpy 2's rules); integers take no negative powers."""
    if not isinstance(exponent, (int, float, np.integer, np.floating)) or isinstance(exponent, bool):
        raise DtypeError(
            f"pow: the exponent must be a constant number, got {type(exponent).__name__}. "
            f"For a Variable exponent y write exp(y * log(x)).")
    if isinstance(exponent, np.generic):
        exponent = exponent.item()
    if a.dtype.kind in "iub" and isinstance(exponent, int) and exponent < 0:
        raise DtypeError(f"pow: an integer array of dtype {a.dtype} (shape {a.shape}) ** "
                         f"{exponent}. Rule: integers have no negative integer powers (1/x is "
                         f"not an integer). Fix: x.astype(np.float64) ** {exponent}, or "
                         f"x ** {float(exponent)}.")
    return exponent


@register("exp")
class Exp(Function):
    """z = e^a; dz/da = z, so the output is saved, not the input."""
    grad_text = ("grad_output * z",)

    @staticmethod
    def forward(ctx, a):
        z = np.exp(a, out=ctx.out(a, floating=True))
        ctx.save_for_backward(z)
        return z

    @staticmethod
    def backward(ctx, grad_output):
        (z,) = ctx.saved_tensors
        return np.multiply(grad_output, z, out=ctx.out(grad_output, z))


@register("log")
class Log(Function):
    """z = ln a; dz/da = 1/a."""
    grad_text = ("grad_output / a",)

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return np.log(a, out=ctx.out(a, floating=True))

    @staticmethod
    def backward(ctx, grad_output):
        (a,) = ctx.saved_tensors
        return np.divide(grad_output, a, out=ctx.out(grad_output, a))


@register("tanh")
class Tanh(Function):
    """z = tanh a; dz/da = 1 - z^2."""
    grad_text = ("grad_output * (1 - z^2)",)

    @staticmethod
    def forward(ctx, a):
        z = np.tanh(a, out=ctx.out(a, floating=True))
        ctx.save_for_backward(z)
        return z

    @staticmethod
    def backward(ctx, grad_output):
        (z,) = ctx.saved_tensors
        return kernels.tanh_backward(z, grad_output, ctx.out(grad_output, z))


@register("sigmoid")
class Sigmoid(Function):
    """z = 1 / (1 + e^-a); dz/da = z (1 - z)."""
    grad_text = ("grad_output * z * (1 - z)",)

    @staticmethod
    def forward(ctx, a):
        z = kernels.sigmoid(a, out=ctx.out(a, floating=True))   # (overflow-free)
        ctx.save_for_backward(z)
        return z

    @staticmethod
    def backward(ctx, grad_output):
        (z,) = ctx.saved_tensors
        return kernels.sigmoid_backward(z, grad_output, out=ctx.out(grad_output, z))


@register("relu")
class Relu(Function):
    """z = max(a, 0); dz/da = 1 where a > 0 (the input is saved to know where)."""
    grad_text = ("grad_output * (a > 0)",)

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return np.maximum(a, 0, out=ctx.out(a), dtype=a.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        (a,) = ctx.saved_tensors
        return np.multiply(grad_output, a > 0, out=ctx.out(grad_output, a))


def add(a, b):
    return Add.apply(a, b)


def sub(a, b):
    return Sub.apply(a, b)


def mul(a, b):
    return Mul.apply(a, b)


def div(a, b):
    return Div.apply(a, b)


def neg(a):
    return Neg.apply(a)


def pow(a, exponent):  # noqa: A001 - the op's name
    return Pow.apply(a, exponent=exponent)


def exp(a):
    return Exp.apply(a)


def log(a):
    return Log.apply(a)


def tanh(a):
    return Tanh.apply(a)


def sigmoid(a):
    return Sigmoid.apply(a)


def relu(a):
    return Relu.apply(a)
