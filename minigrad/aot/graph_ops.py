"""The ops only the ahead-of-time engine writes (no eager Function, no capture): each one whole,
its rule and compiler side by side, entered in the op table (minigrad/optable.py).

identity  y = x, a view: what a rule emits for "dx = dy" (add, sub, bias_add, ...)
copy      y = x in a buffer of its own
zeros     a constant of zeros (a gradient no operation writes)
"""
from __future__ import annotations

import numpy as np

from ..optable import define


def identity_rule(ctx):
    """y = x: dx = dy."""
    return [ctx.op("identity", [ctx.d_output], [ctx.d_inputs[0]])]


define("identity", rule=identity_rule, alias=True, saves="nothing", api=False,
       compilers={"identity": lambda x, **attrs: (x, [])})   # (a view: nothing to run)


def _compile_copy(x, **attrs):
    out = x.copy()
    return out, [(np.copyto, (out, x))]


define("copy", rule=identity_rule, compilers={"copy": _compile_copy}, saves="nothing", api=False)


def zeros_rule(ctx):
    """y = zeros(shape): a constant, no inputs, nothing to emit."""
    return []


define("zeros", rule=zeros_rule, saves="nothing", api=False,
       compilers={"zeros": lambda shape=(), dtype="float64", **attrs: (np.zeros(shape, dtype), [])})
