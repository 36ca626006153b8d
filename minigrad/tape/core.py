"""The slot tape: every value is a numbered slot in a few parallel lists.

    tape = Tape()
    x = tape.var(2.0, name="x")          # slot 0
    y = x * x + tape.sin(x)              # slots 1, 2, 3: each op writes a fresh slot (SSA)
    tape.backward(y)                     # walk tape.instrs in reverse
    x.grad                               # 2x + cos x

The lists are the whole state: values, grads (None until written), requires_grad, kinds ("var",
"const" or "temp"), names, and instrs (what to undo, in the order it was done). A slot is an int
index into them; `Slot` (slots.py) is a thin handle with operators that checks it is still valid.
An op none of whose inputs requires grad records no instruction: its slot is a "const".

Rules this engine enforces (each misuse raises, naming the rule and the fix):
* SSA: nothing is overwritten, so in-place ops on a slot are refused.
* one backward per recording, unless the first one was asked to retain (backward(out, retain=True)).
* reset() invalidates every slot handed out before it.
"""
from __future__ import annotations

from numbers import Integral, Real
from typing import NamedTuple

import numpy as np

from ..errors import BackwardError, DtypeError, InplaceError, MinigradError
from ..gcpause import gc_paused
from ..names import check_name
from .rules import OP_NAMES, RULES, Add, Cos, Div, Exp, Log, Mul, Neg, Pow, Relu, Sin, Sub, Tanh
from .slots import Slot, SlotError, StaleSlotError

ADD, SUB, MUL, DIV, NEG, POW, SIN, COS, EXP, LOG, TANH, RELU = range(12)
BINARY = 4          # op codes below this take two slots
BACKWARD = tuple(RULES[name].backward for name in OP_NAMES)   # op code -> its rule's backward
# The attrs of every op but pow: one shared empty dict rather than one per Instr (Instrs are read,
# never changed). See Rows for why a container per instruction is worth saving.
NO_ATTRS: dict = {}


class Instr(NamedTuple):
    """One recorded op: output = op(*inputs, **attrs)."""
    op: str
    inputs: tuple
    output: int
    attrs: dict


class TapeStep(NamedTuple):
    """One instruction undone by backward_steps; what it changed is read from its walk's log."""
    position: int                 # index into tape.instrs
    instr: Instr
    log: "StepLog"                # what every step of the walk changed
    index: int                    # this step's place in the walk

    @property
    def grad_writes(self) -> tuple:
        """(slot, its grad after this step) for every grad it wrote."""
        return self.log.writes.pairs(self.index)

    @property
    def uses(self) -> tuple:
        """(slot, its use count after this step) for every slot it read."""
        return self.log.uses.pairs(self.index)

    @property
    def freed(self) -> tuple:
        """The slots whose value is no longer needed (and not a var)."""
        return self.log.freed.row(self.index)

    @property
    def remaining(self) -> tuple:
        """The use count of every slot after this step (rebuilt from the walk's changes)."""
        return self.log.remaining(self.index)


class Rows:
    """Rows of numbers kept end to end in one flat list, with where each row ends.

    The plain idea is a tuple per row (a step's grad writes, say). But CPython's cyclic collector
    runs a full collection, which rescans every container alive, after about every 70,000
    containers made; a walk that keeps n steps, each with a few tuples, makes that O(n) times
    over O(n) kept containers. Two lists of numbers are two containers however long the walk:
    a kept step now makes 3 containers (its TapeStep and its Instr's), not 9."""

    def __init__(self):
        self.flat, self.ends = [], []

    def add(self, numbers) -> None:
        self.flat.extend(numbers)
        self.ends.append(len(self.flat))

    def row(self, i: int) -> tuple:
        return tuple(self.flat[self.ends[i - 1] if i else 0:self.ends[i]])

    def pairs(self, i: int) -> tuple:
        row = self.row(i)
        return tuple(zip(row[0::2], row[1::2]))


class StepLog:
    """What each step of one backward_steps walk changed: the grads it wrote, the use counts of
    the slots it read and the slots it freed, and the use counts before the walk. The plain
    idea is a copy of every slot's count in every step, which makes keeping the steps of n
    instructions cost n² (x15 for 4x the instructions); a step keeps its own reads instead, and
    `remaining` is rebuilt for the steps one reads."""

    def __init__(self, counts: list):
        self.start = tuple(counts)
        self.writes, self.uses, self.freed = Rows(), Rows(), Rows()

    def step(self, position, instr, writes, remaining: list, freed) -> TapeStep:
        self.writes.add(number for write in writes for number in write)
        self.uses.add(number for slot in dict.fromkeys(instr.inputs)
                      for number in (slot, remaining[slot]))
        self.freed.add(freed)
        return TapeStep(position, instr, self, len(self.freed.ends) - 1)

    def remaining(self, index: int) -> tuple:
        counts = list(self.start)
        flat = self.uses.flat
        for k in range(0, self.uses.ends[index], 2):
            counts[flat[k]] = flat[k + 1]
        return tuple(counts)


class SlotValueError(MinigradError, ValueError):
    """A number no float64 slot can hold (an int beyond float64's range, about 1.8e308)."""


def float64_of(x, kind: str) -> float:
    """float(x) for a real number x, or a clear error when it does not fit in a float64
    (float() raises a bare OverflowError for an int such as 10**400; numpy refuses it too)."""
    try:
        return float(x)
    except OverflowError:
        digits = len(str(abs(int(x))))
        raise SlotValueError(f"tape.{kind}(<an int of {digits} digits>): a slot holds a float64, "
                             f"whose largest value is about 1.8e308. Fix: scale the number down "
                             f"(or pass float('inf') if infinity is meant).") from None


INPLACE_RULE = ("the slot tape's rule 'every differentiable operation writes a fresh slot' "
                "(SSA): an in-place change would overwrite a value that backward may still need")


class Tape:
    """A tape of float slots; see the module docstring."""

    def __init__(self):
        self.values: list = []
        self.grads: list = []
        self.requires_grad: list[bool] = []
        self.kinds: list[str] = []
        self.names: list = []
        self.generation = 0          # counts reset()s; a Slot remembers the one it was made in
        self._rows: list = []        # the instructions, compactly (see instrs)
        self._instrs: list = []      # Instr views of _rows, built when first read
        self._backwards = 0          # backward passes run on this recording
        self._consumed = False       # a backward without retain=True has run
        self._remaining = None       # the use counts of a backward_steps walk under way

    # -- slots --------------------------------------------------------------------------------
    def var(self, x, name=None) -> Slot:
        """A slot that requires grad (a parameter or an input we differentiate by)."""
        return Slot(self, self._leaf(x, True, "var", name))

    def const(self, x, name=None) -> Slot:
        """A slot that does not require grad (data, a constant factor)."""
        return Slot(self, self._leaf(x, False, "const", name))

    def _leaf(self, x, requires_grad: bool, kind: str, name) -> int:
        if isinstance(x, bool) or not isinstance(x, Real):
            raise DtypeError(f"tape.{kind}({x!r}): a Tape slot holds one float, got "
                             f"{type(x).__name__}. Fix: pass a float, or use TensorTape for "
                             f"arrays.")
        return self._push(float64_of(x, kind), requires_grad, kind, name)

    def _push(self, value, requires_grad: bool, kind: str, name) -> int:
        name = check_name(name, f"tape.{kind}(name=...)")
        slot = len(self.values)
        self.values.append(value)
        self.grads.append(None)
        self.requires_grad.append(requires_grad)
        self.kinds.append(kind)
        self.names.append(name)
        return slot

    @property
    def instrs(self) -> list:
        """The recorded instructions as Instr(op, inputs, output, attrs), oldest first.

        The plain idea is a list of Instr appended by every op. Recording is the hot path, so
        ops append a compact row (op code, a, b, output) instead, and the Instr list is built
        from the rows when someone reads it (it only grows, so each row is converted once).
        The build makes two containers per row (an Instr and its inputs) and no cycle, so the
        cyclic collector is paused while it runs (see gc_paused)."""
        rows, built = self._rows, self._instrs
        if len(built) < len(rows):
            with gc_paused():
                for code, a, b, out in rows[len(built):]:
                    if code < BINARY:
                        built.append(Instr(OP_NAMES[code], (a, b), out, NO_ATTRS))
                    elif code == POW:
                        built.append(Instr("pow", (a,), out, {"exponent": b}))
                    else:
                        built.append(Instr(OP_NAMES[code], (a,), out, NO_ATTRS))
        return built

    def use_counts(self) -> list[int]:
        """How many times each slot is read by a recorded instruction (x * x reads x twice).
        While a backward_steps walk is under way: how many of those reads are still to undo."""
        if self._remaining is not None:
            return list(self._remaining)
        uses = [0] * len(self.values)
        for code, a, b, out in self._rows:
            uses[a] += 1
            if code < BINARY:
                uses[b] += 1
        return uses

    # -- recording ops: the fast path takes int slots; anything else goes through _checked ----
    # Each method computes its value with its rule's forward (rules.py): the formulas live there
    # only. What makes the path fast is the rest: no checks on int slots and a compact row.
    def _record2(self, code: int, value, a: int, b: int) -> int:
        requires_grad = self.requires_grad
        out = len(requires_grad)
        self.values.append(value)
        self.grads.append(None)
        self.names.append(None)
        if requires_grad[a] or requires_grad[b]:
            requires_grad.append(True)
            self.kinds.append("temp")
            self._rows.append((code, a, b, out))
        else:                       # nothing to differentiate: a const, and no instruction
            requires_grad.append(False)
            self.kinds.append("const")
        return out

    def _record1(self, code: int, value, a: int, attr=None) -> int:
        requires_grad = self.requires_grad
        out = len(requires_grad)
        self.values.append(value)
        self.grads.append(None)
        self.names.append(None)
        if requires_grad[a]:
            requires_grad.append(True)
            self.kinds.append("temp")
            self._rows.append((code, a, attr, out))
        else:
            requires_grad.append(False)
            self.kinds.append("const")
        return out

    def add(self, a, b):
        """a + b"""
        if a.__class__ is not int or b.__class__ is not int:
            return self._checked(self.add, "add", a, b)
        values = self.values
        return self._record2(ADD, Add.forward(values[a], values[b]), a, b)

    def sub(self, a, b):
        """a - b"""
        if a.__class__ is not int or b.__class__ is not int:
            return self._checked(self.sub, "sub", a, b)
        values = self.values
        return self._record2(SUB, Sub.forward(values[a], values[b]), a, b)

    def mul(self, a, b):
        """a * b"""
        if a.__class__ is not int or b.__class__ is not int:
            return self._checked(self.mul, "mul", a, b)
        values = self.values
        return self._record2(MUL, Mul.forward(values[a], values[b]), a, b)

    def div(self, a, b):
        """a / b"""
        if a.__class__ is not int or b.__class__ is not int:
            return self._checked(self.div, "div", a, b)
        values = self.values
        return self._record2(DIV, Div.forward(values[a], values[b]), a, b)

    def neg(self, a):
        """-a"""
        if a.__class__ is not int:
            return self._checked(self.neg, "neg", a)
        return self._record1(NEG, Neg.forward(self.values[a]), a)

    def pow(self, a, exponent):
        """a ** exponent, for a constant (float) exponent"""
        exponent = self._exponent(exponent)
        if a.__class__ is not int:
            return self._checked(lambda s: self.pow(s, exponent), "pow", a)
        return self._record1(POW, Pow.forward(self.values[a], exponent=exponent), a, exponent)

    def _exponent(self, exponent) -> float:
        if isinstance(exponent, bool) or not isinstance(exponent, Real):
            raise SlotError(f"tape.pow: the exponent must be a constant number, got "
                            f"{type(exponent).__name__}. Rule: pow differentiates by its base "
                            f"only. Fix: for a slot exponent write exp(b * log(a)).")
        return float(exponent)

    def sin(self, a):
        """sin a"""
        if a.__class__ is not int:
            return self._checked(self.sin, "sin", a)
        return self._record1(SIN, Sin.forward(self.values[a]), a)

    def cos(self, a):
        """cos a"""
        if a.__class__ is not int:
            return self._checked(self.cos, "cos", a)
        return self._record1(COS, Cos.forward(self.values[a]), a)

    def exp(self, a):
        """e^a"""
        if a.__class__ is not int:
            return self._checked(self.exp, "exp", a)
        return self._record1(EXP, Exp.forward(self.values[a]), a)

    def log(self, a):
        """log a (natural)"""
        if a.__class__ is not int:
            return self._checked(self.log, "log", a)
        return self._record1(LOG, Log.forward(self.values[a]), a)

    def tanh(self, a):
        """tanh a"""
        if a.__class__ is not int:
            return self._checked(self.tanh, "tanh", a)
        return self._record1(TANH, Tanh.forward(self.values[a]), a)

    def relu(self, a):
        """max(a, 0)"""
        if a.__class__ is not int:
            return self._checked(self.relu, "relu", a)
        return self._record1(RELU, Relu.forward(self.values[a]), a)

    def apply(self, op: str, *inputs, **attrs):
        """Record op by looking its rule up in rules.RULES by name, checking every input: the
        plain way to do what the methods above do (the benchmark runs both). Slots in, a slot
        out."""
        rule = RULES.get(op)
        if rule is None:
            raise SlotError(f"tape.apply({op!r}): no such op. Ops: {', '.join(OP_NAMES)}.")
        if len(inputs) != rule.arity:
            raise SlotError(f"tape.apply({op!r}): takes {rule.arity} slot(s), got {len(inputs)}.")
        if op == "pow":
            attrs = {"exponent": self._exponent(attrs.get("exponent"))}
        slots = [self.index(x, op) for x in inputs]
        value = self._forward(op, rule, slots, attrs)
        code = OP_NAMES.index(op)
        if code < BINARY:
            out = self._record2(code, value, slots[0], slots[1])
        else:
            out = self._record1(code, value, slots[0], attrs.get("exponent"))
        return Slot(self, out) if any(x.__class__ is Slot for x in inputs) else out

    def _forward(self, op: str, rule, slots, attrs):
        return rule.forward(*[self.values[i] for i in slots], **attrs)

    # -- checking slots -----------------------------------------------------------------------
    def index(self, x, op: str = "use") -> int:
        """The int slot of x (a Slot or an int of this tape), or a clear error."""
        if x.__class__ is Slot:
            if x.tape is not self:
                raise SlotError(f"tape.{op}: slot {x.index} belongs to another tape. Rule: an op "
                                f"reads slots of its own tape only. Fix: record everything on one "
                                f"tape (or copy the value with tape.const(other.value)).")
            if x.generation != self.generation:
                raise StaleSlotError(
                    f"tape.{op}: slot {x.index} was made before tape.reset() (generation "
                    f"{x.generation}, the tape is at {self.generation}). Rule: reset() invalidates "
                    f"every slot. Fix: record the value again after reset(), e.g. tape.var(...).")
            return x.index
        if x.__class__ is int and 0 <= x < len(self.values):
            return x
        if isinstance(x, (Integral, np.integer)) and not isinstance(x, bool):
            x = int(x)          # a numpy integer (np.argmax, an index array) is an index too
            if 0 <= x < len(self.values):
                return x
            raise SlotError(f"tape.{op}: slot {x} does not exist; the tape has {len(self.values)} "
                            f"slots (0..{len(self.values) - 1}). Fix: use a slot the tape "
                            f"returned.")
        raise SlotError(f"tape.{op}: got {type(x).__name__} {x!r} where a slot (an int the tape "
                        f"returned, or a Slot) is needed. Fix: make numbers slots first: "
                        f"tape.const({x!r}) or tape.var({x!r}).")

    def _checked(self, method, op: str, *inputs):
        """The slow path of every op: check and unwrap the inputs, run the int op, and hand back
        a Slot if a Slot came in."""
        result = method(*(self.index(x, op) for x in inputs))
        return Slot(self, result) if any(x.__class__ is Slot for x in inputs) else result

    def inplace_error(self, op: str, slot) -> InplaceError:
        return InplaceError(
            f"{op} on slot {slot} of the tape: in-place operations are refused by {INPLACE_RULE}. "
            f"Fix: write the result to a new slot, `x = x + y` instead of `x += y`.")

    # -- backward -----------------------------------------------------------------------------
    def _seed(self, out, retain: bool) -> int:
        """Check backward may run, clear the grads of the last pass's temps, set d out/d out = 1."""
        out = self.index(out, "backward")
        if self._consumed:
            raise BackwardError(
                f"tape.backward: this recording was already backpropagated. Rule: one backward per "
                f"recording (a retained graph costs memory, so it is asked for, not "
                f"given). Fix: call the first backward as backward(out, retain=True), or reset() "
                f"and record again.")
        if not self.requires_grad[out]:
            raise BackwardError(
                f"tape.backward: slot {out} is a {self.kinds[out]} and does not require grad, so "
                f"there is nothing to differentiate. Fix: make the inputs you want gradients of "
                f"tape.var(...), not tape.const(...).")
        if self._backwards:   # temps keep the previous pass's grads; vars accumulate (like .grad)
            for row in self._rows:
                self._drop_grad(row[3])
        self._backwards += 1
        self._consumed = not retain
        self.grads[out] = self._accumulate(self.grads[out], self._one(out), out)
        return out

    def _one(self, out):
        return 1.0

    def backward(self, out, retain: bool = False, plain: bool = False,
                 create_graph: bool = False) -> None:
        """Gradients of out into tape.grads: undo the instructions newest first.

        The plain loop is `_walk` below (look the rule up, call it, add its results in); plain=True
        runs it. The default calls the same rules, chosen by op code from the compact rows, with
        everything bound to locals and no Instr, use count or TapeStep: it is the hot loop of
        training (benchmarks/tape.py measures both, and tests/test_tape.py checks they agree)."""
        if create_graph:
            raise _no_create_graph()
        if plain:
            for _ in self._walk(out, retain, snapshot=False):
                pass
            return
        self._seed(out, retain)
        values, grads, requires_grad, backward_of = (self.values, self.grads,
                                                     self.requires_grad, BACKWARD)
        for code, a, b, out in reversed(self._rows):
            g = grads[out]
            if g is None:                    # the output never reached the loss
                continue
            if code < BINARY:
                da, db = backward_of[code](g, (values[a], values[b]), values[out])
                if requires_grad[b]:
                    grad = grads[b]
                    grads[b] = db if grad is None else grad + db
            elif code == POW:                # the row keeps pow's exponent where b would be
                da, = backward_of[POW](g, (values[a],), values[out], exponent=b)
            else:
                da, = backward_of[code](g, (values[a],), values[out])
            if requires_grad[a]:
                grad = grads[a]
                grads[a] = da if grad is None else grad + da

    def backward_steps(self, out, retain: bool = False):
        """backward one instruction at a time, with the rules of rules.py: yields a TapeStep per
        instruction, newest first (the seed grad of out is set before the first)."""
        return self._walk(out, retain, snapshot=True)

    def _walk(self, out, retain: bool, snapshot: bool):
        """The plain reverse loop: for each instruction, newest first, run its rule (_undo),
        count its inputs' uses down and release what nobody needs any more."""
        out = self._seed(out, retain)
        instrs = self.instrs
        produced = {instr.output for instr in instrs}
        self._remaining = None
        remaining = self._remaining = self.use_counts()
        log = StepLog(remaining) if snapshot else None   # (what a kept step reads)
        try:
            for position in reversed(range(len(instrs))):
                instr = instrs[position]
                writes = self._undo(instr, snapshot)
                for i in instr.inputs:
                    remaining[i] -= 1
                freed = () if retain else self._dead(instr, remaining, produced)
                self._release(freed)
                yield log.step(position, instr, writes, remaining, freed) if snapshot else position
        finally:   # finished or abandoned: use_counts() reports the recording again
            if self._remaining is remaining:
                self._remaining = None

    def _undo(self, instr: Instr, snapshot: bool) -> tuple:
        """One instruction backwards: its rule turns the output's grad into grads that are added
        into the inputs' grads. Returns (slot, grad) for each grad written."""
        values, grads = self.values, self.grads
        grad_output = grads[instr.output]
        if grad_output is None:              # the output never reached the loss
            return ()
        inputs = [values[i] for i in instr.inputs]
        input_grads = RULES[instr.op].backward(grad_output, inputs, values[instr.output],
                                               **instr.attrs)
        writes = {}
        for i, grad in zip(instr.inputs, input_grads):
            if self.requires_grad[i]:
                grads[i] = self._accumulate(grads[i], grad, i)
                writes[i] = self._snapshot(grads[i]) if snapshot else grads[i]
        return tuple(writes.items())

    def _dead(self, instr: Instr, remaining: list, produced: set) -> tuple:
        """The slots this step leaves unneeded: no reads left and their own instruction undone
        (a rule may read its output, as exp and tanh do). Never a var: its grad is the answer."""
        kinds = self.kinds
        return tuple(dict.fromkeys(
            i for i in (instr.output, *instr.inputs)
            if remaining[i] == 0 and kinds[i] != "var"
            and (i == instr.output or i not in produced)))

    def _accumulate(self, total, grad, slot: int):
        grad = float(grad)     # (a rule given floats returns floats; this keeps it so)
        return grad if total is None else total + grad

    def hand_out(self, x):
        """What slot.value and slot.grad give the caller: a float is immutable, so itself."""
        return x

    def _snapshot(self, grad):
        return grad

    def _drop_grad(self, slot: int) -> None:
        self.grads[slot] = None

    def _release(self, slots) -> None:
        """Floats are kept (freeing one saves nothing); TensorTape gives buffers back here."""

    def zero_grad(self) -> None:
        """Forget every grad, keep every value (and the recording)."""
        for i in range(len(self.grads)):
            self._drop_grad(i)

    def reset(self) -> None:
        """Drop every slot and instruction, keeping the list objects; old slots become stale.

        (A tape of slots in a compiled language truncates to length 0 and keeps the capacity.
        CPython lists have no way to keep their storage when emptied, so what is kept here is the
        list objects themselves; TensorTape keeps the real capacity, its buffers, in the Pool.)"""
        for column in (self.values, self.grads, self.requires_grad, self.kinds, self.names,
                       self._rows, self._instrs):
            column.clear()
        self.generation += 1
        self._remaining = None
        self._backwards = 0
        self._consumed = False

    # -- reading ------------------------------------------------------------------------------
    def table(self) -> str:
        """The slot table as text: slot, kind, name, value, grad, requires_grad, uses."""
        uses = self.use_counts()
        lines = [f"{'slot':>4}  {'kind':<5}  {'name':<6}  {'value':>10}  {'grad':>10}  "
                 f"{'req':<5}  uses"]
        for i, value in enumerate(self.values):
            grad = "-" if self.grads[i] is None else _short(self.grads[i])
            lines.append(f"{i:>4}  {self.kinds[i]:<5}  {self.names[i] or '':<6}  "
                         f"{_short(value):>10}  {grad:>10}  {self.requires_grad[i]!s:<5}  "
                         f"{uses[i]}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({len(self.values)} slots, {len(self._rows)} instructions, "
                f"generation {self.generation})")


def _short(x) -> str:
    if x is None:
        return "(freed)"
    if isinstance(x, float):
        return f"{x:.4g}"
    return f"array{getattr(x, 'shape', '')}"


def _no_create_graph() -> BackwardError:
    return BackwardError(
        "tape.backward(create_graph=True): the scalar tape has no create_graph (nor its tensor "
        "variant). Rule: its backward rules compute gradients as plain values written into "
        "tape.grads, not as instructions "
        "on the tape, so a gradient has no recording to differentiate again. Fix: take "
        "higher-order gradients with the eager engine, mg.grad(..., create_graph=True) (lesson "
        "13), or walk the tape forwards with tangent rules for one more derivative.")
