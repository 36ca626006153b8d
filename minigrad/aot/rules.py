"""Backward rules: for each forward op type, a short function that returns the backward operations.

The rules live with their ops (each op family's file: ops/elementwise.py, ...) and reach the
derivation through the op table (minigrad/optable.py); this file is what a rule is given and
where rules are looked up.

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

from .. import optable
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

    def grads_or_temps(self, *indices) -> list:
        """d_inputs[i] for each i, or a temp named after input i when it needs no gradient: for
        one backward op that writes several input gradients at once (its kernel writes them all)."""
        return [self.d_inputs[i] if self.needs_grad(i) else
                self.temp(f"unused_d_{self.fwd_op.inputs[i]}", like=self.fwd_op.inputs[i])
                for i in indices]

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
    """Op type -> rule. `registry` below reads the op table; make your own to experiment
    (`aot.registry.copy()`, then register_rule)."""

    def __init__(self, rules: dict | None = None):
        self._own = dict(rules or {})

    def _rules(self) -> dict:
        return self._own

    def register_rule(self, op_type: str, rule) -> None:
        self._own[op_type] = rule

    def has_rule(self, op_type: str) -> bool:
        return op_type in self._rules()

    def registered_ops(self) -> list:
        return sorted(self._rules())

    def rule_for(self, op: Operation):
        rule = self._rules().get(op.type)
        if rule is None:
            raise MissingRuleError(
                f"no backward rule for op type '{op.type}' (operation {op.id}: {op.text()}). "
                f"Rule: every operation on the path from the parameters to the loss needs one. "
                f"Fix: write def {op.type}_rule(ctx): return [ctx.op(...)] and put it in the "
                f"op's row (minigrad.optable.attach('{op.type}', rule={op.type}_rule)), or register "
                f"it in a registry of your own (registry.register_rule('{op.type}', "
                f"{op.type}_rule)), or stop the gradient before it "
                f"(DeriveBackwardOptions(stop_gradients=...)).")
        return rule

    def copy(self) -> "BackwardRuleRegistry":
        return BackwardRuleRegistry(self._rules())


class TableRegistry(BackwardRuleRegistry):
    """The rules of the op table's rows, under any registered here by hand."""

    def _rules(self) -> dict:
        return {**optable.rules(), **self._own}


registry = TableRegistry()


def rule(*op_types: str):
    """Decorator: put a function in the rows of op_types as their backward rule (for the families
    whose rules are still written here in aot/, apart from their ops)."""
    def enter(fn):
        for t in op_types:
            optable.attach(t, rule=fn)
        return fn
    return enter
