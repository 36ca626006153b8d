"""Lesson 11 (saves and memory plans): check_save_list.

The student predicts which forward tensors the backward graph of `exercise_graph()` reads through
`saved.` (the required saves), from the forward graph's text and the rules alone. The check
derives the backward graph and compares the prediction with `compute_required_saves` as a set,
explaining each extra tensor and counting the missing ones (naming them would be the answer).
"""
from __future__ import annotations

import numpy as np

from ._report import StudentError, call, failed, passed

CHECK = "check_save_list"


def exercise_graph():
    """h = x @ W + b; r = relu(h); e = exp(r); s = r * e; logits = s @ V; loss = CE(logits, y)."""
    import minigrad as mg
    from minigrad import aot

    rng = np.random.default_rng(11)
    params = {name: mg.create_leaf(rng.normal(scale=0.5, size=shape), requires_grad=True,
                                   name=name)
              for name, shape in (("W", (3, 5)), ("b", (5,)), ("V", (5, 2)))}

    def named(v, name):
        v.name = name          # capture names the tensor after the Variable
        return v

    def f(x, y):
        h = named(x @ params["W"] + params["b"], "h")
        r = named(h.relu(), "r")
        e = named(r.exp(), "e")
        s = named(r * e, "s")
        logits = named(s @ params["V"], "logits")
        return mg.cross_entropy(logits, y)

    x, y = rng.normal(size=(4, 3)), np.array([0, 1, 1, 0])
    return aot.capture(f, x, y, params=params, input_names=["x", "y"])


def check_save_list(predicted_saves) -> bool:
    """Compare the student's predicted save list with compute_required_saves of the derivation."""
    from minigrad import aot

    forward = exercise_graph()
    backward = aot.derive_backward_graph(forward)
    truth = set(aot.compute_required_saves(backward))
    case = "predicted_saves() for exercise_graph()"
    try:
        answer = call(predicted_saves)
    except StudentError as err:
        return failed(CHECK, case, err.description)
    if isinstance(answer, str) or not hasattr(answer, "__iter__"):
        return failed(CHECK, case, f"returned {answer!r}; return a list of tensor names such as "
                                   f"['x', 'h']")
    got = {str(name).removeprefix("saved.") for name in answer}
    if got == truth:
        return passed(CHECK, f"the save list is {sorted(truth)}: every forward tensor backward reads "
                             f"through saved., and nothing else")
    # the names the student wrote are explained one by one; the missing ones are only counted,
    # since naming them would be the answer
    lines = []
    missing = len(truth - got)
    if missing:
        lines.append(f"missing {missing} tensor{'s' * (missing > 1)} that backward reads "
                     f"through saved.: go through the forward operations one by one")
    for name in sorted(got - truth):
        if name in forward.params:
            why = "a parameter: rules read it directly, it lives for the whole run anyway"
        elif name not in forward.shape_env:
            why = f"not a tensor of the graph (its tensors: {', '.join(forward.shape_env)})"
        else:
            why = "no backward operation reads it: the rules of its consumers do not need its value"
        lines.append(f"extra {name}: {why}")
    return failed(CHECK, case, "\n".join(lines),
                  "for each forward operation ask what its backward formula reads: relu' needs "
                  "its input, exp' its output, a product the other operand, a matmul's dW the "
                  "other operand, cross_entropy the logits and targets; bias_add reads nothing")
