"""TapeView in a real JupyterLab driven by Chromium, and its save_html page from file://.

What a student does, checked against the kernel: each Step runs the real tape's backward for one
more instruction (the kernel's tape.grads show exactly that), the current instruction is
highlighted, grads appear as written, use counts count down and freed slots are greyed; the
kernel can step the view; back, the slider and the keyboard replay; names stay text. The figures
(bytes per live step, first paint of a ~1,500-slot tape, save_html size) are printed.
"""

from __future__ import annotations

import json
import time

from browser_harness import WebSocketBytes, open_and_run_all
from test_export import offline  # noqa: F401  (the fixture: a file:// page with no network)
from test_widgets import click, kernel_json, no_dialogs, wait_quiet

IMG = "<img src=x onerror=alert(1)>"

# One read of everything a test looks at in a TapeView (`root` is its `.mg-tape`).
TAPE_SNAPSHOT_JS = """
(root) => {
  const el = root.parentElement;
  const rows = [...root.querySelectorAll('.mg-row[data-slot]')];
  const having = (c) => rows.filter((r) => r.classList.contains(c)).map((r) => +r.dataset.slot);
  const grads = {}, uses = {}, names = {};
  for (const r of rows) {
    grads[r.dataset.slot] = r.querySelector('.mg-grad').textContent;
    uses[r.dataset.slot] = +r.querySelector('.mg-uses').textContent;
    names[r.dataset.slot] = r.querySelector('.mg-name').textContent;
  }
  const instrs = [...root.querySelectorAll('li[data-instr]')];
  const text = (sel) => { const e = root.querySelector(sel); return e ? e.textContent : null; };
  return {
    dataset: { ...el.dataset },
    frame: el.dataset.frame === undefined ? null : Number(el.dataset.frame),
    slots: +root.dataset.slots, rendered: rows.length,
    instrs: +root.dataset.instrs, renderedInstrs: instrs.length,
    current: instrs.filter((li) => li.classList.contains('mg-current'))
      .map((li) => +li.dataset.instr),
    done: instrs.filter((li) => li.classList.contains('mg-done')).map((li) => +li.dataset.instr),
    freed: having('mg-freed'), gradNew: having('mg-grad-new'), hasGrad: having('mg-has-grad'),
    consts: having('mg-kind-const'), using: having('mg-using'),
    grads, uses, names,
    sentence: text('.mg-sentence'), counter: text('.mg-counter'), status: text('.mg-status'),
    title: text('.mg-title'),
  };
}
"""


def tape_snapshot(root) -> dict:
    return root.evaluate(TAPE_SNAPSHOT_JS)


def wait_tape(root, predicate, what: str, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    snap = tape_snapshot(root)
    while not predicate(snap):
        if time.monotonic() > deadline:
            shown = {k: v for k, v in snap.items() if k not in ("grads", "uses", "names")}
            raise AssertionError(f"timed out ({timeout}s) waiting for {what}; the view shows "
                                 f"{json.dumps(shown)[:3000]}")
        time.sleep(0.05)
        snap = tape_snapshot(root)
    return snap


def shown_number(cell: str) -> float:
    """The first number of a grad cell such as "[1.829]"."""
    return float(cell.strip("[]").split(",")[0])


# The kernel's view of the tape: what backward has written and freed so far.
TAPE_INFO = r'''
import json as _json
def tape_info(view, tape):
    frames = view.current_trace["frames"]
    return {"frame": view.frame, "live": view.live, "instrs": len(tape.instrs),
            "kinds": list(tape.kinds),
            "grads": {i: g for i, g in enumerate(tape.grads) if g is not None},
            "position": frames[-1]["position"] if frames else None,
            "freed": sorted({s for f in frames for s in f["freed"]}),
            "uses": tape.use_counts()}
'''

SMALL_TAPE = TAPE_INFO + f'''
import math
from minigrad.tape import Tape
from minigrad.widgets import TapeView
tape = Tape()
x = tape.var(0.7, name={IMG!r})
w = tape.var(-1.3, name="w")
c = tape.const(2.0, name="c")
y = tape.tanh(x * w + c * c) * tape.sin(x)      # c * c: a const, no instruction
view = TapeView(tape, y, title="y = tanh(x w + c²) sin x")
print(_json.dumps(tape_info(view, tape)))
'''


def test_tapeview_steps_the_real_tape(lab, page, browser_log, report_figure):
    dialogs = no_dialogs(page)
    wire = WebSocketBytes(page)
    nb = open_and_run_all(page, lab, _notebook(lab, "tapeview_small.ipynb", [SMALL_TAPE, "view"]))
    info = json.loads(nb.output_text(0).strip().splitlines()[-1])
    root = nb.wait_for_output_selector(1, ".mg-tape")
    n = info["instrs"]

    # -- after forward: the table and the instruction list, nothing run yet ------------------
    snap = wait_tape(root, lambda s: s["frame"] == 0 and "firstPaintMs" in s["dataset"], "frame 0")
    assert snap["slots"] == snap["rendered"] == len(info["kinds"])
    assert snap["done"] == [] and snap["current"] == []
    assert snap["consts"] == [i for i, k in enumerate(info["kinds"]) if k == "const"]
    assert len(snap["consts"]) == 2, "c and c * c (the skipped op) are consts"
    assert snap["hasGrad"] == [] and set(snap["grads"].values()) == {"—"}
    assert [snap["uses"][str(i)] for i in range(snap["slots"])] == info["uses"]
    assert snap["names"]["0"] == IMG and snap["title"] == "y = tanh(x w + c²) sin x"
    assert "Forward is recorded" in snap["sentence"]

    # -- Step: the seed and the newest instruction, run by the real tape ---------------------
    wait_quiet(page, wire)
    mark = wire.mark()
    click(root, "step")
    snap = wait_tape(root, lambda s: s["frame"] == 2, "the first step")
    wait_quiet(page, wire)
    click_bytes, _ = wire.since(mark)
    k1 = kernel_json(nb, "print(_json.dumps(tape_info(view, tape)))")
    assert k1["frame"] == 2 and k1["position"] == n - 1
    assert snap["current"] == [n - 1] and snap["done"] == [n - 1]
    assert sorted(snap["hasGrad"]) == sorted(int(i) for i in k1["grads"])
    for slot, grad in k1["grads"].items():
        assert abs(shown_number(snap["grads"][slot]) - grad) <= 1e-3 * max(1.0, abs(grad))
    assert f"Instruction #{n - 1}" in snap["sentence"] and "grads written" in snap["sentence"]

    # -- the kernel steps the view (one small message) ----------------------------------------
    wait_quiet(page, wire)
    mark = wire.mark()
    nb.run_new_cell("pass")
    wait_quiet(page, wire)
    empty_cell, _ = wire.since(mark)
    mark = wire.mark()
    nb.run_new_cell("view.step()")
    snap = wait_tape(root, lambda s: s["frame"] == 3, "the view to follow view.step()")
    wait_quiet(page, wire)
    cell_bytes, _ = wire.since(mark)
    k2 = kernel_json(nb, "print(_json.dumps(tape_info(view, tape)))")
    assert snap["current"] == [n - 2] == [k2["position"]]
    assert sorted(snap["hasGrad"]) == sorted(int(i) for i in k2["grads"])
    assert set(snap["using"]) >= set(json.loads(nb.run_new_cell(
        f"print(list(tape.instrs[{n - 2}].inputs))").strip().splitlines()[-1]))
    report_figure(f"tapeview: bytes per live step: Step button {click_bytes:,} B; "
                  f"view.step() cell {cell_bytes:,} B ({cell_bytes - empty_cell:,} B beyond an "
                  f"empty cell of {empty_cell:,} B)")

    # -- Back replays (the tape is not undone); the keyboard steps ------------------------------
    click(root, "back")
    snap = wait_tape(root, lambda s: s["frame"] == 2, "back")
    assert snap["current"] == [n - 1]
    assert kernel_json(nb, "print(_json.dumps(tape_info(view, tape)))")["grads"] == k2["grads"]
    root.focus()
    page.keyboard.press("ArrowRight")
    snap = wait_tape(root, lambda s: s["frame"] == 3, "ArrowRight")
    assert snap["current"] == [n - 2]
    root.locator("input.mg-slider").fill("0")
    snap = wait_tape(root, lambda s: s["frame"] == 0, "the slider back to frame 0")
    assert snap["hasGrad"] == [] and snap["freed"] == [] and snap["current"] == []

    # -- Play: replays what was run, then asks the kernel for each next instruction -----------
    root.locator("select.mg-speed").select_option("100")
    click(root, "play")
    snap = wait_tape(root, lambda s: s["frame"] == n + 1, "play to the end of backward", 40)
    end = kernel_json(nb, "print(_json.dumps(tape_info(view, tape)))")
    assert end["frame"] == n + 1
    assert not end["live"] and sorted(snap["done"]) == list(range(n))
    assert snap["current"] == [0] and snap["freed"] == end["freed"] and end["freed"]
    assert all(info["kinds"][s] != "var" for s in snap["freed"])
    assert sorted(snap["hasGrad"]) == sorted(int(i) for i in end["grads"])
    assert all(u == 0 for u in snap["uses"].values())
    assert root.locator('button[data-action="step"]').is_disabled()
    truth = kernel_json(nb, "u = x.value * w.value + 4.0\nprint(_json.dumps([tape.grads[0], "
                            "(1 - math.tanh(u) ** 2) * w.value * math.sin(x.value) "
                            "+ math.tanh(u) * math.cos(x.value)]))")
    assert abs(truth[0] - truth[1]) < 1e-12, truth
    assert abs(shown_number(snap["grads"]["0"]) - truth[1]) <= 1e-3 * max(1.0, abs(truth[1]))

    page.wait_for_timeout(300)   # an <img onerror> would have fired by now
    assert page.evaluate("document.querySelectorAll('.mg-tape img').length") == 0
    assert dialogs == []
    browser_log.assert_no_console_errors()
    browser_log.assert_all_requests_local()


BIG_TAPE = TAPE_INFO + r'''
import numpy as np
from minigrad.tape import Tape
from minigrad.widgets import TapeView
def chain(n_slots, seed=0):
    rng = np.random.default_rng(seed)
    tape = Tape()
    x, w = tape.var(rng.normal(), name="x"), tape.var(rng.normal(), name="w")
    h = x
    while len(tape.values) < n_slots - 2:
        h = tape.tanh(h * w) + tape.const(0.1)
    return tape, h
big, out = chain(1500)
print(len(big.values), len(big.instrs))
'''


def test_tapeview_first_paint_and_steps_of_a_big_tape(lab, page, browser_log, report_figure):
    wire = WebSocketBytes(page)
    nb = open_and_run_all(page, lab, _notebook(lab, "tapeview_big.ipynb", [BIG_TAPE]))
    slots, instrs = map(int, nb.output_text(0).split()[:2])
    wait_quiet(page, wire, quiet_ms=500)
    mark = wire.mark()
    index = nb.cells.count()
    nb.run_new_cell("bigview = TapeView(big, out)\nbigview")
    root = nb.wait_for_output_selector(index, ".mg-tape")
    page.wait_for_function("(root) => root.parentElement.dataset.firstPaintMs !== undefined",
                           arg=root.element_handle(), polling=100, timeout=60_000)
    wait_quiet(page, wire)
    first_bytes, _ = wire.since(mark)
    snap = tape_snapshot(root)
    assert snap["slots"] == slots and snap["instrs"] == instrs and snap["frame"] == 0
    # only the rows in view exist in the page: drawing and restyling cost what a screen costs
    assert 10 < snap["rendered"] < 100 and 10 < snap["renderedInstrs"] < 100, snap
    report_figure(f"tapeview: {slots} slots, {instrs} instructions: first paint "
                  f"{snap['dataset']['firstPaintMs']} ms; widget on the wire "
                  f"{first_bytes / 1024:.1f} KiB")

    times, step_bytes = [], []
    for k in range(1, 7):
        mark = wire.mark()
        click(root, "step")
        snap = wait_tape(root, lambda s: s["frame"] == k + 1, f"live step {k}")
        wait_quiet(page, wire, quiet_ms=150)
        step_bytes.append(wire.since(mark)[0])
        times.append(float(snap["dataset"]["lastStepMs"]))
        assert snap["current"] == [instrs - k]
    for k in range(3):
        click(root, "back")
        snap = wait_tape(root, lambda s: s["frame"] == 6 - k, "back (replay)")
        times.append(float(snap["dataset"]["lastStepMs"]))
    delta = kernel_json(nb, "print(_json.dumps(len(_json.dumps("
                            "bigview.current_trace['frames'][-1]))))")
    report_figure(f"tapeview: {slots} slots: bytes received per live step {step_bytes} (the "
                  f"step's delta itself: {delta} B of JSON; the rest is Jupyter's messages); "
                  f"restyle per step (ms) {times}")
    # Last: the kernel runs the remaining instructions and sends their frames in one message.
    wait_quiet(page, wire)
    mark = wire.mark()
    t0 = time.monotonic()
    click(root, "last")
    snap = wait_tape(root, lambda s: s["frame"] == instrs + 1, "last", timeout=60)
    seconds = time.monotonic() - t0
    wait_quiet(page, wire)
    finish_bytes, _ = wire.since(mark)
    report_figure(f"tapeview: {slots} slots: 'last' ran {instrs - 6} instructions in the kernel "
                  f"and drew the end in {seconds:.2f} s, {finish_bytes / 1024:.1f} KiB on the "
                  f"wire; "
                  f"restyle {snap['dataset']['lastStepMs']} ms")
    assert snap["current"] == [0] and len(snap["freed"]) > 10
    # A live step carries one delta, not the table: far below what the table costs.
    assert max(step_bytes[1:]) < first_bytes / 20, (step_bytes, first_bytes)
    browser_log.assert_no_console_errors()
    browser_log.assert_all_requests_local()


def test_tapeview_save_html_replays_offline(offline, tmp_path, report_figure):  # noqa: F811
    from minigrad.tape import Tape
    from minigrad.widgets import TapeView, save_html

    tape = Tape()
    x = tape.var(0.7, name=IMG)
    w = tape.var(-1.3, name="w")
    c = tape.const(2.0, name="c")
    y = tape.tanh(x * w + c * c) * tape.sin(x)
    view = TapeView(tape, y, title="exported " + IMG)
    path = save_html(view, tmp_path / "tape.html")     # runs backward to the end first
    doc = view.current_trace
    frames, n = doc["frames"], len(tape.instrs)
    report_figure(f"tapeview save_html: {path.stat().st_size / 1024:.0f} KiB "
                  f"({len(tape.values)} slots, {len(frames)} frames)")

    page = offline(path)
    t0 = time.monotonic()
    page.page.goto(page.url)
    root = page.page.locator("#minigrad-root .mg-tape")
    root.wait_for(timeout=30_000)
    snap = wait_tape(root, lambda s: "firstPaintMs" in s["dataset"], "the exported view")
    report_figure(f"tapeview export: loaded in {time.monotonic() - t0:.2f} s, first paint "
                  f"{snap['dataset']['firstPaintMs']} ms")
    assert snap["frame"] == 0 and snap["names"]["0"] == IMG and snap["title"] == "exported " + IMG
    assert page.page.title() == "exported " + IMG
    for k, frame in enumerate(frames, start=1):
        click(root, "step")
        snap = wait_tape(root, lambda s: s["frame"] == k, f"step to frame {k}")
        assert snap["current"] == ([] if frame["position"] is None else [frame["position"]])
        assert sorted(snap["gradNew"]) == sorted(slot for slot, _ in frame["grads"])
    assert snap["frame"] == n + 1 and sorted(snap["done"]) == list(range(n))
    assert snap["freed"] == sorted({s for f in frames for s in f["freed"]})
    assert root.locator('button[data-action="step"]').is_disabled()
    click(root, "first")
    snap = wait_tape(root, lambda s: s["frame"] == 0, "first")
    assert snap["hasGrad"] == [] and snap["freed"] == []
    # play runs the replay to the end by itself
    root.locator("select.mg-speed").select_option("100")
    click(root, "play")
    snap = wait_tape(root, lambda s: s["frame"] == n + 1, "play to the end", timeout=20)
    page.page.wait_for_timeout(300)
    assert page.page.evaluate("document.querySelectorAll('img').length") == 0
    page.assert_clean()


def _notebook(lab, name, cells):
    from browser_harness import write_notebook

    return write_notebook(lab.root, name, cells)


def test_tapeview_after_run_all_shows_where_python_stepped(lab, page, browser_log):
    """Run All: the cells that step the tape run before (or while) the view is drawn, so the
    view never saw their frames arrive; it must still show where Python is, as the stepper does.
    One view is stepped part way (backward still live), the other one to the end."""
    nb = open_and_run_all(page, lab, _notebook(lab, "tapeview_run_all.ipynb", [
        SMALL_TAPE + "tape2 = Tape()\na = tape2.var(0.5, name='a')\n"
                     "view2 = TapeView(tape2, tape2.sin(a * a) * a)",
        "view",
        "view.step(2)\nprint(_json.dumps(tape_info(view, tape)))",
        # (drawn only after it finished: its frames went out before any view listened)
        "view2.finish()\nprint(_json.dumps([view2.frame, len(tape2.instrs)]))",
        "view2",
    ]))
    part = json.loads(nb.output_text(2).strip().splitlines()[-1])
    end, instrs2 = json.loads(nb.output_text(3).strip().splitlines()[-1])
    assert part["live"] and part["frame"] == 3 and end == instrs2 + 1
    root = nb.wait_for_output_selector(1, ".mg-tape")
    snap = wait_tape(root, lambda s: s["frame"] == 3, "the part-way view at Python's frame")
    assert snap["counter"] == "step 3 of 3+", snap["counter"]
    assert sorted(snap["hasGrad"]) == sorted(int(i) for i in part["grads"])
    # lesson 08 says to watch "uses left" count down: its column is in view, not scrolled away
    box = root.evaluate("""(root) => {
        const pane = root.querySelector('.mg-slots-pane').getBoundingClientRect();
        const heads = [...root.querySelectorAll('.mg-head > span')];
        const uses = heads.find((e) => e.textContent === 'uses left').getBoundingClientRect();
        return { pane: [pane.left, pane.right], uses: [uses.left, uses.right] }; }""")
    assert box["pane"][0] <= box["uses"][0] and box["uses"][1] <= box["pane"][1] + 0.5, box
    root2 = nb.wait_for_output_selector(4, ".mg-tape")
    snap = wait_tape(root2, lambda s: s["frame"] == end, "the finished view at its end")
    assert snap["counter"] == f"step {end} of {end}", snap["counter"]
    assert "Backward is over" in snap["sentence"]
    browser_log.assert_no_console_errors()
