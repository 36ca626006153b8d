"""AotView's Python side: the document it draws (minigrad/aot/document.py), its DOT, escaping and
export. The expected values are read off the forward and backward graphs themselves, never off
the document. (The browser side is tested in tests/browser/test_aotview_browser.py.)"""
import json
import re

import numpy as np
import pytest

import minigrad as mg
from minigrad import aot
from minigrad.aot.document import aot_document
from minigrad.widgets import AotView, save_html
from minigrad.widgets.aotview import to_aot_dot

EVIL = '<img src=x onerror=alert(1)>\\N"'


def fan_out_graph(stop=()):
    """x (data) -> linear -> h; loss = CE(h * tanh(h) + h, targets): h is read three times."""
    model = mg.nn.MLP([4, 5, 3], seed=0, dtype=np.float64)
    x = np.random.default_rng(0).normal(size=(2, 4))
    targets = np.array([0, 2])

    def f(x, t):
        h = model(x)
        return mg.cross_entropy(h * h.tanh() + h, t)

    forward = aot.capture(f, x, targets, params=model)
    options = aot.DeriveBackwardOptions(stop_gradients=tuple(stop))
    backward, steps = aot.derive_backward_graph(forward, options, steps=True)
    return forward, backward, steps, options


def by_name(document, graph, type_="tensor"):
    """(Capture names an activation after the operation that writes it: keep the kinds apart.)"""
    return {n["name"]: n for n in document["nodes"] if n["graph"] == graph and n["type"] == type_}


def test_every_backward_operation_is_drawn_once_and_replayed_in_derivation_order():
    forward, backward, steps, options = fan_out_graph()
    doc = aot_document(forward, backward, steps=steps, options=options)
    ops = {n["id"]: n for n in doc["nodes"] if n["type"] == "op" and n["graph"] == "backward"}
    assert sorted(n["text"] for n in ops.values()) == sorted(o.text() for o in backward.operations)
    replay = [ops[i]["name"] for step in doc["steps"] for i in step["emitted"]]
    assert replay == [o.id for o in backward.operations]
    assert [s["kind"] for s in doc["steps"]] == [s.kind for s in steps]
    for k, step in enumerate(doc["steps"]):
        assert all(ops[i]["step"] == k for i in step["emitted"])
    # the forward op of each rule step is the one the derivation named
    fwd = {n["id"]: n["name"] for n in doc["nodes"] if n["type"] == "op" and n["graph"] == "forward"}
    assert [fwd.get(s["op"]) for s in doc["steps"]] == [s.forward_op for s in steps]


def test_saved_reads_are_edges_from_the_forward_tensor_to_the_backward_op_that_reads_it():
    forward, backward, steps, options = fan_out_graph()
    doc = aot_document(forward, backward, steps=steps, options=options)
    nodes = {n["id"]: n for n in doc["nodes"]}
    drawn = sorted((nodes[e["source"]]["name"], nodes[e["target"]]["name"])
                   for e in doc["edges"] if e["kind"] == "saved")
    expected = sorted((t[len("saved."):], op.id) for op in backward.operations
                      for t in op.inputs if t.startswith("saved."))
    assert drawn == expected and drawn
    assert all(nodes[e["source"]]["graph"] == "forward" and nodes[e["target"]]["graph"] == "backward"
               for e in doc["edges"] if e["kind"] == "saved")
    # parameters are read directly: a `param` edge, never a saved one
    direct = sorted((nodes[e["source"]]["name"], nodes[e["target"]]["name"])
                    for e in doc["edges"] if e["kind"] == "param")
    assert direct == sorted((t, op.id) for op in backward.operations for t in op.inputs
                            if t in forward.params)
    assert doc["save"] == backward.save
    assert sorted(n for n, node in by_name(doc, "forward").items() if node["saved"]) == \
        sorted(backward.save)


def test_fan_out_sums_are_marked_and_their_pieces_are_pieces():
    forward, backward, steps, options = fan_out_graph()
    doc = aot_document(forward, backward, steps=steps, options=options)
    ops = [n for n in doc["nodes"] if n["type"] == "op" and n["graph"] == "backward"]
    sums = sorted(n["name"] for n in ops if n["kind"] == "accumulate")
    assert sums == sorted(o.id for o in backward.operations if o.id.startswith("accumulate_"))
    assert len(sums) == 2    # h is read three times: two additions
    grads = by_name(doc, "backward")
    (h,) = [t for op in forward.operations for t in op.outputs if len(forward.consumers_of(t)) == 3]
    pieces = [name for name in grads if name.startswith(f"d_{h}_from_")]
    assert len(pieces) == 3 and all(grads[p]["piece"] for p in pieces)
    assert not grads[f"d_{h}"]["piece"]
    assert 'shape=doublecircle' in to_aot_dot(doc) and "accumulate" in to_aot_dot(doc)


def test_tensors_without_a_gradient_are_greyed_with_the_reason():
    forward, backward, steps, options = fan_out_graph(stop=("layer0.weight",))
    doc = aot_document(forward, backward, steps=steps, options=options)
    tensors = by_name(doc, "forward")
    x, t = forward.inputs
    assert "int64" in tensors[t]["why_no_grad"]
    assert "data" in tensors[x]["why_no_grad"]
    assert "stop-gradient" in tensors["layer0.weight"]["why_no_grad"]
    assert tensors["layer1.weight"]["why_no_grad"] is None
    assert "d_layer0.weight" not in backward.outputs
    # greyed nodes and their edges carry the class the view styles
    dot = to_aot_dot(doc)
    line = next(line for line in dot.splitlines()
                if line.strip().startswith(tensors["layer0.weight"]["id"] + " "))
    assert "nograd" in line


def test_a_forward_op_no_rule_ran_for_is_greyed():
    # preprocessing of the data: nothing upstream wants a gradient, so no rule runs for it
    model = mg.nn.MLP([3, 2], seed=0, dtype=np.float64)
    x = np.ones((1, 3))

    def f(x):
        return model(x.tanh()).sum()

    forward = aot.capture(f, x, params=model)
    view = AotView(forward)
    ops = by_name(view.trace, "forward", "op")
    skipped = [s for s in view.steps if s["kind"] == "skip"]
    assert skipped, view.steps
    for step in skipped:
        node = next(n for n in view.trace["nodes"] if n["id"] == step["op"])
        assert node["needs_grad"] is False
    assert all(n["needs_grad"] for n in ops.values() if n["id"] not in {s["op"] for s in skipped})


def test_the_view_derives_when_given_only_the_forward_graph_and_replays_given_steps():
    forward, backward, steps, options = fan_out_graph()
    view = AotView(forward)
    assert [o.text() for o in view.backward.operations] == [o.text() for o in backward.operations]
    assert [s["kind"] for s in view.steps] == [s.kind for s in steps]
    assert view.frame == 0 and view.dot.startswith("digraph") and view.message == ""
    # a backward graph that this derivation did not make: one step per operation instead
    registry = aot.registry.copy()
    registry.register_rule("tanh", lambda ctx: [ctx.op("tanh_backward", [ctx.d_output, aot.saved_ref(
        ctx.fwd_op.outputs[0])], [ctx.d_inputs[0]]), ctx.op("identity", [ctx.d_inputs[0]], ["spare"])])
    other = aot.derive_backward_graph(forward, registry=registry)
    view = AotView(forward, other)
    emitted = [s for s in view.steps if s["emitted"]]
    assert len(emitted) == len(other.operations) and all(len(s["emitted"]) == 1 for s in emitted)
    # ... unless the same registry is passed: then the steps are recorded again
    view = AotView(forward, other, registry=registry)
    assert [s["kind"] for s in view.steps][:2] == ["producer_map", "needs_grad"]


def test_dot_has_one_node_per_document_node_and_one_edge_per_edge_with_its_id():
    forward, backward, steps, options = fan_out_graph()
    doc = aot_document(forward, backward, steps=steps, options=options)
    dot = to_aot_dot(doc)
    ids = re.findall(r"^\s*(\w+) \[", dot, re.M)
    assert sorted(i for i in ids if i not in ("graph", "node", "edge")) == \
        sorted(n["id"] for n in doc["nodes"])
    edges = [line for line in dot.splitlines() if "->" in line]
    assert len(edges) == len(doc["edges"])
    for k, edge in enumerate(doc["edges"]):
        line = next(line for line in edges if f"id=e{k} " in line + " " or f"id=e{k}]" in line)
        assert line.strip().startswith(f"{edge['source']} -> {edge['target']}")
    saved = [line for line in edges if 'class="saved' in line or "class=saved" in line]
    assert saved and all("constraint=false" in line and "dashed" in line for line in saved)
    assert "cluster_forward" in dot and "cluster_backward" in dot


def evil_graph():
    w = mg.create_leaf(np.ones((3, 2)), requires_grad=True, name=EVIL)
    x = np.ones((1, 3))
    return aot.capture(lambda x: (x @ w).tanh().sum(), x, params={EVIL: w})


def test_user_names_stay_text_in_the_dot():
    view = AotView(evil_graph(), title=EVIL)
    line = next(line for line in view.dot.splitlines() if "img" in line and "->" not in line)
    label = re.search(r'label="((?:[^"\\]|\\.)*)"', line).group(1)
    assert label.startswith("<img src=x onerror=alert(1)>")   # a quoted string, not label=<...>
    assert "\\\\N" in label and '\\"' in label                # backslash and quote escaped
    assert "label=<" not in view.dot
    names = [n["label"] for n in view.trace["nodes"]]
    assert EVIL in names and f"d_{EVIL}" in names              # kept as data, as they are


def test_save_html_of_an_aot_view_is_one_inert_offline_file(tmp_path):
    view = AotView(evil_graph(), title="</script><script>alert(2)</script>")
    page = save_html(view, tmp_path / "aot.html").read_text()
    assert "</script><script>alert(" not in page and "<img src=x" not in page
    assert not re.search(r"""(src|href)\s*=\s*["']?https?://""", page)
    data = re.search(r'<script type="application/json" id="minigrad-data">(.*?)</script>', page,
                     re.S).group(1)
    doc = json.loads(data)
    assert doc["widget"] == "aot" and doc["trace"]["steps"] == view.trace["steps"]
    assert doc["dot"] == view.dot


def test_a_graph_too_big_to_draw_gets_a_message():
    x = np.ones((1, 2))
    w = mg.create_leaf(np.ones(2), requires_grad=True, name="w")

    def chain(x):
        h = x
        for _ in range(150):
            h = (h * w).tanh()
        return h.sum()

    view = AotView(aot.capture(chain, x, params={"w": w}))
    assert view.dot == "" and "max_nodes" in view.message
    assert len(view.steps) > 150       # the steps are still there to read


def test_frame_is_a_synced_trait():
    view = AotView(evil_graph())
    assert view.trait_metadata("frame", "sync") is True
    view.frame = 2
    assert view.get_state()["frame"] == 2


def test_the_memory_plan_strip_is_the_plans_live_ranges():
    forward, backward, steps, options = fan_out_graph()
    plan = aot.plan.plan_memory(forward, backward)
    view = AotView(forward, backward, plan=plan)
    strip = view.trace["plan"]
    assert strip["timeline"] == plan.steps and strip["backward_start"] == plan.n_forward
    assert [(r["tensor"], r["kind"], r["start"], r["end"], r["nbytes"]) for r in strip["ranges"]] == \
        [(r.name, r.kind, r.start, r.end, r.nbytes) for r in plan.ranges]
    assert strip["peak_bytes"] == plan.peak_bytes and strip["peak_at"] == plan.peak_step
    # each range points at the drawn node of its tensor (views own no memory: no range)
    nodes = {n["id"]: n for n in view.trace["nodes"]}
    assert all(nodes[r["node"]]["name"] == r["tensor"] and nodes[r["node"]]["type"] == "tensor"
               for r in strip["ranges"])
    assert AotView(forward).trace["plan"]["peak_bytes"] == plan.peak_bytes   # the default plan
    assert AotView(forward, plan=False).trace["plan"] is None


def test_misuse_gets_clear_errors():
    w = mg.create_leaf(np.ones(2), requires_grad=True, name="w")
    loss = (w * 2).sum()
    with pytest.raises(TypeError, match=r"AotView\(forward=...\).*Variable.*aot.capture.*GraphView"):
        AotView(loss)
    view = AotView(evil_graph())
    with pytest.raises(Exception, match=rf"AotView.frame = {len(view.steps)}: .* 0 to {len(view.steps) - 1}"):
        view.frame = len(view.steps)
    with pytest.raises(Exception, match="frame = -1"):
        view.frame = -1
    assert view.frame == 0
