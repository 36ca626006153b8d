"""Scopes drawn as boxes, in real Chromium + JupyterLab: a model of 12 equal blocks reads as 12
boxes of one kind; a click on a box opens it, a click on its frame closes it; Python's
expand()/collapse() redraw the page; stepping names the real node while its scope is closed."""
from __future__ import annotations

from browser_harness import open_and_run_all, write_notebook
from test_widgets import click, kernel_json, snapshot, wait_for

SETUP = r'''
import json as _json
import numpy as np
import minigrad as mg
from minigrad.widgets import BackwardStepper, GraphView

def blocks_loss(n_blocks=12, width=3):
    rng = np.random.default_rng(0)
    h = mg.create_leaf(rng.normal(size=(2, width)), name="x")
    for i in range(n_blocks):
        with mg.name_scope(f"blocks.{i}"):
            W = mg.create_leaf(rng.normal(size=(width, width)) * 0.5, requires_grad=True, name="W")
            b = mg.create_leaf(np.zeros(width), requires_grad=True, name="b")
            h = (h @ W + b).tanh()
    return (h * h).sum()
'''


def boxes(snap) -> list[str]:
    return sorted(i for i in snap["ids"] if i.startswith("s:"))


def test_scopes_are_boxes_that_open_and_close(lab, page, browser_log):
    path = write_notebook(lab.root, "widgets_scopes.ipynb", [
        SETUP,
        "view = GraphView(blocks_loss(), max_nodes=40)\nview",
        "stepper = BackwardStepper(blocks_loss(), max_nodes=40, expand=['blocks.3'])\nstepper",
    ])
    nb = open_and_run_all(page, lab, path)

    # -- GraphView: 12 blocks, 12 boxes of one kind ------------------------------------------
    view = nb.wait_for_output_selector(1, ".mg-graphview")
    snap = wait_for(view, lambda s: s["graph"] == "ready", "the graph view drawn")
    assert boxes(snap) == sorted(f"s:blocks.{i}" for i in range(12))
    labels = view.locator("g.node.scope text").all_text_contents()
    assert labels.count("kind A (x12)") == 12, labels
    view.locator('g.node[id="s:blocks.5"]').hover()
    wait_for(view, lambda s: "blocks.5" in (s["inspector"] or "") and "scope" in s["inspector"],
             "the inspector on a box")
    # a click opens the box in place: its nodes appear in a frame, the other boxes stay
    view.locator('g.node[id="s:blocks.5"]').click()
    # (the page draws it at once; the kernel hears of it right after the picture is painted)
    snap = wait_for(view, lambda s: "s:blocks.5" not in s["ids"] and s["graph"] == "ready"
                    and "toggleMs" in s["dataset"], "blocks.5 opened")
    assert len(boxes(snap)) == 11 and view.locator('g.cluster[id="c:blocks.5"]').count() == 1
    assert kernel_json(nb, "print(_json.dumps(view.expanded))") == ["blocks.5"]
    # a click on its frame closes it again
    view.locator('g.cluster[id="c:blocks.5"] > text').first.click()
    wait_for(view, lambda s: "s:blocks.5" in s["ids"] and "toggleMs" in s["dataset"],
             "blocks.5 closed by its frame")
    assert kernel_json(nb, "print(_json.dumps(view.expanded))") == []

    # -- BackwardStepper: expand= from Python, stepping into a closed box ---------------------
    root = nb.wait_for_output_selector(2, ".mg-stepper")
    snap = wait_for(root, lambda s: s["graph"] == "ready", "the stepper drawn")
    assert "s:blocks.3" not in snap["ids"] and len(boxes(snap)) == 11
    assert root.locator('g.cluster[id="c:blocks.3"]').count() == 1
    for _ in range(4):   # the seed, the sum, the mul, then the tanh of blocks.11
        frame = snapshot(root)["frame"]
        click(root, "step")
        snap = wait_for(root, lambda s: s["frame"] == frame + 1, "a live step")
    assert snap["current"] == ["s:blocks.11"], snap["current"]
    tag = root.locator('g.node[id="s:blocks.11"] .mg-gradtag text').text_content()
    assert tag == "run 1/3", tag
    assert "tanh.backward" in snap["sentence"]
    assert "this step, inside the closed scope blocks.11" in snap["inspector"]
    sentence = snap["sentence"]
    # opened from Python: the same step, now drawn on the real node
    nb.run_new_cell("stepper.expand('blocks.11')")
    snap = wait_for(root, lambda s: "s:blocks.11" not in s["ids"] and s["current"]
                    and not s["current"][0].startswith("s:"), "blocks.11 opened from Python")
    assert snap["sentence"] == sentence and "tanh" in snap["inspector"]
    nb.run_new_cell("stepper.collapse('blocks.11')")
    wait_for(root, lambda s: s["current"] == ["s:blocks.11"], "blocks.11 closed from Python")
    browser_log.assert_no_console_errors()
