"""Scopes drawn as boxes: which scopes a view opens, the DOT of boxes and frames, and
expand/collapse from Python (no browser needed)."""
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import minigrad as mg
from minigrad.widgets import BackwardStepper, GraphView
from minigrad.widgets.collapse import folding, scope_paths
from minigrad.widgets.dot import to_dot


def blocks_loss(n_blocks=4, width=3):
    """n_blocks equal blocks (tanh(h @ W + b)), each in its own name_scope, then a head."""
    rng = np.random.default_rng(0)
    h = mg.create_leaf(rng.normal(size=(2, width)), name="x")
    for i in range(n_blocks):
        with mg.name_scope(f"blocks.{i}"):
            W = mg.create_leaf(rng.normal(size=(width, width)), requires_grad=True, name="W")
            b = mg.create_leaf(np.zeros(width), requires_grad=True, name="b")
            with mg.name_scope("act"):
                h = (h @ W + b).tanh()
    with mg.name_scope("head"):
        return (h * h).sum()


def chain(n_ops):
    x = mg.create_leaf(np.ones(4), requires_grad=True, name="x")
    w = mg.create_leaf(np.ones(4) * 0.5, requires_grad=True, name="w")
    h = x
    for i in range(n_ops):
        h = h.tanh() if i % 2 == 0 else h * w
    return h.sum()


def dot_name(dot, element_id):
    """The DOT name of the node drawn with id element_id."""
    return re.search(rf'^\s+(\S+) \[.*\bid="?{re.escape(element_id)}"?[ \]]', dot, re.M).group(1)


def test_small_graphs_open_fully():
    trace = mg.trace_of(blocks_loss())
    fold = folding(trace, budget=150)
    assert fold["boxes"] == {} and fold["visible"] == len(trace["nodes"])
    dot = to_dot(trace, fold=fold)
    assert 'id="c:blocks.0"' in dot and 'id="c:blocks.0.act"' in dot   # open scopes: frames


def test_big_graphs_open_at_the_deepest_level_that_fits():
    trace = mg.trace_of(blocks_loss())
    # 37 nodes: 4 blocks of 8 (W and b, then in "act": matmul, add, tanh and their outputs),
    # x, and the head's 4: a budget of 12 shows the top level only, as boxes.
    assert len(trace["nodes"]) == 37
    fold = folding(trace, budget=12)
    assert sorted(b["scope"] for b in fold["boxes"].values()) == \
        ["blocks.0", "blocks.1", "blocks.2", "blocks.3", "head"]
    assert fold["opened"] == set()
    # one level deeper fits a bigger budget: the blocks open, their "act" scopes stay boxes
    fold = folding(trace, budget=30)
    assert fold["opened"] == {"blocks.0", "blocks.1", "blocks.2", "blocks.3", "head"}
    assert sorted(b["scope"] for b in fold["boxes"].values()) == \
        ["blocks.0.act", "blocks.1.act", "blocks.2.act", "blocks.3.act"]
    assert fold["visible"] == 1 + 4 * 3 + 4   # x, each block's W, b and act box, the head


def test_repeated_blocks_are_boxes_of_one_kind():
    fold = folding(mg.trace_of(blocks_loss()), budget=12)
    boxes = {b["scope"]: b for b in fold["boxes"].values()}
    assert {boxes[f"blocks.{i}"]["kind"] for i in range(4)} == {"A"}
    assert boxes["blocks.0"]["alike"] == 4
    assert boxes["head"]["kind"] is None and boxes["head"]["alike"] == 1
    dot = to_dot(mg.trace_of(blocks_loss()), fold=fold)
    assert dot.count("kind A (x4)") == 4


def test_a_box_has_its_size_its_border_and_edges_in_and_out():
    trace = mg.trace_of(blocks_loss(n_blocks=2))
    nodes = {n["id"]: n for n in trace["nodes"]}
    fold = folding(trace, budget=5)   # x and three boxes
    box = fold["boxes"]["s:blocks.0"]
    members = [n["id"] for n in trace["nodes"] if n["scope"][:1] == ["blocks.0"]]
    assert sorted(box["members"]) == sorted(members)
    assert box["ops"] == sum(nodes[m]["type"] == "op" for m in members) == 3
    # its border: the tanh, whose output blocks.1's matmul uses
    assert [nodes[op]["name"] for op in box["border"]] == ["tanh"]
    dot = to_dot(trace, fold=fold)
    box0, box1 = dot_name(dot, "s:blocks.0"), dot_name(dot, "s:blocks.1")
    assert ":" not in box0                                                # (":" means a port)
    assert re.search(rf'\tv0 -> {box0} \[.*id=b\d+', dot)                 # x goes in
    assert len(re.findall(rf'\t{box0} -> {box1} \[', dot)) == 1          # out, once
    for member in members:
        assert not re.search(rf'^\t{member} \[', dot, re.M)               # drawn only as the box


def test_graphs_without_scopes_get_runs_of_nodes():
    trace = mg.trace_of(chain(600))   # 1,204 nodes
    paths = scope_paths(trace, budget=150)
    runs = {p[0] for p in paths.values() if p}
    assert len(runs) == 13 and "nodes 1-100" in runs and "nodes 1201-1202" in runs
    assert {p for p in paths.values() if p and p[0] == "nodes 101-200"} == \
        {("nodes 101-200", f"nodes {k}-{k + 9}") for k in range(101, 201, 10)}   # nested by tens
    leaves = {n["name"]: n["id"] for n in trace["nodes"]
              if n["type"] == "variable" and n["op"] is None}
    assert paths[leaves["w"]] == ()                    # used by every run: drawn outside
    assert paths[leaves["x"]] == ("nodes 1-100", "nodes 1-10")   # used by the first run only
    fold = folding(trace, budget=150)
    # the deepest level that fits: the runs of 10 (120 boxes), the last run's 2 nodes, and w
    assert fold["visible"] == 123 and len(fold["opened"]) == 13
    # runs of 10 hold 5 ops: 3 tanh and 2 mul, or 2 and 3, alternately: two kinds
    kinds = [b["kind"] for b in fold["boxes"].values()]
    assert kinds.count("A") == 60 and kinds.count("B") == 59 and kinds[0] is None
    fold = folding(trace, budget=20)   # runs of 1,000 (at most 10), then of 100 fit
    assert fold["opened"] == {"nodes 1-1000", "nodes 1001-1202"} and fold["visible"] == 14
    assert scope_paths(mg.trace_of(chain(10)), budget=150) == \
        {n["id"]: () for n in mg.trace_of(chain(10))["nodes"]}   # small: no runs


def test_stepper_expand_and_collapse_from_python():
    stepper = BackwardStepper(blocks_loss(), max_nodes=12)
    assert stepper.expanded == [] and "s:blocks.3" in stepper.folding["boxes"]
    stepper.expand("blocks.3.act")   # opens blocks.3 too: a scope inside a closed one is hidden
    assert stepper.expanded == ["blocks.3", "blocks.3.act"]
    assert 'id="c:blocks.3.act"' in stepper.dot and "s:blocks.3" not in stepper.folding["boxes"]
    assert stepper.folding["frames"] == ["c:blocks.3", "c:blocks.3.act"]
    stepper.collapse("blocks.3")     # and everything inside it
    assert stepper.expanded == [] and "s:blocks.3" in stepper.folding["boxes"]
    with pytest.raises(ValueError, match=r"no scope 'block7'.*'blocks.0'.*dots"):
        stepper.expand("block7")


def test_graphview_expand_argument_and_a_click_from_the_page():
    view = GraphView(blocks_loss(), max_nodes=12, expand=["blocks.1"])
    assert view.expanded == ["blocks.1"] and "s:blocks.1.act" in view.folding["boxes"]
    view.expanded = ["blocks.1", "blocks.1.act", "head.x"]   # as the page sets it (unknown:
    # ignored)
    assert "s:blocks.1.act" not in view.folding["boxes"] and 'id="c:blocks.1.act"' in view.dot
    view.expanded = ["blocks.1.act"]   # the frame of blocks.1 clicked: its inner scope closes too
    assert "s:blocks.1" in view.folding["boxes"] and "c:blocks.1.act" not in view.dot


def test_stepping_is_unchanged_by_collapse():
    stepper = BackwardStepper(blocks_loss(), max_nodes=12)
    stepper.step(3)
    before = stepper.current_trace["events"][:]
    stepper.expand("blocks.2")
    stepper.step(2)
    stepper.collapse("blocks.2")
    stepper.finish()
    events = stepper.current_trace["events"]
    assert events[:len(before)] == before and events[-1]["type"] == "consume"
    applied = {e["node"] for e in events if e["type"] == "apply"}
    assert applied == {n["id"] for n in stepper.current_trace["nodes"] if n["type"] == "op"}


@settings(max_examples=25, deadline=None)
@given(n_blocks=st.integers(1, 6), chain_ops=st.integers(0, 400), budget=st.integers(8, 200),
       opened=st.sets(st.integers(0, 7), max_size=4))
def test_every_node_is_drawn_once_and_every_edge_between_boxes_is_there(n_blocks, chain_ops,
                                                                         budget, opened):
    loss = blocks_loss(n_blocks)
    for _ in range(chain_ops):   # then a long unscoped tail
        loss = loss.tanh()
    trace = mg.trace_of(loss.sum())
    default = folding(trace, budget)
    scopes = sorted({s for p in default["paths"].values() for s in p})
    fold = folding(trace, budget, opened=default["opened"] | {scopes[i] for i in opened
                                                              if i < len(scopes)})
    dot = to_dot(trace, fold=fold)
    in_boxes = [m for box in fold["boxes"].values() for m in box["members"]]
    drawn = [n["id"] for n in trace["nodes"]
             if re.search(rf'^\s+{n["id"]} \[.*\bid={n["id"]}[ \]]', dot, re.M)]
    assert len(in_boxes) == len(set(in_boxes))
    assert sorted(in_boxes + drawn) == sorted(n["id"] for n in trace["nodes"])
    assert fold["visible"] == len(drawn) + len(fold["boxes"])
    if len(trace["nodes"]) <= budget:
        assert fold["boxes"] == {}
    where = {m: box_id for box_id, box in fold["boxes"].items() for m in box["members"]}
    for edge in trace["edges"]:
        if edge["kind"] != "parent":
            continue
        source, target = where.get(edge["source"]), where.get(edge["target"])
        if source and source == target:
            continue   # inside one box
        names = [dot_name(dot, i) if i else n for i, n in ((source, edge["source"]),
                                                           (target, edge["target"]))]
        assert re.search(rf'^\t{names[0]} -> {names[1]} \[', dot, re.M), (edge, names)
