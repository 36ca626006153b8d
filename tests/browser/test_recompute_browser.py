"""Lesson 09's checkpoint stepper in Chromium (issue 19): one W2, read again by the recompute,
and a recompute that is stepped one event at a time.

The page is a save_html file opened from file:// (the widget's own JavaScript is what is tested).
"""
from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad.widgets import BackwardStepper, save_html

from test_export import OfflinePage  # noqa: F401  (the offline fixture's page class)
from test_export import offline  # noqa: F401  (pytest fixture)
from test_widgets import click, snapshot, wait_for


@pytest.fixture(scope="module")
def checkpoint_page(tmp_path_factory):
    """The cell of lesson 09, section 5, as a page."""
    W1 = mg.create_leaf(np.array([[0.5, -0.2], [0.3, 0.8]]), requires_grad=True, name="W1")
    W2 = mg.create_leaf(np.array([[1.0, 0.4], [-0.6, 0.2]]), requires_grad=True, name="W2")
    xs = mg.create_leaf(np.array([[1.0, 2.0]]), name="x")

    def segment(h, W):
        return (h @ W).tanh()

    with mg.record("a checkpointed segment") as rec:
        loss = mg.checkpoint(segment, (xs @ W1).tanh(), W2).sum()
        loss.backward()
    path = tmp_path_factory.mktemp("recompute") / "checkpoint.html"
    return save_html(BackwardStepper.from_trace(rec.trace), path), W2.grad.copy()


def names(root) -> list[str]:
    return root.evaluate("(root) => [...root.querySelectorAll('svg.mg-svg g.node')]"
                         ".map((g) => g.getAttribute('aria-label'))")


def test_w2_is_drawn_once_and_read_again_by_the_recompute(offline, checkpoint_page, tmp_path):  # noqa: F811
    path, w2_grad = checkpoint_page
    view = offline(path)
    root, _ = view.open()
    wait_for(root, lambda s: s["graph"] == "ready", "the graph")
    svg = root.locator("svg.mg-svg")
    # One node is W2; the recompute's leaf says it is W2 read again, and a dotted "again" line
    # joins the two (and the saved tanh output to its own stand-in).
    drawn = names(root)
    assert sum(n.startswith("parameter W2,") or n == "parameter W2" for n in drawn) == 1, drawn
    assert sum(n.startswith("parameter W2 (again)") for n in drawn) == 1, drawn
    labels = svg.locator("g.node text").all_text_contents()
    assert labels.count("W2") == 1 and labels.count("W2 (again)") == 1, labels
    again = svg.locator("g.edge.again")
    assert again.count() == 2
    assert again.first.locator("path").evaluate("p => getComputedStyle(p).strokeDasharray") != "none"
    legend = root.locator('.mg-legend [data-legend="again"]')
    assert legend.is_visible() and "read again" in legend.text_content()
    # Its inspector names the array it reads again.
    root.locator("svg.mg-svg g.node", has_text="W2 (again)").hover()
    inspector = root.locator(".mg-inspector").text_content()
    assert "same array as" in inspector and "W2 (2x2)" in inspector, inspector

    # Step through: every recompute step is one event (one line of the step text), and names
    # what it recorded.
    click(root, "first")
    snap = wait_for(root, lambda s: s["frame"] == 0, "the first step")
    recompute = []
    while root.locator('button[data-action="step"]').is_enabled():
        frame = snap["frame"]
        click(root, "step")
        snap = wait_for(root, lambda s: s["frame"] == frame + 1, f"step {frame + 1}")
        if snap["dataPhase"] == "recompute":
            recompute.append(root.locator(".mg-sentence li").all_text_contents())
        if len(recompute) == 2:
            view.page.screenshot(path=str(tmp_path / "recompute-w2-again.png"), full_page=True)
    assert [len(lines) for lines in recompute] == [1] * 5, recompute
    texts = [lines[0] for lines in recompute]
    assert texts[0].startswith("leaf tanh output (again)") and texts[1].startswith("leaf W2 (again)")
    assert "the same array as W2" in texts[1], texts[1]
    assert [t.split("(")[0] for t in texts[2:]] == ["recompute: matmul", "recompute: tanh",
                                                    "recompute: recompute_seed"], texts
    # At the end both nodes carry W2's gradient (numpy's): the stand-in's, handed back to W2.
    drawn = names(root)
    for name in ("parameter W2, ", "parameter W2 (again), "):
        hit = [n for n in drawn if n.startswith(name)]
        assert len(hit) == 1 and "gradient assigned (=) [" in hit[0], (name, hit)
        shown = [float(v) for v in hit[0].split("[")[1].rstrip("]").split(",")]
        np.testing.assert_allclose(shown, w2_grad.ravel()[:len(shown)], rtol=1e-3)
    view.assert_clean()


def test_the_again_legend_stays_hidden_without_a_recompute(offline, tmp_path):  # noqa: F811
    w = mg.create_leaf(np.array([0.5, -1.0]), name="w", requires_grad=True)
    path = save_html(BackwardStepper((w * w).sum()), tmp_path / "plain.html")
    view = offline(path)
    root, _ = view.open()
    wait_for(root, lambda s: s["graph"] == "ready", "the graph")
    assert root.locator('.mg-legend [data-legend="saved"]').is_visible()
    assert not root.locator('.mg-legend [data-legend="again"]').is_visible()
    assert snapshot(root)["graph"] == "ready"
    view.assert_clean()
