"""Steps: what backward_steps() yields, and the compact records the schedulers write.

Stepping must cost plain backward nothing and stepping itself little, so the schedulers write
plain tuples laid out like Step (apply_step, accumulate_step), and an accumulate into a node's
output carries the node's new pending_count in the same record; `expand` turns a group of them
into the Steps a reader sees: the accumulate, a "pending" Step and, at 0, a "ready" Step.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np


class Step(NamedTuple):
    """One event of a backward run, as yielded by backward_steps().

    kind: "start" (seed dL/dL = 1 into the loss), "apply" (node's backward runs, grad = its
    grad_output), "accumulate" (grad added into `variable`, first_write tells assign vs sum),
    "pending" (node's pending_count after a decrement), "ready" (node can run now), "done";
    and "recompute" (a minigrad.checkpoint node ran its segment again, recording it).
    """

    kind: str
    node: object = None
    variable: object = None
    grad: object = None
    pending_count: int | None = None
    first_write: bool | None = None
    total: object = None   # "accumulate": the gradient summed so far (read it before the next
    #                        step: later steps may add to the same array)


PREVIEW = 8   # how many leading values a Step or a trace keeps of an array
_step = functools.partial(tuple.__new__, Step)   # Step(...) without NamedTuple's Python-level
#                                                  __new__: stepping makes several per node


def preview(array) -> np.ndarray:
    """A small copy of an array's first values in C order (cheap even for big arrays)."""
    if type(array) is not np.ndarray:
        array = np.asarray(array)
    return array.flat[:PREVIEW]


def apply_step(node, grad_output) -> tuple:
    return ("apply", node, None, grad_output, None, None, None)


def accumulate_step(node, inputs, parent, grad, count, first) -> tuple:
    """The compact record of one gradient sent to parent, and the count it left (see expand)."""
    fn = parent.grad_fn
    total = parent._grad if fn is None else fn.grad_output
    if sum([x is parent for x in inputs]) > 1:   # x + x: the next write lands before a read
        total = preview(total)
    return ("accumulate", node, parent, grad, count, first, total)


def seed_steps(loss, root, seed) -> list:
    """The Steps of backward's first step: d loss / d loss = 1 (and done, for a leaf loss)."""
    start = Step("start", root, loss, seed, None, True)
    return [start] if root is not None else [start, Step("done")]


def expand(group: list) -> list:
    """The Steps of a compact group (see the module docstring)."""
    steps = []
    for step in group:
        kind, node, variable, grad, count, first_write, total = step
        if kind != "accumulate" or count is None:
            steps.append(_step(step))
            continue
        fn = variable.grad_fn
        steps.append(_step(("accumulate", node, variable, grad, None, first_write, total)))
        steps.append(_step(("pending", fn, variable, None, count, None, None)))
        if count == 0:
            steps.append(_step(("ready", fn, variable, None, 0, None, None)))
    return steps
