"""capture(fn, *example_inputs, params=...): run ordinary minigrad code once, keep its graph as IR.

The eager engine already records every op it runs (the grad_fn graph). capture runs fn on the
examples with every float input marked requires_grad (so every op is recorded), then walks that
graph from the outputs back and writes one Operation per node, in an order where each tensor is
written before it is read. Names come from Variable names (parameters such as "layer0.weight",
inputs) and otherwise from the op ("relu_3"). Shapes and dtypes go into the graph's shape_env.

What the graph walk cannot see, capture decides explicitly (never a silently stale plan):
* a numpy array or leaf fn uses as a constant is copied at capture, read-only: changing the
  array afterwards does not change the plan (pass it as an input or a parameter to vary it);
  a leaf that requires grad, neither an input nor in params, is refused (it would be frozen);
* x.detach() inside fn, and the .data of a traced tensor used as a constant, become
  stop_gradient(x): the live value on every run, with no gradient through it; every op after
  a detach() is recorded too (a float detach() result is the output of a StopGradient node
  that requires grad while capture records, so the ops that read it build a graph);
* v.item(), v.numpy() and bool(v) (an if on a value) of a traced tensor are refused: the number,
  copy or branch would be frozen; numpy work on a traced tensor's .data cannot be seen, so a
  .data read the plan never gets as an operand is warned of (CaptureWarning, at the end);
* integer inputs (ids, targets) are recorded like frozen parameters, so ops on them alone
  (targets.reshape(-1)) follow new data;
* no_grad() inside fn is refused (its results would be frozen constants);
  (how capture knows: while fn runs, modes.capture is its Recording, which detach() asks for
  its result and no_grad() asks first);
* names: inputs and parameters each need their own name, none starting with "saved." or
  "recomputed."; the output names must be free (derive refuses a tensor named like another's
  gradient, "d_" + name). Clashes are refused, naming both, never renamed behind your back.
"""
from __future__ import annotations

import contextlib
import os
import sys
import warnings

import numpy as np

from .. import optable
from ..errors import MinigradError
from ..modes import is_grad_enabled, modes
from ..eager.variable import OPS, Variable, create_leaf
from ..ops.multi import primary_of
from .derive import INDEX_NAME
from .ir import Graph, Operation, TensorInfo


class CaptureError(MinigradError, ValueError):
    """fn used something the IR cannot hold (an op without an aot form, a batched matmul, ...)."""


class CaptureWarning(UserWarning):
    """fn read a traced tensor's values through .data and the plan did not get them as an
    operand: numpy work or an `if` on them would be frozen at their capture-time values."""


def capture(fn, *example_inputs, params=None, input_names=None, output_names=None) -> Graph:
    """The forward Graph of fn(*example_inputs); params: a Module, a list or a dict of Variables."""
    if not is_grad_enabled():
        raise CaptureError("capture: called inside no_grad(), where ops build no graph, so fn's "
                           "ops could not be recorded. Fix: call aot.capture outside no_grad().")
    param_vars = named_params(params)
    given = _input_names(example_inputs, input_names)
    check_names(given, param_vars)
    leaves, names, no_grad = [], {}, set()
    for value, name in zip(example_inputs, given):
        data = value.data if isinstance(value, Variable) else np.asarray(value)
        differentiable = data.dtype.kind == "f" and not INDEX_NAME.search(name)   # rope_freqs
        leaf = create_leaf(data, requires_grad=differentiable, name=name)   # recorded, even for data
        if not (isinstance(value, Variable) and value.requires_grad):
            no_grad.add(name)
        leaves.append(leaf)
        names[id(leaf)] = name
    for name, p in param_vars.items():
        names[id(p)] = name
    # A frozen parameter (requires_grad=False) is recorded like the data inputs, for the duration
    # of fn only: ops on it and constants alone would build no node and be frozen at its
    # capture-time values. It gets no gradient, as in eager.
    frozen = {name: p for name, p in param_vars.items()
              if not p.requires_grad and p.dtype.kind == "f"}
    no_grad |= set(frozen)
    # Integer inputs (ids, targets) likewise: an op on them alone (targets.reshape(-1)) would
    # build no node and keep the capture-time targets on every run.
    recorded = [*frozen.values(), *(v for v in leaves if v.dtype.kind != "f")]
    try:
        for v in recorded:
            v.requires_grad = True
        with Recording() as recording:
            result = fn(*leaves)
    finally:
        for v in recorded:
            v.requires_grad = False
    recording.refuse_a_caught_no_grad()
    outputs = list(result) if isinstance(result, (tuple, list)) else [result]
    output_names = _output_names(outputs, output_names, [*given, *param_vars])
    graph = Graph(inputs=list(given), params=list(param_vars), no_grad=no_grad)
    for v, out_name in zip(outputs, output_names):
        if not isinstance(v, Variable):
            raise CaptureError(f"capture: fn returned {type(v).__name__}, not a Variable. "
                               f"Fix: return the minigrad result (e.g. the loss).")
        names.setdefault(id(v), out_name)
    for v in leaves + list(param_vars.values()):
        graph.shape_env[names[id(v)]] = TensorInfo(v.shape, v.dtype)
    owners = {_memory(v._data): names[id(v)] for v in leaves + list(param_vars.values())}
    used: set = set()   # the memory of every traced tensor's .data the plan reads as an operand
    for v in _topological(outputs):
        _record(graph, v, names, owners, used)
    graph.outputs = [names[id(v)] for v in outputs]
    recording.warn_of_values_read(used)
    return graph


class Recording:
    """What fn does that its graph cannot show, told by the engine while fn runs on this thread.

    A detached value and a value computed under no_grad() are both leaves of fn's graph: the
    walk would take them, and every op computed from them and constants only (those build no
    graph), for constants and freeze their capture-time data. So, while capture runs fn,
    modes.capture is this object: Variable.detach() asks it for its result (a StopGradient
    node's output, recorded like any op), and no_grad() asks it first (refused).
    """

    def __init__(self):
        self.no_grad_at: str | None = None
        self._previous = None
        self.reads: dict = {}   # memory of a traced tensor's .data -> (what, where) it was read
        self._detaching = False

    def __enter__(self) -> "Recording":
        self._previous, modes.capture = modes.capture, self
        return self

    def __exit__(self, *exc) -> None:
        modes.capture = self._previous

    def detached(self, source: Variable, out: Variable) -> Variable:
        """What source.detach() returns while fn runs: for floats, the output of a StopGradient
        node, which requires grad so that the ops reading it are recorded (the eager graph is
        still cut: source is no parent of it); out, the plain leaf, for integers (which never
        require grad: an op with a traced float operand reads it by memory, see _name_leaf)."""
        if out.dtype.kind != "f":
            return out
        self._detaching = True   # (the node reads source's values: not fn reading them)
        try:
            return OPS["stop_gradient"].apply(source)
        finally:
            self._detaching = False

    def read_values(self, v: Variable, array: np.ndarray) -> None:
        """v.data of a traced tensor while fn runs: remember it, to tell at the end whether the
        plan got it as an operand (the live value, supported) or not (frozen: warned)."""
        if not self._detaching:
            what = f"'{v.name}' " if v.name else ""
            self.reads.setdefault(_memory(array), (f"{what}of shape {v.shape}",
                                                   _user_line(sys._getframe(1))))

    def warn_of_values_read(self, used: set) -> None:
        for memory, (what, where) in self.reads.items():
            if memory not in used:
                warnings.warn(
                    f"capture: fn read the values of the traced tensor {what} through .data at "
                    f"{where}, and the plan did not get them as an operand of an op. If fn "
                    f"computed with them in numpy or branched on them (if x.data[0] > 0), the "
                    f"plan keeps what that gave at capture, on every later run. Fix: compute "
                    f"with minigrad ops (x.detach() for no gradient), pass x.data itself as an "
                    f"operand, or capture once per branch.", CaptureWarning, stacklevel=3)

    def taken_out(self, v: Variable, how: str) -> "CaptureError":
        """v.item(), v.numpy() or bool(v) of a traced value while fn runs: the number, copy or
        branch would be a constant of the plan, its capture-time value on every later run."""
        what = f"'{v.name}' " if v.name else ""
        return CaptureError(
            f"capture: fn took the value of the traced tensor {what}of shape {v.shape} out of "
            f"the graph with {how} at {_user_line(sys._getframe(1))}. Rule: a plan replays the "
            f"recorded ops only, so a Python number, a numpy copy or an if on a value would keep "
            f"its capture-time value on every later run, without a word. Fix: compute with "
            f"minigrad ops (x.detach() for a value without gradient), take numbers out of the "
            f"outputs after executor.run(), or capture once per branch.")

    def entered_no_grad(self) -> None:
        self.no_grad_at = self.no_grad_at or _with_line(sys._getframe(1))
        raise self._no_grad_error("")

    def refuse_a_caught_no_grad(self) -> None:
        """fn caught the refusal and went on: what it did instead is unknown, so refuse again."""
        if self.no_grad_at is not None:
            raise self._no_grad_error(" (fn caught the error raised there and went on)")

    def _no_grad_error(self, caught: str) -> "CaptureError":
        return CaptureError(
            f"capture: fn entered no_grad() at {self.no_grad_at}{caught}. Values computed there "
            f"are leaves without a graph, so the plan would keep their capture-time data and use "
            f"it, stale, on every later run. Rule: a captured function builds its whole graph. "
            f"Fix: use x.detach() (captured as a stop gradient of the live value), or compute the "
            f"value outside fn and pass it as an input.")


def _user_line(frame) -> str:
    """file:line of the first frame outside minigrad: the line of fn that made the call."""
    package = os.path.dirname(os.path.dirname(__file__))
    while frame is not None and frame.f_code.co_filename.startswith(package + os.sep):
        frame = frame.f_back
    return _with_line(frame) if frame is not None else "an unknown line"


def _with_line(frame) -> str:
    """file:line of the `with no_grad():` line: the first frame outside modes.py and contextlib."""
    skipped = (contextlib.__file__, is_grad_enabled.__code__.co_filename)   # (modes.py)
    while frame is not None and frame.f_code.co_filename in skipped:
        frame = frame.f_back
    if frame is None:
        return "an unknown line"
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"


def named_params(params) -> dict:
    """name -> parameter, from a Module, a list of named Variables or a dict."""
    if params is None:
        return {}
    listed = not hasattr(params, "parameters")   # (a Module lists its parameters in one order)
    if not listed:
        params = params.parameters()
    if isinstance(params, dict):
        return dict(params)
    found, where, unnamed = {}, {}, []
    for i, p in enumerate(params):
        unnamed += [] if getattr(p, "name", None) else [i]
        if listed and len(unnamed) == 2:   # named by position: another order swaps them silently
            raise CaptureError(
                f"capture: parameters {unnamed[0]} and {unnamed[1]} of the list have no name, so "
                f"they are named by position (param{unnamed[0]}, param{unnamed[1]}). Rule: a plan "
                f"finds its parameters by name; by position, an Executor given them in another "
                f"order would swap two of one shape without a word. Fix: name them (p.name = "
                f"'W1', or create_leaf(..., name='W1')), or pass a dict name -> Variable.")
        name = p.name or f"param{i}"
        if name in found and found[name] is not p:
            raise CaptureError(
                f"capture: parameters {where[name]} and {i} are both named '{name}'. Rule: each "
                f"parameter of a plan has its own name (its gradient is d_<name>); with one name "
                f"the second would hide the first, which would get no gradient. Fix: name them "
                f"(p.name = ...), or pass a dict name -> Variable.")
        found[name], where[name] = p, i
    return found


RESERVED_PREFIXES = ("saved.", "recomputed.")   # how backward graphs and plans refer to tensors


def check_names(input_names: list, param_vars: dict) -> None:
    """Inputs and parameters each need a name no other input or parameter has, and none of the
    prefixes the backward graph uses for its own references."""
    seen: dict = {}
    for kind, name in [*(("input", n) for n in input_names), *(("parameter", n) for n in param_vars)]:
        if not isinstance(name, str) or not name:
            raise CaptureError(f"capture: {kind} name {name!r} is not a non-empty string. Fix: "
                               f"name every input and parameter with a string.")
        if name.startswith(RESERVED_PREFIXES):
            raise CaptureError(f"capture: {kind} '{name}' starts with '{name.split('.')[0]}.', "
                               f"which backward graphs use to refer to a forward tensor. Rule: "
                               f"names must not start with {' or '.join(map(repr, RESERVED_PREFIXES))}."
                               f" Fix: rename the {kind} (e.g. '{name.replace('.', '_', 1)}').")
        if name in seen:
            raise CaptureError(f"capture: {seen[name]} '{name}' and {kind} '{name}' share one name. "
                               f"Rule: every input and parameter of a plan has its own name (one "
                               f"would silently stand for the other). Fix: rename the {kind} "
                               f"(Variable.name, input_names=[...] or the key of the params dict).")
        seen[name] = kind


def _input_names(values: tuple, given) -> list:
    if given is None:
        return [_input_name(v, i, len(values)) for i, v in enumerate(values)]
    given = list(given)
    if len(given) != len(values):
        raise CaptureError(f"capture: input_names {given} name {len(given)} inputs, but "
                           f"{len(values)} example inputs were given. Rule: one name per example "
                           f"input, in order. Fix: pass {len(values)} names (or none).")
    return given


def _input_name(value, i: int, count: int) -> str:
    if isinstance(value, Variable) and value.name:
        return value.name
    return "x" if count == 1 else f"x{i}"


def _output_names(outputs: list, given, taken: list) -> list:
    if given is None:
        given = ["loss"] if len(outputs) == 1 else [f"out{i}" for i in range(len(outputs))]
    given = list(given)
    if len(given) != len(outputs):
        raise CaptureError(f"capture: output_names {given} name {len(given)} outputs, but fn "
                           f"returned {len(outputs)}. Fix: one name per output.")
    for name in given:
        if name in taken or given.count(name) > 1:
            raise CaptureError(f"capture: the output name '{name}' is already the name of an input "
                               f"or parameter (or of another output). Rule: every tensor of a plan "
                               f"has its own name. Fix: rename that input or parameter, or pass "
                               f"output_names=[...] with a free name.")
    return given


def _topological(outputs: list) -> list:
    """Non-leaf Variables, each after the Variables it reads (iterative post-order walk).
    A secondary output of a multi-output op (ops/multi.py) comes after its op's main output;
    a detached value comes after its source."""
    order, done, stack = [], set(), [(v, False) for v in outputs]
    while stack:
        v, expanded = stack.pop()
        link = primary_of(v)
        if id(v) in done or (v.grad_fn is None and link is None):
            continue
        if expanded:
            done.add(id(v))
            order.append(v)
            continue
        stack.append((v, True))
        stack.extend((p, False) for p in reversed(_reads(v, link)))
    return order


def _reads(v: Variable, link) -> list:
    """What v depends on: its parents, minus its op's own linked outputs, plus its op's main
    output; for a detached value, the Variable it was detached from (no parent: the eager
    graph is cut there)."""
    if v.grad_fn is not None and v.grad_fn.name == "stop_gradient":
        return [v.grad_fn.source]
    parents = [p for p in v.parents if (primary_of(p) or (None,))[0] is not v]
    return parents + [link[0]] if link is not None else parents


def _record(graph: Graph, v: Variable, names: dict, owners: dict, used: set) -> None:
    """Append v's operation; owners: memory -> name of each traced tensor so far; used: the
    memory of the traced tensors' data read as operands."""
    if primary_of(v) is not None:   # written by the record of its op's main output (named there)
        return
    inputs = _reads(v, None)
    for x in inputs:
        if id(x) not in names:
            _name_leaf(graph, x, names, owners, used)
    node = v.grad_fn
    if node.linked_outputs:   # a several-output op makes its index outputs from its inputs' .data
        used.update(_memory(x._data) for x in inputs)   # (moe_topk's indices): run by the plan
    if node.name == "stop_gradient" and id(v) not in names and v.name == inputs[0].name:
        names[id(v)] = _free_name(None, f"{names[id(inputs[0])]}.detached", graph)
    row = optable.captured().get(node.name)   # how the op's row says to write it
    if row is None:
        raise CaptureError(f"capture: the eager op '{node.name}' has no ahead-of-time form. "
                           f"Supported: {', '.join(sorted(optable.captured()))}. Fix: express it "
                           f"with these ops, or give its row in the op table (minigrad/optable.py) "
                           f"a capture translation, a backward rule and compilers.")
    try:
        op_type, attrs, *more = row.translate(node, v, inputs)
    except optable.NotCapturable as refusal:
        raise CaptureError(str(refusal)) from None
    outputs = more[0] if more else [v]
    _append(graph, v, names, op_type, attrs, inputs, outputs, node)
    for out in outputs:
        if isinstance(out, Variable):
            owners.setdefault(_memory(out._data), names[id(out)])


def _memory(array: np.ndarray) -> tuple:
    """Where an array's values are: two arrays with this key show the same numbers."""
    return (array.__array_interface__["data"][0], array.shape, array.strides, array.dtype.str)


def _name_leaf(graph: Graph, x: Variable, names: dict, owners: dict, used: set) -> None:
    """A leaf nobody named: the data of a traced tensor (read through .data) is that tensor,
    with no gradient; anything else is a constant, copied now and read-only (a later change to
    the array must not change the plan)."""
    source = owners.get(_memory(x._data)) if x._data.size else None
    if source is not None:
        used.add(_memory(x._data))
        names[id(x)] = f"{source}.detached"
        if names[id(x)] not in graph.shape_env:
            graph.shape_env[names[id(x)]] = TensorInfo(x.shape, x.dtype)
            graph.operations.append(Operation(f"stop_gradient_{len(graph.operations)}",
                                              "stop_gradient", (source,), (names[id(x)],)))
        return
    if x.requires_grad:   # a trainable leaf frozen into the plan would get no gradient, silently
        raise _unlisted_parameter(x, graph)
    fresh = f"const{len(graph.constants)}"   # (a name already taken gets this prefix)
    name = x.name if _is_free(x.name, graph) else \
        (f"{fresh}.{x.name}" if x.name else fresh)
    names[id(x)] = name
    constant = np.array(x.data)
    constant.flags.writeable = False
    graph.constants[name] = constant
    graph.shape_env[name] = TensorInfo(x.shape, x.dtype)


def _unlisted_parameter(x: Variable, graph: Graph) -> CaptureError:
    what = f"'{x.name}' " if x.name else ""
    return CaptureError(
        f"capture: fn reads the Variable {what}of shape {x.shape} ({x.dtype}), which requires "
        f"grad but is neither an input nor one of params ({graph.params or 'none given'}). Rule: "
        f"the plan copies such a leaf as a constant, so it would get no gradient and never see "
        f"its updates. Fix: pass it in params=[...] (or the model owning it, or as an input); "
        f"for a constant, make it without requires_grad or use x.detach().")


def _append(graph: Graph, v: Variable, names: dict, op_type: str, attrs: dict, inputs: list,
            outputs: list, node) -> None:
    """Write v's operation: name its outputs (Variables and (label, shape, dtype) triples)."""
    k = len(graph.operations)
    op_id = f"{op_type}_{k}"
    if id(v) not in names:
        names[id(v)] = _output_name(v, op_id, [names[id(x)] for x in inputs], graph)
    out_names = []
    for out in outputs:
        if isinstance(out, Variable):
            if id(out) not in names:
                names[id(out)] = _free_name(out.name, f"{names[id(v)]}.{_label(node, out)}", graph)
            name, info = names[id(out)], TensorInfo(out.shape, out.dtype)
        else:   # (label, shape, dtype): an output only backward reads (rstd, lse)
            label, shape, dtype = out
            name, info = _free_name(None, f"{names[id(v)]}.{label}", graph), TensorInfo(shape, dtype)
        graph.shape_env[name] = info
        out_names.append(name)
    graph.operations.append(Operation(op_id, op_type, tuple(names[id(x)] for x in inputs),
                                      tuple(out_names), attrs))


def _label(node, out: Variable) -> str:
    labels = [k for k, ref in (node.linked_outputs or {}).items() if ref() is out]
    return labels[0] if labels else "out"


def _is_free(name, graph: Graph) -> bool:
    """Not taken, and not one of the prefixes backward graphs use ("saved.x" means x there)."""
    return bool(name) and name not in graph.shape_env and not name.startswith(RESERVED_PREFIXES)


def _free_name(own, fallback: str, graph: Graph) -> str:
    """own if it is free, else fallback, else fallback with a number."""
    for name in (own, fallback):
        if _is_free(name, graph):
            return name
    k = 1
    while f"{fallback}{k}" in graph.shape_env:
        k += 1
    return f"{fallback}{k}"


def _output_name(v: Variable, op_id: str, input_names: list, graph: Graph) -> str:
    """The Variable's own name; else the module's, read off its parameters ("layer0.weight" ->
    "layer0"); else the op id ("relu_1"). A name already taken falls through to the next."""
    modules = [n.rsplit(".", 1)[0] for n in input_names if n in graph.params and "." in n]
    for name in (v.name, *modules[:1]):
        if _is_free(name, graph):
            return name
    return _free_name(None, op_id, graph)   # (a parameter may be named like an op id)
