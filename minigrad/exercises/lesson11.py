"""Lesson 11 (saves and memory plans): check_save_list and check_choose_recompute.

The student predicts which forward tensors the backward graph of `exercise_graph()` reads through
`saved.` (the required saves), from the forward graph's text and the rules alone. The check
derives the backward graph and compares the prediction with `compute_required_saves` as a set,
explaining each extra tensor and counting the missing ones (naming them would be the answer).

check_choose_recompute: the student picks the fewest cheap saves to recompute so that
aot.plan_memory(..., policy="recompute", recompute=chosen).peak_bytes fits a budget, or raises,
naming the budget and the lowest peak, when nothing fits. The check plans every choice itself
(_every_choice, which the student's function may not call) and re-plans the student's answer.
"""
from __future__ import annotations

import itertools
import re

import numpy as np

from ._report import StudentError, call, call_own, failed, passed

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


# -- the second exercise: recompute under a memory budget ------------------------------------------
BUDGET_CHECK = "check_choose_recompute"
BUDGET_HINTS = (   # graded: the idea first, then the shape of the code
    "a save only lowers the peak if it is alive at the peak step, so bytes alone do not decide: "
    "try the choices of 0 candidates, then of 1, then of 2, ... and keep the first that fits",
    "for k in range(len(candidates) + 1): for chosen in itertools.combinations(candidates, k): "
    "if aot.plan_memory(forward, backward, policy='recompute', recompute=list(chosen)).peak_bytes "
    "<= budget_bytes: return list(chosen)",
)
IMPOSSIBLE_HINT = ("when no choice fits, raise an exception whose message names the budget and the "
                   "smallest peak any choice reaches, both in bytes (e.g. ValueError(f'... "
                   "{budget_bytes} ... {lowest} ...'))")


def budget_graphs() -> dict:
    """Small networks for the budget exercise: name -> (forward, backward). Layers h = tanh(h W) * g
    as in the lesson, of unequal widths, so that the biggest save is not always the one to drop."""
    import minigrad as mg
    from minigrad import aot

    rng = np.random.default_rng(23)
    graphs = {}
    for name, widths, batch in (("4 layers 12-40-24-40-8", (12, 40, 24, 40, 8), 32),
                                ("4 layers of 16", (16, 16, 16, 16, 16), 24),
                                ("3 layers 8-48-48-8", (8, 48, 48, 8), 64)):
        params = {}
        for i, (n_in, n_out) in enumerate(zip(widths, widths[1:])):
            params[f"W{i}"] = mg.create_leaf(rng.normal(scale=0.4, size=(n_in, n_out)),
                                             requires_grad=True, name=f"W{i}")
            params[f"g{i}"] = mg.create_leaf(rng.normal(size=(n_out,)), requires_grad=True,
                                             name=f"g{i}")

        def net(x, y, params=params, n=len(widths) - 1):
            h = x
            for i in range(n):
                h = (h @ params[f"W{i}"]).tanh() * params[f"g{i}"]
            return mg.cross_entropy(h, y)

        x, y = rng.normal(size=(batch, widths[0])), rng.integers(0, widths[-1], size=batch)
        forward = aot.capture(net, x, y, params=params, input_names=["x", "y"])
        graphs[name] = (forward, aot.derive_backward_graph(forward))
    return graphs


def _every_choice(forward, backward) -> dict:
    """The check's own search: (chosen candidates) -> peak bytes, for every subset."""
    from minigrad import aot

    candidates = aot.plan_memory(forward, backward, policy="recompute").recomputed
    return {chosen: aot.plan_memory(forward, backward, policy="recompute",
                                    recompute=list(chosen)).peak_bytes
            for k in range(len(candidates) + 1)
            for chosen in itertools.combinations(candidates, k)}


def _names_number(message: str, number: int) -> bool:
    """Whether message writes number, with or without thousands separators (1,234 or 1_234)."""
    plain = re.sub(r"(?<=\d)[,_](?=\d{3}\b)", "", message)
    return re.search(rf"(?<![\d.]){number}(?![\d.])", plain) is not None


def check_choose_recompute(choose_recompute) -> bool:
    """choose_recompute(forward, backward, budget_bytes) -> the fewest cheap saves to recompute
    so that the plan's peak fits; an exception naming the budget and the lowest peak if none does."""
    from minigrad import aot

    def catching(*args):        # a raised exception is an answer here (for a budget nobody meets)
        try:
            return "returned", choose_recompute(*args)
        except NotImplementedError:
            raise
        except Exception as exc:   # noqa: BLE001 - any exception the student chose to raise
            return "raised", exc

    for graph_name, (forward, backward) in budget_graphs().items():
        peaks = _every_choice(forward, backward)
        candidates = max(peaks, key=len)
        lowest = min(peaks.values())
        levels = sorted(set(peaks.values()), reverse=True)
        budgets = levels + [(levels[0] + levels[1]) // 2 if len(levels) > 1 else levels[0],
                            lowest - 1]
        for budget in budgets:
            case = f"{graph_name}, budget {budget:,} bytes"
            try:
                how, answer = call_own(catching, (_every_choice,), forward, backward, budget)
            except StudentError as err:
                return failed(BUDGET_CHECK, case, err.description, BUDGET_HINTS)
            fitting = [chosen for chosen, peak in peaks.items() if peak <= budget]
            if not fitting:
                if how == "returned":
                    return failed(BUDGET_CHECK, case,
                                  f"returned {answer!r}, but no choice fits: the lowest peak any "
                                  f"choice of {list(candidates)} reaches is {lowest:,} bytes.",
                                  IMPOSSIBLE_HINT)
                message = f"{type(answer).__name__}: {answer}"
                missing = [what for what, number in (("the budget", budget), ("the lowest peak", lowest))
                           if not _names_number(str(answer), number)]
                if missing:
                    return failed(BUDGET_CHECK, case,
                                  f"raised {message}\nbut the message does not name "
                                  f"{' and '.join(missing)} ({budget} and {lowest} bytes).",
                                  IMPOSSIBLE_HINT)
                continue
            fewest = min(fitting, key=len)
            if how == "raised":
                return failed(BUDGET_CHECK, case,
                              f"raised {type(answer).__name__}: {answer}\nbut recomputing "
                              f"{list(fewest)} fits (peak {peaks[fewest]:,} bytes).", BUDGET_HINTS)
            if isinstance(answer, str) or not hasattr(answer, "__iter__"):
                return failed(BUDGET_CHECK, case, f"returned {answer!r}; return a list of saved "
                                                  f"tensor names such as ['mul_2']")
            chosen = [str(name) for name in answer]
            strangers = [name for name in chosen if name not in candidates]
            if strangers or len(set(chosen)) != len(chosen):
                return failed(BUDGET_CHECK, case,
                              f"returned {chosen}: choose each name once, among the cheap saves "
                              f"{list(candidates)}" + (f" ({strangers[0]!r} is not one)" if strangers else ""))
            peak = aot.plan_memory(forward, backward, policy="recompute",
                                   recompute=chosen).peak_bytes     # planned here, not trusted
            if peak > budget:
                return failed(BUDGET_CHECK, case,
                              f"recomputing {chosen} peaks at {peak:,} bytes, over the budget by "
                              f"{peak - budget:,}.", BUDGET_HINTS)
            if len(chosen) > len(fewest):
                return failed(BUDGET_CHECK, case,
                              f"recomputing {chosen} fits (peak {peak:,}), but {list(fewest)} fits "
                              f"too and recomputes {len(fewest)} tensor(s), not {len(chosen)}.",
                              BUDGET_HINTS)
    return passed(BUDGET_CHECK, "every budget met with as few recomputed tensors as any choice "
                                "(every choice was tried), and a budget below the lowest peak "
                                "refused with both numbers")
