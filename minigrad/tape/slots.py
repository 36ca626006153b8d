"""Slot: a thin handle on one slot of a tape, so that tape code reads like maths.

A Slot is (tape, index, generation) and nothing else: its value and grad live in the tape's lists
(the slot table is the truth). Operators record ops on the tape; a plain number on either side
becomes a const slot. Every use checks that the tape has not been reset since the slot was made.
"""
from __future__ import annotations

from numbers import Real


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
        return self.tape.values[self.tape.index(self, "value")]

    @value.setter
    def value(self, new):
        raise self.tape.inplace_error("setting .value", self.index)

    @property
    def grad(self):
        return self.tape.grads[self.tape.index(self, "grad")]

    @property
    def requires_grad(self) -> bool:
        return self.tape.requires_grad[self.tape.index(self, "requires_grad")]

    @property
    def kind(self) -> str:
        return self.tape.kinds[self.tape.index(self, "kind")]

    @property
    def name(self):
        return self.tape.names[self.tape.index(self, "name")]

    def backward(self, retain: bool = False) -> None:
        self.tape.backward(self, retain=retain)

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
        from .core import SlotError
        raise SlotError(f"{base!r} ** slot {self.index}: pow takes a constant exponent only. Fix: "
                        f"write tape.exp(slot * math.log({base!r})).")

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
