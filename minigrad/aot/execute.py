"""Run a forward and a backward Graph on numpy, from a plan compiled once.

Compiling walks the operations once with the example values: each op's compiler (from its row of
the op table, minigrad/optable.py; kernels.py says the calling convention) computes the
result (allocating its buffer), and returns the flat calls that recompute it *into that buffer*:
`(np.add, (a, b, out))`. Running is then one loop, `for fn, args in calls: fn(*args)`, with no
graph, no dictionary and no allocation: that is where ahead-of-time wins over eager, which builds
a node, a Variable and usually a new array per op. The math is the eager ops' (kernels.py).

The plain idea, without the speed trick: `env[out] = KERNEL[op.type](*[env[i] for i in op.inputs])`
for each op in order. Views (reshape, identity, transpose) cost nothing: their output *is* a view
of the input's buffer, made once. Every tensor keeps its own buffer (saved tensors included), so a
saved.x is simply x's buffer; plan.py says how much memory a buffer-sharing runtime would need.
Buffers are reused by the next run: copy a result to keep it (run() returns its loss as a copy;
grads() and executor[name] hand out the buffers themselves; with shared buffers, executor[name]
refuses an intermediate, whose memory later tensors reuse).

run() copies each input and parameter into the plan's own buffer first, after checking its shape
and kind of dtype: the plan reads a parameter's current array on every run (`w.data = new` and
in-place optimiser steps alike), and the inputs hold their values after the run.
"""
from __future__ import annotations

import numpy as np

from .. import optable
from ..errors import DtypeError, MinigradError
from ..kernels import run_calls
from ..eager.variable import Variable
from ..nn.layers import Module
from . import placement
from .capture import named_params
from .ir import Graph, TensorInfo, is_saved, unsaved


class ExecuteError(MinigradError, ValueError):
    """The graphs cannot be run as given (a missing input, an unsaved tensor, an unknown op)."""


class Executor:
    """Executor(forward, backward, params, *example_inputs): compile once, then run(*inputs).

    share_buffers=True (the default) places the buffers in one arena by live range
    (placement.py): arena_bytes is then the memory the run needs, unshared_bytes what one buffer
    per tensor would take.
    """

    def __init__(self, forward: Graph, backward: Graph | None, params, *example_inputs,
                 share_buffers: bool = True):
        self.forward, self.backward = forward, backward
        self.constant_ids: set = set()   # buffers written once at compile time (never shared)
        self.env: dict = dict(forward.constants)
        # The plan owns a copy of each parameter, refreshed from the parameter on every run: a
        # kept reference would miss `w.data = new_array` (and a shape change would go unseen).
        self.param_sources = _param_sources(params)
        missing = [p for p in forward.params if p not in self.param_sources]
        if missing:
            raise ExecuteError(f"Executor: no array for params {missing}. Fix: pass the model, a "
                               f"list of its parameter Variables or a dict name -> array.")
        for name in forward.params:
            self.env[name] = np.array(checked_value("Executor", "parameter", name,
                                                    self.param_sources[name](), forward.shape_env.get(name)))
        if len(example_inputs) != len(forward.inputs):
            raise ExecuteError(f"Executor: the forward graph has inputs {forward.inputs}, got "
                               f"{len(example_inputs)} example arrays. Fix: pass one per input.")
        for name, value in zip(forward.inputs, example_inputs):
            self.env[name] = np.array(checked_value("Executor", "input", name, value,
                                                    forward.shape_env.get(name)))
        self.forward_calls = self._compile(forward.operations, forward)
        self.backward_calls = []
        if backward is not None:
            d_loss = backward.inputs[0]
            loss = self.env[forward.outputs[0]]
            self.env[d_loss] = np.ones_like(loss)   # d loss / d loss = 1, written once
            self._check_saves(backward)
            self.backward_calls = self._compile(backward.operations, backward, saved_ok=True)
            self.backward_calls += self._cast_grads(backward)
        self.unshared_bytes = self.arena_bytes = None
        self.own_buffers = None   # with shared buffers: the tensors sure to keep their values
        if share_buffers:
            self._share_buffers(params)
            self.own_buffers = {*forward.inputs, *forward.params, *forward.constants,
                                *forward.outputs, *(backward.inputs + backward.outputs
                                                    if backward is not None else ())}

    def _share_buffers(self, params) -> None:
        fixed = {*self.forward.params, *self.forward.constants}
        external = {id(placement.root_of(a)) for name, a in self.env.items() if name in fixed}
        external |= self.constant_ids
        if self.backward is not None:
            external.add(id(placement.root_of(self.env[self.backward.inputs[0]])))
        outputs = [*self.forward.outputs, *(self.backward.outputs if self.backward else [])]
        calls = self.forward_calls + self.backward_calls
        calls, self.env, self.arena_bytes, self.unshared_bytes = placement.place(
            calls, self.env, external, [self.env[n] for n in (*outputs, *self.forward.inputs)],
            [self.env[n] for n in self.forward.inputs])   # inputs keep their values to the end
        n = len(self.forward_calls)
        self.forward_calls, self.backward_calls = calls[:n], calls[n:]

    def _cast_grads(self, backward: Graph) -> list:
        """A gradient has its input's dtype, in every engine (eager's accumulate_grad casts too).
        The rules compute in the dtype the loss brings (a float16 x under a float32 loss gets
        a float32 d_x): each gradient output is copied into the dtype the graph declares."""
        calls = []
        for name in backward.outputs:
            info, grad = backward.shape_env.get(name), self.env[name]
            if info is not None and np.dtype(info.dtype) != grad.dtype:
                self.env[name] = np.empty(grad.shape, info.dtype)
                calls += run_calls([(np.copyto, (self.env[name], grad))])
        return calls

    def _check_saves(self, backward: Graph) -> None:
        save = set(backward.save)
        for op in backward.operations:
            for t in op.inputs:
                if is_saved(t) and unsaved(t) not in save:
                    raise ExecuteError(
                        f"backward op {op.id} ({op.type}) reads {t}, but '{unsaved(t)}' is not in "
                        f"the backward graph's save list {backward.save}. Rule: with "
                        f"auto_save=False only extra_saves are kept. Fix: add '{unsaved(t)}' to "
                        f"extra_saves, or derive with auto_save=True.")

    def _compile(self, operations, graph: Graph, saved_ok: bool = False) -> list:
        calls, compilers = [], optable.compilers()   # (each op's row holds its compilers)
        for op in operations:
            compiler = compilers.get(op.type)
            if compiler is None:
                raise ExecuteError(f"Executor: no kernel for op type '{op.type}' ({op.id}). Fix: "
                                   f"give the op's row a compiler (minigrad.optable.attach("
                                   f"'{op.type}', compilers={{...}})); known: "
                                   f"{', '.join(sorted(compilers))}.")
            args = [self._lookup(t, op) for t in op.inputs]
            out, op_calls = compiler(*args, **op.attrs)
            outs = out if isinstance(out, tuple) else (out,)   # a tuple: one array per output
            if len(outs) != len(op.outputs):
                raise ExecuteError(f"Executor: the compiler of '{op.type}' ({op.id}) made "
                                   f"{len(outs)} arrays for the {len(op.outputs)} outputs "
                                   f"{list(op.outputs)}. Rule: a compiler returns one buffer per "
                                   f"output, in order. Fix: return a tuple of {len(op.outputs)} arrays.")
            for name, array in zip(op.outputs, outs):
                if not isinstance(array, np.ndarray):   # a scalar would freeze at its first value
                    raise ExecuteError(f"Executor: the compiler of '{op.type}' ({op.id}) made a "
                                       f"{type(array).__name__} for '{name}', not an ndarray. "
                                       f"Rule: every buffer of a plan, 0-d included, is an ndarray "
                                       f"later runs write into. Fix: wrap its result in kernels.as_array().")
                _check_declared_shape(op, name, array, graph.shape_env.get(name))
                self.env[name] = array
                if not op_calls and not any(placement.root_of(array) is placement.root_of(a)
                                            for a in args):
                    self.constant_ids.add(id(placement.root_of(array)))   # made once (zeros): keep it
            calls += op_calls
        return calls

    def _lookup(self, name: str, op) -> np.ndarray:
        array = self.env.get(unsaved(name))
        if array is None:
            raise ExecuteError(f"Executor: op {op.id} ({op.type}) reads '{name}', which no earlier "
                               f"operation wrote and is not an input, param or constant.")
        return array

    def run(self, *inputs):
        """Forward then backward on new input values; returns the loss (a 0-d array of its own)."""
        env = self.env
        if len(inputs) != len(self.forward.inputs):
            raise ExecuteError(f"Executor.run: the graph has inputs {self.forward.inputs}, got "
                               f"{len(inputs)} values. Fix: pass one array per input, in order.")
        for name in self.forward.params:   # (a name given as a parameter but captured as a
            self._write("parameter", name, self.param_sources[name]())   # constant stays a constant)
        for name, value in zip(self.forward.inputs, inputs):
            self._write("input", name, value)
        for fn, args in self.forward_calls:
            fn(*args)
        for fn, args in self.backward_calls:
            fn(*args)
        # A copy: the loss buffer is rewritten by the next run, and `losses.append(run(x))`
        # would otherwise hold the last loss many times. (One number; grads() hands out buffers.)
        return env[self.forward.outputs[0]].copy()

    def _write(self, kind: str, name: str, value) -> None:
        buffer = self.env[name]
        info = TensorInfo(buffer.shape, buffer.dtype)
        np.copyto(buffer, checked_value("Executor.run", kind, name, value, info), casting="same_kind")

    def grads(self) -> dict:
        """The backward graph's outputs, by name ("d_layer0.weight" -> array); reused by the next run."""
        if self.backward is None:
            raise ExecuteError("Executor.grads: this executor has no backward graph (it was built "
                               "with backward=None), so it computes no gradients. Fix: "
                               "Executor(forward, derive_backward_graph(forward), params, *inputs).")
        return {name: self.env[name] for name in self.backward.outputs}

    def __getitem__(self, name: str) -> np.ndarray:
        name = unsaved(name)
        if self.own_buffers is not None and name in self.env and name not in self.own_buffers:
            # (an intermediate's memory is lent to later tensors: it would read their values)
            raise ExecuteError(
                f"Executor['{name}']: with share_buffers=True (the default) the buffer of an "
                f"intermediate tensor is reused by later tensors of the run, so after run() it "
                f"may hold another tensor's values. Rule: only inputs, parameters, constants, "
                f"outputs and gradients keep a buffer of their own. Fix: "
                f"Executor(..., share_buffers=False) to read every tensor, or return '{name}' "
                f"from fn as a second output.")
        return self.env[name]


def checked_value(where: str, kind: str, name: str, value, info) -> np.ndarray:
    """value as an array that fits the plan's tensor `name` (shape, and a dtype numpy casts
    without changing its kind: float targets or complex inputs are refused, not truncated)."""
    value = np.asarray(value.data if isinstance(value, Variable) else value)
    if info is None:
        return value
    shape = tuple(info.shape)
    if value.shape != shape:
        fewer_rows = value.ndim == len(shape) > 0 and value.shape[1:] == shape[1:] \
            and value.shape[0] < shape[0]
        raise ExecuteError(
            f"{where}: {kind} '{name}' has shape {value.shape}, the plan was compiled for "
            f"{shape}. Rule: an ahead-of-time plan has static shapes. Fix: capture and compile "
            f"again with an example of the new shape"
            + (f"; fewer rows than captured is often the last batch of batches(), which may be "
               f"smaller: skip it (if len(yb) < {shape[0]}: continue) or compile a second plan "
               f"for its size." if fewer_rows else "."))
    if not np.can_cast(value.dtype, info.dtype, "same_kind"):
        raise DtypeError(
            f"{where}: {kind} '{name}' has dtype {value.dtype}, the plan was compiled for "
            f"{np.dtype(info.dtype)}. Rule: a value may change precision, not kind (no float "
            f"class targets, no complex numbers). Fix: pass {np.dtype(info.dtype)} data, e.g. "
            f"value.astype(np.{np.dtype(info.dtype).name}) if that is what you mean.")
    return value


def _check_declared_shape(op, name: str, array: np.ndarray, info) -> None:
    # The graphs declare every tensor's shape (a gradient has its tensor's shape). A rule whose
    # op yields another shape would hand back a broadcast gradient without a word: refuse it.
    if info is not None and tuple(array.shape) != tuple(info.shape):
        raise ExecuteError(
            f"Executor: op {op.id} ({op.type}) makes '{name}' of shape {array.shape}, but the graph "
            f"declares {tuple(info.shape)}. Rule: a gradient has its tensor's shape (broadcast "
            f"axes summed back, as eager's accumulate_grad does). Fix: the backward rule must end "
            f"with ctx.to_input_shape(...) or a sum_to_shape op.")


def _param_sources(params) -> dict:
    """name -> a function returning the parameter's current array (read again on every run)."""
    sources = {}
    places = _places(params) if isinstance(params, Module) else {}
    for name, p in named_params(params).items():
        if id(p) in places:   # a model's: check it still holds this Variable (one dict lookup)
            sources[name] = _checked_source(p, name, *places[id(p)])
        elif isinstance(p, Variable):
            sources[name] = lambda p=p: p.data
        elif isinstance(p, np.ndarray):
            sources[name] = lambda p=p: p
        else:
            raise ExecuteError(f"Executor: parameter '{name}' is a {type(p).__name__}. Rule: "
                               f"params are Variables or numpy arrays. Fix: pass the model, a list "
                               f"of its parameter Variables or a dict name -> Variable or ndarray.")
    return sources


def _places(model: Module) -> dict:
    """id(parameter) -> (owner, key): where the model keeps each of its Variables, an attribute
    of a Module or an item of a list, tuple or dict (the first place found)."""
    places, seen, stack = {}, set(), [model]
    while stack:
        owner = stack.pop()
        if id(owner) in seen:
            continue
        seen.add(id(owner))
        items = (vars(owner).items() if isinstance(owner, Module) else owner.items()
                 if isinstance(owner, dict) else enumerate(owner))
        for key, value in items:
            if isinstance(value, Variable):
                places.setdefault(id(value), (owner, key))
            elif isinstance(value, (Module, list, tuple, dict)):
                stack.append(value)
    return places


def _checked_source(p: Variable, name: str, owner, key):
    """p's array, after checking the model still keeps p where it did when the plan was made:
    `layer.weight = create_leaf(...)` would leave the plan reading the old Variable, silently."""
    holder = vars(owner) if isinstance(owner, Module) else owner

    def source() -> np.ndarray:
        if holder[key] is not p:
            raise _replaced_error(name, owner, key)
        return p.data
    return source


def _replaced_error(name: str, owner, key) -> ExecuteError:
    return ExecuteError(
        f"Executor.run: the model's parameter '{name}' ({type(owner).__name__}, "
        f"{'attribute' if isinstance(owner, Module) else 'item'} {key!r}) is another Variable "
        f"than when the Executor was made. Rule: a plan reads the Variables it was given; the "
        f"replaced one would be read (and trained) no more, and the new one never. Fix: make the "
        f"Executor again, or keep the Variable and give it new values (w.data = new_array).")
