"""Lesson 01, variables and leaves: check_kind_of."""
from __future__ import annotations

import numpy as np

from ._report import StudentError, call, failed, passed

KINDS = ("parameter", "data", "intermediate")


def _engine_kind(v) -> str:
    """What the engine's own fields say (the same rule the trace's roles follow)."""
    if v.grad_fn is not None:
        return "intermediate"
    return "parameter" if v.requires_grad else "data"


def _cases() -> list:
    """(how the Variable was made, the Variable, why it is what it is), built fresh per check."""
    import minigrad as mg

    w = mg.create_leaf([0.5, -1.0], requires_grad=True, name="w")
    x = mg.create_leaf([2.0, 3.0], name="x")
    with mg.no_grad():
        frozen = w * 3.0
    return [
        ("create_leaf([0.5, -1.0], requires_grad=True)", w,
         "create_leaf with requires_grad=True makes a parameter"),
        ("create_leaf([2.0, 3.0])", x,
         "a leaf that does not require grad is data"),
        ("create_leaf([0, 2, 1])  (integer class labels)", mg.create_leaf([0, 2, 1]),
         "integer data is fine as data; it just can never require grad"),
        ("w * x  (w a parameter, x data)", w * x,
         "an op with an input that requires grad records a node: its output has a grad_fn"),
        ("x * 2.0  (x data)", x * 2.0,
         "an op records a node only when one of its inputs requires grad; here none does, so "
         "the result has grad_fn None and requires_grad False: it is a leaf, i.e. data"),
        ("(w * x).sum()", (w * x).sum(),
         "a reduction is an op like any other: its output has a grad_fn"),
        ("w * 3.0 computed inside `with mg.no_grad():`", frozen,
         "under no_grad() no graph is built: the result is a leaf that does not require grad"),
        ("w.detach()", w.detach(),
         "detach() gives the same numbers as a leaf that does not require grad"),
        ("create_leaf(np.zeros(3, np.float32), requires_grad=True)",
         mg.create_leaf(np.zeros(3, np.float32), requires_grad=True),
         "the dtype does not change the kind: a float32 leaf that requires grad is a parameter"),
        ("x + w  (data first, then a parameter)", x + w,
         "one input that requires grad is enough for the op to record a node"),
    ]


def check_kind_of(kind_of) -> bool:
    """Grade kind_of(v) -> "parameter" | "data" | "intermediate" on ten Variables."""
    name = "check_kind_of"
    cases = _cases()
    for number, (how, v, why) in enumerate(cases, 1):
        expected = _engine_kind(v)
        try:
            got = call(kind_of, v)
        except StudentError as exc:
            return failed(name, f"case {number}: {how}", exc.description)
        if got not in KINDS:
            return failed(name, f"case {number}: {how}",
                          f"your function returned {got!r}",
                          f"return one of the strings {', '.join(repr(k) for k in KINDS)}.")
        if got != expected:
            return failed(name, f"case {number}: {how}",
                          f"expected {expected!r}, your function returned {got!r}\n"
                          f"(this Variable has grad_fn={v.grad_fn!r}, "
                          f"requires_grad={v.requires_grad})",
                          why + ".")
    return passed(name, f"all {len(cases)} Variables classified as the engine sees them")
