"""What a first render shows: a graph wider than its box opens where its output is drawn (the
loss of lesson 08, the leaked total of lesson 07), since that is what the text talks about."""

from __future__ import annotations

from browser_harness import open_and_run_all, write_notebook

SETUP = r'''
import numpy as np
import minigrad as mg
from minigrad.widgets import GraphView

total = mg.create_leaf(0.0)
w = mg.create_leaf(0.5, requires_grad=True, name="w")
for step in range(12):                       # a chain of adds, as lesson 07's leak
    total = total + (w * float(step)).tanh()
total.name = "total"
'''

IN_VIEW = """
(root) => {
  const el = root.parentElement;
  const box = root.querySelector('.mg-graph').getBoundingClientRect();
  const out = [...root.querySelectorAll('svg g.node')].find((g) => g.classList.contains('output'));
  if (!out || el.dataset.graph !== 'ready') return null;
  const r = out.getBoundingClientRect();
  const scroll = root.querySelector('.mg-graph');
  return { inside: r.left >= box.left && r.right <= box.right && r.top >= box.top && r.bottom <= box.bottom,
           scrolls: scroll.scrollWidth > scroll.clientWidth, node: [r.left, r.right], box: [box.left, box.right] };
}
"""


def test_a_wide_graph_opens_at_its_output(lab, page, browser_log):
    nb = open_and_run_all(page, lab, write_notebook(lab.root, "first_render.ipynb",
                                                     [SETUP, "GraphView(total)"]))
    root = nb.wait_for_output_selector(1, ".mg-graphview")
    page.wait_for_function(f"(root) => ({IN_VIEW})(root) !== null", arg=root.element_handle(),
                           polling=100, timeout=30_000)
    page.wait_for_timeout(300)   # (the scroll happens after the picture is mounted)
    seen = root.evaluate(IN_VIEW)
    assert seen["scrolls"], f"the graph must be wider than its box for this test: {seen}"
    assert seen["inside"], f"the output node is not in view at first render: {seen}"
    browser_log.assert_no_console_errors()
