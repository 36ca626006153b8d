"""The tape as a JSON document (tape.schema.json): what TapeView draws and save_html keeps.

The document mirrors the tape itself: the slot table as parallel columns (kinds, names,
requires_grad, shapes, values, grads, uses), the instruction list, then backward as frames.
Frame 0 is the tape after forward. Each later frame is a small delta: the seed, then one per
instruction in the order backward runs them -- the grads that step wrote, the use counts it
changed and the slots it freed. A reader folds the deltas from frame 0 to reach any frame, so
a live view receives one small frame per step instead of the whole table again.
"""
from __future__ import annotations

import math

import numpy as np

from .rules import RULES, rule_text

SCHEMA = "minigrad-tape"
VERSION = 1
PREVIEW = 4            # values shown per slot: enough to recognise an array, cheap to send


def numbers(value) -> list:
    """The first PREVIEW numbers of a slot's value (or grad), rounded to 6 significant
    digits; NaN and infinities become null, as JSON has no such numbers."""
    flat = np.asarray(value, dtype=float).reshape(-1)[:PREVIEW]
    return [float(f"{v:.6g}") if math.isfinite(v) else None for v in flat.tolist()]


def _shape(value) -> list:
    return [] if value is None else [int(n) for n in np.shape(value)]


def _text(name) -> str | None:
    return None if name is None else str(name)


def _attrs(attrs: dict) -> dict:
    """Instruction attributes as JSON (numbers stay numbers, anything else becomes text)."""
    out = {}
    for key, value in (attrs or {}).items():
        if isinstance(value, (bool, int, float, str)) or value is None:
            out[str(key)] = value if not isinstance(value, float) or math.isfinite(value) else None
        else:
            out[str(key)] = repr(value)
    return out


def output_slot(tape) -> int:
    """The slot backward starts from when none is given: the last instruction's output, or the
    last slot of a tape that recorded no instruction."""
    if tape.instrs:
        return int(tape.instrs[-1].output)
    if not tape.values:
        raise ValueError("TapeView: the tape is empty (no slot was written). Record a "
                         "computation first: x = tape.var(2.0); y = x * x; TapeView(tape, y).")
    return len(tape.values) - 1


def tape_document(tape, out: int, *, title: str | None = None) -> dict:
    """The tape as it stands (values, grads, use counts) with backward not yet stepped."""
    uses = [int(n) for n in tape.use_counts()]
    ops = sorted({instr.op for instr in tape.instrs})
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "title": title,
        "output": int(out),
        "slots": {
            "kinds": [str(k) for k in tape.kinds],
            "names": [_text(n) for n in tape.names],
            "requires_grad": [bool(r) for r in tape.requires_grad],
            "shapes": [_shape(v) for v in tape.values],
            # (None: a TensorTape gave the value's buffer back to its pool after a backward)
            "values": [None if v is None else numbers(v) for v in tape.values],
            "grads": [None if g is None else numbers(g) for g in tape.grads],
            "uses": uses,
        },
        "instrs": [{"op": str(i.op), "inputs": [int(s) for s in i.inputs],
                    "output": int(i.output), "attrs": _attrs(i.attrs)} for i in tape.instrs],
        "rules": {op: rule_text(op) for op in ops if op in RULES},   # from the docstrings
        "frames": [],
        "done": False,
    }


def seed_frame(tape, out: int, had_grad=()) -> dict:
    """The seed: backward starts with grad(out) = 1 (ones in out's shape). had_grad: which slots
    held a grad before it; a second backward's seed drops the temps' grads of the pass before
    (vars keep theirs, to add to), so each of those is written as null."""
    dropped = [[int(i), None] for i, had in enumerate(had_grad)
               if had and i != out and tape.kinds[i] == "temp"]
    return {"position": None, "grads": [[int(out), numbers(np.ones_like(
        np.asarray(tape.values[out], dtype=float)))]] + dropped, "uses": [], "freed": []}


def step_frame(step, remaining_before: list) -> dict:
    """One backward step (a TapeStep) as a delta: what it wrote, counted down and freed.

    `remaining_before` is the use count of every slot before the step; it is updated in place,
    so the next call compares with the counts after this step."""
    changed = []
    # A step keeps the counts of the slots it read (step.uses): a step costs O(inputs), not
    # O(slots). (Its output's count is not read by its own step: it does not change.)
    for slot, count in step.uses:
        if remaining_before[slot] != count:
            changed.append([int(slot), int(count)])
            remaining_before[slot] = count
    return {
        "position": int(step.position),
        "grads": [[int(slot), numbers(grad)] for slot, grad in step.grad_writes],
        "uses": changed,
        "freed": [int(slot) for slot in step.freed],
    }
