"""Cost that grows with the work (issue 20): the algorithms, pinned by what they touch.

Timings are for benchmarks/scale.py; here each part is made to count what it reads or keeps, on a
graph big enough that a quadratic walk would be off by orders of magnitude, and the count is held
to a small multiple of the size of the work.
"""
from __future__ import annotations

import gc
import importlib.util
import pathlib
from contextlib import contextmanager

import numpy as np
import pytest

import minigrad as mg
from minigrad.eager.function import Function
from minigrad.gcpause import gc_paused

from gc_counts import collections_during


def _workloads():
    """benchmarks/workloads.py: the graphs scale.py times, loaded by path (as the tests load
    the other benchmark modules)."""
    path = pathlib.Path(__file__).parent.parent / "benchmarks" / "workloads.py"
    spec = importlib.util.spec_from_file_location("scale_workloads", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_graphs = _workloads()
chain, chain_with_unused_consumers = _graphs.chain, _graphs.chain_with_unused_consumers
scoped_blocks, tape_chain = _graphs.scoped_blocks, _graphs.tape_chain


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
    np.testing.assert_allclose(w.grad, links * 0.5 ** (links - 1) * np.ones(4), rtol=1e-9)
    assert x.grad is not None


def test_pending_and_topo_agree_when_every_link_stalls():
    grads = {}
    for order in ("pending", "topo"):
        x, w, loss = chain_with_unused_consumers(40)
        loss.backward(order=order)
        grads[order] = (x.grad.copy(), w.grad.copy())
    for a, b in zip(grads["pending"], grads["topo"]):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_a_live_step_sends_and_builds_only_what_it_changed(monkeypatch):
    pytest.importorskip("anywidget")   # (absent only in the oldest-numpy pass, which has no widgets)
    from minigrad.trace import recorder as trace   # (where the recorder looks build_document up)
    from minigrad.trace import document
    from minigrad.widgets import BackwardStepper
    arena = mg.Arena("graph", 1 << 20)
    with arena.scope():
        loss = chain(300)
        stepper = BackwardStepper(loss)
        page = {k: list(stepper.trace[k]) for k in ("events", "frames", "blocks")}
        sent, builds, expanded = [], [0], [0]
        monkeypatch.setattr(stepper, "send", lambda content, *a, **k: sent.append(content))
        whole, expand = trace.build_document, document.BackwardEvents.expand

        def counted_build(*args):
            builds[0] += 1
            return whole(*args)

        def counted_expand(self, entry):
            expanded[0] += 1
            return expand(self, entry)
        monkeypatch.setattr(trace, "build_document", counted_build)
        monkeypatch.setattr(document.BackwardEvents, "expand", counted_expand)
        steps = 0
        while stepper.live:
            stepper.step()
            steps += 1
    # the whole document is built once, when backward ends (the synced `trace`), not per step
    assert steps > 300 and builds[0] == 1, (steps, builds)
    # each engine step's raw group is turned into events once (the seed and each node's apply)
    assert expanded[0] <= steps + 1
    # the page, folding the messages as views/backward-stepper.js does, has what the document has; and no
    # message repeats an event, a frame or a block
    for message in sent:
        page["events"] += message["events"]
        page["frames"] += message["frames"]
        page["blocks"] += message["new_blocks"]
    final = stepper.trace
    assert page["events"] == final["events"] and page["frames"] == final["frames"]
    assert page["blocks"] == final["blocks"] and len(final["blocks"]) > 300
    assert max(len(m["events"]) for m in sent) <= 12
    assert stepper.frame == len(final["frames"]) - 1


def test_trace_of_keeps_a_bounded_number_of_bytes_per_op():
    import tracemalloc
    per_op = {}
    for n in (500, 2000):
        loss = chain(n)
        gc.collect()
        tracemalloc.start()
        try:
            doc = mg.trace_of(loss)
            per_op[n] = tracemalloc.get_traced_memory()[1] / n
        finally:
            tracemalloc.stop()
        assert len(doc["nodes"]) == 2 * n + 4 and len(doc["events"]) == n + 3
        del doc
    # the same bytes per op at 4x the ops (a per-op record, no table that grows with the graph
    # inside each op's entry); about 4 KB each: ids, labels, sentences, previews of 8 values
    assert per_op[2000] <= 1.15 * per_op[500] and per_op[2000] < 8_000, per_op


def test_a_dropped_trace_is_freed_at_once_not_left_to_the_cyclic_collector():
    # A trace is ~15 containers per op. Held in a reference cycle (a recorder listing itself
    # among the recorders its hooks go to), a dropped one waited for a full collection, which
    # had to rescan all of it; without the cycle, dropping the document frees it.
    loss = chain(300)
    gc.collect()
    with gc_paused():   # (nothing may be freed here but by reference counting)
        before = len(gc.get_objects())
        doc = mg.trace_of(loss)
        made = len(gc.get_objects()) - before
        del doc
        left = len(gc.get_objects()) - before
    assert made > 10 * 300 and left <= 5, (made, left)


def containers_made(run) -> tuple:
    """(run(), how many containers it made), counted with the collector paused (a collection
    would reset the count)."""
    with gc_paused():
        made_before = gc.get_count()[0]
        result = run()
        return result, gc.get_count()[0] - made_before


def test_kept_tape_steps_cost_what_each_step_changed():
    import tracemalloc
    per_step = {}
    for n in (500, 2000):
        tape, x, y = tape_chain(n)
        gc.collect()
        tracemalloc.start()
        try:
            steps = list(tape.backward_steps(y, retain=True))
            per_step[n] = tracemalloc.get_traced_memory()[0] / n
        finally:
            tracemalloc.stop()
        assert len(steps) == n
        assert all(len(s.uses) <= len(s.instr.inputs) for s in steps)
    # a copy of every count per step would be 8 bytes x slots: 4x the bytes per step at 4x n
    assert per_step[2000] <= 1.2 * per_step[500], per_step
    # and the counts are all there when read: rebuilt from the changes
    tape, x, y = tape_chain(6)
    counts = []
    for step in tape.backward_steps(y, retain=True):
        counts.append(tape.use_counts())
    assert steps[-1].remaining == (0,) * len(tape_chain(2000)[0].values)   # every read undone
    assert counts == [list(s.remaining) for s in tape.backward_steps(y, retain=True)]


def test_kept_tape_steps_make_few_containers_for_the_cyclic_collector():
    # CPython runs a full collection (a rescan of every container alive) after about every
    # 70,000 containers made, so what a kept step costs the collector is the containers it makes
    # and keeps. A TapeStep and the Instr it points at are three (the Instr's inputs tuple);
    # a tuple per grad write or read (the plain way, 9 per step) must not come back.
    n = 3000
    tape, x, y = tape_chain(n)
    gc.collect()
    tracked_before = len(gc.get_objects())
    steps, made = containers_made(lambda: list(tape.backward_steps(y, retain=True)))
    gc.collect()   # (tuples of plain numbers stop being tracked here)
    kept = len(gc.get_objects()) - tracked_before
    assert len(steps) == n
    assert made / n <= 3.5, made / n
    assert kept / n <= 2.2, kept / n   # each TapeStep and its Instr
    # what the steps changed is all there when read
    # (the last op is h * x: h read once, x by the n/2 muls and the first sin, one read undone)
    assert steps[0].uses == ((n - 1, 0), (0, n // 2)) and steps[0].freed == ()
    assert steps[-1].grad_writes == ((0, pytest.approx(x.grad)),)


def test_reading_a_tapes_instrs_runs_one_young_collection_not_one_per_700_instrs():
    # The Instr list is built when first read: two containers per instruction and no cycle, so
    # the collector waits until it is built (one young collection after it, over what it made).
    # Run as usual it would collect n / 350 times, and after each ten of those look at the
    # older generations too, the whole heap among them.
    n = 20000
    tape, x, y = tape_chain(n)
    _, ran = collections_during(lambda: tape.instrs)
    assert len(tape.instrs) == n
    assert sum(ran.values()) <= 1 and ran.get(2, 0) == 0, ran


def test_a_kept_walk_over_built_instrs_makes_one_container_per_step():
    n = 20000
    tape, x, y = tape_chain(n)
    tape.instrs   # (built: what the walk itself makes is counted below)
    gc.collect()
    steps, made = containers_made(lambda: list(tape.backward_steps(y, retain=True)))
    assert len(steps) == n and made / n <= 1.05, made / n   # each TapeStep
    # 20,000 kept steps then cost the collector no full collection (a rescan of the heap)
    tape, x, y = tape_chain(n)
    _, ran = collections_during(lambda: list(tape.backward_steps(y, retain=True)))
    assert ran.get(2, 0) == 0 and ran.get(1, 0) <= 4, ran


def test_a_box_click_costs_the_kernel_no_drawing(monkeypatch):
    pytest.importorskip("anywidget")   # (absent only in the oldest-numpy pass, which has no widgets)
    from minigrad.widgets import GraphView, views
    view = GraphView(scoped_blocks(30), max_nodes=20)
    drawn = []
    to_dot, folding = views.to_dot, views.folding
    monkeypatch.setattr(views, "to_dot", lambda *a, **k: drawn.append("dot") or to_dot(*a, **k))
    monkeypatch.setattr(views, "folding",
                        lambda *a, **k: drawn.append("fold") or folding(*a, **k))
    for scope in ("blocks.3", "blocks.7", "blocks.7.act"):
        view.set_state({"expanded": [scope]})   # as the page sends a click
    assert drawn == []                          # the page draws it (trace/open-scopes-dot.js)
    # what Python reads is still the drawing of what is open, made once when read
    assert 'id="c:blocks.7.act"' not in view.dot   # blocks.7 closed: its inner scope is hidden
    assert view.folding["frames"] == [] and "s:blocks.7" in view.folding["boxes"]
    assert drawn == ["fold", "dot"]
    view.set_state({"expanded": ["blocks.7", "blocks.7.act"]})
    assert 'id="c:blocks.7.act"' in view.dot and "s:blocks.7" not in view.folding["boxes"]
    assert view.folding["frames"] == ["c:blocks.7", "c:blocks.7.act"]
    assert drawn == ["fold", "dot"] * 2


def _scale_benchmark():
    """benchmarks/scale.py (its CASES: what the benchmark times), loaded by path."""
    path = pathlib.Path(__file__).parent.parent / "benchmarks" / "scale.py"
    spec = importlib.util.spec_from_file_location("scale_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def calls_made(run) -> dict:
    """{function: how many times run() called it, and (function, "lines"): how many lines of it
    ran}, Python functions and C ones (list.append, heapq.heappush, ...), counted with the
    collector paused (so that none depends on when it runs). The calls are what cProfile's ncalls
    would say, without its clock; the lines count a loop's turns (a scan inside one call)."""
    import sys
    calls: dict = {}

    def count(frame, event, arg):
        if event == "call":
            key = frame.f_code
        elif event == "c_call":
            key = f"{getattr(arg, '__module__', None) or ''}.{arg.__qualname__}"
        else:
            return
        calls[key] = calls.get(key, 0) + 1

    def count_lines(frame, event, arg):
        if event == "line":
            key = (frame.f_code, "lines")
            calls[key] = calls.get(key, 0) + 1
        return count_lines
    with gc_paused():
        sys.setprofile(count)
        sys.settrace(count_lines)
        try:
            run()
        finally:
            sys.settrace(None)
            sys.setprofile(None)
    return calls


def _named(key) -> str:
    code, what = key if isinstance(key, tuple) else (key, "calls")
    if isinstance(code, str):
        return f"{code} {what}"
    return f"{pathlib.Path(code.co_filename).name}:{code.co_firstlineno} {code.co_qualname} {what}"


# Each case of benchmarks/scale.py at a size small enough to count every call (n here, 4n).
_COUNTED_AT = {"pending": 1000, "stepper": 50, "trace_of": 250, "Tape": 500, "box clicks": 100,
               "box click then read": 60, "aot": 60}


@pytest.mark.parametrize("name", list(_COUNTED_AT))
def test_each_scale_case_calls_each_function_at_most_4x_as_often_at_4x_the_size(name):
    # The deterministic half of the benchmark's ratio: a per-step cost that grows with the graph
    # (a rescan, a rebuild of a table, a copy made again per step) shows as a function called
    # more than 4x as often at 4x the size; a linear part calls each one k*n + c times (4x, give
    # or take its constant: c may be negative); a scan per step is n² (16x), n log n about 5x here.
    if name != "pending" and name != "Tape" and name != "trace_of":
        pytest.importorskip("anywidget")   # (the widget cases; the aot ones import it too)
    scale = _scale_benchmark()
    n = _COUNTED_AT[name]
    cases = [c for c in scale.CASES if c.what.startswith(name)]
    assert cases, name
    previous = mg.set_debug(False)   # (as the benchmark runs: scale.main turns debug off)
    try:
        for case in cases:
            case.run(case.prepare(n))   # (first-use set-up, once per process, is not counted)
            small, big = (calls_made(lambda s=case.prepare(size): case.run(s))
                          for size in (n, 4 * n))
            grew = {_named(k): (small.get(k, 0), big[k]) for k in big
                    if big[k] > 4.1 * small.get(k, 0) + 32}
            assert not grew, (case.what, grew)
            assert sum(big.values()) >= 3 * sum(small.values()) or name == "box clicks", case.what
    finally:
        mg.set_debug(previous)


def test_the_benchmark_closes_the_widgets_it_times():
    # ipywidgets keeps every widget alive until it is closed; left open, each run of a widget
    # case kept its graph and trace (12,000 containers per stepper of 400 ops), and every later
    # run's full collections rescanned all of them: later runs, and the big ones most, paid for
    # the earlier ones.
    pytest.importorskip("anywidget")
    from minigrad.widgets import BackwardStepper, GraphView
    scale = _scale_benchmark()

    def alive() -> int:
        gc.collect()
        return sum(isinstance(o, (BackwardStepper, GraphView)) for o in gc.get_objects())
    before = alive()
    for case in scale.CASES:
        if "stepper" in case.what or "click" in case.what:
            scale.measure(case._replace(n=8, rounds=1))
    assert alive() == before
