"""Function: the base class of every op, and the graph node an op leaves behind.

An op is a subclass with `forward(ctx, *arrays)` and `backward(ctx, grad_output)` side by side.
`Op.apply(*inputs)` does the three things of design A: compute the output with numpy, wrap it
in a new Variable, and, only when an input requires grad, wire the node: keep the inputs
(parents), the arrays forward saved, and count one more pending consumer on each parent node
(design B). The node *is* the ctx object forward and backward receive, so non-input data (axes,
shapes, flags) is stored on it as plain attributes.
"""
from __future__ import annotations

import itertools
import os
import threading
import traceback

import numpy as np

from .errors import DtypeError, MinigradError, ShapeError
from .modes import modes
from .variable import OPS, Variable

_creation_counter = itertools.count()
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def register(name: str):
    """Class decorator: give the op its name and enter it in the op table (minigrad.OPS)."""
    def enter(cls):
        cls.name = name
        OPS[name] = cls
        return cls
    return enter


class Function:
    """Base class of ops; an instance is one node of the graph (PyTorch calls it a grad_fn)."""

    __slots__ = ("inputs", "saved_tensors", "pending_count", "grad_output",
                 "seq", "released", "_locked", "__dict__", "__weakref__")
    name = "function"
    # What the op requires of shapes, quoted when numpy rejects them (subclasses refine it).
    shape_rule = "inputs broadcast numpy-style: shapes are aligned from the right and each pair " \
                 "of sizes must be equal or one of them 1"
    shape_fix = "reshape one operand (e.g. x.reshape(-1, 1)) so the axes line up"

    @staticmethod
    def forward(ctx, *arrays):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError

    def save_for_backward(self, *arrays) -> None:
        """Keep arrays backward will need. While the graph lives, they are read-only."""
        self.saved_tensors = arrays

    @classmethod
    def apply(cls, *inputs, **params) -> Variable:
        """Run the op on Variables (or constants) and record it in the graph when needed."""
        variables = inputs
        for x in inputs:
            if not isinstance(x, Variable):
                variables = _as_variables(inputs, cls.name)
                break
        node = cls()
        node.inputs = variables
        node.saved_tensors = ()
        # Unary and binary ops take a path without comprehensions: this is the per-op overhead
        # every student's loop pays, so it is kept to plain attribute reads.
        try:
            if len(variables) == 2:
                a, b = variables
                out = cls.forward(node, a._data, b._data, **params)
                requires_grad = a.requires_grad or b.requires_grad
            elif len(variables) == 1:
                a = variables[0]
                out = cls.forward(node, a._data, **params)
                requires_grad = a.requires_grad
            else:
                out = cls.forward(node, *[v._data for v in variables], **params)
                requires_grad = any(v.requires_grad for v in variables)
        except MinigradError:
            raise
        except (ValueError, IndexError) as exc:   # numpy's word for shapes/axes/indices that don't fit
            raise cls.shape_error([v.shape for v in variables], params, exc) from None
        if type(out) is not np.ndarray:
            out = np.asarray(out)   # 0-d results come back as numpy scalars
        if not (requires_grad and modes.grad_enabled):
            return Variable(out)
        node.pending_count = 0
        node.grad_output = None
        node.released = False
        node.seq = next(_creation_counter)
        for v in variables:
            parent = v.grad_fn
            if parent is not None:
                parent.pending_count += 1
        guarded = _writable_by_user(node.saved_tensors, variables) if node.saved_tensors else ()
        node._locked = _SavedLock(guarded) if guarded else None
        if modes.anomaly:
            node.created_at = _creation_site()
        return Variable(out, True, node)

    @property
    def needs_input_grad(self) -> tuple:
        """For each input, whether backward must compute its gradient (others may be skipped)."""
        recording = hasattr(self, "released") or modes.grad_enabled   # recorded, or about to be
        return tuple(recording and v.requires_grad for v in self.inputs)

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
        state = "released" if getattr(self, "released", False) else \
            f"pending_count={getattr(self, 'pending_count', 0)}"
        return f"<{self.name} node, {state}>"


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


# -- saved arrays are read-only while a graph needs them ------------------------------------------
# Writing into a saved array would silently change the gradient. An op's own output can only be
# reached through Variable.data, which hands it out read-only, so the arrays to guard are those a
# user holds: the data of leaf inputs (parameters, batches, constants) and views, which may alias
# them. apply() clears their writeable flag and release() (or the node's finaliser) restores it.
# A count per array lets several live graphs share one; a view is locked with its base, since a
# write through either changes both.
_locks: dict = {}            # id(array) -> [array, count, was_writeable]
_locks_guard = threading.Lock()


def _writable_by_user(saved: tuple, inputs: tuple) -> tuple:
    """The saved arrays a user could write into: leaf inputs' data, and views (which may alias it)."""
    guarded = []
    for array in saved:
        if not isinstance(array, np.ndarray):
            continue
        if array.base is not None:
            guarded.append(array)
            continue
        for v in inputs:
            if v._data is array and v.grad_fn is None:
                guarded.append(array)
                break
    return tuple(guarded)


class _SavedLock:
    """The locks one node holds. Released by backward, or by the garbage collector when a graph
    is dropped without backward (so its arrays do not stay read-only forever)."""

    __slots__ = ("arrays",)

    def __init__(self, arrays: tuple):
        self.arrays = arrays
        _lock(arrays)

    def release(self) -> None:
        arrays, self.arrays = self.arrays, ()
        if arrays and _locks is not None:   # _locks is None during interpreter shutdown
            _unlock(arrays)

    __del__ = release


def _lock(arrays: tuple) -> None:
    with _locks_guard:
        for array in arrays:
            while isinstance(array, np.ndarray):
                entry = _locks.get(id(array))
                if entry is None:
                    writeable = array.flags.writeable
                    _locks[id(array)] = [array, 1, writeable]
                    if writeable:
                        array.flags.writeable = False
                else:
                    entry[1] += 1
                array = array.base


def _unlock(arrays: tuple) -> None:
    with _locks_guard:
        for array in arrays:
            chain = []
            while isinstance(array, np.ndarray):
                chain.append(array)
                array = array.base
            for array in reversed(chain):   # a view can be made writeable only after its base
                entry = _locks[id(array)]
                entry[1] -= 1
                if entry[1] == 0:
                    del _locks[id(array)]
                    if entry[2]:
                        try:
                            array.flags.writeable = True
                        except ValueError:   # its base is still locked by another graph
                            pass


def _creation_site() -> str:
    """file:line of the user code that called the op (first frame outside minigrad)."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        if not os.path.abspath(frame.filename).startswith(_PACKAGE_DIR):
            return f"{frame.filename}:{frame.lineno} ({frame.line})"
    return "inside minigrad"
