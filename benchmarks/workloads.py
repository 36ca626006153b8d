"""The graphs benchmarks/scale.py times and tests/test_scale.py counts on, defined once.

(The tests load this file by its path, as they load the other benchmark modules.)
"""
from __future__ import annotations

import numpy as np

import minigrad as mg


def chain(n_ops: int):
    """n_ops tiny ops in a row (tanh and mul alternately) and a sum: the loss."""
    x = mg.create_leaf(np.ones(4), requires_grad=True, name="x")
    w = mg.create_leaf(np.full(4, 0.5), requires_grad=True, name="w")
    h = x
    for i in range(n_ops):
        h = h.tanh() if i % 2 == 0 else h * w
    return h.sum()


def chain_with_unused_consumers(links: int) -> tuple:
    """(x, w, loss): a chain whose every link also feeds a branch the loss does not use (a value
    logged, a metric): each link's pending count waits for a consumer that never sends a
    gradient."""
    x = mg.create_leaf(np.ones(4), requires_grad=True, name="x")
    w = mg.create_leaf(np.full(4, 0.5), requires_grad=True, name="w")
    h = x
    for _ in range(links):
        h = h * w
        h.exp()                        # the unused consumer (dropped at once)
    return x, w, h.sum()


def scoped_blocks(n_blocks: int):
    """n_blocks blocks of a few ops, each in a scope: the graph a lesson draws as boxes."""
    rng = np.random.default_rng(0)
    h = mg.create_leaf(rng.normal(size=(2, 3)), name="x")
    for i in range(n_blocks):
        with mg.name_scope(f"blocks.{i}"):
            W = mg.create_leaf(rng.normal(size=(3, 3)), requires_grad=True, name="W")
            with mg.name_scope("act"):
                h = (h @ W).tanh()
    return (h * h).sum()


def tape_chain(n_instrs: int) -> tuple:
    """(tape, x, out): n_instrs instructions on a slot tape, sin and mul by x alternately."""
    tape = mg.tape.Tape()
    x = tape.var(0.5)
    h = x
    for i in range(n_instrs):
        h = h.sin() if i % 2 == 0 else h * x
    return tape, x, h
