"""MemoryView.compare in a real JupyterLab driven by Chromium, and its save_html page offline.

Three runs of one training step (keep everything, checkpoint every 2 layers, one checkpoint per
layer) are recorded in the kernel; the view must draw one line per run, and the peaks it shows
must be the pools' own high-water marks, which the kernel reads off the allocators (the view
computes its peaks from the trace events, so the two are independent).
"""
from __future__ import annotations

import json

from browser_harness import open_and_run_all, write_notebook
from test_export import OfflinePage  # noqa: F401  (the offline fixture's page class)
from test_export import offline  # noqa: F401  (pytest fixture)

RUNS = r'''
import json
import numpy as np
import minigrad as mg
from minigrad.widgets import MemoryView, save_html

def layers(h, *ws):
    for W in ws:
        h = mg.relu(h @ W)
    return h

def run(k, n=6):
    rng = np.random.default_rng(0)
    ws = [mg.create_leaf(rng.normal(size=(32, 32)).astype(np.float32) * 0.2, requires_grad=True)
          for _ in range(n)]
    x = mg.create_leaf(np.ones((16, 32), np.float32))
    pool = mg.Pool(f"graph k={k}")
    with mg.record() as rec, pool.scope():
        h = x
        for i in range(0, n, k or n):
            h = mg.checkpoint(layers, h, *ws[i:i + k]) if k else layers(h, *ws)
        (h * h).sum().backward()
    return rec.trace, pool.high_water

runs = {"keep <all>": run(0), "every 2": run(2), "every layer": run(1)}
view = MemoryView.compare({name: t for name, (t, _) in runs.items()}, title="save vs checkpoint")
print(json.dumps({name: hw for name, (_, hw) in runs.items()}))
'''

PEAKS_JS = """(root) => [...root.querySelectorAll('.mg-runs li')].map((li) => ({
  name: li.querySelector('.mg-run-name').textContent,
  peak: Number(li.dataset.peak),
  text: li.textContent }))"""


def test_compare_draws_one_line_per_run_with_the_pools_peaks(lab, page, browser_log, tmp_path,
                                                            offline):  # noqa: F811
    path = write_notebook(lab.root, "memory_compare.ipynb", [RUNS, "view"])
    nb = open_and_run_all(page, lab, path)
    high_water = json.loads(nb.output_text(0).strip().splitlines()[-1])
    root = nb.wait_for_output_selector(1, ".mg-memorycompare")
    root.locator(".mg-runs li").nth(2).wait_for()
    shown = root.evaluate(PEAKS_JS)
    assert [r["name"] for r in shown] == list(high_water)   # "<all>" stays text
    assert {r["name"]: r["peak"] for r in shown} == high_water
    assert root.locator("polyline.mg-used-line").count() == 3
    keep, every2 = shown[0]["peak"], shown[1]["peak"]
    assert every2 < keep
    assert f"({every2 / keep:.2f}× keep <all>)" in shown[1]["text"]
    print(f"MemoryView.compare in JupyterLab: {[r['text'] for r in shown]}")
    browser_log.assert_no_console_errors()
    browser_log.assert_all_requests_local()

    # the same view written with save_html replays from file:// with no network
    html = tmp_path / "compare.html"
    nb.run_new_cell(f"save_html(view, {str(html)!r})")
    view = offline(html)
    page_root, _ = view.open()
    page_root.locator(".mg-runs li").nth(2).wait_for()
    assert page_root.evaluate(PEAKS_JS) == shown
    view.assert_clean()


STEPPER = r'''
import numpy as np
import minigrad as mg
from minigrad.widgets import BackwardStepper
W1 = mg.create_leaf(np.array([[0.5, -0.2], [0.3, 0.8]]), requires_grad=True, name="W1")
W2 = mg.create_leaf(np.array([[1.0, 0.4], [-0.6, 0.2]]), requires_grad=True, name="W2")
x = mg.create_leaf(np.array([[1.0, 2.0]]), name="x")
def segment(h, W):
    return (h @ W).tanh()
loss = mg.checkpoint(segment, (x @ W1).tanh(), W2).sum()
stepper = BackwardStepper(loss)
'''


def test_live_stepper_shows_the_recompute_phase(lab, page, browser_log):
    from test_widgets import click, snapshot, wait_for

    path = write_notebook(lab.root, "stepper_recompute.ipynb", [STEPPER, "stepper"])
    nb = open_and_run_all(page, lab, path)
    root = nb.wait_for_output_selector(1, ".mg-stepper")
    wait_for(root, lambda s: s["graph"] == "ready", "the graph")
    seen, hints = [], set()   # (phase shown, the step's sentence), one per click on Step
    for _ in range(60):
        snap = snapshot(root)
        seen.append((snap["dataPhase"], snap["sentence"]))
        hints.add((snap["dataPhase"], root.locator(".mg-phase-hint").text_content()))
        if snap["dataPhase"] == "released":
            break
        frame = snap["frame"]
        click(root, "step")
        wait_for(root, lambda s: s["frame"] == frame + 1 or s["dataPhase"] == "released",
                 "the next live step")
    phases = [p for p, _ in seen]
    runs = [p for i, p in enumerate(phases) if i == 0 or p != phases[i - 1]]
    assert runs == ["forward", "backward", "recompute", "backward", "released"], runs
    recompute = [text for p, text in seen if p == "recompute"]
    assert recompute and all("recompute: " in text for text in recompute), recompute
    assert ("recompute", "recompute: a checkpoint runs its segment again from the saved "
                         "inputs, recording it this time") in hints, hints
    print(f"live stepper: {len(seen)} steps, phases {runs}")
    # the kernel's engine did run: after the last step both weights have their gradients
    out = nb.run_new_cell("print(W1.grad is not None and W2.grad is not None)")
    assert "True" in out, out
    browser_log.assert_no_console_errors()
    browser_log.assert_all_requests_local()
