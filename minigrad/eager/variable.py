"""Variable, the one user-facing value type, and create_leaf.

A Variable wraps a numpy array (`data`). A leaf that requires grad is a parameter: backward sums
d loss / d leaf into its `.grad`. A Variable made by an op points to the node that made it
(`grad_fn`), and that node to its inputs (`parents`) and the arrays it kept (`saved_tensors`).

The operators look ops up by name in OPS, the table that minigrad/ops fills when it is imported;
that is how this module uses ops without importing them (no import circle: ops make Variables).
"""
from __future__ import annotations

import sys
import warnings

import numpy as np

from . import engine, higher
from ..arena import hand_out, in_scope, same_memory, stale_error
from ..errors import InplaceError, NonLeafGradWarning, ShapeError
from ..modes import modes
from ..names import check_name
from .guards import (check_leaf_dtype, check_shareable, checked_grad, describe, log_of_base,
                     not_an_array, not_comparable, not_numeric, read_by_live_graph,
                     reshaped_while_saved)
from .readonly import in_live_graph, leaf_on_allocator

OPS: dict = {}   # op name -> Function subclass, filled by minigrad/ops via function.register


class Variable:
    """An array plus what autograd needs to know about it."""

    __slots__ = ("_data", "_grad", "requires_grad", "grad_fn", "name", "_accumulate", "_block",
                 "_grad_buffer", "scope", "_grad_variable", "__weakref__")

    def __init__(self, data: np.ndarray, requires_grad: bool = False, grad_fn=None, name=None,
                 block=None):
        self._data = data
        self._grad = None
        self.requires_grad = requires_grad
        self.grad_fn = grad_fn
        self.name = name
        self._accumulate = None
        self._block = block          # the arena/pool block holding data; None on the heap
        self._grad_buffer = None     # a leaf's gradient array, kept across zero_grad()
        self.scope = modes.scope     # the name_scope()s and Module calls it was made in
        self._grad_variable = None   # a leaf's gradient as a Variable (backward(create_graph))

    def _check_alive(self) -> None:
        block = self._block
        if block is not None and not block.alive:
            raise stale_error(describe(self), block)

    # -- what it is ---------------------------------------------------------------------------
    @property
    def data(self) -> np.ndarray:
        """The values. A leaf's array is yours to update (after backward); an op's output belongs
        to its graph and is handed out read-only: copy it with .numpy() to change it."""
        self._check_alive()
        array, block = self._exposed(), self._block
        if block is not None and block.handed is not False:   # (not the heap, nor a leaf no
            array = hand_out(array, block)                     # scope takes back)
        if modes.capture is not None and self.requires_grad:   # an aot capture: numbers it
            modes.capture.read_values(self, array)             # may freeze (see capture.py)
        return array

    def _exposed(self) -> np.ndarray:
        """What .data shows: a leaf's own array, an op output's read-only view."""
        if self.grad_fn is None:
            return self._data
        view = self._data.view()
        view.flags.writeable = False
        return view

    @data.setter
    def data(self, value) -> None:
        if self.grad_fn is not None:
            raise InplaceError(f"cannot replace the data of {describe(self)}: it is an op's "
                               f"output and belongs to its graph. Compute a new Variable instead.")
        if isinstance(value, Variable):
            value = value.data
        array = np.asarray(value, dtype=self._data.dtype)
        if array is self._data or same_memory(array, self._data):   # w.data -= lr * w.grad:
            return                                                  # changed in place already
        if array.shape != self._data.shape:   # the old gradient was of another parameter
            if in_live_graph(self._data) or read_by_live_graph(self):
                raise reshaped_while_saved(self, array.shape)
            self._grad = self._grad_buffer = None
        self._data, self._block = array, None   # (the new array is not on an allocator)

    @property
    def is_leaf(self) -> bool:
        """True for Variables no op made while recording (parameters, data, no_grad results)."""
        return self.grad_fn is None

    @property
    def shape(self) -> tuple:
        return self._data.shape

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def size(self) -> int:
        return self._data.size

    @property
    def grad(self):
        """d loss / d self after backward, for leaves that require grad; None otherwise. Always
        a numpy array, also after backward(create_graph=True) (see grad_variable)."""
        if self.grad_fn is not None:
            warnings.warn(
                f"{describe(self)} is not a leaf, and only leaf gradients are kept: an "
                f"intermediate gradient lives only while backward runs. To see it, step backward "
                f"with backward_steps() (or the BackwardStepper widget) and read the 'accumulate' "
                f"events, or make the value a leaf.", NonLeafGradWarning, stacklevel=2)
            return None
        if self._grad is None:
            return None
        self._check_alive()
        block = self._block
        if block is None or block.grad_block is None:   # (a gradient on the heap)
            return self._grad
        return hand_out(self._grad, block.grad_block)

    @grad.setter
    def grad(self, value) -> None:
        """None forgets the gradient and its array (the next backward starts a new one, so an
        array you took from .grad stays yours); an array of the data's shape is copied in."""
        self._grad_variable = None
        if value is None:
            self._grad = self._grad_buffer = None
            return
        self._grad = self._grad_buffer = checked_grad(self, value)

    @property
    def parents(self) -> tuple:
        """The Variables the op that made this one consumed: the graph's topology."""
        return self.grad_fn.inputs if self.grad_fn is not None else ()

    @property
    def saved_tensors(self) -> tuple:
        """The arrays the op that made this one kept for its backward: data, not topology."""
        return self.grad_fn.saved_tensors if self.grad_fn is not None else ()

    @property
    def grad_variable(self):
        """The gradient as a Variable with a graph, after backward(create_graph=True): the same
        values as .grad (which stays an array), differentiable again. None otherwise."""
        return self._grad_variable

    # -- autograd -----------------------------------------------------------------------------
    def backward(self, order: str = "pending", *, shuffle=None, retain_graph=None,
                 create_graph: bool = False) -> None:
        """Compute d self / d leaf for every leaf that requires grad (see minigrad.backward).
        create_graph=True records the gradient computation too (see grad_variable, mg.grad)."""
        self._check_alive()
        if create_graph:
            higher.backward_create_graph(self)
            return
        engine.backward(self, order, shuffle=shuffle, retain_graph=retain_graph)

    def zero_grad(self) -> None:
        """Forget the accumulated gradient: .grad reads None until the next backward writes it.

        The gradient array is kept and the next backward writes into it again, so a training
        loop allocates no new gradient memory per step; unless you kept the array
        (history.append(w.grad)): then the next backward starts a new one (on the heap, also for
        a parameter on an arena), so what you kept keeps its values. (Counted by references,
        beyond ._grad_buffer, ._grad and the count's own: see _UNKEPT.)
        """
        buffer = self._grad_buffer
        if buffer is not None and sys.getrefcount(buffer) - (self._grad is buffer) > _UNKEPT:
            self._grad_buffer = None
        self._grad = self._grad_variable = None

    def detach(self) -> "Variable":
        """The same data as a leaf that does not require grad (shares memory, and so goes stale
        with it when it lives on an arena or pool)."""
        self._check_alive()
        out = Variable(self._exposed(), False, None, self.name, self._block)   # (read-only: op output)
        if modes.capture is not None:   # an aot capture is recording: a stop-gradient node there
            out = modes.capture.detached(self, out)
        return out

    def item(self) -> float:
        self._check_alive()
        if modes.capture is not None and self.requires_grad:   # a number the plan would freeze
            raise modes.capture.taken_out(self, "item()")
        if self._data.size != 1:
            raise ValueError(f"item() needs a single value; {describe(self)} has shape "
                             f"{self._data.shape}. Reduce it (sum, mean) or index it first.")
        return self._data.item()

    def numpy(self) -> np.ndarray:
        """A copy of the data: safe to keep after the graph (or its arena) is gone."""
        self._check_alive()
        if modes.capture is not None and self.requires_grad:   # a copy the plan would freeze
            raise modes.capture.taken_out(self, "numpy()")
        return self._data.copy()

    # -- operators: each looks its op up by name ----------------------------------------------
    def __add__(self, other):
        return OPS["add"].apply(self, other)

    def __radd__(self, other):
        return OPS["add"].apply(other, self)

    def __sub__(self, other):
        return OPS["sub"].apply(self, other)

    def __rsub__(self, other):
        return OPS["sub"].apply(other, self)

    def __mul__(self, other):
        return OPS["mul"].apply(self, other)

    def __rmul__(self, other):
        return OPS["mul"].apply(other, self)

    def __truediv__(self, other):
        return OPS["div"].apply(self, other)

    def __rtruediv__(self, other):
        return OPS["div"].apply(other, self)

    def __matmul__(self, other):
        return OPS["matmul"].apply(self, other)

    def __rmatmul__(self, other):
        return OPS["matmul"].apply(other, self)

    def __pow__(self, exponent):
        return OPS["pow"].apply(self, exponent=exponent)

    def __rpow__(self, base):
        # base ** x = exp(x * log(base)) for a constant base > 0
        return OPS["exp"].apply(OPS["mul"].apply(self, log_of_base(base, self)))

    def __neg__(self):
        return OPS["neg"].apply(self)

    def __getitem__(self, index):
        return OPS["getitem"].apply(self, index=index)

    def __len__(self) -> int:
        return len(self._data)

    def __bool__(self) -> bool:
        """numpy's rule: one element is true or false, several are ambiguous."""
        self._check_alive()
        if self._data.size != 1:
            raise ShapeError(
                f"bool() of {describe(self)}: the truth value of {self._data.size} elements is "
                f"ambiguous (numpy's rule). Fix: reduce first, e.g. bool((x.data > 0).any()) or "
                f"bool((x.data > 0).all()), or index one element.")
        if modes.capture is not None and self.requires_grad:   # a branch the plan would freeze
            raise modes.capture.taken_out(self, "bool()")
        return bool(self._data)

    # -- comparisons are refused: no gradient, and Python's own == would compare identity ------
    # (A Variable equals itself: weak-keyed tables look a Variable up by comparing it to itself.)
    def __eq__(self, other):
        if other is self:
            return True
        raise not_comparable(self, "==", other)

    def __ne__(self, other):
        if other is self:
            return False
        raise not_comparable(self, "!=", other)

    def __lt__(self, other):
        raise not_comparable(self, "<", other)

    def __le__(self, other):
        raise not_comparable(self, "<=", other)

    def __gt__(self, other):
        raise not_comparable(self, ">", other)

    def __ge__(self, other):
        raise not_comparable(self, ">=", other)

    __hash__ = object.__hash__   # (by identity, as before: defining __eq__ would remove it)

    # -- numpy: operators are answered, the array protocol is refused --------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # `array + variable` reaches here as np.add(array, variable): answer as the operator does.
        if method == "__call__" and not kwargs and len(inputs) == 2:
            if ufunc in UFUNC_OPS:
                return OPS[UFUNC_OPS[ufunc]].apply(*inputs)
            if ufunc is np.power:
                return inputs[1].__rpow__(inputs[0]) if inputs[1] is self else self ** inputs[1]
        raise not_an_array(self, f"numpy's {ufunc.__name__}" + ("" if method == "__call__" else
                                                                f".{method}"))

    def __array__(self, dtype=None, copy=None):
        raise not_an_array(self, "np.asarray / np.array")

    def __iter__(self):
        return (self[i] for i in range(len(self._data)))

    # In-place operators would overwrite data a graph may need for backward, so they are refused.
    def __iadd__(self, other):
        return self._inplace("+=", "add", other)

    def __isub__(self, other):
        return self._inplace("-=", "sub", other)

    def __imul__(self, other):
        return self._inplace("*=", "mul", other)

    def __itruediv__(self, other):
        return self._inplace("/=", "div", other)

    def __setitem__(self, index, value):
        """x[i] = v is refused (Python's own message was "does not support item assignment"):
        a graph may have saved x, and an element written would change what backward reads."""
        raise InplaceError(
            f"x[{index!r}] = ... on {describe(self)}: minigrad records no writes into a "
            f"Variable, because a graph may have saved its data for backward. Build a new "
            f"Variable instead: with a numpy mask m, x * (1 - m) + value * m, or mg.concat of "
            f"the pieces; to change a parameter's numbers (after backward), write its array: "
            f"w.data[{index!r}] = value.")

    def _inplace(self, symbol: str, op: str, other):
        if self.requires_grad or getattr(other, "requires_grad", False):
            raise InplaceError(
                f"'{symbol}' on {describe(self)}: in-place changes to a Variable that takes part "
                f"in autograd are not allowed, because a graph may have saved its data for "
                f"backward. Build a new Variable instead (x = x {symbol[0]} y), or, to update a "
                f"parameter after backward, change its array: w.data -= lr * w.grad.")
        return OPS[op].apply(self, other)   # rebinds the name to a new Variable, like x = x + y

    # -- method forms of the ops --------------------------------------------------------------
    def sum(self, axis=None, keepdims: bool = False):
        return OPS["sum"].apply(self, axis=axis, keepdims=keepdims)

    def mean(self, axis=None, keepdims: bool = False):
        return OPS["mean"].apply(self, axis=axis, keepdims=keepdims)

    def max(self, axis=None, keepdims: bool = False):
        return OPS["max"].apply(self, axis=axis, keepdims=keepdims)

    def reshape(self, *shape):
        return OPS["reshape"].apply(self, shape=OPS["reshape"].sizes(shape))

    def transpose(self, *axes):
        return OPS["transpose"].apply(self, axes=OPS["transpose"].sizes(axes))

    @property
    def T(self):
        return OPS["transpose"].apply(self, axes=None)

    def exp(self):
        return OPS["exp"].apply(self)

    def log(self):
        return OPS["log"].apply(self)

    def tanh(self):
        return OPS["tanh"].apply(self)

    def abs(self):
        return OPS["abs"].apply(self)

    __abs__ = abs   # abs(v)

    def sigmoid(self):
        return OPS["sigmoid"].apply(self)

    def relu(self):
        return OPS["relu"].apply(self)

    def softmax(self, axis: int = -1):
        return OPS["softmax"].apply(self, axis=axis)

    def log_softmax(self, axis: int = -1):
        return OPS["log_softmax"].apply(self, axis=axis)

    def __repr__(self) -> str:
        parts = [f"shape={self._data.shape}", f"dtype={self._data.dtype}"]
        if self._block is not None and not self._block.alive:
            parts.append(f"STALE: its {type(self._block.allocator).__name__.lower()} "
                         f"{self._block.allocator.name!r} was popped")
        if self.name:
            parts.insert(0, f"name={self.name!r}")
        if self.grad_fn is not None:
            parts.append(f"grad_fn=<{self.grad_fn.name}>")
        elif self.requires_grad:
            parts.append("requires_grad=True")
        if self._data.size <= 8 and "STALE" not in parts[-1]:
            parts.append("data=" + np.array2string(self._data, precision=4, separator=", ")
                         .replace("\n", ""))
        return f"Variable({', '.join(parts)})"


def create_leaf(data, requires_grad: bool = False, *, name: str | None = None, dtype=None,
                arena=None, copy: bool = True) -> Variable:
    """Wrap data as a leaf Variable: a parameter if requires_grad, else data.

    The data is copied (like torch.tensor), so the graph never shares memory with an array you
    keep; float32 stays float32 and Python lists of floats become float64 unless dtype= says
    otherwise. Parameters need a float dtype: integers have no gradient.

    Where the copy lives: on `arena` if given (an Arena or Pool; a parameter's gradient buffer
    goes there too), else on the allocator of the current scope (batch data inside
    `with graph.scope():`), else on the ordinary heap. Create parameters outside batch scopes, or
    pass arena=perm_arena: a leaf made inside a scope goes stale when the scope ends.

    copy=False shares your numpy array instead (like torch.from_numpy): no copy, so a large batch
    costs nothing to wrap, but the leaf stays on the heap even inside a scope, and while a graph
    that saved it lives the array is read-only (writing it would change the gradients); for a
    view, the array it views is, and a write through the view is refused when backward runs
    (see readonly.py). The array must already have the dtype asked for.
    """
    name = check_name(name, "create_leaf(name=...)")
    block = None
    if isinstance(data, Variable):
        data, block = data.data, data._block   # (shared memory goes stale with its block)
    if not copy:
        return _shared_leaf(data, bool(requires_grad), name, dtype, arena, block)
    try:
        array = np.asarray(data, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise not_numeric(data, exc) from None
    check_leaf_dtype(array, type(data).__name__, requires_grad)
    allocator = arena if arena is not None else modes.allocator
    if allocator is None:
        leaf = Variable(array.copy(), bool(requires_grad), None, name)
    else:
        leaf = _leaf_on(allocator, array, bool(requires_grad), name)
    if modes.recorder is not None:
        modes.recorder.on_leaf(leaf)
    return leaf


def _shared_leaf(data, requires_grad: bool, name, dtype, arena, block) -> Variable:
    """create_leaf(copy=False): the leaf's data is the caller's own array (or a Variable's)."""
    check_shareable(data, dtype, arena)
    check_leaf_dtype(data, type(data).__name__, requires_grad)
    leaf = Variable(data, requires_grad, None, name, block)
    if modes.recorder is not None:
        modes.recorder.on_leaf(leaf)
    return leaf


# numpy ufuncs that are Variable operators: `array + variable` is np.add(array, variable)
UFUNC_OPS = {np.add: "add", np.subtract: "sub", np.multiply: "mul", np.true_divide: "div",
             np.matmul: "matmul"}


def _leaf_on(allocator, array: np.ndarray, requires_grad: bool, name) -> Variable:
    kind = "param" if requires_grad else "input"
    copy, block = allocator._alloc(array.shape, array.dtype, kind, name)
    copy[...] = array
    block.pinned = True   # a leaf outlives the backward that reads it (see Pool use counts)
    leaf = Variable(leaf_on_allocator(copy), requires_grad, None, name, block)
    # Will a scope take it back? (Else a parameter on its own arena: .data is its array.)
    scoped = allocator is modes.allocator or (modes.allocator is not None and in_scope(allocator))
    if not scoped:
        block.handed = False
    if requires_grad:
        leaf._grad_buffer, grad_block = allocator._alloc(array.shape, array.dtype, "grad",
                                                         f"{name or 'param'}.grad")
        grad_block.pinned = True
        if scoped:
            block.grad_block = grad_block   # (.grad hands out its array as .data does)
    return leaf



def _probe_unkept() -> int:
    """What zero_grad's count gives for a gradient array only its Variable holds, from a frame
    like zero_grad's (measured: Python versions differ in what a frame's own references add)."""
    leaf = Variable(np.zeros(1))
    leaf._grad_buffer = np.zeros(1)
    buffer = leaf._grad_buffer
    return sys.getrefcount(buffer)


_UNKEPT = _probe_unkept()
