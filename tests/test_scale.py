"""Cost that grows with the work (issue 20): the algorithms, pinned by what they touch.

Timings are for benchmarks/scale.py; here each part is made to count what it reads or keeps, on a
graph big enough that a quadratic walk would be off by orders of magnitude, and the count is held
to a small multiple of the size of the work.
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np

import minigrad as mg
from minigrad.function import Function


def chain_with_unused_consumers(links: int):
    """Every link of the chain also feeds a branch the loss does not use."""
    x = mg.create_leaf(np.ones(3), requires_grad=True, name="x")
    w = mg.create_leaf(np.full(3, 0.5), requires_grad=True, name="w")
    h = x
    for _ in range(links):
        h = h * w
        h.exp()                      # an unused consumer: h's pending count never reaches 0
    return x, w, h.sum()


@contextmanager
def counting_released_reads():
    """Count every read of node.released (the scheduler's test of "has this node run?")."""
    slot = Function.__dict__["released"]
    reads = [0]

    def read(node):
        reads[0] += 1
        return slot.__get__(node, type(node))

    Function.released = property(read, slot.__set__)
    try:
        yield reads
    finally:
        Function.released = slot


def test_pending_scheduler_looks_at_each_node_a_few_times_when_every_link_stalls():
    links = 1500
    x, w, loss = chain_with_unused_consumers(links)
    with counting_released_reads() as reads:
        loss.backward(order="pending")
    # ~links stalls; a rescan of everything reached at each would read ~links²/2 = 1.1 million
    assert reads[0] <= 12 * links, reads[0]
    np.testing.assert_allclose(w.grad, links * 0.5 ** (links - 1) * np.ones(3), rtol=1e-9)
    assert x.grad is not None


def test_pending_and_topo_agree_when_every_link_stalls():
    grads = {}
    for order in ("pending", "topo"):
        x, w, loss = chain_with_unused_consumers(40)
        loss.backward(order=order)
        grads[order] = (x.grad.copy(), w.grad.copy())
    for a, b in zip(grads["pending"], grads["topo"]):
        np.testing.assert_allclose(a, b, rtol=1e-12)
