"""Scenarios whose trace documents are pinned in this folder (see tests/test_trace_golden.py):
a refactor of minigrad/trace/ must leave every one unchanged, every field exactly but the
floats, which must agree within their dtype's tolerance (tests/golden.py).

Each scenario returns a list of documents: several when a trace is read half way (the stepper
reads it after every step), one otherwise. Regenerate the fixtures only when the document is
meant to change, from the repository root:  .venv/bin/python tests/trace_golden/scenarios.py
"""
from __future__ import annotations

import json
import pathlib

import numpy as np

import minigrad as mg
from minigrad.eager.engine import compact_groups
from minigrad.trace import Recorder

HERE = pathlib.Path(__file__).parent


def _mlp_step(allocator=None, order="pending"):
    X, y, _, _ = mg.data.digits_split()
    model = mg.nn.MLP([64, 16, 10], seed=0)
    with mg.record("mlp step") as rec:
        if allocator is None:
            x = mg.create_leaf(X[:8], name="x")
            mg.cross_entropy(model(x), y[:8]).backward(order)
        else:
            with allocator.scope():
                x = mg.create_leaf(X[:8], name="x")
                mg.cross_entropy(model(x), y[:8]).backward(order)
    return [rec.trace]


def mlp_heap():
    return _mlp_step()


def mlp_heap_topo():
    return _mlp_step(order="topo")


def mlp_arena():
    return _mlp_step(mg.Arena("graph", 1 << 16))


def mlp_pool():
    return _mlp_step(mg.Pool("pool"))


def diamond_shared_input():
    """x + x, a value feeding two ops, leaf grads written several times, a shuffled queue."""
    with mg.record("diamond") as rec:
        x = mg.create_leaf([1.0, -2.0, 0.5], requires_grad=True, name="x")
        w = mg.create_leaf([[0.5, -1.0], [2.0, 0.25], [1.0, 1.0]], requires_grad=True, name="w")
        h = (x * 3.0).tanh()
        z = ((h + h) * h).sum() + (h @ w).sum() + x.sum()
        z.backward(shuffle=3)
    return [rec.trace]


def dead_branch():
    """A consumer the loss does not depend on: the engine runs the stalled node."""
    with mg.record("dead branch") as rec:
        a = mg.create_leaf([1.0, 2.0], requires_grad=True, name="a")
        h = a.exp()
        unused = h * 2.0   # noqa: F841  (kept alive: its edge keeps h's count up)
        (h.sum()).backward()
    return [rec.trace]


def leaf_loss_and_ops_zoo():
    """Backward from a leaf; then many ops with ctx data (axes, shapes, indices)."""
    with mg.record("zoo") as rec:
        s = mg.create_leaf(2.0, requires_grad=True, name="s")
        s.backward()
        m = mg.create_leaf(np.arange(12.0).reshape(3, 4) / 7, requires_grad=True, name="m")
        parts = [m.sum(axis=0, keepdims=True), m.mean(axis=1).reshape(3, 1), m.max(axis=0),
                 m.T.reshape(-1)[2:5], m.softmax(axis=1)[1], m.log_softmax()[0:1],
                 mg.concat([m, m], axis=0).sigmoid(), (m ** 2).relu(), (2.0 ** m).log()]
        loss = sum(p.sum() for p in parts[1:]) + parts[0].sum()
        loss.backward(order="topo")
    return [rec.trace]


def trace_of_arena_graph():
    graph = mg.Arena("graph", 1 << 16)
    W = mg.create_leaf(np.linspace(-1, 1, 6).reshape(3, 2), requires_grad=True, name="W")
    with graph.scope():
        x = mg.create_leaf(np.linspace(0, 1, 12).reshape(4, 3), name="x")
        h = (x @ W).tanh()
        loss = (h * h).sum()
        doc = mg.trace_of(loss, "read back")
        loss.backward()
    return [doc]


def half_recorded_forward():
    """Part of the forward ran before recording began: read back at the start of backward."""
    x = mg.create_leaf([1.0, 2.0], requires_grad=True, name="x")
    h = x * x
    with mg.record("half") as rec:
        loss = (h.exp() + x).sum()
        loss.backward()
    return [rec.trace]


def stepper_on_pool_read_each_step():
    """What the stepper widget does: add_graph, then one compact group at a time, reading the
    document after every step (the lazy previews meet pool frees in between)."""
    pool = mg.Pool("pool")
    X, y, _, _ = mg.data.digits_split()
    model = mg.nn.MLP([64, 8, 10], seed=1)
    docs = []
    with pool.scope():
        x = mg.create_leaf(X[:4], name="x")
        loss = mg.cross_entropy(model(x), y[:4])
        recorder = Recorder("stepper").add_graph(loss)
        docs.append(recorder.trace)
        groups = compact_groups(loss)
        while True:
            previous, mg.modes.modes.recorder = mg.modes.modes.recorder, recorder
            try:   # allocations and frees are recorded while the engine step runs
                group = next(groups, None)
            finally:
                mg.modes.modes.recorder = previous
            if group is None:
                break
            recorder.on_steps(group)
            docs.append(recorder.trace)
    return docs


def stepper_on_arena_read_at_end():
    graph = mg.Arena("graph", 1 << 16)
    X, y, _, _ = mg.data.digits_split()
    model = mg.nn.MLP([64, 8, 10], seed=2)
    with mg.record("arena steps") as rec:
        with graph.scope():
            x = mg.create_leaf(X[:4], name="x")
            loss = mg.cross_entropy(model(x), y[:4])
            steps = list(mg.backward_steps(loss, order="topo"))
    assert steps[-1].kind == "done"
    return [rec.trace]


def ledger_of_allocator():
    perm = mg.Arena("perm", 1 << 14)
    mg.nn.MLP([4, 3, 2], seed=0, arena=perm)
    recorder = Recorder("ledger")
    recorder._arena(perm)
    return [recorder.trace]


SCENARIOS = [mlp_heap, mlp_heap_topo, mlp_arena, mlp_pool, diamond_shared_input, dead_branch,
             leaf_loss_and_ops_zoo, trace_of_arena_graph, half_recorded_forward,
             stepper_on_pool_read_each_step, stepper_on_arena_read_at_end, ledger_of_allocator]


def dump(docs: list) -> str:
    return json.dumps(docs, indent=1, sort_keys=False) + "\n"


def fixture(scenario) -> pathlib.Path:
    return HERE / f"{scenario.__name__}.json"


if __name__ == "__main__":
    for scenario in SCENARIOS:
        fixture(scenario).write_text(dump(scenario()), encoding="utf-8")
        print("wrote", fixture(scenario).name)
