"""Accessible TapeView and AotView (issue 22), in Chromium.

TapeView's slot table is a table (rows, cells, column headers; aria-rowcount and aria-rowindex,
since only the rows in view exist) whose rows say in words what their colours show; its slot
table and its instruction list are one Tab stop each, Up / Down / Page Up / Page Down / Home / End
moving between rows. AotView's nodes say the derivation's state in their accessible names, as
the stepper's nodes do (a11y.js). Pages are save_html files opened from file://.
"""
from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad import aot
from minigrad.tape import Tape
from minigrad.widgets import AotView, TapeView, save_html

from test_export import OfflinePage  # noqa: F401  (the offline fixture's page class)
from test_export import offline  # noqa: F401  (pytest fixture)

N_LAYERS = 60   # a tape of ~180 slots: more rows than the pane shows, so most are not in the DOM


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    out = tmp_path_factory.mktemp("a11y_tape_aot")
    tape = Tape()
    tx, tw, tc = tape.var(0.7, name="x"), tape.var(-1.3, name="w"), tape.const(2.0, name="c")
    ty = tape.tanh(tx * tw + tc * tc) * tape.sin(tx)
    long_tape = Tape()
    y, w = long_tape.var(0.3, name="x"), long_tape.var(0.9, name="w")
    for _ in range(N_LAYERS):
        y = long_tape.tanh(y * w)
    mlp = mg.nn.MLP([4, 6, 3], seed=0, dtype=np.float64)
    gate = mg.create_leaf(np.full(3, 0.5), requires_grad=True, name="gate")
    captured = aot.capture(lambda x, t: mg.cross_entropy(mlp(x) * gate, t), np.ones((2, 4)),
                           np.array([0, 1]), params=[*mlp.parameters(), gate])
    return {"tape": save_html(TapeView(tape, ty), out / "tape.html"),
            "long": save_html(TapeView(long_tape, y), out / "long.html"),
            "aot": save_html(AotView(captured), out / "aot.html")}


def open_page(offline, path):  # noqa: F811
    view = offline(path)
    root, _ = view.open()
    root.locator("input.mg-slider").wait_for()
    return view, root


def go(root, frame):
    root.locator("input.mg-slider").fill(str(frame))
    root.page.wait_for_function("([el, f]) => el.dataset.frame === String(f)",
                                arg=[root.element_handle().evaluate_handle("r => r.parentElement"), frame])


ROWS_JS = """(root) => [...root.querySelectorAll('.mg-slots-body [data-slot]')].map((r) => ({
  slot: +r.dataset.slot, classes: [...r.classList], rowindex: r.getAttribute('aria-rowindex'),
  role: r.getAttribute('role'), tabindex: r.getAttribute('tabindex'),
  state: r.lastElementChild.textContent, stateRole: r.lastElementChild.getAttribute('role') }))"""
ITEMS_JS = """(root) => [...root.querySelectorAll('.mg-instrs [data-instr]')].map((li) => ({
  pos: +li.dataset.instr, classes: [...li.classList], current: li.getAttribute('aria-current'),
  tabindex: li.getAttribute('tabindex'), state: li.lastElementChild.textContent,
  posinset: li.getAttribute('aria-posinset'), setsize: li.getAttribute('aria-setsize') }))"""

WORDS = {"mg-writing": "output of the current instruction", "mg-using": "read by the current instruction",
         "mg-grad-new": "gradient written at this step", "mg-freed": "freed: no use left"}


def test_tape_rows_say_in_words_what_their_colours_show(offline, pages):  # noqa: F811
    view, root = open_page(offline, pages["tape"])
    n_slots = int(root.get_attribute("data-slots"))
    n_instrs = int(root.get_attribute("data-instrs"))
    table = root.locator('[role="table"]')
    assert table.get_attribute("aria-rowcount") == str(n_slots + 1)
    snap = root.locator(".mg-tape-body").aria_snapshot()
    assert '- table "slots":' in snap and "- rowgroup:" in snap and '- list "instructions":' in snap, snap
    assert 'columnheader "uses left"' in snap and 'columnheader "state"' in snap, snap
    seen = set()
    last = int(root.locator("input.mg-slider").get_attribute("max"))
    for frame in range(last + 1):
        go(root, frame)
        rows = root.evaluate(ROWS_JS)
        assert len(rows) == n_slots
        for r in rows:
            assert r["role"] == "row" and r["stateRole"] == "cell" and r["rowindex"] == str(r["slot"] + 2)
            for cls, words in WORDS.items():
                assert (cls in r["classes"]) == (words in r["state"]), (frame, r)
                if words in r["state"]:
                    seen.add(words)
        items = root.evaluate(ITEMS_JS)
        assert len(items) == n_instrs
        for it in items:
            assert it["posinset"] == str(it["pos"] + 1) and it["setsize"] == str(n_instrs)
            current = "mg-current" in it["classes"]
            assert (it["current"] == "step") == current, (frame, it)
            want = ": running now" if current else ": done" if "mg-done" in it["classes"] else ": not run yet"
            assert it["state"] == want, (frame, it)
        assert sum(it["current"] == "step" for it in items) == (1 if frame >= 2 else 0), (frame, items)
    assert seen == set(WORDS.values()), seen
    # Chromium's own tree has the words as cells of the rows (at the last step: freed slots).
    cdp = view.page.context.new_cdp_session(view.page)
    ax = cdp.send("Accessibility.getFullAXTree")["nodes"]
    cells = [n.get("name", {}).get("value", "") for n in ax if n.get("role", {}).get("value") == "cell"]
    assert "freed: no use left" in cells, cells
    view.assert_clean()


def focused(page):
    return page.evaluate("""() => { const e = document.activeElement;
      return { slot: e.dataset.slot ?? null, instr: e.dataset.instr ?? null, rowindex: e.getAttribute('aria-rowindex'),
               outline: getComputedStyle(e).outlineStyle }; }""")


def test_tape_lists_are_one_tab_stop_each_with_arrow_keys(offline, pages):  # noqa: F811
    view, root = open_page(offline, pages["long"])
    page = view.page
    n_slots = int(root.get_attribute("data-slots"))
    n_instrs = int(root.get_attribute("data-instrs"))
    assert n_slots > 100
    frame = 5
    go(root, frame)
    rendered = root.evaluate(ROWS_JS)
    assert len(rendered) < n_slots                        # (virtual: most rows are not in the DOM)
    assert [r["tabindex"] for r in rendered].count("0") == 1
    items = root.evaluate(ITEMS_JS)
    assert [it["tabindex"] for it in items].count("0") == 1
    # The Tab stop is the row the step shows: the instruction running now.
    assert next(it for it in items if it["tabindex"] == "0")["current"] == "step"

    root.locator("input.mg-slider").focus()
    for _ in range(3):   # (the step's sentence, when it overflows, is a Tab stop too)
        page.keyboard.press("Tab")
        if focused(page)["slot"] is not None:
            break
    at = focused(page)
    assert at["slot"] is not None and at["outline"] == "solid", at
    page.keyboard.press("ArrowDown")
    assert int(focused(page)["slot"]) == int(at["slot"]) + 1
    page.keyboard.press("End")
    now = focused(page)
    assert now["slot"] == str(n_slots - 1) and now["rowindex"] == str(n_slots + 1), now
    page.keyboard.press("PageUp")
    assert int(focused(page)["slot"]) < n_slots - 5
    page.keyboard.press("Home")
    assert focused(page)["slot"] == "0"
    assert page.evaluate("document.activeElement.closest('.mg-root').parentElement.dataset.frame") == str(frame)
    # One Tab stop: the next Tab leaves the table for the instruction list, on its stop.
    page.keyboard.press("Tab")
    at = focused(page)
    assert at["slot"] is None and at["instr"] is not None, at
    page.keyboard.press("End")
    assert focused(page)["instr"] == str(n_instrs - 1)
    page.keyboard.press("ArrowUp")
    assert focused(page)["instr"] == str(n_instrs - 2)
    # Shift+Tab goes back to the table, on the row the keyboard left it at.
    page.keyboard.press("Shift+Tab")
    assert focused(page)["slot"] == "0"
    # Left and Right still step backward from a row.
    page.keyboard.press("ArrowRight")
    page.wait_for_function("(f) => document.activeElement.closest('.mg-root').parentElement.dataset.frame === f",
                           arg=str(frame + 1))
    view.assert_clean()


NODES_JS = """(root) => [...root.querySelectorAll('svg.mg-svg g.node')].map((g) => ({
  id: g.id, name: g.getAttribute('aria-label'), classes: [...g.classList], tabindex: g.getAttribute('tabindex'),
  stroke: g.querySelector('.mg-shape') ? getComputedStyle(g.querySelector('.mg-shape')).stroke : null }))"""


def test_aot_node_names_say_the_derivation_state(offline, pages):  # noqa: F811
    view, root = open_page(offline, pages["aot"])
    root.page.wait_for_function("(el) => el.dataset.graph === 'ready'",
                                arg=root.element_handle().evaluate_handle("r => r.parentElement"))
    last = int(root.locator("input.mg-slider").get_attribute("max"))
    saves_at = None
    seen = set()
    for frame in range(last + 1):
        go(root, frame)
        nodes = root.evaluate(NODES_JS)
        assert [n["tabindex"] for n in nodes].count("0") == 1, frame
        known = "required saves (" in root.locator(".mg-saves").text_content()
        if known and saves_at is None:
            saves_at = frame
        for n in nodes:
            c, name = set(n["classes"]), n["name"]
            where = (frame, n["id"], sorted(c), name)
            assert name.startswith(("forward ", "backward ")), where
            assert ("not derived yet" in name) == ("mg-future" in c), where
            assert ("its backward rule runs in this step" in name) == ("mg-current" in c), where
            assert ("emitted in this step" in name) == ("mg-new" in c), where
            assert ("no gradient needed" in name) == ("nograd" in c), where
            # the saved tensors are named (and outlined) once the derivation has found them
            assert ("saved for backward" in name) == ("saved" in c and known), where
            seen.update(w for w in ("not derived yet", "rule runs", "emitted", "no gradient", "saved")
                        if w in name)
        current = [n for n in nodes if "mg-current" in n["classes"]]
        if current:   # the Tab stop follows the op whose rule runs
            assert current[0]["tabindex"] == "0", (frame, current)
    assert saves_at is not None and 0 < saves_at
    assert seen == {"not derived yet", "rule runs", "emitted", "no gradient", "saved"}, seen
    go(root, 0)
    before = {n["stroke"] for n in root.evaluate(NODES_JS) if "saved" in n["classes"]}
    go(root, last)
    after = {n["stroke"] for n in root.evaluate(NODES_JS) if "saved" in n["classes"]}
    assert before and after and before != after, (before, after)
    view.assert_clean()
