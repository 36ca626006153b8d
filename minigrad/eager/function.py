"""Function: the base class of every op, and the graph node an op leaves behind.

An op is a subclass with `forward(ctx, *arrays)` and `backward(ctx, grad_output)` side by side.
`Op.apply(*inputs)` does three things: compute the output with numpy, wrap it in a new
Variable, and, only when an input requires grad, wire the node: keep the inputs (parents), the
arrays forward saved, and count one more pending consumer on each parent node (dependency
counting). The node *is* the ctx object forward and backward receive, so non-input data (axes,
shapes, flags) is stored on it as plain attributes.
"""
from __future__ import annotations

import gc
import itertools

import numpy as np

from ..arena import stale_error
from ..errors import DtypeError, MinigradError, ShapeError
from ..kernels import result_dtype, result_shape
from ..modes import modes
from .readonly import exposes, guard_saved, releasable
from .guards import creation_site, describe
from .variable import OPS, Variable

_creation_counter = itertools.count()


def next_seq() -> int:
    """A fresh creation number: every node made after this call has a larger `seq` (so a
    checkpoint can tell the nodes its segment made from those that were there before)."""
    return next(_creation_counter)


def register(name: str):
    """Class decorator: give the op its name and enter it in the op table (minigrad.OPS)."""
    def enter(cls):
        cls.name = name
        OPS[name] = cls
        return cls
    return enter


class Function:
    """Base class of ops; an instance is one node of the graph (PyTorch calls it a grad_fn)."""

    # A node's fields, all declared here. apply sets the slots: first what forward and backward
    # use (inputs, saved_tensors, grad_output, arena, _last_buffer, and released = None: not in a
    # graph), then, when the node is recorded, the graph's (pending_count, released = False,
    # seq, exposes, _locked, _block). The three fields below the slots are set on few nodes, so
    # they are class defaults a node overrides (a slot more on every node measured slower).
    # Anything else on a node is the op's own data (axes, shapes, flags), in its __dict__.
    __slots__ = ("inputs", "saved_tensors", "pending_count", "grad_output", "seq", "released",
                 "arena", "_locked", "_block", "_last_buffer", "exposes", "__dict__",
                 "__weakref__")
    created_at = None       # where the op ran, under detect_anomaly (guards._check_finite)
    linked_outputs = None   # a multi-output op's other outputs (ops/multi.py)
    main_output = None      # on a secondary output's node: (main Variable, label) (ops/multi.py)
    name = "function"
    # What the op requires of shapes, quoted when numpy rejects them (subclasses refine it).
    shape_rule = "inputs broadcast numpy-style: shapes are aligned from the right and each pair " \
                 "of sizes must be equal or one of them 1"
    shape_fix = "reshape one operand (e.g. x.reshape(-1, 1)) so the axes line up"
    # What backward computes for each input, in words (read by traces and widgets), and the
    # names those words give the inputs.
    grad_text: tuple = ()
    input_names: tuple = ("a", "b", "c")
    # A node whose backward is a whole walk of its own (a checkpoint's recompute) gives the
    # engine its groups of steps here, so a stepped backward shows them.
    recompute_groups = None
    # The op's derivative written with Variable ops, (ctx, grad_output) -> one Variable per input,
    # run instead of backward under create_graph so that the gradient is itself a graph
    # (eager/higher.py). None: the op has only its numpy backward.
    differentiable_backward = None

    @staticmethod
    def forward(ctx, *arrays):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError

    def save_for_backward(self, *arrays) -> None:
        """Keep arrays backward will need. While the graph lives, those a user could write are
        read-only, and backward checks they did not change (see readonly.py)."""
        self.saved_tensors = arrays

    def buffer(self, *like, shape=None, dtype=None, kind: str | None = None,
               floating: bool = False):
        """numpy's out= for an op's result: None on the heap (numpy allocates), else an array on
        the current arena or pool. Ops write `np.add(a, b, out=ctx.out(a, b))`.

        shape defaults to numpy's broadcasting of `like` (or is a function of them), dtype to
        numpy's promotion of them (a float type when floating=True, for exp, log, ...), and kind
        to "activation" in forward and "grad" in backward. ctx.arena (the allocator of the scope
        the op ran in, or None) is tested first, so that eager code on the heap pays one call
        and no shape or dtype arithmetic. (The keywords are spelled out, not **kwargs: a misspelt
        one then fails on the heap too, not only on an arena.)
        """
        allocator = self.arena
        if allocator is None:
            return None
        if shape is None:
            shape = result_shape(like)
        elif callable(shape):
            shape = shape(*like)
        elif type(shape) is not tuple:
            shape = tuple(shape)
        if dtype is None:
            dtype = result_dtype(like)
            if floating and dtype.kind != "f":
                dtype = np.dtype(np.float64)
        elif not isinstance(dtype, np.dtype):   # (np.float32, "float32": allocators take a dtype)
            dtype = np.dtype(dtype)
        if kind is None:
            kind = "activation" if self.grad_output is None else "grad"
        self._last_buffer = last = allocator._alloc(shape, dtype, kind, self.name)
        return last[0]

    out = buffer   # the name ops use in forward and backward: ctx.out(a, b)

    def grad_buffer(self, i: int, shape: tuple, dtype):
        """Where backward writes the gradient for input i (an out= array, or None).

        When input i is a parameter whose gradient is still unwritten in this backward, this is
        the parameter's own .grad array: writing there directly saves accumulate_grad a copy of
        what can be the largest array of a step (a weight gradient). Otherwise it is buffer().
        """
        v = self.inputs[i]
        target = v._grad_buffer
        if (target is not None and v._grad is None and v.grad_fn is None
                and target.shape == shape and target.dtype == dtype
                and sum([x is v for x in self.inputs]) == 1):   # x @ x: twice
            return target
        return self.buffer(shape=shape, dtype=dtype, kind="grad")

    @classmethod
    def apply(cls, *inputs, **params) -> Variable:
        """Run the op on Variables (or constants) and record it in the graph when needed."""
        variables, requires_grad = _variables_of(inputs, cls.name)
        node = cls()
        node.inputs, node.saved_tensors, node.grad_output = variables, (), None
        node.arena, node._last_buffer, node.released = modes.allocator, None, None
        out = _forward(node, variables, params)               # 1. numpy computes the output
        block = None
        if node.arena is not None:                            # (on an arena or a pool)
            out, block = _placed(node, out, variables)
        if not (requires_grad and modes.grad_enabled):
            return Variable(out, False, None, None, block)    # 2. wrap it: a constant, no graph
        node.pending_count, node.released, node._locked = 0, False, None   # 3. or its grad_fn
        node.seq, node.exposes = next(_creation_counter), exposes(out, variables)
        for v in variables:
            if v.grad_fn is not None:                         # one more consumer to wait for
                v.grad_fn.pending_count += 1
        if node.saved_tensors:                                # (see readonly.py)
            node._locked = guard_saved(node.saved_tensors, variables)
        node._block = None if node.arena is None else _node_record(node, node.arena)
        if modes.anomaly:
            node.created_at = creation_site()
        output = Variable(out, True, node, None, block)
        if modes.recorder is not None:
            modes.recorder.on_op(node, output)
        return output

    @property
    def needs_input_grad(self) -> tuple:
        """For each input, whether backward must compute its gradient (others may be skipped)."""
        recording = self.released is not None or modes.grad_enabled   # recorded, or about to be
        return tuple([recording and v.requires_grad for v in self.inputs])

    @classmethod
    def shape_error(cls, shapes: list, params: dict, exc: Exception) -> ShapeError:
        shown = " and ".join(str(s) for s in shapes)
        extra = f" with {params}" if params else ""
        return ShapeError(f"{cls.name}: inputs of shapes {shown}{extra} do not fit ({exc}). "
                          f"Rule: {cls.shape_rule}. Fix: {cls.shape_fix}.")

    # -- the node's view for readers (widgets, lessons, tests) --------------------------------
    @property
    def next_functions(self) -> tuple:
        """PyTorch's reading of the parents: each parent's grad_fn, AccumulateGrad for a leaf
        that requires grad, None for data."""
        return tuple(v.grad_fn if v.grad_fn is not None
                     else (_accumulate_node(v) if v.requires_grad else None)
                     for v in self.inputs)

    def release(self) -> None:
        """Backward is done with this node: drop saved tensors and parents, unlock saved arrays."""
        self.released = True
        self.saved_tensors = ()
        self.inputs = ()
        self.grad_output = None
        if self._locked is not None:
            self._locked.release()
            self._locked = None

    def __repr__(self) -> str:
        state = ("released" if self.released else "not in a graph" if self.released is None
                 else f"pending_count={self.pending_count}")
        return f"<{self.name} node, {state}>"


def graph_root(cls, value: Variable, **ctx) -> Variable:
    """cls's forward of value as a node with no inputs whose output requires grad: a graph
    that starts at a value instead of at a leaf (StopGradient). ctx: attributes of the node."""
    node = cls()
    node.inputs, node.saved_tensors, node.grad_output = (), (), None
    node.arena, node._last_buffer, node._block, node._locked = None, None, None, None
    node.pending_count, node.released, node.seq = 0, False, next(_creation_counter)
    node.__dict__.update(ctx)
    if modes.anomaly:
        node.created_at = creation_site()
    out = cls.forward(node, value.data)
    node.exposes = exposes(out, (value,))   # (its output may be the value's own memory)
    output = Variable(out, True, node, value.name, value._block)
    if modes.recorder is not None:
        modes.recorder.on_op(node, output)
    return output


class AccumulateGrad:
    """The node PyTorch puts at a leaf that requires grad: backward ends here, in `.grad`."""

    __slots__ = ("variable",)
    name = "AccumulateGrad"
    next_functions = ()

    def __init__(self, variable: Variable):
        self.variable = variable

    def __repr__(self) -> str:
        return f"<AccumulateGrad into {self.variable.name or 'leaf'} {self.variable.shape}>"


def _accumulate_node(variable: Variable) -> AccumulateGrad:
    if variable._accumulate is None:
        variable._accumulate = AccumulateGrad(variable)
    return variable._accumulate


def live_nodes() -> int:
    """How many graph nodes are alive and not yet consumed by backward.

    A loop that keeps each step's loss Variable (say, `total = total + loss` without .item())
    keeps every step's graph alive: this number then grows with each step instead of returning
    to zero. It walks the garbage collector's object list, so it costs milliseconds, not
    nanoseconds: nothing is counted on the hot path.
    """
    # (getattr: a node another thread is making at this moment may not have its fields yet)
    return sum(1 for obj in gc.get_objects()
               if isinstance(obj, Function) and getattr(obj, "released", None) is False)


# -- the steps of apply, each behind one call ---------------------------------------------------
def _variables_of(inputs: tuple, op_name: str) -> tuple:
    """The inputs as Variables (constants wrapped), each checked to be alive, and whether any
    of them requires grad."""
    requires_grad = False
    for x in inputs:
        if not isinstance(x, Variable):
            return _variables_of(_as_variables(inputs, op_name), op_name)
        if x._block is not None and not x._block.alive:
            raise stale_error(f"{op_name}: input {describe(x)}", x._block)
        requires_grad = requires_grad or x.requires_grad
    return inputs, requires_grad


def _forward(node, variables: tuple, params: dict) -> np.ndarray:
    """The op's forward on the inputs' arrays; numpy's complaints become the op's shape rule."""
    # Unary and binary ops without keywords take a path that builds no argument list (**{}
    # alone costs a dict): this is the per-op overhead every student's loop pays.
    try:
        if params or len(variables) > 2:
            out = node.forward(node, *[v._data for v in variables], **params)
        elif len(variables) == 2:
            out = node.forward(node, variables[0]._data, variables[1]._data)
        else:
            out = node.forward(node, variables[0]._data)
    except MinigradError:
        raise
    except (ValueError, IndexError) as exc:   # numpy's word for shapes/axes/indices that don't fit
        raise node.shape_error([v.shape for v in variables], params, exc) from None
    return out if type(out) is np.ndarray else np.asarray(out)   # 0-d results: numpy scalars


def _placed(node, out: np.ndarray, inputs: tuple) -> tuple:
    """The op's output on its allocator, and its block: the one ctx.out wrote, an input's
    (a view), or a copy's."""
    last = node._last_buffer
    if last is not None and last[0] is out:          # written in place through ctx.out
        return last
    for v in inputs:                                 # a view of an input (reshape, slicing)
        if v._block is not None and out.base is not None \
                and (out.base is v._data or out.base is v._data.base) \
                and np.may_share_memory(out, v._data):   # (a leaf's view points at it)
            return out, v._block
    # The op could not write into the arena directly: copy its result there (ops on the hot
    # path use ctx.out, so this is the fallback, not the rule).
    placed, block = node.arena._alloc(out.shape, out.dtype, "activation", node.name)
    placed[...] = out
    return placed, block


def _node_record(node, allocator):
    """The node's stand-in record on the arena or pool (see Arena). The scope's end unlocks its
    saved arrays (backward cannot run after it); on a pool, each saved array counts one more use."""
    block = allocator.reserve(32 + 8 * (len(node.inputs) + len(node.saved_tensors)), "node",
                              node.name)
    block.lock = node._locked = releasable(node._locked)   # (two holders: node and record)
    allocator.retain_saved(node.saved_tensors)
    return block


def _as_variables(inputs: tuple, op_name: str) -> tuple:
    return tuple(v if isinstance(v, Variable) else _constant(v, inputs, op_name) for v in inputs)


def _constant(value, inputs: tuple, op_name: str) -> Variable:
    """Wrap a non-Variable operand as constant data, with numpy's rules for Python scalars.

    A Python scalar takes the dtype numpy would give it next to the Variable operand, so
    float32 * 2.0 stays float32.
    """
    if isinstance(value, (bool, int, float)):
        like = next((x._data.dtype for x in inputs if isinstance(x, Variable)), None)
        dtype = np.result_type(like, value) if like is not None else None
        return Variable(np.asarray(value, dtype=dtype))
    array = np.asarray(value) if isinstance(value, np.ndarray) else _numeric(value, op_name)
    if array.dtype.kind not in "biuf":
        raise DtypeError(f"{op_name}: operand of dtype {array.dtype} ({type(value).__name__}) is "
                         f"not numeric. Pass numbers, numeric arrays or Variables.")
    return Variable(array)


def _numeric(value, op_name: str) -> np.ndarray:
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise DtypeError(f"{op_name}: cannot use {type(value).__name__} as an operand ({exc}). "
                         f"Pass numbers, numeric arrays or Variables.") from None
