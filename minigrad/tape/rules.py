"""The tape's ops, one small class each: forward and backward side by side.

These are the plain statement of every rule. `TensorTape` runs them on numpy arrays, `Tape.apply`
and `Tape.backward_steps` run them on floats, and the scalar `Tape`'s fast methods (core.py) must
agree with them (tests/test_tape.py checks it). numpy functions work on floats and arrays alike;
where Python's own operator does the same job it is used when there is no buffer to write into
(a numpy call on two floats costs far more than the arithmetic).

forward(*inputs, out=None, **attrs) -> value    (out: a buffer to write into, or None)
backward(grad_output, inputs, output, **attrs) -> one gradient per input
"""
from __future__ import annotations

import numpy as np


class Add:
    """y = a + b;  da = g, db = g"""
    arity = 2

    def forward(a, b, out=None):
        return a + b if out is None else np.add(a, b, out=out)

    def backward(g, inputs, y):
        return g, g


class Sub:
    """y = a - b;  da = g, db = -g"""
    arity = 2

    def forward(a, b, out=None):
        return a - b if out is None else np.subtract(a, b, out=out)

    def backward(g, inputs, y):
        return g, -g


class Mul:
    """y = a * b;  da = g * b, db = g * a"""
    arity = 2

    def forward(a, b, out=None):
        return a * b if out is None else np.multiply(a, b, out=out)

    def backward(g, inputs, y):
        a, b = inputs
        return g * b, g * a


class Div:
    """y = a / b;  da = g / b, db = -g * a / b^2"""
    arity = 2

    def forward(a, b, out=None):
        return a / b if out is None else np.divide(a, b, out=out)

    def backward(g, inputs, y):
        a, b = inputs
        return g / b, -g * a / (b * b)


class Neg:
    """y = -a;  da = -g"""
    arity = 1

    def forward(a, out=None):
        return -a if out is None else np.negative(a, out=out)

    def backward(g, inputs, y):
        return (-g,)


class Pow:
    """y = a^p for a constant p;  da = g * p * a^(p-1)"""
    arity = 1

    def forward(a, out=None, *, exponent):
        return np.power(a, exponent, out=out)

    def backward(g, inputs, y, *, exponent):
        return (g * exponent * np.power(inputs[0], exponent - 1),)


class Sin:
    """y = sin a;  da = g * cos a"""
    arity = 1

    def forward(a, out=None):
        return np.sin(a, out=out)

    def backward(g, inputs, y):
        return (g * np.cos(inputs[0]),)


class Cos:
    """y = cos a;  da = -g * sin a"""
    arity = 1

    def forward(a, out=None):
        return np.cos(a, out=out)

    def backward(g, inputs, y):
        return (-g * np.sin(inputs[0]),)


class Exp:
    """y = e^a;  da = g * y   (the saved output, so a is not needed)"""
    arity = 1

    def forward(a, out=None):
        return np.exp(a, out=out)

    def backward(g, inputs, y):
        return (g * y,)


class Log:
    """y = log a;  da = g / a"""
    arity = 1

    def forward(a, out=None):
        return np.log(a, out=out)

    def backward(g, inputs, y):
        return (g / inputs[0],)


class Tanh:
    """y = tanh a;  da = g * (1 - y^2)"""
    arity = 1

    def forward(a, out=None):
        return np.tanh(a, out=out)

    def backward(g, inputs, y):
        return (g * (1.0 - y * y),)


class Relu:
    """y = max(a, 0);  da = g where a > 0, else 0"""
    arity = 1

    def forward(a, out=None):
        return np.maximum(a, 0.0, out=out)

    def backward(g, inputs, y):
        return (g * (inputs[0] > 0),)


# The op names in op-code order: the scalar tape stores an instruction's op as its index here.
OP_NAMES = ("add", "sub", "mul", "div", "neg", "pow", "sin", "cos", "exp", "log", "tanh", "relu")
RULES = {name: rule for name, rule in zip(
    OP_NAMES, (Add, Sub, Mul, Div, Neg, Pow, Sin, Cos, Exp, Log, Tanh, Relu))}
