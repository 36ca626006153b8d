"""Lesson 09 (memory): the lesson's MLP, measure_peak, and check_fit_budget.

The student writes fit_budget(n_layers, budget, measure): a checkpoint plan, a list of
(start, stop) layer ranges, each run with minigrad.checkpoint (layers outside every range are
kept as usual), whose measured peak fits the budget while recomputing as few layers as
possible; or None when no plan fits. measure(plan) runs one training step with that plan inside
a fresh Pool and returns the pool's high-water mark in bytes.

The check measures the returned plan itself, and compares the number of layers it recomputes
with the best plan of the family the lesson describes (keep the last layers, checkpoint the
first ones in segments of equal length), found by trying them all.
"""
from __future__ import annotations

import numpy as np

from ..arena import Pool
from ..checkpointing import checkpoint
from ..ops import linear, mse, relu
from ..eager.variable import create_leaf
from ._report import StudentError, call, failed, passed

CHECK = "check_fit_budget"
WIDTH, BATCH = 64, 32


def make_mlp(n_layers: int, seed: int = 0) -> list:
    """n_layers (W, b) pairs of a WIDTH-wide MLP, float32 (He initialisation)."""
    rng = np.random.default_rng(seed)
    return [(create_leaf((rng.normal(size=(WIDTH, WIDTH)) * np.sqrt(2 / WIDTH))
                         .astype(np.float32), requires_grad=True, name=f"W{i}"),
             create_leaf(np.zeros(WIDTH, np.float32), requires_grad=True, name=f"b{i}"))
            for i in range(n_layers)]


def layers(h, *params):
    """relu(h W + b) for each (W, b) in turn; params is W0, b0, W1, b1, ..."""
    for W, b in zip(params[::2], params[1::2]):
        h = relu(linear(h, W, b))
    return h


def run_plan(x, params: list, plan) -> object:
    """The MLP's output, each (start, stop) of plan checkpointed, other layers kept."""
    h, i = x, 0
    for start, stop in sorted(plan):
        h = layers(h, *[p for pair in params[i:start] for p in pair])
        h = checkpoint(layers, h, *[p for pair in params[start:stop] for p in pair])
        i = stop
    return layers(h, *[p for pair in params[i:] for p in pair])


def measure_peak(n_layers: int, plan, seed: int = 0) -> int:
    """Bytes: the high-water mark of a fresh Pool over one forward and backward with plan."""
    params = make_mlp(n_layers, seed)
    rng = np.random.default_rng(seed + 1)
    x = create_leaf(rng.normal(size=(BATCH, WIDTH)).astype(np.float32), name="x")
    target = create_leaf(rng.normal(size=(BATCH, WIDTH)).astype(np.float32), name="y")
    pool = Pool("graph")
    with pool.scope():
        mse(run_plan(x, params, plan), target).backward()
    return pool.high_water


def family(n_layers: int):
    """Plans of the lesson's family, fewest recomputed layers first: keep the last `kept`
    layers, checkpoint the first n_layers - kept in segments of k layers."""
    for kept in range(n_layers, -1, -1):
        m = n_layers - kept
        for k in range(1, m + 1):
            yield [(s, min(s + k, m)) for s in range(0, m, k)]
        if m == 0:
            yield []


def recomputed(plan) -> int:
    return sum(stop - start for start, stop in plan)


def best_in_family(n_layers: int, budget: int, peak_of):
    for plan in family(n_layers):
        if peak_of(plan) <= budget:
            return plan
    return None


def _valid(plan, n_layers: int) -> str:
    """'' if plan is a list of in-order, non-overlapping (start, stop) ranges, else why not."""
    if not isinstance(plan, (list, tuple)):
        return f"returned a {type(plan).__name__}, not a list of (start, stop) pairs (or None)"
    last = 0
    for item in plan:
        if not (isinstance(item, (list, tuple)) and len(item) == 2
                and all(isinstance(v, (int, np.integer)) for v in item)):
            return f"{item!r} is not a (start, stop) pair of ints"
        start, stop = item
        if not last <= start < stop <= n_layers:
            return (f"({start}, {stop}) is not a range of layers after the previous one "
                    f"(0 <= start < stop <= {n_layers}, in order, not overlapping)")
        last = stop
    return ""


def check_fit_budget(fit_budget) -> bool:
    """fit_budget(n_layers, budget, measure) -> plan or None; measured against the budget."""
    n, peaks = 12, {}

    def peak_of(plan) -> int:   # (deterministic: each plan is measured once)
        key = tuple(map(tuple, plan))
        if key not in peaks:
            peaks[key] = measure_peak(n, plan)
        return peaks[key]

    keep = peak_of([])
    lowest = min(peak_of(plan) for plan in family(n))
    cases = [("a budget keep fits", keep), ("60% of keep", int(0.6 * keep)),
             ("35% of keep", int(0.35 * keep)), ("below anything possible", lowest - 1)]
    for name, budget in cases:
        case = f"{n} layers, budget {budget:,} bytes ({name})"
        def measure(plan):
            problem = _valid(plan, n)
            if problem:
                raise ValueError(f"measure({plan!r}): {problem}")
            return measure_peak(n, plan)

        try:
            plan = call(fit_budget, n, budget, measure)
        except StudentError as err:
            return failed(CHECK, case, err.description)
        best = best_in_family(n, budget, peak_of)
        if best is None:
            if plan is not None:
                return failed(CHECK, case, f"returned {plan!r}, but no plan of the family fits "
                                           f"(the lowest peak is {lowest:,} bytes).",
                              "return None when nothing fits")
            continue
        if plan is None:
            return failed(CHECK, case, f"returned None, but {best!r} fits.",
                          "try every plan of the family, fewest recomputed layers first")
        problem = _valid(plan, n)
        if problem:
            return failed(CHECK, case, problem)
        peak = measure_peak(n, plan)   # measured again here, not taken from the student
        if peak > budget:
            return failed(CHECK, case, f"the plan {plan!r} peaks at {peak:,} bytes, over the "
                                       f"budget by {peak - budget:,}.",
                          "keep only a plan whose measure(plan) <= budget")
        if recomputed(plan) > recomputed(best):
            return failed(CHECK, case, f"the plan {plan!r} recomputes {recomputed(plan)} layers; "
                                       f"{best!r} fits too and recomputes {recomputed(best)}.",
                          "try plans with fewer checkpointed layers first (keep more)")
    return passed(CHECK, f"every plan fits its measured budget with as few recomputed layers "
                         f"as the best plan of the family; None when nothing fits "
                         f"(keep peaks at {keep:,} bytes, the lowest plan at {lowest:,})")
