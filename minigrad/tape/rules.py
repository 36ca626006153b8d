"""The tape's ops, one small class each: forward and backward side by side.

These are the only statement of every rule. The scalar `Tape` runs them on floats (its fast
methods and fast backward loop call them by op code, `Tape.apply` and `backward_steps` look them
up by name), `TensorTape` runs them on numpy arrays, and the tape view prints the backward half
of each docstring. The elementary functions come from floats.py, so every road gives numpy's
IEEE values at the edges (exp(710) = inf, 1 / 0 = inf, log(-1) = nan, ...).

forward(*inputs, out=None, **attrs) -> value    (out: a buffer to write into, or None)
backward(grad_output, inputs, output, **attrs) -> one gradient per input
Docstring: "y = <forward>;  backward: <rule>", where ḡy is grad_output (g in the code) and
ḡa, ḡb are the grads added into the inputs.
"""
from __future__ import annotations

import numpy as np

from .floats import cos, divide, exp, log, power, relu, sin, tanh


class Add:
    """y = a + b;  backward: ḡa += ḡy;  ḡb += ḡy"""
    arity = 2

    def forward(a, b, out=None):
        return a + b if out is None else np.add(a, b, out=out)

    def backward(g, inputs, y):
        return g, g


class Sub:
    """y = a − b;  backward: ḡa += ḡy;  ḡb −= ḡy"""
    arity = 2

    def forward(a, b, out=None):
        return a - b if out is None else np.subtract(a, b, out=out)

    def backward(g, inputs, y):
        return g, -g


class Mul:
    """y = a·b;  backward: ḡa += b·ḡy;  ḡb += a·ḡy"""
    arity = 2

    def forward(a, b, out=None):
        return a * b if out is None else np.multiply(a, b, out=out)

    def backward(g, inputs, y):
        a, b = inputs
        return g * b, g * a


class Div:
    """y = a / b;  backward: ḡa += ḡy / b;  ḡb −= ḡy·a / b²"""
    arity = 2

    def forward(a, b, out=None):
        return divide(a, b, out)

    def backward(g, inputs, y):
        a, b = inputs
        ga = divide(g, b)
        return ga, divide(-ga * a, b)   # (ḡy/b)·a/b, as eager: b² overflows where this does not


class Neg:
    """y = −a;  backward: ḡa −= ḡy"""
    arity = 1

    def forward(a, out=None):
        return -a if out is None else np.negative(a, out=out)

    def backward(g, inputs, y):
        return (-g,)


class Pow:
    """y = a^p (p a constant);  backward: ḡa += p·a^(p−1)·ḡy  (0 when p = 0)"""
    arity = 1

    def forward(a, out=None, *, exponent):
        return power(a, exponent, out)

    def backward(g, inputs, y, *, exponent):
        if exponent == 0.0:     # a^0 = 1 is flat, also at a = 0 where p·a^(p−1) is 0·∞ = nan
            return (g * 0.0,)
        return (g * exponent * power(inputs[0], exponent - 1.0),)


class Sin:
    """y = sin a;  backward: ḡa += cos(a)·ḡy"""
    arity = 1

    def forward(a, out=None):
        return sin(a, out)

    def backward(g, inputs, y):
        return (g * cos(inputs[0]),)


class Cos:
    """y = cos a;  backward: ḡa −= sin(a)·ḡy"""
    arity = 1

    def forward(a, out=None):
        return cos(a, out)

    def backward(g, inputs, y):
        return (-g * sin(inputs[0]),)


class Exp:
    """y = e^a;  backward: ḡa += y·ḡy   (the saved output, so a is not needed)"""
    arity = 1

    def forward(a, out=None):
        return exp(a, out)

    def backward(g, inputs, y):
        return (g * y,)


class Log:
    """y = log a;  backward: ḡa += ḡy / a"""
    arity = 1

    def forward(a, out=None):
        return log(a, out)

    def backward(g, inputs, y):
        return (divide(g, inputs[0]),)


class Tanh:
    """y = tanh a;  backward: ḡa += (1 − y²)·ḡy"""
    arity = 1

    def forward(a, out=None):
        return tanh(a, out)

    def backward(g, inputs, y):
        return (g * (1.0 - y * y),)


class Relu:
    """y = max(a, 0);  backward: ḡa += ḡy where a > 0"""
    arity = 1

    def forward(a, out=None):
        return relu(a, out)

    def backward(g, inputs, y):
        return (g * (inputs[0] > 0.0),)


def rule_text(op: str) -> str:
    """The backward rule of op as the view prints it: its docstring after "backward:"."""
    return RULES[op].__doc__.split("backward:", 1)[1].strip()


# The op names in op-code order: the scalar tape stores an instruction's op as its index here.
OP_NAMES = ("add", "sub", "mul", "div", "neg", "pow", "sin", "cos", "exp", "log", "tanh", "relu")
RULES = {name: rule for name, rule in zip(
    OP_NAMES, (Add, Sub, Mul, Div, Neg, Pow, Sin, Cos, Exp, Log, Tanh, Relu))}
