"""The page opens and closes scopes itself (widgets/src/trace/open-scopes-dot.js, run here by Node.js): for any
list of open scopes it must write exactly the DOT and box table Python writes, so that the
kernel's `dot` and `folding` always match the picture and a redraw after the kernel answers is
a no-op."""
import importlib.util
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import minigrad as mg
from minigrad.widgets import BackwardStepper, GraphView
from test_widget_collapse import blocks_loss, chain

ROOT = Path(__file__).resolve().parents[1]
CLI = ROOT / "widgets" / "dev" / "open-scopes-dot-cli.mjs"


def _node() -> str:
    spec = importlib.util.spec_from_file_location("find_node", ROOT / "widgets" / "find_node.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found = module.find()
    assert found is not None, "these tests run widgets/src/trace/open-scopes-dot.js with Node.js (18+)"
    return str(found.folder / "node")


def page_draws(view, cases: list[list[str]]) -> list[dict]:
    """What open-scopes-dot.js draws for each list of open scopes, from the traits the page receives."""
    payload = {"trace": view.trace, "table": view.scope_table, "cases": cases}
    out = subprocess.run([_node(), str(CLI)], input=json.dumps(payload), capture_output=True,
                         text=True, check=True, timeout=120)
    return json.loads(out.stdout)


def kernel_draws(view, expanded: list[str]) -> dict:
    view.expanded = expanded
    return {"dot": view.dot, "folding": json.loads(json.dumps(view.folding))}


def scoped_and_nasty():
    """Nested scopes, repeated blocks, and names that need quoting in DOT (quotes, backslashes,
    HTML-like text, entities: Graphviz decodes `&amp;` in labels, so both sides escape `&`)."""
    rng = np.random.default_rng(1)
    h = mg.create_leaf(rng.normal(size=(2, 3)), name='x "in" &amp; \\')
    for i in range(3):
        with mg.name_scope(f"blocks.{i}"):
            W = mg.create_leaf(rng.normal(size=(3, 3)), requires_grad=True, name="<W>")
            with mg.name_scope("graph"):   # a DOT keyword as a scope name
                h = (h @ W).tanh()
            with mg.name_scope("<b>a&lt;b</b>"):   # HTML-like: a frame label, quoted as text
                h = h * 1.0
    with mg.name_scope("<i>top</i>"):   # HTML-like at the top: a frame label of one part
        h = h * 2.0
    with mg.name_scope('head "1" \\N &'):
        return (h * h).sum()


@pytest.mark.parametrize("make, budget", [(lambda: blocks_loss(5), 12), (scoped_and_nasty, 6),
                                          (lambda: chain(700), 150)])
def test_the_page_draws_what_python_draws(make, budget):
    view = GraphView(make(), max_nodes=budget)
    scopes = view.scope_table["scopes"]
    cases = [list(view.expanded), [], scopes[:1], scopes[:3], scopes[-2:], scopes,
             [scopes[-1]], ["no such scope"] + scopes[1:2]]
    for page, expanded in zip(page_draws(view, cases), cases):
        kernel = kernel_draws(view, expanded)
        assert page["dot"] == kernel["dot"], expanded
        assert page["folding"] == kernel["folding"], expanded


@settings(max_examples=10, deadline=None)
@given(n_blocks=st.integers(1, 5), budget=st.integers(6, 60),
       opened=st.lists(st.sets(st.integers(0, 20), max_size=6), min_size=1, max_size=4))
def test_any_choice_of_open_scopes_is_drawn_alike(n_blocks, budget, opened):
    stepper = BackwardStepper(blocks_loss(n_blocks), max_nodes=budget)
    scopes = stepper.scope_table["scopes"]
    cases = [sorted({scopes[i] for i in pick if i < len(scopes)}) for pick in opened]
    for page, expanded in zip(page_draws(stepper, cases), cases):
        assert page == kernel_draws(stepper, expanded), expanded


def test_a_graph_without_scopes_sends_no_table():
    view = GraphView(chain(10))
    assert view.scope_table == {} and page_draws(view, [[]]) is None


def test_a_parameter_shared_by_many_boxes_gets_no_weight_on_its_edges_into_them():
    view = GraphView(chain(700), max_nodes=150)   # w feeds every run of nodes
    w = next(n["id"] for n in view.trace["nodes"] if n["name"] == "w" and n["type"] == "variable")
    into_boxes = [line for line in view.dot.splitlines() if line.startswith(f"\t{w} -> box")]
    assert len(into_boxes) > 2 and all("weight=0" in line for line in into_boxes)
    assert sum("weight=0" in line for line in view.dot.splitlines()) == len(into_boxes)
    assert "weight" not in GraphView(blocks_loss(2)).dot   # small graphs: drawn as before
    [page] = page_draws(view, [view.expanded])
    assert page["dot"] == view.dot
