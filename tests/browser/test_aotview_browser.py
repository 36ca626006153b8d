"""AotView in a real JupyterLab driven by Chromium.

What a student does with it, checked against what the kernel says: the picture holds one node
per node of the kernel's document, the `saved.` reads and the greyed tensors are where the
backward graph says; Step replays the derivation one rule at a time (the rule's sentence and
the operations it emitted appear, nothing later does); the kernel and the view agree on the
step shown, both ways; the memory plan's live ranges are drawn; user text stays text. Figures
(first paint, restyle time) are printed and repeated in the run's summary.
"""
from __future__ import annotations

import json
import time

from playwright.sync_api import expect

from browser_harness import open_and_run_all, write_notebook
from test_widgets import click, kernel_json, no_dialogs

IMG = "<img src=x onerror=alert(1)>"
TITLE = "<b>aot</b><img src=y onerror=alert(3)>"

SETUP = r'''
import json as _json
import numpy as np
import minigrad as mg
from minigrad import aot
from minigrad.widgets import AotView

model = mg.nn.MLP([4, 6, 3], seed=0, dtype=np.float64)
x = np.random.default_rng(0).normal(size=(2, 4))
targets = np.array([0, 2])
gate = mg.create_leaf(np.full(3, 0.5), requires_grad=True, name=%r)

def f(x, t):
    h = model(x)
    return mg.cross_entropy(h * h.tanh() * gate + h, t)   # h fans out; gate has a user name

forward = aot.capture(f, x, targets, params=[*model.parameters(), gate])
view = AotView(forward, title=%r)

def doc_info(v):
    d = v.trace
    return {"ids": [n["id"] for n in d["nodes"]],
            "backward": [n["id"] for n in d["nodes"] if n["graph"] == "backward"],
            "greyed": sorted(n["id"] for n in d["nodes"]
                             if n.get("why_no_grad") or n.get("needs_grad") is False),
            "sums": sorted(n["id"] for n in d["nodes"] if n.get("kind") == "accumulate"),
            "saved_edges": sum(e["kind"] == "saved" for e in d["edges"]),
            "steps": d["steps"], "frame": v.frame,
            "labels": {n["id"]: n["label"] for n in d["nodes"]},
            "nodes": {n["id"]: {"step": n.get("step"), "graph": n["graph"]} for n in d["nodes"]},
            "ranges": [[r["tensor"], r["node"]] for r in d["plan"]["ranges"]],
            "peak": d["plan"]["peak_bytes"], "save": d["save"]}
print(_json.dumps(doc_info(view)))
''' % (IMG, TITLE)

SNAPSHOT = """
(root) => {
  const el = root.parentElement;
  const nodes = [...root.querySelectorAll('svg.mg-svg g.node')];
  const having = (c) => nodes.filter((g) => g.classList.contains(c)).map((g) => g.id);
  const edges = [...root.querySelectorAll('svg.mg-svg g.edge')];
  const phase = root.querySelector('.mg-phase');
  return {
    dataset: { ...el.dataset },
    frame: el.dataset.frame === undefined ? null : Number(el.dataset.frame),
    graph: el.dataset.graph || null,
    ids: nodes.map((g) => g.id),
    future: having('mg-future'), current: having('mg-current'), fresh: having('mg-new'),
    nograd: having('nograd'), sums: having('accumulate'),
    savedEdges: edges.filter((g) => g.classList.contains('saved')).length,
    savedVisible: edges.filter((g) => g.classList.contains('saved') && !g.classList.contains('mg-future')).length,
    phase: phase ? phase.getAttribute('data-phase') : null,
    sentence: (root.querySelector('.mg-sentence') || {}).textContent || '',
    counter: (root.querySelector('.mg-counter') || {}).textContent || '',
    ranges: [...root.querySelectorAll('.mg-plan [data-range]')].map((r) => r.getAttribute('data-range')),
    hot: [...root.querySelectorAll('.mg-plan .mg-plan-hot')].map((r) => r.getAttribute('data-range')),
    inspector: (root.querySelector('.mg-inspector') || {}).textContent || '',
    peak: (root.querySelector('.mg-plan-peak') || {}).textContent || '',
    saves: (root.querySelector('.mg-saves') || {}).textContent || '',
  };
}
"""


def snap(root) -> dict:
    return root.evaluate(SNAPSHOT)


def wait(root, predicate, what: str, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    s = snap(root)
    while not predicate(s):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {json.dumps(s)[:2000]}")
        time.sleep(0.05)
        s = snap(root)
    return s


def test_aot_view_replays_the_derivation(lab, page, browser_log, report_figure):
    dialogs = no_dialogs(page)
    path = write_notebook(lab.root, "aotview.ipynb", [SETUP, "view"])
    nb = open_and_run_all(page, lab, path)
    info = json.loads(nb.output_text(0).strip().splitlines()[-1])
    root = nb.wait_for_output_selector(1, ".mg-aotview")
    s = wait(root, lambda s: s["graph"] == "ready", "the two graphs to be drawn")
    report_figure(f"AotView ({len(info['ids'])} nodes, {len(info['steps'])} steps): first paint "
                  f"{s['dataset'].get('firstPaintMs')} ms, layout {s['dataset'].get('layoutMs')} "
                  f"ms, engine wait {s['dataset'].get('engineWaitMs')} ms")

    # -- the picture is the kernel's document ------------------------------------------------
    assert sorted(s["ids"]) == sorted(info["ids"]) and len(s["ids"]) == len(set(s["ids"]))
    assert s["savedEdges"] == info["saved_edges"] > 0
    assert sorted(s["nograd"]) == info["greyed"] and info["greyed"]
    assert sorted(s["sums"]) == info["sums"] and len(info["sums"]) == 2
    for node_id, label in info["labels"].items():
        if label == IMG or label == f"d_{IMG}":
            texts = root.locator(f'g.node[id="{node_id}"] text').all_text_contents()
            assert label in texts, (label, texts)
    assert root.locator(".mg-title").text_content() == TITLE

    # -- the memory plan: one row per live range of the kernel's plan ------------------------
    assert s["ranges"] == [name for name, _ in info["ranges"]] and s["ranges"]
    name, node = next((name, node) for name, node in info["ranges"] if name.startswith("d_"))
    root.locator(f'.mg-plan [data-range="{name}"] button').click()
    s = wait(root, lambda s: s["hot"] == [name], "the clicked range to be marked")
    assert info["labels"][node] in s["inspector"]             # ... and its tensor inspected
    root.locator(f'g.node[id="{node}"]').click()               # (a click on it unpins)

    # -- frame 0: the forward graph alone -------------------------------------------------------
    assert s["frame"] == info["frame"] == 0 and s["phase"] == "captured"
    assert sorted(s["future"]) == sorted(info["backward"])
    assert s["savedVisible"] == 0
    # one numbering: step 0 is before any rule ran, `view.frame = k` shows "step k"
    last_step = len(info["steps"]) - 1
    assert s["counter"] == f"step 0 of {last_step}", s["counter"]
    # the save list is what the derivation finds at its last step: not shown before it
    found = next(k for k, st in enumerate(info["steps"]) if st["kind"] == "required_saves")
    assert s["saves"] == f"required saves: found at step {found}, once every rule has run"

    # -- Step to the first rule: what it emitted appears, nothing later ------------------------
    first_rule = next(k for k, st in enumerate(info["steps"]) if st["kind"] == "apply_rule")
    for _ in range(first_rule):
        click(root, "step")
    s = wait(root, lambda s: s["frame"] == first_rule, "the first apply_rule step")
    step = info["steps"][first_rule]
    assert s["phase"] == "derive" and s["current"] == [step["op"]]
    made = [i for i, n in info["nodes"].items() if n["graph"] == "backward" and n["step"] is not None
            and n["step"] <= first_rule]
    assert sorted(set(info["backward"]) - set(s["future"])) == sorted(made)
    assert set(step["emitted"]) <= set(s["fresh"]) and step["emitted"]
    assert step["text"] in s["sentence"]
    assert kernel_json(nb, "print(_json.dumps(view.frame))") == first_rule   # view -> kernel

    # -- the keyboard ------------------------------------------------------------------------------
    root.focus()
    page.keyboard.press("ArrowRight")
    s = wait(root, lambda s: s["frame"] == first_rule + 1, "ArrowRight")
    assert info["steps"][first_rule + 1]["text"] in s["sentence"]
    page.keyboard.press("ArrowLeft")
    wait(root, lambda s: s["frame"] == first_rule, "ArrowLeft")
    page.keyboard.press("End")
    s = wait(root, lambda s: s["phase"] == "done", "End")
    assert s["frame"] == len(info["steps"]) - 1 and s["future"] == []
    assert s["savedVisible"] == info["saved_edges"]
    assert s["counter"] == f"step {last_step} of {last_step}", s["counter"]
    assert s["saves"].startswith(f"required saves ({len(info['save'])}): ")
    assert all(name in s["saves"] for name in info["save"]), (s["saves"], info["save"])
    for button in ("step", "last"):
        expect(root.locator(f'button[data-action="{button}"]')).to_be_disabled()
    page.keyboard.press("Home")
    wait(root, lambda s: s["frame"] == 0, "Home")

    # -- the kernel moves the view ---------------------------------------------------------------
    nb.run_new_cell(f"view.frame = {first_rule + 2}")
    s = wait(root, lambda s: s["frame"] == first_rule + 2, "the view to follow view.frame")
    assert info["steps"][first_rule + 2]["text"] in s["sentence"]
    assert s["counter"] == f"step {first_rule + 2} of {last_step}", s["counter"]

    # -- replay timing: every step's restyle -------------------------------------------------------
    click(root, "first")
    times = []
    for k in range(1, len(info["steps"])):
        click(root, "step")
        s = wait(root, lambda s, k=k: s["frame"] == k, f"step {k}")
        times.append(float(s["dataset"]["lastStepMs"]))
    # A figure, not an assertion: a time depends on the machine and its load (the brief's rule).
    report_figure(f"AotView step restyle (ms): {times}; max {max(times)}")
    assert len(times) == len(info["steps"]) - 1 and all(t >= 0 for t in times), times

    page.wait_for_timeout(300)
    counts = page.evaluate("""() => ({
        img: document.querySelectorAll('.mg-root img').length,
        b: document.querySelectorAll('.mg-root b').length })""")
    assert counts == {"img": 0, "b": 0}, counts
    assert dialogs == []
    browser_log.assert_no_console_errors()
    browser_log.assert_all_requests_local()


def test_aot_view_save_html_replays_offline(browser, tmp_path, report_figure):
    import numpy as np

    import minigrad as mg
    from minigrad import aot
    from minigrad.widgets import AotView, save_html
    from test_export import OfflinePage

    model = mg.nn.MLP([4, 6, 3], seed=0, dtype=np.float64)
    w = mg.create_leaf(np.full(3, 0.5), requires_grad=True, name=IMG)
    forward = aot.capture(lambda x, t: mg.cross_entropy(model(x) * w, t), np.ones((2, 4)),
                          np.array([0, 1]), params=[*model.parameters(), w])
    view = AotView(forward, title=TITLE)
    path = save_html(view, tmp_path / "aot.html")
    report_figure(f"AotView save_html: {path.stat().st_size / 1024:.0f} KiB "
                  f"({len(view.trace['nodes'])} nodes, {len(view.steps)} steps)")
    page = OfflinePage(browser, path)
    try:
        root, seconds = page.open()
        s = wait(root, lambda s: s["graph"] == "ready" and "firstPaintMs" in s["dataset"],
                 "the exported picture")
        report_figure(f"AotView export: loaded in {seconds:.2f} s, first paint "
                      f"{s['dataset']['firstPaintMs']} ms")
        assert sorted(s["ids"]) == sorted(n["id"] for n in view.trace["nodes"])
        assert s["frame"] == 0 and s["phase"] == "captured"
        sentences = [s["sentence"]]
        for k in range(1, len(view.steps)):
            click(root, "step")
            s = wait(root, lambda s, k=k: s["frame"] == k, f"exported step {k}")
            assert view.steps[k]["text"] in s["sentence"]
            sentences.append(s["sentence"])
        assert s["phase"] == "done" and s["future"] == []
        assert len(set(sentences)) == len(sentences)
        assert root.locator(".mg-title").text_content() == TITLE
        assert page.page.evaluate("() => document.querySelectorAll('img, b').length") == 0
        page.assert_clean()
    finally:
        page.close()


def test_aot_view_fits_in_the_window_with_its_plan(lab, page, browser_log):
    """Lesson 12's AotView (a transformer block and its memory plan): the controls, the two
    graphs and the plan are on screen together in a 1400 x 900 window."""
    page.set_viewport_size({"width": 1400, "height": 900})
    path = write_notebook(lab.root, "aotview_tall.ipynb", ['''
import minigrad as mg
from minigrad import aot
from minigrad.widgets import AotView
model = mg.nn.TinyTransformer(vocab=11, dim=32, n_layers=1, n_heads=4, hidden=64, seed=0)
ids, targets = mg.data.sort_digits(1, 8, seed=3)
forward = aot.capture(model, ids, targets, params=model, input_names=["ids", "targets"])
view = AotView(forward, title="one block ahead of time")
''', "view"])
    nb = open_and_run_all(page, lab, path)
    root = nb.wait_for_output_selector(1, ".mg-aotview")
    wait(root, lambda s: s["graph"] == "ready", "the two graphs to be drawn")
    height = root.evaluate("(root) => root.getBoundingClientRect().height")
    assert height <= 900 - 100, f"AotView is {height:.0f} px high: taller than the window"
    # the plan's row names: none cut by the column, no two alike ("blocks.0.attn_n…" twice)
    names = root.evaluate("""(root) => [...root.querySelectorAll('.mg-plan-name')].map((b) =>
        ({ text: b.textContent, full: b.title, cut: b.scrollWidth > b.clientWidth + 1 }))""")
    assert names and not [n for n in names if n["cut"]], [n for n in names if n["cut"]]
    assert len({n["text"] for n in names}) == len(names), [n["text"] for n in names]
    browser_log.assert_no_console_errors()
