"""The widgets' Python side: traces, live stepping on the real engine, replays, export.
(The browser side is tested in tests/browser/.)"""
import json
import re
import sys

import numpy as np
import pytest

import minigrad as mg
from minigrad.widgets import BackwardStepper, GraphView, MemoryView, save_html


def mlp_loss(seed=0):
    X, y, _, _ = mg.data.digits_split()
    model = mg.nn.MLP([64, 16, 10], seed=seed)
    return model, mg.cross_entropy(model(mg.create_leaf(X[:8], name="x")), y[:8])


def test_importing_minigrad_does_not_import_widget_packages():
    code = ("import sys, minigrad; bad = [m for m in ('anywidget', 'ipywidgets', 'graphviz', "
            "'minigrad.widgets') if m in sys.modules]; print(bad)")
    import subprocess
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_graph_view_carries_the_trace_and_its_drawing():
    _, loss = mlp_loss()
    view = GraphView(loss, title="mlp")
    assert view.trace["schema"] == "minigrad-trace" and view.trace["title"] == "mlp"
    assert view.dot.startswith("digraph") and view.message == ""
    assert view.options["show_saved"] is True
    assert view.layout_engine is GraphView(loss).layout_engine   # one engine per kernel


def test_stepper_steps_the_real_engine_one_node_at_a_time():
    model, loss = mlp_loss()
    W = model.parameters()[-2]                    # the last layer's weight: written first
    first = model.parameters()[0]
    stepper = BackwardStepper(loss)
    initial = stepper.frame
    assert stepper.live and W.grad is None and first.grad is None
    stepper.step()                                # the seed
    assert W.grad is None
    stepper.step()                                # cross_entropy
    stepper.step()                                # the last linear: its weight gets a grad
    assert W.grad is not None and first.grad is None
    assert stepper.frame > initial
    stepper.finish()
    assert not stepper.live and first.grad is not None
    # the same numbers as a plain backward on a fresh copy of the graph
    model2, loss2 = mlp_loss()
    loss2.backward()
    for p, q in zip(model.parameters(), model2.parameters()):
        np.testing.assert_allclose(p.grad, q.grad)
    events = stepper.trace["events"]
    assert events[-1]["type"] == "consume"
    assert stepper.frame == len(stepper.trace["frames"]) - 1


def test_every_stepper_step_makes_one_frame_even_when_the_ready_queue_runs_dry():
    # h feeds tanh (on the loss's path) and exp (not on it): once tanh has run, the ready queue
    # is empty while h's mul still counts exp as pending, and the engine releases it on its
    # own ("ready", no node run). That must not be a step that shows nothing (a dropped click,
    # lesson 12): step k is always the k-th frame after forward.
    x = mg.create_leaf(np.array([0.5, -1.0]), name="x")
    w = mg.create_leaf(np.array([2.0, 3.0]), requires_grad=True, name="w")
    h = x * w
    h.exp()                                        # a consumer the loss does not read
    loss = h.tanh().sum()
    stepper = BackwardStepper(loss)
    initial, k, ran = stepper.frame, 0, []
    while stepper.live:
        frames = len(stepper.current_trace["frames"])
        stepper.step()
        k += 1
        assert len(stepper.current_trace["frames"]) == frames + 1, f"step {k} made no frame"
        assert stepper.frame == initial + k
        ran += [e["type"] for e in stepper.current_trace["events"][stepper.current_trace["frames"][-2] + 1:]]
    assert "ready" in ran, "the graph must make the ready queue run dry (else nothing is tested)"
    np.testing.assert_allclose(w.grad, (1 - np.tanh([1.0, -3.0]) ** 2) * [0.5, -1.0])


def test_stepper_answers_the_browser_messages():
    _, loss = mlp_loss()
    stepper = BackwardStepper(loss, order="topo")
    before = len(stepper.current_trace["frames"])
    stepper._on_message(stepper, {"kind": "advance", "steps": 2}, [])
    assert len(stepper.current_trace["frames"]) == before + 2
    assert len(stepper.trace["frames"]) == before   # live steps travel as "append" messages
    # a view drawn later says what it has; the kernel sends the whole trace if it is behind
    stepper._on_message(stepper, {"kind": "hello", "frames": before}, [])
    assert stepper.trace == stepper.current_trace
    stepper._on_message(stepper, {"kind": "finish"}, [])
    assert not stepper.live and stepper.trace == stepper.current_trace


def test_a_move_the_page_held_back_until_after_the_answer_is_undone():
    # The page buffers state updates while the kernel is busy, so "went back to frame k" can
    # arrive after the "finish" the user clicked next. It must not pull the stepper back.
    _, loss = mlp_loss()
    stepper = BackwardStepper(loss)
    start = stepper.frame
    stepper.set_state({"frame": start + 1, "frame_seq": 1})          # arrives in time
    assert stepper.frame == start + 1
    stepper._on_message(stepper, {"kind": "finish", "seq": 2}, [])   # sent after move 2 ...
    end = len(stepper.current_trace["frames"]) - 1
    assert stepper.frame == end and not stepper.live
    stepper.set_state({"frame": start, "frame_seq": 2})              # ... which arrives late
    assert stepper.frame == end
    stepper.set_state({"frame": start, "frame_seq": 3})              # a new move is obeyed
    assert stepper.frame == start


def test_stepper_records_arena_allocations_of_backward():
    graph = mg.Arena("graph", 1 << 16)
    model = mg.nn.MLP([64, 16, 10], seed=0)
    X, y, _, _ = mg.data.digits_split()
    with graph.scope():
        loss = mg.cross_entropy(model(mg.create_leaf(X[:8], name="x")), y[:8])
        stepper = BackwardStepper(loss)
        stepper.finish()
    kinds = {b["kind"] for b in stepper.trace["blocks"]}
    assert {"input", "activation", "node", "grad"} <= kinds
    backward_allocs = [e for e in stepper.trace["events"]
                       if e["type"] == "alloc" and e["phase"] == "backward"]
    assert backward_allocs


def test_replaying_a_recorded_trace_needs_no_engine():
    with mg.record("replay") as rec:
        _, loss = mlp_loss()
        loss.backward()
    replay = BackwardStepper.from_trace(rec.trace)
    assert not replay.live and replay.frame == rec.trace["initial_frame"]
    replay.step()   # nothing to run: a replay only moves in the browser
    assert replay.frame == rec.trace["initial_frame"]


def test_a_live_step_that_makes_several_frames_shows_the_first():
    # A checkpoint's recompute runs in one engine step but records its leaves and ops one frame
    # each: the view moves to the first of them (the page then steps through the rest).
    W = mg.create_leaf(np.array([[1.0, 0.4], [-0.6, 0.2]]), requires_grad=True, name="W")
    x = mg.create_leaf(np.array([[1.0, 2.0]]), name="x")
    stepper = BackwardStepper(mg.checkpoint(lambda h, w: (h @ w).tanh(), x, W).sum())
    phases = []
    while stepper.live:
        before = len(stepper.current_trace["frames"])
        stepper.step()
        trace = stepper.current_trace
        made = len(trace["frames"]) - before
        assert stepper.frame == before, (stepper.frame, before, made)
        phases.append((trace["events"][trace["frames"][stepper.frame]]["phase"], made))
    # the recompute: x (again), W (again), matmul, tanh, its seed: five frames in one step
    assert ("recompute", 5) in phases, phases
    assert all(made == 1 for phase, made in phases if phase != "recompute"), phases


def test_memory_view_of_an_arena_shows_its_ledger():
    graph = mg.Arena("graph", 1 << 16)
    with graph.scope():
        mg.create_leaf(np.ones((4, 4)), name="batch")
        view = MemoryView(graph)
        assert [b["owner"] for b in view.trace["blocks"]] == ["batch"]
    with pytest.raises(TypeError, match="Arena"):
        MemoryView([1, 2])


def test_big_graph_is_drawn_collapsed_not_refused():
    x = mg.create_leaf(np.ones(2), requires_grad=True)
    h = x
    for _ in range(300):
        h = (h * 1.01).tanh()
    view = GraphView(h.sum())
    assert view.message == "" and view.dot.startswith("digraph")
    assert view.folding["visible"] <= 150 and view.folding["boxes"]
    # the constant 1.01 of each step is drawn inside its run's box, not beside it
    consts = [n["id"] for n in view.trace["nodes"] if n["role"] == "data"] if False else \
        [n["id"] for n in view.trace["nodes"] if n.get("role") == "data"]
    members = {m for box in view.folding["boxes"].values() for m in box["members"]}
    assert len(consts) == 300 and set(consts) <= members


def test_save_html_is_one_offline_file_that_carries_the_trace(tmp_path):
    _, loss = mlp_loss()
    stepper = BackwardStepper(loss)
    path = save_html(stepper, tmp_path / "step.html")
    page = path.read_text()
    assert not stepper.live                                 # finished before export
    assert "Content-Security-Policy" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?https?://""", page)
    data = re.search(r'<script type="application/json" id="minigrad-data">(.*?)</script>', page,
                     re.S).group(1)
    doc = json.loads(data)
    assert doc["widget"] == "stepper" and doc["trace"]["events"] == stepper.trace["events"]


def test_save_html_keeps_user_text_inert(tmp_path):
    w = mg.create_leaf([1.0], requires_grad=True, name="</script><script>alert(1)</script>")
    view = GraphView((w * 2).sum())
    page = save_html(view, tmp_path / "g.html").read_text()
    assert "</script><script>alert(1)" not in page
