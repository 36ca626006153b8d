"""The picture's box in the scrolling notebook (issue 19): it grows with the drawing up to most of
the window (min(80vh, 1200px)) and scrolls only beyond that; "fit" never makes labels smaller than
8 px (a graph too big for that keeps scrolling). In Chromium, from file:// and in JupyterLab.
"""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import minigrad as mg
from minigrad.widgets import BackwardStepper, save_html

from test_export import OfflinePage  # noqa: F401  (the offline fixture's page class)
from test_export import offline  # noqa: F401  (pytest fixture)
from test_widgets import wait_for


def tall(k):
    """k branches x_i * w -> tanh, summed by a tree of adds: a drawing about k rows tall."""
    w = mg.create_leaf(np.array([0.5, -1.0]), name="w", requires_grad=True)
    hs = [(mg.create_leaf(np.array([1.0 + i, 2.0]), name=f"x{i}") * w).tanh() for i in range(k)]
    while len(hs) > 1:
        hs = [hs[i] + hs[i + 1] if i + 1 < len(hs) else hs[i] for i in range(0, len(hs), 2)]
    return hs[0].sum()


TALL = inspect.getsource(tall)   # (the same builder runs in the notebook below)

BOX_JS = """(root) => { const g = root.querySelector('.mg-graph');
  return { client: g.clientHeight, scroll: g.scrollHeight, label: parseFloat(g.dataset.labelPx),
           max: parseFloat(getComputedStyle(g).maxHeight), window: innerHeight }; }"""
OLD_CAP = 560   # px: the box's fixed maximum before


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    out = tmp_path_factory.mktemp("graph_box")
    return {k: save_html(BackwardStepper(tall(k)), out / f"tall{k}.html") for k in (3, 14, 120)}


def box(offline, path, height=900):  # noqa: F811
    view = offline(path)
    view.page.set_viewport_size({"width": 1280, "height": height})
    root, _ = view.open()
    wait_for(root, lambda s: s["graph"] == "ready", "the graph")
    return view, root, root.evaluate(BOX_JS)


def test_the_box_grows_with_the_drawing_and_scrolls_only_beyond_most_of_the_window(offline, pages):  # noqa: F811
    view, root, small = box(offline, pages[3])
    assert small["scroll"] <= small["client"] + 1 and small["client"] < 400, small
    assert small["label"] >= 8
    view.assert_clean()
    # Taller than the old fixed cap, shorter than 80% of the window: all of it, no inner scroll.
    view, root, mid = box(offline, pages[14])
    assert mid["max"] == pytest.approx(0.8 * 900, abs=1), mid
    assert OLD_CAP < mid["client"] <= mid["max"] and mid["scroll"] <= mid["client"] + 1, mid
    assert mid["label"] >= 8, mid
    view.assert_clean()
    # Far taller than the window: the box stops at 80vh and scrolls; "fit" keeps labels >= 8 px
    # (so it cannot fit this one: it says so by still scrolling).
    view, root, big = box(offline, pages[120])
    assert big["client"] == pytest.approx(big["max"], abs=2) and big["scroll"] > big["client"], big
    assert big["label"] >= 8, big
    root.locator('button[data-action="zoom-fit"]').click()
    fitted = root.evaluate(BOX_JS)
    assert fitted["label"] == pytest.approx(8, abs=0.05) and fitted["scroll"] > fitted["client"], fitted
    view.assert_clean()
    # A smaller window: a smaller box (80vh of 600 px).
    view, root, short = box(offline, pages[14], height=600)
    assert short["max"] == pytest.approx(480, abs=1) and short["client"] <= 481, short
    assert short["label"] >= 8, short
    view.assert_clean()


def test_in_jupyterlab_the_graph_is_not_a_small_scroll_box(lab, page, browser_log):
    from browser_harness import open_and_run_all, write_notebook

    code = "import numpy as np\nimport minigrad as mg\nfrom minigrad.widgets import BackwardStepper\n" + TALL
    path = write_notebook(lab.root, "graph_box.ipynb", [code, "BackwardStepper(tall(14))"])
    nb = open_and_run_all(page, lab, path)
    root = nb.wait_for_output_selector(1, ".mg-stepper")
    wait_for(root, lambda s: s["graph"] == "ready", "the graph")
    shown = root.evaluate(BOX_JS)
    assert OLD_CAP < shown["client"] and shown["scroll"] <= shown["client"] + 1, shown
    assert shown["client"] <= 0.8 * shown["window"] + 1 and shown["label"] >= 8, shown
    browser_log.assert_no_console_errors()
