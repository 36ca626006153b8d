"""Slot: a thin handle on one slot of a tape, so that tape code reads like maths.

A Slot is (tape, index, generation) and nothing else: its value and grad live in the tape's lists
(the slot table is the truth). Operators record ops on the tape; a plain number on either side
becomes a const slot. Every use checks that the tape has not been reset since the slot was made.
The errors of a slot misused live here too, so that the tape (core.py) imports this module and
this module needs nothing from the tape.
"""
from __future__ import annotations

from numbers import Real

from ..errors import MinigradError

# numpy's ufuncs for the operators a Slot has: (the method when the slot is on the left, on the
# right). `np.ones(3) * slot` reaches Slot.__array_ufunc__ as np.multiply(array, slot).
OPERATORS = {"add": ("__add__", "__radd__"), "subtract": ("__sub__", "__rsub__"),
             "multiply": ("__mul__", "__rmul__"), "divide": ("__truediv__", "__rtruediv__"),
             "power": ("__pow__", "__rpow__"), "negative": ("__neg__", None)}


class SlotError(MinigradError, TypeError):
    """Something that is not a slot of this tape was given where a slot is needed."""


class StaleSlotError(MinigradError, RuntimeError):
    """A slot handed out before tape.reset() was used after it."""


class Slot:
    """Slot `index` of `tape`, made in tape generation `generation`."""

    __slots__ = ("tape", "index", "generation")

    def __init__(self, tape, index: int):
        self.tape, self.index, self.generation = tape, index, tape.generation

    def __index__(self) -> int:          # tape.values[slot] works, and checks the slot
        return self.tape.index(self, "index")

    # -- the slot's row of the table ----------------------------------------------------------
    @property
    def value(self):
        """The slot's value (on a TensorTape, a read-only copy: the table's buffer is reused)."""
        return self.tape.hand_out(self.tape.values[self.tape.index(self, "value")])

    @value.setter
    def value(self, new):
        raise self.tape.inplace_error("setting .value", self.index)

    @property
    def grad(self):
        """The slot's grad, or None (on a TensorTape, a read-only copy, as value)."""
        return self.tape.hand_out(self.tape.grads[self.tape.index(self, "grad")])

    @property
    def requires_grad(self) -> bool:
        return self.tape.requires_grad[self.tape.index(self, "requires_grad")]

    @property
    def kind(self) -> str:
        return self.tape.kinds[self.tape.index(self, "kind")]

    @property
    def name(self):
        return self.tape.names[self.tape.index(self, "name")]

    def backward(self, retain: bool = False, create_graph: bool = False) -> None:
        self.tape.backward(self, retain=retain, create_graph=create_graph)

    # -- operators: each records one op and returns the fresh slot ----------------------------
    def _slot(self, other):
        return other if other.__class__ is Slot else self.tape.const(other)

    def __add__(self, other):
        return self.tape.add(self, self._slot(other))

    def __radd__(self, other):
        return self.tape.add(self._slot(other), self)

    def __sub__(self, other):
        return self.tape.sub(self, self._slot(other))

    def __rsub__(self, other):
        return self.tape.sub(self._slot(other), self)

    def __mul__(self, other):
        return self.tape.mul(self, self._slot(other))

    def __rmul__(self, other):
        return self.tape.mul(self._slot(other), self)

    def __truediv__(self, other):
        return self.tape.div(self, self._slot(other))

    def __rtruediv__(self, other):
        return self.tape.div(self._slot(other), self)

    def __neg__(self):
        return self.tape.neg(self)

    def __pow__(self, exponent):
        return self.tape.pow(self, exponent)

    def __rpow__(self, base):
        raise SlotError(f"{base!r} ** slot {self.index}: pow takes a constant exponent only. Fix: "
                        f"write tape.exp(slot * math.log({base!r})).")

    # -- the ops that are methods, not operators ---------------------------------------------
    def sin(self):
        return self.tape.sin(self)

    def cos(self):
        return self.tape.cos(self)

    def exp(self):
        return self.tape.exp(self)

    def log(self):
        return self.tape.log(self)

    def tanh(self):
        return self.tape.tanh(self)

    def relu(self):
        return self.tape.relu(self)

    # -- numpy: its operators are ours, its other functions are refused ---------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """numpy meets a slot. Without this numpy treats the slot as an element: np.ones(3) *
        slot would be an object array of 3 slots, 3 ops recorded. So an operator goes to the
        slot's own (the array becomes one const slot, as a number does) and the rest is refused."""
        names = OPERATORS.get(ufunc.__name__) if method == "__call__" and not kwargs else None
        if names is None:
                raise SlotError(f"np.{ufunc.__name__}{'' if method == '__call__' else '.' + method}"
                            f" on slot {self.index}: numpy functions do not record on the tape. "
                            f"Fix: use an operator (+ - * / **) or the slot's own op: "
                            f"slot.sin() .cos() .exp() .log() .tanh() .relu().")
        if len(inputs) == 1:
            return getattr(self, names[0])()
        left, right = inputs
        return getattr(self, names[0])(right) if left is self else getattr(self, names[1])(left)

    # -- in place: refused (SSA) --------------------------------------------------------------
    def __iadd__(self, other):
        raise self.tape.inplace_error("+=", self.index)

    def __isub__(self, other):
        raise self.tape.inplace_error("-=", self.index)

    def __imul__(self, other):
        raise self.tape.inplace_error("*=", self.index)

    def __itruediv__(self, other):
        raise self.tape.inplace_error("/=", self.index)

    def __ipow__(self, other):
        raise self.tape.inplace_error("**=", self.index)

    def __bool__(self):
        raise TypeError(f"slot {self.index}: a slot has no truth value (it is a place in the "
                        f"tape). Fix: compare its number, `slot.value > 0`.")

    def __repr__(self) -> str:
        tape = self.tape
        if self.generation != tape.generation:
            return f"Slot({self.index}, stale: made before tape.reset())"
        value, grad = tape.values[self.index], tape.grads[self.index]
        shown = f"{value:.6g}" if isinstance(value, Real) else repr(value)
        name = f" {tape.names[self.index]!r}" if tape.names[self.index] else ""
        return f"Slot({self.index}{name}, {tape.kinds[self.index]}, value={shown}, grad={grad})"
