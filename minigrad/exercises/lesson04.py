"""Lesson 04 (dependency counting): check_pending_backward.

The student writes pending_backward(loss, pick): backward by pending counts, taking the next
node from the ready list with pick(ready). The check runs it on random graphs (each built twice:
once for the student, once for the library's engine) with a shuffled pick and compares the leaf
gradients with minigrad.backward(order="pending").
"""
from __future__ import annotations

import random

import numpy as np

from ..eager.engine import backward
from ..eager.variable import create_leaf
from ._report import StudentError, call, failed, passed

CHECK = "check_pending_backward"
N_GRAPHS = 40


def random_graph(seed: int):
    """A random graph over a few (3,) leaves, with no dead branches.

    Returns (loss, parameters). Every op's output is used, in the end, by the loss: values that no
    later op consumed are summed into it. Built from `seed` alone, so two calls with one seed give
    two separate but identical graphs. Includes diamonds (x + x, x * x) and data leaves.
    """
    rng = np.random.default_rng(seed)
    values, params = [], []
    for i in range(int(rng.integers(2, 5))):
        requires_grad = i == 0 or rng.random() < 0.7
        leaf = create_leaf(rng.normal(size=3), requires_grad=requires_grad, name=f"x{i}")
        values.append(leaf)
        if requires_grad:
            params.append(leaf)
    used = set()

    def take():
        v = values[int(rng.integers(len(values)))]
        used.add(id(v))
        return v

    for _ in range(int(rng.integers(3, 13))):
        kind = int(rng.integers(7))
        a = take()
        if kind == 0:
            out = a + take()
        elif kind == 1:
            out = a * take()
        elif kind == 2:
            out = a - take()
        elif kind == 3:
            out = a.tanh()
        elif kind == 4:
            out = a + a                     # the diamond: two edges from one value
        elif kind == 5:
            out = a * float(rng.uniform(0.5, 2.0))
        else:
            out = a.sigmoid() * a
        values.append(out)
    loss = None
    for v in values:
        if id(v) not in used and v.requires_grad:
            term = v.sum()
            loss = term if loss is None else loss + term
    return loss, params


def _count_nodes(loss) -> int:
    seen, stack = set(), [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        stack.extend(v.grad_fn for v in node.inputs)
    return len(seen)


class _ShuffledPick:
    """pick(ready): remove and return a random node; counts calls and stops runaway loops."""

    def __init__(self, seed: int, limit: int):
        self.rng = random.Random(seed)
        self.calls = 0
        self.limit = limit
        self.problem = None   # what went wrong inside pick, reported without a traceback line

    def __call__(self, ready: list):
        self.calls += 1
        if self.calls > self.limit:
            self.problem = (f"pick() was called {self.calls} times for a graph of "
                            f"{self.limit // 4} nodes, so the check stopped your loop.")
            raise RuntimeError(self.problem)
        if not isinstance(ready, list) or not ready:
            self.problem = f"pick() was given {ready!r}; it takes the list of ready nodes."
            raise RuntimeError(self.problem)
        i = self.rng.randrange(len(ready))
        ready[i], ready[-1] = ready[-1], ready[i]
        return ready.pop()


def check_pending_backward(pending_backward) -> bool:
    """Run pending_backward(loss, pick) on random graphs; compare leaf grads with the engine."""
    for seed in range(N_GRAPHS):
        loss, params = random_graph(seed)
        n_nodes = _count_nodes(loss)
        pick = _ShuffledPick(seed, 4 * n_nodes)
        case = (f"random graph {seed} ({n_nodes} nodes, {len(params)} parameters), "
                f"shuffled pick")
        try:
            call(pending_backward, loss, pick)
        except StudentError as err:
            if pick.problem is not None:
                return failed(CHECK, case, pick.problem,
                              "a node goes on the ready list once, when its pending count "
                              "reaches 0, and pick(ready) takes it off; loop while ready is "
                              "not empty")
            return failed(CHECK, case, err.description)
        want_loss, want_params = random_graph(seed)
        backward(want_loss, order="pending")
        if pick.calls == 0:
            return failed(CHECK, case, "pick(ready) was never called.",
                          "take each next node with node = pick(ready), so the check can run "
                          "your loop in a random order")
        for got, want in zip(params, want_params):
            if got.grad is None:
                return failed(CHECK, case, f"{got.name}.grad is None; the engine gives "
                                           f"{np.round(want.grad, 6)}.",
                              "the gradient never reached this leaf: does every node run? A "
                              "parent's pending count must drop once per edge, and the node "
                              "goes on the ready list when it reaches 0")
            if not np.allclose(got.grad, want.grad, rtol=1e-9, atol=1e-12):
                return failed(CHECK, case,
                              f"{got.name}.grad = {np.round(got.grad, 6)}\n"
                              f"engine gives  {np.round(want.grad, 6)}",
                              "a node that runs before all its consumers have sent their "
                              "gradient passes on a partial sum; a node that runs twice counts "
                              "its gradient twice. Accumulate with minigrad.accumulate_grad, "
                              "then decrement the parent's pending_count")
        if pick.calls != n_nodes:
            return failed(CHECK, case, f"pick() was called {pick.calls} times for {n_nodes} "
                                       f"nodes.",
                          "each node should be picked exactly once")
    return passed(CHECK, f"{N_GRAPHS} random graphs (diamonds included), shuffled order: leaf "
                         f"gradients equal backward(order='pending')")
