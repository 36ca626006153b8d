"""The ahead-of-time steps do work linear in the graph, and give the plans the plain algorithms give.

Speed is measured in benchmarks/scale_aot.py; here the algorithms are pinned without a clock:
first fit and the recompute rewrite against plain (quadratic) versions written out below, and
the work first fit does (gaps looked at) counted at n and 4n layers.
"""
import gc
import random

import numpy as np
import pytest

import minigrad as mg
from minigrad import aot
from minigrad.aot import placement
from minigrad.aot.derive import compute_required_saves
from minigrad.aot.ir import Graph, Operation, saved_name_of
from minigrad.aot.plan import RECOMPUTED

from gc_counts import collections_during


def mlp_graphs(n):
    model = mg.nn.MLP([8] * (n + 1), seed=0, dtype=np.float64)
    x, y = np.ones((4, 8)), np.array([0, 1, 2, 3])
    forward = aot.capture(lambda x, y: mg.cross_entropy(model(x), y), x, y, params=model,
                          input_names=["x", "y"])
    return forward, aot.derive_backward_graph(forward), model, x, y


def plain_first_fit(spans):
    """Each buffer scans every live buffer, sorted by offset, for the lowest gap that fits."""
    offsets, active, size = {}, [], 0
    for key, (root, first, last) in sorted(spans.items(), key=lambda kv: (kv[1][1], -kv[1][0].nbytes)):
        active = [a for a in active if a[0] >= first]
        need = -(-max(root.nbytes, 1) // placement.ALIGN) * placement.ALIGN
        offset = 0
        for _, start, nbytes in sorted(active, key=lambda a: a[1]):
            if offset + need <= start:
                break
            offset = max(offset, start + nbytes)
        offsets[key] = offset
        active.append((last, offset, need))
        size = max(size, offset + need)
    return offsets, size


@pytest.mark.parametrize("seed", range(30))
def test_first_fit_places_every_buffer_where_the_plain_scan_does(seed):
    rng = random.Random(seed)
    spans = {}
    for k in range(rng.randrange(1, 120)):
        first = rng.randrange(-1, 60)
        last = first + rng.choice([0, 1, 2, 5, 20, 200])
        spans[k] = [np.empty(rng.choice([1, 8, 64, 65, 200, 512, 4096]), np.uint8), first, last]
    assert placement.first_fit(spans) == plain_first_fit(spans)


def test_first_fit_looks_at_a_bounded_number_of_gaps_per_buffer(monkeypatch):
    """The plain scan passes every live buffer below the answer (n x live in all); here the
    gaps looked at grow with the buffers placed, not with their square."""
    looked = [0]
    gap_at = placement._Runs.gap_at

    def counting(self, offset):
        looked[0] += 1
        return gap_at(self, offset)
    monkeypatch.setattr(placement._Runs, "gap_at", counting)
    counts = []
    for n in (40, 160):
        looked[0] = 0
        run = aot.Executor(*mlp_graphs(n))
        counts.append(looked[0])
        assert run.arena_bytes < run.unshared_bytes
    assert counts[1] <= 4.5 * counts[0], counts


def plain_recompute_saves(forward, backward, names):
    """The rewrite one producer at a time, each re-run inserted before its first reader in the
    list as it stands (a pass over the whole backward graph per producer)."""
    ops = list(backward.operations)
    order = [t for op in forward.operations for t in op.outputs]
    producers = {}
    for t in sorted(names, key=lambda n: -order.index(n)):
        producer = forward.producer_of(t)
        producers.setdefault(producer.id, (producer, []))[1].append(t)
    for producer, chosen in producers.values():
        stale = {saved_name_of(t): RECOMPUTED + t for t in chosen}
        readers = [i for i, op in enumerate(ops) if any(x in stale for x in op.inputs)]
        ops = [Operation(op.id, op.type, tuple(stale.get(x, x) for x in op.inputs), op.outputs, op.attrs)
               for op in ops]
        inputs = tuple(x if x in forward.params or x in forward.constants else saved_name_of(x)
                       for x in producer.inputs)
        ops.insert(readers[0] if readers else 0,
                   Operation(f"recompute_{producer.id}", producer.type, inputs,
                             tuple(RECOMPUTED + o for o in producer.outputs), dict(producer.attrs)))
    graph = Graph(inputs=list(backward.inputs), operations=ops, outputs=list(backward.outputs))
    graph.save = compute_required_saves(graph)
    return graph


def cheap_chain():
    w = mg.create_leaf(np.linspace(0.1, 0.9, 12).reshape(3, 4), requires_grad=True, name="w")

    def chain(x):
        h = x * w
        for _ in range(3):
            h = (h.tanh() * h).exp() - h
        return (h * h).sum()
    forward = aot.capture(chain, np.ones((3, 4)), params={"w": w}, input_names=["x"])
    return forward, aot.derive_backward_graph(forward)


@pytest.mark.parametrize("seed", range(12))
def test_recompute_rewrites_backward_as_the_plain_rewrite_does(seed):
    """Chains of re-runs (a re-run reading a recomputed input) included: any subset of saves."""
    forward, backward = cheap_chain() if seed % 2 else mlp_graphs(3)[:2]
    made = [t for t in backward.save if forward.producer_of(t) is not None]
    rng = random.Random(seed)
    names = made if seed < 2 else rng.sample(made, rng.randint(1, len(made)))
    got = aot.recompute_saves(forward, backward, names)
    want = plain_recompute_saves(forward, backward, names)
    assert [(o.id, o.inputs, o.outputs) for o in got.operations] == \
        [(o.id, o.inputs, o.outputs) for o in want.operations]
    assert got.save == want.save


def test_the_plan_counts_the_bytes_alive_at_each_step_as_the_plain_sum_does():
    forward, backward = cheap_chain()
    for policy in ("save_all", "recompute"):
        plan = aot.plan_memory(forward, backward, policy=policy)
        live = [sum(r.nbytes for r in plan.ranges if r.start <= s <= r.end) for s in range(len(plan.steps))]
        assert plan.peak_bytes == max(live) and plan.peak_step == live.index(max(live))


def test_a_rerun_goes_before_the_rerun_that_reads_it_when_both_have_the_same_first_reader():
    """m = x * w, e = exp(m), one backward op reads both saved: recomputing both must run m's
    re-run first, though the same backward op is the first reader of each."""
    forward = Graph(inputs=["x"], params=["w"], outputs=["e"], operations=[
        Operation("m", "multiply", ("x", "w"), ("m",)), Operation("e", "exp", ("m",), ("e",))])
    backward = Graph(inputs=["d_e"], outputs=["d_m"], operations=[
        Operation("b", "multiply", ("d_e", saved_name_of("e"), saved_name_of("m")), ("d_m",))])
    backward.save = compute_required_saves(backward)
    got = aot.recompute_saves(forward, backward, ["e", "m"])
    assert [o.id for o in got.operations] == ["recompute_m", "recompute_e", "b"]
    assert [o.id for o in plain_recompute_saves(forward, backward, ["e", "m"]).operations] == \
        ["recompute_m", "recompute_e", "b"]


def test_plan_memory_builds_its_ranges_with_the_collector_paused():
    """A plan of n layers makes thousands of records and no cycle: run with the collector on, the
    young collections it triggered, and the full ones over a heap it made bigger, grew faster
    than n (benchmarks/scale_aot.py). Paused, none runs inside it; the count keeps running."""
    forward, backward, *_ = mlp_graphs(200)
    plan, ran = collections_during(lambda: aot.plan_memory(forward, backward, policy="recompute"))
    assert ran in ({}, {0: 1}) and gc.isenabled()  # (at most the one young collection after)
    assert len(plan.ranges) > 300


def test_derive_builds_the_backward_graph_with_the_collector_paused():
    """Deriving n layers makes thousands of records (operations, names, log steps) and no cycle:
    with the collector on it ran 27 young and 2 middle collections inside it at 800 layers, 110
    and 9 at 3,200 (6.7 ms and 39 ms: 5.8x for 4x the layers). Paused, none runs inside it, and
    what it made is freed without the collector when dropped."""
    forward, *_ = mlp_graphs(200)
    backward, ran = collections_during(lambda: aot.derive_backward_graph(forward))
    assert ran in ({}, {0: 1}) and gc.isenabled()  # (at most the one young collection after)
    assert len(backward.operations) > 500
    del backward
    assert gc.collect() == 0                       # (no cycle was left for the collector)
