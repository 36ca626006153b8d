"""minigrad's widgets in a real JupyterLab driven by Chromium.

What a student does, checked against what the kernel says: the BackwardStepper's picture
matches the trace node for node, each click runs the real engine for one more node (the
kernel's `.grad` shows exactly that), the kernel can step the view, the view can scrub back
and forth; how many bytes a widget costs on the wire; how fast the picture is drawn and
restyled; user text stays text. Every figure measured is printed (run with ``-s``).

The page's DOM hooks used here are listed in widgets/README.md ("Hooks for tests").
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from playwright.sync_api import expect

from browser_harness import (
    WebSocketBytes,
    collapse_left_sidebar,
    open_and_run_all,
    open_notebook,
    write_notebook,
)

REPO = Path(__file__).resolve().parents[2]
# The README's picture is rewritten only on request (MINIGRAD_SCREENSHOT=1), so that running the
# tests leaves the working tree as it was; otherwise the shot goes to a temporary folder.
SCREENSHOT = (REPO / "docs" / "stepper.png" if os.environ.get("MINIGRAD_SCREENSHOT") == "1"
              else Path(tempfile.gettempdir()) / "minigrad-stepper.png")

# One read of everything a test looks at in one widget. `root` is the widget's `.mg-root`;
# its parent is the element anywidget gave render() (the timing hooks live on it).
SNAPSHOT_JS = """
(root) => {
  const el = root.parentElement;
  const svg = root.querySelector('svg.mg-svg');
  const nodes = svg ? [...svg.querySelectorAll('g.node')] : [];
  const having = (c) => nodes.filter((g) => g.classList.contains(c)).map((g) => g.id);
  const badges = {};
  for (const b of root.querySelectorAll('[data-pending-for]')) {
    badges[b.getAttribute('data-pending-for')] =
      b.classList.contains('mg-hidden') ? null : b.textContent.trim();
  }
  const tags = {};
  for (const t of root.querySelectorAll('[data-grad-for]')) {
    tags[t.getAttribute('data-grad-for')] =
      t.classList.contains('mg-hidden') ? null : t.textContent.trim();
  }
  const blocks = {};
  for (const b of root.querySelectorAll('.mg-memory [data-block]')) {
    blocks[b.getAttribute('data-block')] = b.getAttribute('data-state');
  }
  const phase = root.querySelector('.mg-phase');
  const text = (sel) => { const e = root.querySelector(sel); return e ? e.textContent : null; };
  return {
    dataset: { ...el.dataset },
    frame: el.dataset.frame === undefined ? null : Number(el.dataset.frame),
    graph: el.dataset.graph || null,
    ids: nodes.map((g) => g.id),
    current: having('mg-current'),
    done: having('mg-done'),
    hasGrad: having('mg-has-grad'),
    gradFirst: having('mg-grad-first'),
    gradSum: having('mg-grad-sum'),
    badges,
    tags,
    blocks,
    names: Object.fromEntries(nodes.map((g) => [g.id, g.getAttribute('aria-label')])),
    edges: svg ? [...svg.querySelectorAll('g.edge')].map((g) => `${g.id} ${[...g.classList].sort().join(' ')}`) : [],
    phase: phase ? phase.textContent.trim() : null,
    dataPhase: phase ? phase.getAttribute('data-phase') : null,
    sentence: text('.mg-sentence'),
    inspector: text('.mg-inspector'),
    counter: text('.mg-counter'),
    status: text('.mg-status'),
    message: text('.mg-message'),
    slider: (root.querySelector('input.mg-slider') || {}).value,
    legend: root.querySelectorAll('.mg-legend li').length,
  };
}
"""


def snapshot(root) -> dict:
    return root.evaluate(SNAPSHOT_JS)


def wait_for(root, predicate, what: str, timeout: float = 30.0) -> dict:
    """Poll the widget's snapshot until predicate(snapshot) holds; fail with the last one."""
    deadline = time.monotonic() + timeout
    snap = snapshot(root)
    while not predicate(snap):
        if time.monotonic() > deadline:
            shown = {k: v for k, v in snap.items() if k not in ("ids", "blocks", "tags")}
            raise AssertionError(f"timed out ({timeout}s) waiting for {what}; the widget shows "
                                 f"{json.dumps(shown, indent=1)[:3000]}")
        time.sleep(0.05)
        snap = snapshot(root)
    return snap


POSITIONS_JS = r"""(root) => {
  const box = root.querySelector(".mg-graph").getBoundingClientRect();
  const svg = root.querySelector(".mg-graph svg");
  const pic = svg.getBoundingClientRect();
  const scale = pic.width / svg.viewBox.baseVal.width;   // screen pixels per Graphviz point
  const at = {};
  for (const g of svg.querySelectorAll("g.node")) {
    const r = g.getBoundingClientRect();
    const x = (r.left + r.right) / 2, y = (r.top + r.bottom) / 2;
    // on screen (in the picture's box as scrolled), and in the drawing (points from its corner)
    at[g.id] = {screen: [x - box.left, y - box.top], drawing: [(x - pic.left) / scale,
                                                               (y - pic.top) / scale]};
  }
  return at;
}"""


def positions(root) -> dict:
    """Every drawn node's and box's centre: on screen and in Graphviz's drawing."""
    return root.evaluate(POSITIONS_JS)


def moved(before: dict, after: dict, opened: str) -> dict:
    """How the nodes and boxes drawn before and after opening box `opened` moved on screen:
    how many kept their place (within 2 px), and on each side of it (left: before it in a
    left-to-right graph, right: after it) how many moved together with the others on that side
    (within 2 px of that side's median shift, which is reported too)."""
    import statistics
    kept = sorted((set(before) & set(after)) - {opened})
    x0 = before[opened]["screen"][0]

    def shift(i):
        return (after[i]["screen"][0] - before[i]["screen"][0],
                after[i]["screen"][1] - before[i]["screen"][1])

    def near(a, b):
        return ((a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2) ** 0.5 <= 2

    out = {"kept": len(kept), "still": sum(near(shift(i), (0, 0)) for i in kept)}
    for side, ids in (("left", [i for i in kept if before[i]["screen"][0] < x0]),
                      ("right", [i for i in kept if before[i]["screen"][0] > x0])):
        shifts = [shift(i) for i in ids]
        common = (statistics.median(s[0] for s in shifts),
                  statistics.median(s[1] for s in shifts)) if shifts else (0, 0)
        out[side] = {"n": len(ids), "together": sum(near(s, common) for s in shifts),
                     "by": (round(common[0]), round(common[1]))}
    return out


def describe_moves(before: dict, after: dict, opened: str) -> str:
    m = moved(before, after, opened)
    return (f"{m['still']}/{m['kept']} nodes outside kept their place on screen (2 px); "
            f"left of it {m['left']['together']}/{m['left']['n']} moved together by "
            f"{m['left']['by']} px, right of it {m['right']['together']}/{m['right']['n']} "
            f"by {m['right']['by']} px")


def kernel_json(nb, code: str):
    """Run `code` in a new cell; it must print one line of JSON as its last output line."""
    out = nb.run_new_cell(code)
    lines = [line for line in out.strip().splitlines() if line.strip()]
    assert lines, f"no output from {code!r}"
    return json.loads(lines[-1])


def click(root, action: str) -> None:
    root.locator(f'button[data-action="{action}"]').click()


def no_dialogs(page) -> list:
    """Collect every JavaScript dialog the page opens (and dismiss it)."""
    opened: list[str] = []

    def on_dialog(dialog) -> None:
        opened.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", on_dialog)
    return opened


# The kernel's view of the stepper: the trace's nodes and what the last step did.
TRACE_INFO = r'''
import json as _json
def trace_info(st):
    t = st.current_trace
    ev, fr = t["events"], t["frames"]
    last = ev[(fr[-2] + 1 if len(fr) > 1 else 0):fr[-1] + 1]
    nodes = {n["id"]: n for n in t["nodes"]}
    return {
        "ids": [n["id"] for n in t["nodes"]],
        "ops": {n["id"]: {"name": n["name"], "inputs": n["inputs"],
                          "pending_count": n["pending_count"]}
                for n in t["nodes"] if n["type"] == "op"},
        "vars": {n["id"]: {"name": n["name"], "role": n["role"], "op": n["op"]}
                 for n in t["nodes"] if n["type"] == "variable"},
        "frame": st.frame, "frames": len(fr), "initial_frame": t["initial_frame"],
        "live": st.live,
        "last_step": [{k: e.get(k) for k in ("type", "node", "variable", "count", "first_write")}
                      for e in last],
        "blocks": [b["id"] for b in t["blocks"]],
    }
'''


def parent_ops(info: dict, op_id: str) -> list[str]:
    """The ops that produced op_id's inputs (whose pending counts its backward decrements)."""
    out = []
    for var in info["ops"][op_id]["inputs"]:
        producer = info["vars"][var]["op"]
        if producer is not None:
            out.append(producer)
    return out


# ------------------------------------------------------------------------------------------
# 1 + 6. The BackwardStepper on an MLP's loss, step by step (and the README's screenshot)
# ------------------------------------------------------------------------------------------

MLP_SETUP = TRACE_INFO + r'''
import numpy as np
import minigrad as mg
from minigrad.widgets import BackwardStepper

X_train, y_train, X_test, y_test = mg.data.digits_split()
model = mg.nn.MLP([64, 16, 10], seed=0)
W_first, W_last = model.parameters()[0], model.parameters()[2]
# Everything of this batch on an arena, so that the memory strip has blocks to show. The scope
# stays open while we step (the stepper's backward allocates its gradients there too).
graph = mg.Arena("graph", 1 << 16)
graph_scope = graph.scope()
graph_scope.__enter__()
x = mg.create_leaf(X_train[:4], name="x")
loss = mg.cross_entropy(model(x), y_train[:4])
stepper = BackwardStepper(loss, title="MLP 64-16-10 on 4 digits")
'''


def test_stepper_steps_the_real_engine(lab, page, browser_log, report_figure):
    dialogs = no_dialogs(page)
    page.set_viewport_size({"width": 1280, "height": 900})
    path = write_notebook(lab.root, "widgets_stepper.ipynb", [
        MLP_SETUP,
        "stepper",
        "print(_json.dumps(trace_info(stepper)))",
    ])
    nb = open_notebook(page, lab, path)
    collapse_left_sidebar(page)   # the whole width for the notebook (and the screenshot)
    nb.run_all()
    root = nb.wait_for_output_selector(1, ".mg-stepper")
    info = json.loads(nb.output_text(2).strip().splitlines()[-1])
    ops, variables = info["ops"], info["vars"]
    (ce,) = [op for op, o in ops.items() if o["name"] == "cross_entropy"]
    (loss_id,) = [v for v, o in variables.items() if o["role"] == "output"]
    names = {o["name"]: v for v, o in variables.items() if o["name"]}
    w_first, w_last = names["layer0.weight"], names["layer1.weight"]
    print(f"trace: {len(info['ids'])} nodes ({len(ops)} ops), {info['frames']} frames, "
          f"initial frame {info['initial_frame']}, {len(info['blocks'])} blocks")

    # -- the initial state: forward is over, backward has not started ----------------------
    snap = wait_for(root, lambda s: s["graph"] == "ready", "the graph to be drawn")
    assert sorted(snap["ids"]) == sorted(info["ids"]), "one g.node per trace node"
    assert len(snap["ids"]) == len(set(snap["ids"])) == len(info["ids"])
    expect(root.locator(".mg-legend")).to_be_visible()
    assert snap["legend"] >= 7
    assert snap["frame"] == info["frame"] == info["initial_frame"]
    assert snap["phase"].lower() == "forward" and snap["dataPhase"] == "forward"
    # one numbering: step 0 is where forward ended, step k the state after k stepper.step()
    assert snap["counter"] == "step 0 of 0+", snap["counter"]
    assert snap["hasGrad"] == [] and all(t is None for t in snap["tags"].values()), snap["tags"]
    assert snap["done"] == []
    assert snap["badges"] == {op: str(o["pending_count"]) for op, o in ops.items()}
    assert snap["blocks"] and set(snap["blocks"]) <= set(info["blocks"])
    assert all(state == "alive" for state in snap["blocks"].values()), snap["blocks"]
    report_figure(f"first paint {snap['dataset'].get('firstPaintMs')} ms, "
                  f"engine wait {snap['dataset'].get('engineWaitMs')} ms "
                  f"(engine mode {snap['dataset'].get('engineMode')})")

    # -- Step: the seed ---------------------------------------------------------------------
    frame0 = snap["frame"]
    click(root, "step")
    snap = wait_for(root, lambda s: s["frame"] == frame0 + 1, "the seed step")
    assert snap["dataPhase"] == "backward" and snap["phase"].lower() == "backward"
    assert snap["current"] == [loss_id], "the seed step is about the loss"
    assert snap["hasGrad"] == [loss_id] and snap["gradFirst"] == [loss_id]
    assert "seeded" in snap["sentence"], snap["sentence"]
    assert snap["counter"] == "step 1 of 1+", snap["counter"]   # lesson 00: "Step 1 seeds"
    seed_info = kernel_json(nb, "print(_json.dumps(trace_info(stepper)))")
    assert [e["type"] for e in seed_info["last_step"]] == ["start"]
    assert seed_info["frame"] == snap["frame"]

    # -- Step: the first node is cross_entropy; its parents' badges drop as the trace says --
    before = snap["badges"]
    click(root, "step")
    snap = wait_for(root, lambda s: s["frame"] == frame0 + 2, "the first apply step")
    step_info = kernel_json(nb, "print(_json.dumps(trace_info(stepper)))")
    applied = [e["node"] for e in step_info["last_step"] if e["type"] == "apply"]
    assert applied == [ce], step_info["last_step"]
    assert snap["current"] == [ce], "mg-current is the op of the current apply event"
    assert snap["done"] == [ce]
    expected = {e["node"]: str(e["count"])
                for e in step_info["last_step"] if e["type"] == "pending"}
    assert set(expected) == set(parent_ops(info, ce)), (expected, parent_ops(info, ce))
    for op, count in expected.items():
        assert snap["badges"][op] == count, (op, snap["badges"][op], count)
        assert int(before[op]) - 1 == int(count), f"{op}: {before[op]} -> {count}"
    unchanged = {op: b for op, b in before.items() if op not in expected}
    assert {op: snap["badges"][op] for op in unchanged} == unchanged
    written = [e["variable"] for e in step_info["last_step"] if e["type"] == "accumulate"]
    assert written and set(written) <= set(snap["gradFirst"])
    assert "cross_entropy.backward" in snap["sentence"], snap["sentence"]
    assert "cross_entropy" in snap["inspector"], snap["inspector"]

    # -- one more Step: the last linear layer; the engine really ran only that far ----------
    click(root, "step")
    snap = wait_for(root, lambda s: s["frame"] == frame0 + 3, "the second apply step")
    assert w_last in snap["hasGrad"] and w_first not in snap["hasGrad"]
    out = nb.run_new_cell("print(W_first.grad is None, W_last.grad is not None)")
    assert out.split() == ["True", "True"], out

    # -- the kernel steps the view ------------------------------------------------------------
    frame_before, current_before = snap["frame"], snap["current"]
    live = kernel_json(nb, "stepper.step()\nprint(_json.dumps(trace_info(stepper)))")
    (op_now,) = [e["node"] for e in live["last_step"] if e["type"] == "apply"]
    snap = wait_for(root, lambda s: s["frame"] == live["frame"] and s["current"] == [op_now],
                    "the view to follow stepper.step() from the kernel")
    assert snap["frame"] == frame_before + 1 and snap["current"] != current_before

    # -- 6. the README's picture, half way through backward --------------------------------
    take_screenshot(page, root)

    # -- Back replays (the engine is not undone) ---------------------------------------------
    click(root, "back")
    snap = wait_for(root, lambda s: s["frame"] == frame_before, "Back")
    assert snap["current"] == current_before
    assert w_last in snap["hasGrad"]
    synced = kernel_json(nb, "print(_json.dumps([stepper.frame, W_first.grad is None]))")
    assert synced == [frame_before, True], synced   # the frame reached the kernel; no undo

    # -- the slider: back to the end of forward -------------------------------------------------
    root.locator("input.mg-slider").fill(str(frame0))
    snap = wait_for(root, lambda s: s["frame"] == frame0, "the slider")
    assert snap["dataPhase"] == "forward" and snap["hasGrad"] == []
    assert snap["badges"] == {op: str(o["pending_count"]) for op, o in ops.items()}

    # -- the keyboard, with the focus in the widget -----------------------------------------
    root.focus()
    page.keyboard.press("ArrowRight")
    snap = wait_for(root, lambda s: s["frame"] == frame0 + 1, "ArrowRight")
    assert snap["current"] == [loss_id]
    page.keyboard.press("ArrowRight")
    snap = wait_for(root, lambda s: s["frame"] == frame0 + 2, "ArrowRight again")
    assert snap["current"] == [ce]
    page.keyboard.press("ArrowLeft")
    snap = wait_for(root, lambda s: s["frame"] == frame0 + 1, "ArrowLeft")
    assert snap["current"] == [loss_id]

    # -- Last: backward runs to the end in the kernel ------------------------------------------
    click(root, "last")
    snap = wait_for(root, lambda s: s["dataPhase"] == "released", "Last to reach 'released'")
    final = kernel_json(nb, "print(_json.dumps(trace_info(stepper)))")
    assert not final["live"] and snap["frame"] == final["frame"] == final["frames"] - 1
    assert snap["phase"].lower() == "released"
    assert sorted(snap["done"]) == sorted(ops)
    params = [v for v, o in variables.items() if o["role"] == "param"]
    assert set(params) <= set(snap["hasGrad"])
    for button in ("step", "last"):
        expect(root.locator(f'button[data-action="{button}"]')).to_be_disabled()
    same = nb.run_new_cell(
        "model2 = mg.nn.MLP([64, 16, 10], seed=0)\n"
        "loss2 = mg.cross_entropy(model2(mg.create_leaf(X_train[:4])), y_train[:4])\n"
        "loss2.backward()\n"
        "print(all(np.allclose(p.grad, q.grad, rtol=1e-6, atol=1e-7)\n"
        "          for p, q in zip(model.parameters(), model2.parameters())),\n"
        "      all(p.grad is not None for p in model.parameters()))")
    assert same.split() == ["True", "True"], same

    print(browser_log.summary())
    assert dialogs == []
    browser_log.assert_no_console_errors()
    browser_log.assert_all_requests_local()


def take_screenshot(page, root) -> None:
    """The widget alone, at a readable size, for the README (docs/stepper.png).

    The notebook scrolls inside JupyterLab's own box, so a widget taller than that box would
    come out cut: the page is made tall enough for the shot, then put back."""
    viewport = page.viewport_size
    visible = page.locator(".jp-NotebookPanel .jp-WindowedPanel-outer").first.bounding_box()
    box = root.bounding_box()
    if visible and box["height"] + 24 > visible["height"]:
        page.set_viewport_size({"width": viewport["width"],
                                "height": int(viewport["height"] + box["height"] + 24
                                              - visible["height"])})
    page.mouse.move(0, 0)   # no hover effect on the button clicked last
    root.scroll_into_view_if_needed()
    page.wait_for_timeout(200)   # let the page settle after the resize and the scroll
    box = root.bounding_box()
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    root.screenshot(path=str(SCREENSHOT), animations="disabled")
    page.set_viewport_size(viewport)
    print(f"screenshot: {SCREENSHOT} ({box['width']:.0f}x{box['height']:.0f} CSS px)")


def test_inspector_terms_fit_on_one_line_in_jupyterlab(lab, page, browser_log):
    """The inspector's terms (formula, parents, saved, ...) are short words: each must sit on
    one line, clear of its value, whatever styles JupyterLab gives the output area's
    <dl>/<dt>/<dd>."""
    path = write_notebook(lab.root, "widgets_inspector.ipynb", [
        "import minigrad as mg\n"
        "from minigrad.widgets import BackwardStepper\n"
        "w = mg.create_leaf([1.0, -2.0], requires_grad=True, name='w')\n"
        "x = mg.create_leaf([3.0, 4.0], name='x')\n"
        "stepper = BackwardStepper((w * x).tanh().sum())\n"
        "stepper",
    ])
    nb = open_and_run_all(page, lab, path)
    root = nb.wait_for_output_selector(0, ".mg-stepper")
    wait_for(root, lambda s: s["graph"] == "ready" and "formula" in (s["inspector"] or ""),
             "the inspector to describe the current op")
    root.scroll_into_view_if_needed()
    terms = root.evaluate("""(root) => [...root.querySelectorAll('.mg-inspector dt')].map((dt) => {
        const range = document.createRange();
        range.selectNodeContents(dt);
        const text = range.getBoundingClientRect();
        const dd = dt.nextElementSibling;
        return { text: dt.textContent, lines: range.getClientRects().length,
                 textRight: Math.round(text.right),
                 valueLeft: dd ? Math.round(dd.getBoundingClientRect().left) : null,
                 dtWidth: getComputedStyle(dt).width };
    })""")
    print("inspector terms:", terms)
    assert terms, "the inspector shows no terms"
    # One line each, and ending before its value begins (not broken letter by letter, not
    # written over the value).
    broken = [t for t in terms if t["lines"] != 1 or t["valueLeft"] is None
              or t["textRight"] > t["valueLeft"]]
    assert not broken, (
        "inspector terms do not fit their column inside JupyterLab (JupyterLab's "
        "'.jp-OutputArea-output dt {float: left; width: 20%}' reaches the widget's <dt>): "
        f"{broken}")
    browser_log.assert_no_console_errors()


# ------------------------------------------------------------------------------------------
# 2. What a widget costs on the wire
# ------------------------------------------------------------------------------------------

def wait_quiet(page, wire: WebSocketBytes, quiet_ms: int = 300, timeout: float = 10.0) -> None:
    """Wait until no kernel frame has arrived for quiet_ms (the window of a measure is clean)."""
    deadline = time.monotonic() + timeout
    last, since = wire.frames, time.monotonic()
    while time.monotonic() < deadline:
        page.wait_for_timeout(50)   # (Playwright delivers frame events while it waits)
        if wire.frames != last:
            last, since = wire.frames, time.monotonic()
        elif (time.monotonic() - since) * 1000 >= quiet_ms:
            return


def test_payload_per_widget(lab, page, browser_log, report_figure):
    wire = WebSocketBytes(page)
    path = write_notebook(lab.root, "widgets_payload.ipynb", [
        "import minigrad as mg\n"
        "from minigrad.widgets import BackwardStepper, GraphView\n"
        "X_train, y_train, _, _ = mg.data.digits_split()\n"
        "model = mg.nn.MLP([64, 16, 10], seed=0)\n"
        "loss = mg.cross_entropy(model(mg.create_leaf(X_train[:8], name='x')), y_train[:8])\n"
        "other = mg.cross_entropy(model(mg.create_leaf(X_train[8:16], name='x2')), "
        "y_train[8:16])",
    ])
    nb = open_and_run_all(page, lab, path)
    assert wire.urls, "no kernel websocket was seen"

    def measure(code: str, selector: str, ready=lambda s: s["graph"] == "ready"):
        wait_quiet(page, wire)
        mark = wire.mark()
        index = nb.cells.count()
        nb.run_new_cell(code)
        root = nb.wait_for_output_selector(index, selector)
        wait_for(root, ready, f"the widget of {code!r}")
        wait_quiet(page, wire)
        return root, wire.since(mark)

    root, (first, first_frames) = measure("stepper = BackwardStepper(loss)\nstepper",
                                          ".mg-stepper")
    _, (second, second_frames) = measure("GraphView(other)", ".mg-root")
    # An empty cell's own traffic (execute_input, status, reply), to tell it from the widget's.
    wait_quiet(page, wire)
    mark = wire.mark()
    nb.run_new_cell("pass")
    wait_quiet(page, wire)
    baseline, _ = wire.since(mark)

    # One live step from the kernel: the engine runs one node, the view follows.
    frame = snapshot(root)["frame"]
    wait_quiet(page, wire)
    mark = wire.mark()
    nb.run_new_cell("stepper.step()")
    wait_for(root, lambda s: s["frame"] == frame + 1, "the view to follow stepper.step()")
    wait_quiet(page, wire)
    step_cell, _ = wire.since(mark)
    # ... and one live step from the Step button (no cell at all).
    mark = wire.mark()
    click(root, "step")
    wait_for(root, lambda s: s["frame"] == frame + 2, "the view after a click on Step")
    wait_quiet(page, wire)
    step_click, _ = wire.since(mark)

    kib = lambda n: f"{n / 1024:.1f} KiB"   # noqa: E731
    report_figure(f"payload: first stepper on the page {kib(first)} ({first:,} B in "
                  f"{first_frames} frames, the layout engine included); second widget "
                  f"(GraphView) {kib(second)} ({second:,} B in {second_frames} frames); "
                  f"an empty cell {baseline:,} B")
    report_figure(f"payload per live step: stepper.step() cell {step_cell:,} B "
                  f"({step_cell - baseline:,} B beyond an empty cell), "
                  f"Step button {step_click:,} B")
    assert first > 600 * 1024, "the first widget should bring the layout engine (~630 KiB)"
    assert second <= 150_000, f"a second widget costs {second:,} B (> 150 KB)"
    browser_log.assert_no_console_errors()
    browser_log.assert_all_requests_local()


# ------------------------------------------------------------------------------------------
# 3. How fast: first paint, a step's restyle, a graph too big to draw
# ------------------------------------------------------------------------------------------

CHAIN_SETUP = r'''
import json as _json
import numpy as np
import minigrad as mg
from minigrad.widgets import BackwardStepper

def chain(n_ops, seed=0):
    """x -> tanh -> (* w) -> tanh -> ... -> sum: 2 * n_ops + 4 trace nodes."""
    rng = np.random.default_rng(seed)
    x = mg.create_leaf(rng.normal(size=(4,)), requires_grad=True, name="x")
    w = mg.create_leaf(rng.normal(size=(4,)), requires_grad=True, name="w")
    h = x
    for i in range(n_ops):
        h = mg.tanh(h) if i % 2 == 0 else h * w
    return h.sum()
'''


def test_performance(lab, page, browser_log, report_figure):
    wire = WebSocketBytes(page)   # (only to wait for quiet moments)
    path = write_notebook(lab.root, "widgets_perf.ipynb", [CHAIN_SETUP])
    nb = open_and_run_all(page, lab, path)

    def show(code: str):
        wait_quiet(page, wire, quiet_ms=500)   # measure the widget, not the page settling
        index = nb.cells.count()
        out = nb.run_new_cell(code)
        count = int(out.strip().splitlines()[0])
        root = nb.wait_for_output_selector(index, ".mg-stepper")
        # Wait without reading the DOM in a tight loop (that would compete with the drawing).
        page.wait_for_function("(root) => root.parentElement.dataset.graph === 'ready'",
                               arg=root.element_handle(), polling=100, timeout=60_000)
        return root, count

    # -- about 200 nodes: the first paint -------------------------------------------------------
    # (max_nodes above its size: drawn fully, every node laid out)
    root, n200 = show("s200 = BackwardStepper(chain(98), max_nodes=250)\n"
                      "print(len(s200.trace['nodes']))\ns200")
    page.wait_for_function("(root) => root.parentElement.dataset.firstPaintMs !== undefined",
                           arg=root.element_handle(), polling=100)
    snap = snapshot(root)
    assert len(snap["ids"]) == n200
    first_paint = float(snap["dataset"]["firstPaintMs"])
    data = snap["dataset"]
    report_figure(f"{n200} nodes: first paint {first_paint} ms, engine wait "
                  f"{data.get('engineWaitMs')} ms, layout {data.get('layoutMs')} ms, "
                  f"mount {data.get('mountMs')} ms (engine mode {data.get('engineMode')})")
    # Timings are reported, never asserted: they depend on the machine and its load (targets:
    # benchmarks/README.md). What is asserted is what the picture holds.

    # -- about 500 nodes, drawn collapsed (runs of nodes as boxes): first paint, steps ------------
    root, n500 = show("s500 = BackwardStepper(chain(248))\n"
                      "print(len(s500.trace['nodes']))\ns500")
    page.wait_for_function("(root) => root.parentElement.dataset.firstPaintMs !== undefined",
                           arg=root.element_handle(), polling=100)
    snap = snapshot(root)
    data = snap["dataset"]
    drawn = int(data["drawnNodes"])
    assert drawn <= 150 and len(snap["ids"]) == drawn, (drawn, len(snap["ids"]))
    assert sum(i.startswith("s:") for i in snap["ids"]) >= 10   # boxes, not nodes
    report_figure(f"{n500} nodes drawn as {drawn} (boxes of runs): first paint "
                  f"{data.get('firstPaintMs')} ms (target 300), layout {data.get('layoutMs')} ms, "
                  f"mount {data.get('mountMs')} ms")
    times, wire_bytes = [], []

    def timed(root, action: str, delta: int, n: int, times: list) -> None:
        before = snapshot(root)["frame"]
        mark = wire.mark()
        click(root, action)
        s = wait_for(root, lambda s: s["frame"] == before + delta, f"{action} at {n} nodes")
        times.append((action, float(s["dataset"]["lastStepMs"])))
        wait_quiet(page, wire, quiet_ms=150)
        wire_bytes.append(wire.since(mark)[0])

    for _ in range(6):
        timed(root, "step", +1, n500, times)   # live: the kernel runs one node, the view restyles
    report_figure(f"{n500} nodes: bytes received per live step {wire_bytes}")
    # backward is inside the last box now: it is the current one and shows its progress
    snap = snapshot(root)
    assert any(i.startswith("s:") for i in snap["current"]), snap["current"]
    tag = root.locator("g.node.scope.mg-current .mg-gradtag text").text_content()
    assert tag.startswith("run ") and "/" in tag, tag
    # the sentence and the inspector name the real node, not the box
    assert "this step, inside the closed scope" in snap["inspector"], snap["inspector"]
    for _ in range(4):
        timed(root, "back", -1, n500, times)   # replay: folded again from the start
    for _ in range(4):
        timed(root, "step", +1, n500, times)   # replay forward
    worst = max(ms for _, ms in times)
    report_figure(f"{n500} nodes: step restyle times (ms) {[ms for _, ms in times]}; "
                  f"max {worst} ms")
    # (target: a frame, 16 ms; reported above, not asserted)

    # -- 5,000 nodes: drawn collapsed; a step; one box opened by a click --------------------------
    wait_quiet(page, wire, quiet_ms=500)
    index = nb.cells.count()
    t0 = time.monotonic()
    out = nb.run_new_cell("s5k = BackwardStepper(chain(2498))\n"
                          "print(len(s5k.trace['nodes']))\ns5k")
    n5k = int(out.strip().splitlines()[0])
    root = nb.wait_for_output_selector(index, ".mg-stepper")
    page.wait_for_function("(root) => root.parentElement.dataset.firstPaintMs !== undefined",
                           arg=root.element_handle(), polling=100, timeout=60_000)
    rendered = time.monotonic() - t0
    snap = snapshot(root)
    data = snap["dataset"]
    drawn = int(data["drawnNodes"])
    assert snap["graph"] == "ready" and drawn <= 150 and len(snap["ids"]) == drawn
    report_figure(f"{n5k} nodes drawn as {drawn}: first paint {data.get('firstPaintMs')} ms "
                  f"(target 1000), layout {data.get('layoutMs')} ms, mount "
                  f"{data.get('mountMs')} ms;"
                  f" cell + render {rendered:.2f} s")
    times5k, wire_bytes = [], []
    for _ in range(4):
        timed(root, "step", +1, n5k, times5k)
    for _ in range(2):
        timed(root, "back", -1, n5k, times5k)
    report_figure(f"{n5k} nodes: step restyle times (ms) {[ms for _, ms in times5k]} (target 16); "
                  f"bytes per live step {wire_bytes[:4]}")
    # open the box backward is in, by a click: the nodes inside appear, the rest stays boxes
    box = root.locator("g.node.scope.mg-current")
    scope = box.get_attribute("id")[2:]
    before = positions(root)
    box.click()
    page.wait_for_function("(root) => root.parentElement.dataset.toggleMs !== undefined",
                           arg=root.element_handle(), polling=50, timeout=60_000)
    snap = snapshot(root)
    assert f"s:{scope}" not in snap["ids"] and sum(i.startswith("s:") for i in snap["ids"]) >= 40
    assert root.locator(f'g.cluster[id="c:{scope}"]').count() == 1
    # (runs of 100 hold runs of 10: backward is now in one of those)
    assert snap["current"] and snap["current"][0].startswith("s:") and \
        snap["current"][0] != f"s:{scope}" and len(snap["ids"]) <= 80, snap["current"]
    report_figure(f"{n5k} nodes: opening one box ({scope}) took {snap['dataset']['toggleMs']} ms "
                  f"from the click to the new picture (target 300): the new DOT (made in the page) after "
                  f"{snap['dataset'].get('toggleAnswerMs')} ms, layout "
                  f"{snap['dataset']['layoutMs']} ms, now {snap['dataset']['drawnNodes']} drawn")
    report_figure(f"{n5k} nodes, opening {scope}: " + describe_moves(before, positions(root), f"s:{scope}"))
    expanded = kernel_json(nb, "print(_json.dumps(s5k.expanded))")
    assert expanded == [scope]
    # and its frame closes it again (the picture from before: no layout this time)
    root.locator(f'g.cluster[id="c:{scope}"] > text').first.click()
    snap = wait_for(root, lambda s: f"s:{scope}" in s["ids"] and "toggleMs" in s["dataset"],
                    "the box back after a click on its frame")
    report_figure(f"{n5k} nodes: closing {scope} again took {snap['dataset']['toggleMs']} ms "
                  f"(layout reused: {snap['dataset'].get('layoutReused')})")
    # A reader's pointer rests on a box before clicking it: the view lays it out meanwhile.
    other = root.locator("g.node.scope:not(.mg-current)").last
    other_id = other.get_attribute("id")
    other.hover()
    page.wait_for_timeout(400)
    other.click()
    snap = wait_for(root, lambda s: other_id not in s["ids"] and "toggleMs" in s["dataset"],
                    f"{other_id} opened after resting on it")
    report_figure(f"{n5k} nodes: opening {other_id[2:]} after the pointer rested 0.4 s on it "
                  f"took {snap['dataset']['toggleMs']} ms (laid out while the pointer rested: "
                  f"{snap['dataset'].get('layoutReused')})")
    browser_log.assert_no_console_errors()
    browser_log.assert_all_requests_local()


# ------------------------------------------------------------------------------------------
# 4. User text is text
# ------------------------------------------------------------------------------------------

IMG = "<img src=x onerror=alert(1)>"
SCRIPT = "</script><script>alert(2)</script>"
TITLE = "<b>title</b><img src=y onerror=alert(3)>"


def test_user_text_is_text(lab, page, browser_log):
    dialogs = no_dialogs(page)
    path = write_notebook(lab.root, "widgets_text.ipynb", [
        TRACE_INFO +
        "import minigrad as mg\n"
        "from minigrad.widgets import BackwardStepper, GraphView\n"
        f"a = mg.create_leaf([[1.0, 2.0]], requires_grad=True, name={IMG!r})\n"
        f"b = mg.create_leaf([[3.0], [4.0]], requires_grad=True, name={SCRIPT!r})\n"
        "loss = (a @ b).tanh().sum()\n"
        f"stepper = BackwardStepper(loss, title={TITLE!r})\n"
        "print(_json.dumps(trace_info(stepper)))",
        "stepper",
        f"GraphView(loss, title={TITLE!r})",
    ])
    nb = open_and_run_all(page, lab, path)
    info = json.loads(nb.output_text(0).strip().splitlines()[-1])
    ids = {o["name"]: v for v, o in info["vars"].items() if o["name"]}
    stepper = nb.wait_for_output_selector(1, ".mg-stepper")
    graph = nb.wait_for_output_selector(2, ".mg-root")
    for root in (stepper, graph):
        wait_for(root, lambda s: s["graph"] == "ready", "the graph")
        for name in (IMG, SCRIPT):
            texts = root.locator(f'g.node[id="{ids[name]}"] text').all_text_contents()
            assert name in texts, (name, texts)
        assert root.locator(".mg-title").text_content() == TITLE

    # the inspector (hover a node) and the step sentences show the names as they are
    stepper.locator(f'g.node[id="{ids[IMG]}"]').hover()
    expect(stepper.locator(".mg-inspector")).to_contain_text(IMG)
    stepper.locator(f'g.node[id="{ids[SCRIPT]}"]').hover()
    expect(stepper.locator(".mg-inspector")).to_contain_text(SCRIPT)
    click(stepper, "last")
    snap = wait_for(stepper, lambda s: s["dataPhase"] == "released", "the end of backward")
    frames = snap["frame"]
    seen = ""
    for _ in range(frames):
        seen += snapshot(stepper)["sentence"]
        if IMG in seen and SCRIPT in seen:
            break
        click(stepper, "back")
        page.wait_for_timeout(20)
    assert IMG in seen and SCRIPT in seen, seen

    page.wait_for_timeout(500)   # an <img onerror> would have fired by now
    counts = page.evaluate("""() => ({
        img: document.querySelectorAll('.mg-root img').length,
        script: document.querySelectorAll('.mg-root script').length,
        b: document.querySelectorAll('.mg-root b').length })""")
    print(f"user text: elements made from names/titles {counts}; dialogs {dialogs}")
    assert counts == {"img": 0, "script": 0, "b": 0}, counts
    assert dialogs == [], dialogs
    browser_log.assert_no_console_errors()
    browser_log.assert_all_requests_local()
