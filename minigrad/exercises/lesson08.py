"""Lesson 08 (the tape): check_reverse_loop.

The student writes reverse_loop(tape, out): the tape's backward, newest instruction first, with
the rules of minigrad.tape.RULES. The check records random functions (fan-out, x * x, consts,
dead branches) twice: on a tape for the student, whose own backward is switched off, and on
minigrad's eager engine with 0-d Variables; the vars' grads must equal the eager leaves' grads,
and no const or unreached slot may get a grad.
"""
from __future__ import annotations

import numpy as np

from ..tape import Tape
from ..eager.variable import create_leaf
from ._report import StudentError, call, failed, passed

CHECK = "check_reverse_loop"
N_FUNCTIONS = 40


class _Walked(list):
    """tape.instrs as the check hands it out: notes the direction the student walks it in."""
    forward = reverse = False

    def __iter__(self):
        self.forward = True
        return super().__iter__()

    def __reversed__(self):
        self.reverse = True
        return super().__reversed__()


START_HINTS = (   # graded: the idea first, the steps only after more failing runs
    "out's own grad is 1; every other grad is built by undoing the recorded instructions, "
    "newest first, each one passing its output's grad on to its inputs",
    "seed the grad of out with 1.0, walk tape.instrs from the end, and for each instruction "
    "whose output has a grad, let its rule (RULES[instr.op].backward) turn that grad into its "
    "inputs' grads, which you add in")
FORWARD_HINT = ("your loop walks tape.instrs in recording order. Backward must undo them newest "
                "first: an instruction's output grad is complete only after every later "
                "instruction that reads it has run. Loop over reversed(tape.instrs)")


class _CheckTape(Tape):
    """A tape whose backward is off, so the gradients must come from the student's loop."""

    walks: list

    @property
    def instrs(self) -> list:
        walked = _Walked(super().instrs)
        self.__dict__.setdefault("walks", []).append(walked)
        return walked

    def walked_forward(self) -> bool:
        return any(w.forward and not w.reverse for w in self.__dict__.get("walks", []))

    def backward(self, out, retain=False, plain=False):
        raise RuntimeError("tape.backward is switched off in this check: write the loop yourself")

    def backward_steps(self, out, retain=False):
        raise RuntimeError("tape.backward_steps is switched off in this check: write the loop "
                           "yourself")


def random_function(seed: int, make_var, make_const):
    """Record one random function with make_var/make_const (tape slots or Variables).

    Returns (vars, consts, out, dead): out is the sum of a few values; dead are values computed
    but not part of out. Only ops both engines have, kept inside their domains."""
    rng = np.random.default_rng(seed)
    xs = [make_var(float(v)) for v in rng.uniform(-1.5, 1.5, int(rng.integers(1, 4)))]
    cs = [make_const(float(v)) for v in rng.uniform(0.5, 2.0, int(rng.integers(1, 3)))]
    values = xs + cs
    for _ in range(int(rng.integers(3, 12))):
        a = values[int(rng.integers(len(values)))]
        b = values[int(rng.integers(len(values)))]
        kind = int(rng.integers(9))
        if kind == 0:
            out = a + b
        elif kind == 1:
            out = a * b
        elif kind == 2:
            out = a - b
        elif kind == 3:
            out = a.tanh()
        elif kind == 4:
            out = a * a                       # one value read twice by one op
        elif kind == 5:
            out = (a * 0.5).exp()
        elif kind == 6:
            out = a / (b * b + 1.0)
        elif kind == 7:
            out = (a * a + 1.0).log() ** 2.0
        else:
            out = -a.relu()
        values.append(out)
    picks = rng.choice(len(values), size=min(3, len(values)), replace=False)
    total = values[int(picks[0])]
    for i in picks[1:]:
        total = total + values[int(i)]
    dead = [values[-1].tanh() * 3.0]          # computed, never part of out
    return xs, cs, total, dead


def check_reverse_loop(reverse_loop) -> bool:
    """Run reverse_loop(tape, out) on random functions; compare with the eager engine."""
    for seed in range(N_FUNCTIONS):
        tape = _CheckTape()
        xs, cs, out, dead = random_function(seed, tape.var, tape.const)
        case = (f"random function {seed} ({len(tape.instrs)} instructions, {len(xs)} vars, "
                f"{len(cs)} consts)")
        if not out.requires_grad:    # a function of consts only: nothing to check here
            continue
        try:
            call(reverse_loop, tape, out)
        except StudentError as err:
            return failed(CHECK, case, err.description, START_HINTS)
        vs, _, eager_out, _ = random_function(
            seed, lambda v: create_leaf(v, requires_grad=True), create_leaf)
        eager_out.backward()
        for k, (x, v) in enumerate(zip(xs, vs)):
            want = None if v.grad is None else float(v.grad)
            got = tape.grads[x.index]
            if (got is None) != (want is None):
                return failed(CHECK, case, f"var {k} (slot {x.index}): your grad is {got}, the "
                                           f"eager engine gives {want}.",
                              FORWARD_HINT if tape.walked_forward() else
                              "a var the output does not depend on keeps grad None; one it does "
                              "depend on gets one: skip an instruction whose output grad is None, "
                              "run every other")
            if got is not None and not np.isclose(got, want, rtol=1e-10, atol=1e-12):
                return failed(CHECK, case, f"var {k} (slot {x.index}): your grad is {got:.10g}, "
                                           f"the eager engine gives {want:.10g}.",
                              FORWARD_HINT if tape.walked_forward() else
                              "add into a grad that is already there (a slot read twice, as in "
                              "x * x, gets two contributions); never overwrite it")
        written = [i for i, g in enumerate(tape.grads)
                   if g is not None and not tape.requires_grad[i]]
        if written:
            return failed(CHECK, case, f"slots {written} are consts but got a grad.",
                          "only slots with tape.requires_grad[i] True receive a grad")
        for slot in dead:
            if tape.grads[slot.index] is not None:
                return failed(CHECK, case, f"slot {slot.index} is not part of out but got a grad.",
                              "start from out only: tape.grads[out] = 1.0, and skip "
                              "instructions whose output grad is None")
    return passed(CHECK, f"{N_FUNCTIONS} random functions (fan-out, x * x, consts, dead "
                         f"branches): the vars' grads equal the eager engine's")
