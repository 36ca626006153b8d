"""Backward rules: for each forward op type, a short function that returns the backward operations.

A rule reads a BackwardRuleContext (the forward op, the names of the output gradients it receives
and of the input gradients it must write) and returns Operations. It never computes anything: it
writes the backward graph. Two conventions from the source design:

* a forward *activation* the backward needs is read through saved_ref(name) = "saved.<name>":
  that is how derive_backward_graph learns what forward must keep (compute_required_saves);
* a *parameter* (or constant) is read directly: it lives for the whole run anyway.

d_inputs[i] is None when input i needs no gradient: a rule must emit nothing for it.
"""
from __future__ import annotations

import numpy as np

from .. import kernels
from ..errors import MinigradError
from .ir import SAVED_PREFIX, Graph, Operation, TensorInfo


class DeriveError(MinigradError, ValueError):
    """The forward graph, the options or a rule do not allow a backward graph (named tensor, fix)."""


class MissingRuleError(MinigradError, KeyError):
    """derive_backward_graph met an op type with no backward rule."""

    def __str__(self) -> str:   # KeyError would quote the message
        return self.args[0]


def saved_ref(name: str) -> str:
    """How a rule reads a forward activation: "x" -> "saved.x" (forward must keep x)."""
    return SAVED_PREFIX + name


class BackwardRuleContext:
    """Everything a rule may read, and `op()` to build Operations with unique ids."""

    def __init__(self, fwd_op: Operation, d_outputs: list, d_inputs: list, forward_graph: Graph,
                 counter: list, read_directly: set = None):
        self.fwd_op = fwd_op
        self.d_outputs = d_outputs              # one name per forward output (None: no gradient)
        self.d_output = d_outputs[0]            # the primary output's gradient
        self.d_inputs = d_inputs                # one name per forward input (None: not needed)
        self.forward_graph = forward_graph
        self.shape_env = forward_graph.shape_env
        self._counter = counter                 # shared by all rules of one derivation
        self.new_shapes: dict = {}              # temp name -> TensorInfo (for the planner)
        # params and constants (read directly, never saved); one set per derivation, passed in,
        # because looking names up in the graph's lists costs a pass over them per rule
        self._read_directly = ({*forward_graph.params, *forward_graph.constants}
                               if read_directly is None else read_directly)

    @property
    def op_counter(self) -> int:
        return self._counter[0]

    def needs_grad(self, i: int) -> bool:
        if not 0 <= i < len(self.d_inputs):
            raise DeriveError(f"the rule for {self.fwd_op.id} ({self.fwd_op.type}) asked "
                              f"ctx.needs_grad({i}), but the op has {len(self.d_inputs)} inputs "
                              f"{list(self.fwd_op.inputs)}. Fix: i in 0..{len(self.d_inputs) - 1}.")
        return self.d_inputs[i] is not None

    def is_param(self, name: str) -> bool:
        return name in self._read_directly

    def is_input(self, name: str) -> bool:
        return name in self.forward_graph.inputs

    def read(self, name: str) -> str:
        """A forward tensor as backward reads it: a parameter directly, anything else saved."""
        return name if self.is_param(name) else saved_ref(name)

    def shape(self, name: str) -> tuple:
        return self._info(name, f"ctx.shape({name!r})").shape

    def temp(self, label: str, like: str) -> str:
        """A fresh name for an intermediate backward tensor shaped like forward tensor `like`."""
        return self._fresh(label, self._info(like, f"ctx.temp({label!r}, like={like!r})"))

    def _fresh(self, label: str, info) -> str:
        self._counter[0] += 1
        name = f"{label}_{self._counter[0]}"
        self.new_shapes[name] = info
        return name

    def _info(self, name: str, asked: str):
        info = self.shape_env.get(name)
        if info is None:
            raise DeriveError(f"the rule for {self.fwd_op.id} ({self.fwd_op.type}) asked {asked}: "
                              f"'{name}' is not a tensor of the forward graph. Rule: shapes are "
                              f"known for forward tensors only. Fix: name one of the op's inputs "
                              f"{list(self.fwd_op.inputs)} or outputs {list(self.fwd_op.outputs)} "
                              f"(without 'saved.').")
        return info

    def op(self, type_: str, inputs, outputs, **attrs) -> Operation:
        self._counter[0] += 1
        return Operation(f"{type_}_{self._counter[0]}", type_, tuple(inputs), tuple(outputs), attrs)

    def broadcast_temp(self, label: str) -> str:
        """A fresh name shaped like the op's inputs broadcast together (an elementwise gradient)."""
        infos = [self._info(t, f"ctx.broadcast_temp({label!r})") for t in self.fwd_op.inputs]
        shape = np.broadcast_shapes(*(tuple(i.shape) for i in infos))
        return self._fresh(label, TensorInfo(shape, np.result_type(*(i.dtype for i in infos))))

    def to_input_shape(self, i: int, type_: str, inputs, **attrs) -> list:
        """Emit type_(inputs) as the gradient of input i. An elementwise op computes it in the
        broadcast shape of all its inputs; where input i was broadcast, the piece is summed back
        to its shape (what eager's accumulate_grad does with sum_to_shape)."""
        x = self.fwd_op.inputs[i]
        full = np.broadcast_shapes(*(tuple(self.shape(t)) for t in self.fwd_op.inputs))
        if tuple(self.shape(x)) == full:
            return [self.op(type_, inputs, [self.d_inputs[i]], **attrs)]
        piece = self.broadcast_temp(f"{self.d_inputs[i]}_full")
        return [self.op(type_, inputs, [piece], **attrs),
                self.op("sum_to_shape", [piece], [self.d_inputs[i]], shape=self.shape(x))]


class BackwardRuleRegistry:
    """Op type -> rule. `registry` below is the module-level one; make your own to experiment."""

    def __init__(self, rules: dict | None = None):
        self._rules = dict(rules or {})

    def register_rule(self, op_type: str, rule) -> None:
        self._rules[op_type] = rule

    def has_rule(self, op_type: str) -> bool:
        return op_type in self._rules

    def registered_ops(self) -> list:
        return sorted(self._rules)

    def rule_for(self, op: Operation):
        rule = self._rules.get(op.type)
        if rule is None:
            raise MissingRuleError(
                f"no backward rule for op type '{op.type}' (operation {op.id}: {op.text()}). "
                f"Rule: every operation on the path from the parameters to the loss needs one. "
                f"Fix: write def {op.type}_backward(ctx): return [ctx.op(...)] and register it "
                f"with minigrad.aot.registry.register_rule('{op.type}', {op.type}_backward), or "
                f"stop the gradient before it (DeriveBackwardOptions(stop_gradients=...)).")
        return rule

    def copy(self) -> "BackwardRuleRegistry":
        return BackwardRuleRegistry(self._rules)


registry = BackwardRuleRegistry()


def rule(*op_types: str):
    """Decorator: register a function as the backward rule of op_types in the module registry."""
    def enter(fn):
        for t in op_types:
            registry.register_rule(t, fn)
        return fn
    return enter


# -- the rules ----------------------------------------------------------------------------------
# matmul: C = op(A) @ op(B), op = transpose when the attr says "T" (2-D operands).
# dA = G @ B^T, dB = A^T @ G for "NN"; the other three cases move the transposes around.
_MATMUL_GRADS = {   # transpose -> ((a, b, transpose) for dA, (a, b, transpose) for dB)
    "NN": (("G", "B", "NT"), ("A", "G", "TN")),
    "NT": (("G", "B", "NN"), ("G", "A", "TN")),
    "TN": (("B", "G", "NT"), ("A", "G", "NN")),
    "TT": (("B", "G", "TT"), ("G", "A", "TT")),
}


@rule("matmul")
def matmul_backward(ctx):
    """C = A @ B: dA = dC @ B^T, dB = A^T @ dC; saves A and B when they are activations."""
    return _matmul_grads(ctx)


@rule("matmul_bias")
def matmul_bias_backward(ctx):
    """C = A @ B + bias: as matmul, and d_bias = dC summed over the batch."""
    ops = _matmul_grads(ctx)
    if ctx.needs_grad(2):
        ops.append(ctx.op("sum_to_shape", [ctx.d_output], [ctx.d_inputs[2]],
                          shape=ctx.shape(ctx.fwd_op.inputs[2])))
    return ops


def _matmul_grads(ctx) -> list:
    a, b = ctx.fwd_op.inputs[:2]
    names = {"G": ctx.d_output, "A": ctx.read(a), "B": ctx.read(b)}
    grads = _MATMUL_GRADS[ctx.fwd_op.attrs.get("transpose", "NN")]
    return [ctx.op("matmul", [names[x], names[y]], [ctx.d_inputs[i]], transpose=t)
            for i, (x, y, t) in enumerate(grads) if ctx.needs_grad(i)]


@rule("add")
def add_backward(ctx):
    """C = A + B: dA = dC, dB = dC (summed back over broadcast axes); saves nothing."""
    return [op for i in (0, 1) if ctx.needs_grad(i)
            for op in ctx.to_input_shape(i, "identity", [ctx.d_output])]


@rule("bias_add")
def bias_add_backward(ctx):
    """y = x + bias (bias along the last axis): dx = dy, d_bias = dy summed over the batch."""
    ops = []
    if ctx.needs_grad(0):
        ops.append(ctx.op("identity", [ctx.d_output], [ctx.d_inputs[0]]))
    if ctx.needs_grad(1):
        ops.append(ctx.op("sum_to_shape", [ctx.d_output], [ctx.d_inputs[1]],
                          shape=ctx.shape(ctx.fwd_op.inputs[1])))
    return ops


@rule("subtract")
def subtract_backward(ctx):
    """C = A - B: dA = dC, dB = -dC; saves nothing."""
    ops = []
    if ctx.needs_grad(0):
        ops += ctx.to_input_shape(0, "identity", [ctx.d_output])
    if ctx.needs_grad(1):
        ops += ctx.to_input_shape(1, "neg", [ctx.d_output])
    return ops


@rule("multiply")
def multiply_backward(ctx):
    """C = A * B: dA = dC * B, dB = dC * A; saves each operand the other's gradient needs."""
    a, b = ctx.fwd_op.inputs
    ops = []
    if ctx.needs_grad(0):
        ops += ctx.to_input_shape(0, "multiply", [ctx.d_output, ctx.read(b)])
    if ctx.needs_grad(1):
        ops += ctx.to_input_shape(1, "multiply", [ctx.d_output, ctx.read(a)])
    return ops


@rule("divide")
def divide_backward(ctx):
    """C = A / B: dA = dC / B, dB = -dC / B * C; saves B and C."""
    b, c = ctx.fwd_op.inputs[1], ctx.fwd_op.outputs[0]
    over_b = ctx.temp("d_over_b", like=c)
    ops = [ctx.op("divide", [ctx.d_output, ctx.read(b)], [over_b])]
    if ctx.needs_grad(0):
        ops += ctx.to_input_shape(0, "identity", [over_b])
    if ctx.needs_grad(1):
        scaled = ctx.temp("d_times_c", like=c)
        ops.append(ctx.op("multiply", [over_b, saved_ref(c)], [scaled]))
        ops += ctx.to_input_shape(1, "neg", [scaled])
    return ops


@rule("neg")
def neg_backward(ctx):
    """y = -x: dx = -dy."""
    return [ctx.op("neg", [ctx.d_output], [ctx.d_inputs[0]])]


@rule("pow")
def pow_backward(ctx):
    """y = x^p: dx = dy * p x^(p-1); saves x."""
    return [ctx.op("pow_backward", [ctx.d_output, ctx.read(ctx.fwd_op.inputs[0])],
                   [ctx.d_inputs[0]], exponent=ctx.fwd_op.attrs["exponent"])]


@rule("exp")
def exp_backward(ctx):
    """y = e^x: dx = dy * y; saves the output y."""
    return [ctx.op("multiply", [ctx.d_output, saved_ref(ctx.fwd_op.outputs[0])], [ctx.d_inputs[0]])]


@rule("log")
def log_backward(ctx):
    """y = ln x: dx = dy / x; saves x."""
    return [ctx.op("divide", [ctx.d_output, ctx.read(ctx.fwd_op.inputs[0])], [ctx.d_inputs[0]])]


def _from_output(op_type: str, kernel: str):
    """Rules whose derivative is a function of the output y (tanh, sigmoid): saves y."""
    def backward(ctx):
        return [ctx.op(kernel, [ctx.d_output, saved_ref(ctx.fwd_op.outputs[0])], [ctx.d_inputs[0]])]
    backward.__doc__ = f"dx = {kernel}(dy, y); saves the output y."
    backward.__name__ = backward.__qualname__ = f"{op_type}_backward"
    registry.register_rule(op_type, backward)
    return backward


def _from_input(op_type: str, kernel: str):
    """Rules whose derivative is a function of the input x (relu, silu, gelu): saves x."""
    def backward(ctx):
        return [ctx.op(kernel, [ctx.d_output, ctx.read(ctx.fwd_op.inputs[0])], [ctx.d_inputs[0]])]
    backward.__doc__ = f"dx = {kernel}(dy, x); saves the input x."
    backward.__name__ = backward.__qualname__ = f"{op_type}_backward"
    registry.register_rule(op_type, backward)
    return backward


tanh_backward = _from_output("tanh", "tanh_backward")            # dy * (1 - y^2)
sigmoid_backward = _from_output("sigmoid", "sigmoid_backward")   # dy * y (1 - y)
relu_backward = _from_input("relu", "relu_backward")             # dy * (x > 0)
silu_backward = _from_input("silu", "silu_backward")             # dy * silu'(x)
gelu_backward = _from_input("gelu", "gelu_backward")             # dy * gelu'(x)


@rule("softmax")
def softmax_backward(ctx):
    """y = softmax(x): dx = y * (dy - sum(dy * y)); saves y."""
    return [ctx.op("softmax_backward", [ctx.d_output, saved_ref(ctx.fwd_op.outputs[0])],
                   [ctx.d_inputs[0]], axis=ctx.fwd_op.attrs["axis"])]


@rule("log_softmax")
def log_softmax_backward(ctx):
    """y = log_softmax(x): dx = dy - exp(y) * sum(dy); saves y."""
    return [ctx.op("log_softmax_backward", [ctx.d_output, saved_ref(ctx.fwd_op.outputs[0])],
                   [ctx.d_inputs[0]], axis=ctx.fwd_op.attrs["axis"])]


@rule("view", "reshape")
def view_backward(ctx):
    """y = x viewed with another shape: dx = dy viewed with x's shape; saves nothing."""
    return [ctx.op("view", [ctx.d_output], [ctx.d_inputs[0]], shape=ctx.shape(ctx.fwd_op.inputs[0]))]


@rule("transpose")
def transpose_backward(ctx):
    """y = x with axes permuted: dx = dy permuted back (negative axes resolved first, as the
    eager op does); saves nothing."""
    axes = ctx.fwd_op.attrs.get("axes")
    back = kernels.inverse_permutation(axes, len(ctx.shape(ctx.fwd_op.inputs[0])))
    return [ctx.op("transpose", [ctx.d_output], [ctx.d_inputs[0]], axes=back)]


@rule("zeros")
def zeros_backward(ctx):
    """y = zeros(shape): a constant, no inputs, nothing to emit."""
    return []


@rule("stop_gradient")
def stop_gradient_backward(ctx):
    """y = x with no gradient through (detach): derive never asks; nothing to emit."""
    return []


@rule("identity", "copy")
def identity_backward(ctx):
    """y = x: dx = dy."""
    return [ctx.op("identity", [ctx.d_output], [ctx.d_inputs[0]])]


@rule("sum")
def sum_backward(ctx):
    """y = sum(x, axis): dx = dy spread back over the summed axes; saves nothing (x's shape only)."""
    return [_expand(ctx, scale=1.0)]


@rule("mean")
def mean_backward(ctx):
    """y = mean(x, axis): dx = dy / n spread back over the averaged axes."""
    x, y = ctx.fwd_op.inputs[0], ctx.fwd_op.outputs[0]
    n = kernels.averaged_count(int(np.prod(ctx.shape(x), dtype=np.int64)),
                               int(np.prod(ctx.shape(y), dtype=np.int64)))
    # n = 0 only when x is empty: dx is empty too, so its scale never multiplies anything
    return [_expand(ctx, scale=1.0 / n if n else 0.0)]


def _expand(ctx, scale: float):
    attrs = ctx.fwd_op.attrs
    return ctx.op("expand", [ctx.d_output], [ctx.d_inputs[0]], shape=ctx.shape(ctx.fwd_op.inputs[0]),
                  axis=attrs.get("axis"), keepdims=attrs.get("keepdims", False), scale=scale)


@rule("cross_entropy")
def cross_entropy_backward(ctx):
    """L = -mean log softmax(logits)[t]: d_logits = (softmax(logits) - onehot(t)) / N * dL;
    saves the logits (softmax is recomputed in backward) and the targets."""
    logits, targets = ctx.fwd_op.inputs
    return [ctx.op("cross_entropy_backward", [ctx.d_output, ctx.read(logits), ctx.read(targets)],
                   [ctx.d_inputs[0]])]


@rule("broadcast_to")
def broadcast_to_backward(ctx):
    """y = x repeated to a larger shape: dx = dy summed back to x's shape; saves nothing."""
    return [ctx.op("sum_to_shape", [ctx.d_output], [ctx.d_inputs[0]], shape=ctx.shape(ctx.fwd_op.inputs[0]))]


@rule("mse")
def mse_backward(ctx):
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
