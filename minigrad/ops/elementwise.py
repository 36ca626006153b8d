"""Elementwise ops, each one whole: the eager Function (forward and backward side by side), then
its ahead-of-time rule and compilers, then its row of the op table (minigrad/optable.py).

Read one op top to bottom and you see its derivative three ways: eager backward computes it on
arrays now; the aot rule writes it as operations of a backward graph, before any value exists;
the compilers say which numpy call runs each of those operations. The math they share is in
kernels.py. (The scalar tape says it a fourth way, in tape/rules.py: its own instruction set.)

Backward returns gradients in the output's (broadcast) shape; accumulate_grad sums them back to
each input's shape, so no eager op here deals with broadcasting itself. Its aot twin does, with
ctx.to_input_shape (what accumulate_grad does, written into the graph).
"""
from __future__ import annotations

import numpy as np

from .. import kernels
from ..errors import DtypeError
from ..eager.function import Function, register
from ..optable import SAME, define
from ..kernels import activation_compiler, grad_compiler, ufunc_compiler


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

    @staticmethod
    def differentiable_backward(ctx, grad_output):
        """the same, recorded (create_graph): dz/da = dz/db = 1"""
        return grad_output, grad_output


def add_rule(ctx):
    """C = A + B: dA = dC, dB = dC (summed back over broadcast axes); saves nothing."""
    return [op for i in (0, 1) if ctx.needs_grad(i)
            for op in ctx.to_input_shape(i, "identity", [ctx.d_output])]


def _capture_add(node, v, inputs):
    a, b = inputs
    if b.ndim == 1 and a.ndim >= 2 and b.shape[0] == a.shape[-1]:
        return "bias_add", {}   # x + b with b along the last axis: the layer's bias
    return "add", {}


define(Add, rule=add_rule, compilers={"add": ufunc_compiler(np.add)}, capture=_capture_add,
       cheap=True, saves="nothing")


def bias_add_rule(ctx):
    """y = x + bias (bias along the last axis): dx = dy, d_bias = dy summed over the batch."""
    ops = []
    if ctx.needs_grad(0):
        ops.append(ctx.op("identity", [ctx.d_output], [ctx.d_inputs[0]]))
    if ctx.needs_grad(1):
        ops.append(ctx.op("sum_to_shape", [ctx.d_output], [ctx.d_inputs[1]],
                          shape=ctx.shape(ctx.fwd_op.inputs[1])))
    return ops


# An aot-only op: capture writes an eager add of a last-axis vector as bias_add (the source
# design's name for a layer's bias), whose rule sums the bias gradient without a broadcast temp.
define("bias_add", rule=bias_add_rule, compilers={"bias_add": ufunc_compiler(np.add)},
       cheap=True, saves="nothing", api=False)


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

    @staticmethod
    def differentiable_backward(ctx, grad_output):
        """recorded (create_graph): g, -g"""
        return grad_output, -grad_output


def sub_rule(ctx):
    """C = A - B: dA = dC, dB = -dC; saves nothing."""
    ops = []
    if ctx.needs_grad(0):
        ops += ctx.to_input_shape(0, "identity", [ctx.d_output])
    if ctx.needs_grad(1):
        ops += ctx.to_input_shape(1, "neg", [ctx.d_output])
    return ops


define(Sub, rule=sub_rule, compilers={"sub": ufunc_compiler(np.subtract)}, capture=SAME,
       cheap=True, saves="nothing")


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

    @staticmethod
    def differentiable_backward(ctx, grad_output):
        """recorded (create_graph): g * b, g * a, with the input Variables, not saved arrays"""
        a, b = ctx.inputs
        return grad_output * b, grad_output * a


def mul_rule(ctx):
    """C = A * B: dA = dC * B, dB = dC * A; saves each operand the other's gradient needs."""
    a, b = ctx.fwd_op.inputs
    ops = []
    if ctx.needs_grad(0):
        ops += ctx.to_input_shape(0, "mul", [ctx.d_output, ctx.read(b)])
    if ctx.needs_grad(1):
        ops += ctx.to_input_shape(1, "mul", [ctx.d_output, ctx.read(a)])
    return ops


define(Mul, rule=mul_rule, compilers={"mul": ufunc_compiler(np.multiply)}, capture=SAME,
       cheap=True, saves="both inputs")


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

    @staticmethod
    def differentiable_backward(ctx, grad_output):
        """recorded (create_graph): g / b, -g a / b^2"""
        a, b = ctx.inputs
        grad_a = grad_output / b
        return grad_a, -(grad_a * a / b)


def div_rule(ctx):
    """C = A / B: dA = dC / B, dB = -dC / B * C; saves B and C (-a/b^2 = -c/b)."""
    b, c = ctx.fwd_op.inputs[1], ctx.fwd_op.outputs[0]
    over_b = ctx.temp("d_over_b", like=c)
    ops = [ctx.op("div", [ctx.d_output, ctx.read(b)], [over_b])]
    if ctx.needs_grad(0):
        ops += ctx.to_input_shape(0, "identity", [over_b])
    if ctx.needs_grad(1):
        scaled = ctx.temp("d_times_c", like=c)
        ops.append(ctx.op("mul", [over_b, ctx.read(c)], [scaled]))
        ops += ctx.to_input_shape(1, "neg", [scaled])
    return ops


define(Div, rule=div_rule, compilers={"div": ufunc_compiler(np.divide)}, capture=SAME,
       saves="b and the output")


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

    @staticmethod
    def differentiable_backward(ctx, grad_output):
        """recorded (create_graph): -g"""
        return -grad_output


def neg_rule(ctx):
    """y = -x: dx = -dy."""
    return [ctx.op("neg", [ctx.d_output], [ctx.d_inputs[0]])]


define(Neg, rule=neg_rule, compilers={"neg": ufunc_compiler(np.negative)}, capture=SAME,
       cheap=True, saves="nothing")


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

    @staticmethod
    def differentiable_backward(ctx, grad_output):
        """recorded (create_graph): g * p * a^(p-1)"""
        (a,) = ctx.inputs
        return grad_output * ctx.exponent * a ** (ctx.exponent - 1)


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


def pow_rule(ctx):
    """y = x^p: dx = dy * p x^(p-1); saves x."""
    return [ctx.op("pow_backward", [ctx.d_output, ctx.read(ctx.fwd_op.inputs[0])],
                   [ctx.d_inputs[0]], exponent=ctx.fwd_op.attrs["exponent"])]


def _compile_pow(x, exponent=None, **attrs):
    # The buffer in the dtype numpy 2 gives: numpy 1.x promotes a 0-d float32 x by its value.
    return kernels.plan_call(np.power, x, exponent,
                             np.empty(x.shape, np.result_type(x.dtype, exponent)))


def _compile_pow_backward(grad_output, x, exponent=None, **attrs):
    return kernels.plan_call(kernels.pow_backward, x, exponent, grad_output,
                             kernels.empty_result(x, grad_output))


define(Pow, rule=pow_rule, compilers={"pow": _compile_pow, "pow_backward": _compile_pow_backward},
       capture=lambda node, v, inputs: ("pow", {"exponent": node.exponent}), saves="a")


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

    @staticmethod
    def differentiable_backward(ctx, grad_output):
        """recorded (create_graph): g * e^a, e^a recomputed from the input so it is in the graph"""
        return grad_output * ctx.inputs[0].exp()


def exp_rule(ctx):
    """y = e^x: dx = dy * y; saves the output y."""
    return [ctx.op("mul", [ctx.d_output, ctx.read(ctx.fwd_op.outputs[0])], [ctx.d_inputs[0]])]


define(Exp, rule=exp_rule, compilers={"exp": ufunc_compiler(np.exp)}, capture=SAME, cheap=True,
       saves="the output")


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

    @staticmethod
    def differentiable_backward(ctx, grad_output):
        """recorded (create_graph): g / a"""
        return grad_output / ctx.inputs[0]


def log_rule(ctx):
    """y = ln x: dx = dy / x; saves x."""
    return [ctx.op("div", [ctx.d_output, ctx.read(ctx.fwd_op.inputs[0])], [ctx.d_inputs[0]])]


define(Log, rule=log_rule, compilers={"log": ufunc_compiler(np.log)}, capture=SAME, saves="a")


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

    @staticmethod
    def differentiable_backward(ctx, grad_output):
        """recorded (create_graph): g (1 - z^2), z = tanh a recomputed from the input"""
        z = ctx.inputs[0].tanh()
        return grad_output * (1 - z * z)


def tanh_rule(ctx):
    """y = tanh x: dx = tanh_backward(dy, y) = dy (1 - y^2); saves the output y."""
    return [ctx.op("tanh_backward", [ctx.d_output, ctx.read(ctx.fwd_op.outputs[0])],
                   [ctx.d_inputs[0]])]


define(Tanh, rule=tanh_rule, capture=SAME, cheap=True, saves="the output",
       compilers={"tanh": ufunc_compiler(np.tanh),
                  "tanh_backward": grad_compiler(kernels.tanh_backward)})


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

    @staticmethod
    def differentiable_backward(ctx, grad_output):
        """recorded (create_graph): g z (1 - z), z = sigmoid a recomputed from the input"""
        z = ctx.inputs[0].sigmoid()
        return grad_output * z * (1 - z)


def sigmoid_rule(ctx):
    """y = sigmoid x: dx = sigmoid_backward(dy, y) = dy y (1 - y); saves the output y."""
    return [ctx.op("sigmoid_backward", [ctx.d_output, ctx.read(ctx.fwd_op.outputs[0])],
                   [ctx.d_inputs[0]])]


define(Sigmoid, rule=sigmoid_rule, capture=SAME, cheap=True, saves="the output",
       compilers={"sigmoid": activation_compiler(kernels.sigmoid),
                  "sigmoid_backward": grad_compiler(kernels.sigmoid_backward)})


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

    @staticmethod
    def differentiable_backward(ctx, grad_output):
        """recorded (create_graph): g * (a > 0), a constant mask (its own derivative is 0)"""
        (a,) = ctx.saved_tensors
        return grad_output * (a > 0).astype(a.dtype)


def relu_rule(ctx):
    """y = max(x, 0): dx = relu_backward(dy, x) = dy (x > 0); saves the input x."""
    return [ctx.op("relu_backward", [ctx.d_output, ctx.read(ctx.fwd_op.inputs[0])],
                   [ctx.d_inputs[0]])]


define(Relu, rule=relu_rule, capture=SAME, cheap=True, saves="a",
       compilers={"relu": activation_compiler(kernels.relu),
                  "relu_backward": grad_compiler(kernels.relu_backward)})


@register("abs")
class Abs(Function):
    """z = |a|; dz/da = sign(a) (0 at a = 0, the subgradient PyTorch and JAX pick too)."""
    grad_text = ("grad_output * sign(a)",)

    @staticmethod
    def forward(ctx, a):
        _check_abs(a)
        ctx.save_for_backward(a)
        return np.absolute(a, out=ctx.out(a))

    @staticmethod
    def backward(ctx, grad_output):
        (a,) = ctx.saved_tensors
        return kernels.abs_backward(a, grad_output, out=ctx.out(grad_output, a))


def _check_abs(a: np.ndarray) -> None:
    """|x| of a signed integer's most negative value does not fit its dtype: numpy wraps it to
    itself (abs(int8 -128) = -128). Refused, not returned negative."""
    if a.dtype.kind == "i" and a.size and a.min() == np.iinfo(a.dtype).min:
        raise DtypeError(f"abs: an array of dtype {a.dtype} (shape {a.shape}) holds "
                         f"{np.iinfo(a.dtype).min}, whose absolute value does not fit in "
                         f"{a.dtype} (numpy would return it negative). Rule: |x| must be "
                         f"representable in x's dtype. Fix: x.astype(np.int64) or a float dtype.")


def abs_rule(ctx):
    """y = |x|: dx = abs_backward(dy, x) = dy sign(x); saves the input x."""
    return [ctx.op("abs_backward", [ctx.d_output, ctx.read(ctx.fwd_op.inputs[0])],
                   [ctx.d_inputs[0]])]


def _checked_abs(x, out):
    _check_abs(x)   # (a plan's input may be new integer data on every run)
    return np.absolute(x, out=out)


define(Abs, rule=abs_rule, capture=SAME, cheap=True, saves="a",
       compilers={"abs": activation_compiler(_checked_abs),
                  "abs_backward": grad_compiler(kernels.abs_backward)})


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


def abs(a):  # noqa: A001 - the op's name
    return Abs.apply(a)
