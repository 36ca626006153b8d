"""TensorTape: the same tape with numpy arrays in its slots, their memory taken from a Pool.

Every value (vars and consts included) is a buffer from the pool. During backward a value goes
back to the pool as soon as nothing still needs it: its remaining use count is 0 and its own
instruction has been undone (a rule may read its output, as exp and tanh do). Vars are kept; they
are what the caller asked about. So the pool's peak during backward is lower than keeping every
value until the end, which is what `peak_bytes` in the tests and benchmarks/tape.py measure.

Gradients live in the pool too: a slot's grad buffer is taken when backward first writes it,
and a temp's grad goes back once its instruction has been undone (nothing reads it after that),
so `tape.grads` of temps is None after a backward without retain; vars keep theirs.

Because buffers are reused, what the tape hands out is protected two ways (SSA: nothing backward
reads may change): the table's buffers are read-only once written (only the tape's own
accumulation reopens a grad buffer), and `slot.value` / `slot.grad` are read-only copies, which
stay as they were after zero_grad, backward or reset. `tape.values` and `tape.grads` are the live
table: read them now, copy what you keep.
"""
from __future__ import annotations

import numpy as np

from numbers import Real

from ..arena import Pool
from ..errors import DtypeError, ShapeError
from ..kernels import sum_to_shape
from .core import Tape, float64_of
from .slots import SlotError


class TensorTape(Tape):
    """A Tape whose slots hold float64 arrays allocated from `pool` (a new Pool by default)."""

    def __init__(self, pool: Pool | None = None):
        super().__init__()
        self.pool = pool if pool is not None else Pool("tape")
        self._blocks: list = []      # the pool block of each slot's value (None once freed)
        self._grad_blocks: dict = {}  # slot -> the pool block of its grad

    def _leaf(self, x, requires_grad: bool, kind: str, name) -> int:
        if isinstance(x, Real) and not isinstance(x, bool):
            x = float64_of(x, kind)          # one number: the scalar tape's own check
        array = np.asarray(x)
        if array.dtype.kind not in "iuf":    # np.asarray(x, float64) would parse "1.5"
            raise DtypeError(f"tape.{kind}({x!r:.60}): a TensorTape slot holds a float64 array "
                             f"of real numbers; this is {type(x).__name__} of dtype "
                             f"{array.dtype} (strings, bools, complex and objects are refused). "
                             f"Fix: pass numbers or an array of numbers, e.g. np.array([1.5]).")
        buffer = self._alloc(array.shape, kind, name)
        buffer[...] = array
        buffer.flags.writeable = False
        return self._push(buffer, requires_grad, kind, name)

    def _alloc(self, shape, kind: str, name) -> np.ndarray:
        buffer, block = self.pool._alloc(shape, np.float64, "param" if kind == "var" else
                                         "activation", name)
        self._blocks.append(block)
        return buffer

    # Every op takes the plain road through the rules (numpy does the work per element).
    def add(self, a, b):
        return self.apply("add", a, b)

    def sub(self, a, b):
        return self.apply("sub", a, b)

    def mul(self, a, b):
        return self.apply("mul", a, b)

    def div(self, a, b):
        return self.apply("div", a, b)

    def neg(self, a):
        return self.apply("neg", a)

    def pow(self, a, exponent):
        return self.apply("pow", a, exponent=exponent)

    def sin(self, a):
        return self.apply("sin", a)

    def cos(self, a):
        return self.apply("cos", a)

    def exp(self, a):
        return self.apply("exp", a)

    def log(self, a):
        return self.apply("log", a)

    def tanh(self, a):
        return self.apply("tanh", a)

    def relu(self, a):
        return self.apply("relu", a)

    def _forward(self, op, rule, slots, attrs):
        xs = [self.values[i] for i in slots]
        for i, x in zip(slots, xs):
            if x is None:
                raise SlotError(f"tape op on slot {i}: its value was given back to the pool by "
                                f"backward. Rule: after a backward without retain the recording "
                                f"is spent. Fix: reset() and record again, or backward(out, "
                                f"retain=True).")
        try:
            shape = np.broadcast_shapes(*(x.shape for x in xs))
        except ValueError:
            raise ShapeError(f"tape.{op}: shapes {' and '.join(str(x.shape) for x in xs)} do not "
                             f"broadcast (slots {slots}). Fix: reshape one input.") from None
        out = self._alloc(shape, "temp", None)
        with np.errstate(all="ignore"):      # IEEE values (inf, nan), as the scalar Tape
            rule.forward(*xs, out=out, **attrs)
        out.flags.writeable = False
        return out

    def _undo(self, instr, snapshot: bool) -> tuple:
        with np.errstate(all="ignore"):
            return super()._undo(instr, snapshot)

    def _one(self, out):
        """The seed: d out / d out, all ones; for a slot with many elements, backward(out)
        differentiates the sum of its elements (as torch's out.backward(ones_like(out)))."""
        return np.ones_like(self.values[out])

    def backward(self, out, retain: bool = False, plain: bool = True,
                 create_graph: bool = False) -> None:
        """Always the plain walk: numpy does the work per element, the rules are the code."""
        super().backward(out, retain, plain=True, create_graph=create_graph)

    def _accumulate(self, total, grad, slot: int):
        """Add grad, reduced to the slot's shape (undoing broadcasting), into its pool buffer."""
        grad = sum_to_shape(np.asarray(grad, dtype=np.float64), self.values[slot].shape)
        if total is None:
            total, block = self.pool._alloc(grad.shape, np.float64, "grad", self.names[slot])
            self._grad_blocks[slot] = block
            total[...] = grad
        else:
            total.flags.writeable = True     # only the tape writes into the table
            np.add(total, grad, out=total)
        total.flags.writeable = False
        return total

    def hand_out(self, x):
        """slot.value and slot.grad: a read-only copy, as the pool reuses the buffer itself."""
        if x is None:
            return None
        copy = x.copy()
        copy.flags.writeable = False
        return copy

    def _snapshot(self, grad):
        return grad.copy()     # the buffer is added to later, or reused once freed

    def _drop_grad(self, slot: int) -> None:
        block = self._grad_blocks.pop(slot, None)
        if block is not None:
            self.pool.free(block)
        self.grads[slot] = None

    def _release(self, slots) -> None:
        for i in slots:
            block = self._blocks[i]
            if block is not None:
                self.pool.free(block)
                self._blocks[i] = None
                self.values[i] = None
            if self.kinds[i] != "var":
                self._drop_grad(i)

    def reset(self) -> None:
        """Give every buffer back to the pool (the capacity stays there for the next step)."""
        for i in range(len(self._blocks)):
            self._drop_grad(i)
        self._release(range(len(self._blocks)))
        self._blocks.clear()
        super().reset()

    def peak_bytes(self) -> int:
        return self.pool.high_water

