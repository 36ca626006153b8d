"""Every lesson, run in a real JupyterLab with Run All: no error output, no console error, no
request off the machine, and every widget it displays drawn.

How many widgets a lesson displays is read from the notebook JupyterLab saves after the run (the
kernel's outputs, as the server stores them), not from the page: one run, in the browser."""
from __future__ import annotations

import json
import pathlib
import shutil
import time

import pytest

from browser_harness import (
    BrowserLog,
    Notebook,
    assert_all_requests_local,
    assert_no_console_errors,
    open_and_run_all,
)

LESSONS = sorted((pathlib.Path(__file__).parents[2] / "lessons").glob("[0-9][0-9]_*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def saved_outputs(notebook: Notebook, path: pathlib.Path, timeout: float = 60.0) -> list[dict]:
    """File -> Save Notebook, then the outputs of the file the server wrote (the copy put there
    had none, so outputs on disk mean the save arrived)."""
    notebook._menu("File", "docmanager:save")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        outputs = [o for c in cells for o in c.get("outputs", [])]
        if outputs:
            return outputs
        # (Playwright's wait, not time.sleep: the page's requests pass BrowserLog's route
        # handler, which runs only while Playwright has control)
        notebook.page.wait_for_timeout(200)
    raise AssertionError(f"File -> Save Notebook did not write {path.name}'s outputs in {timeout}s")


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_lesson_runs_in_jupyterlab_with_its_widgets_drawn(lesson, lab, page,
                                                           browser_log: BrowserLog,
                                                           record_timing):
    shutil.copy(lesson, lab.root / lesson.name)
    notebook = open_and_run_all(page, lab, lab.root / lesson.name, timeout=180)
    record_timing(f"{lesson.stem}: Run All in JupyterLab", notebook.run_seconds)
    outputs = saved_outputs(notebook, lab.root / lesson.name)
    assert [o for o in outputs if o["output_type"] == "error"] == []
    expected = sum(WIDGET_VIEW in o.get("data", {}) for o in outputs)
    assert expected >= 1, "every lesson shows at least one widget"
    views = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .mg-root")
    views.nth(expected - 1).wait_for(timeout=60_000)
    assert views.count() == expected
    # each view finished drawing: a graph, a memory strip, the runs of a MemoryView.compare, a
    # tape's slot rows, or a message (never a spinner)
    page.wait_for_function(
        """(n) => {
            const roots = document.querySelectorAll(
                '.jp-NotebookPanel:not(.lm-mod-hidden) .mg-root');
            return roots.length === n && [...roots].every(
                r => r.querySelector(
                    'svg g.node, .mg-memory [data-block], .mg-runs li, .mg-row[data-slot], .mg-message'));
        }""", arg=expected, timeout=60_000)
    assert_no_console_errors(browser_log)
    assert_all_requests_local(browser_log)
    if lesson.stem == "07_arenas_and_batches":
        leaked_total_drawn_collapsed(page)


def leaked_total_drawn_collapsed(page) -> None:
    """Lesson 07's leak: one box per step (kind A, x7) and the last step open; a click opens
    another step in the page, its frame closes it."""
    leak = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .mg-graphview").filter(
        has=page.locator('g.cluster[id="c:step 7"]'))
    assert leak.count() == 1
    boxes = leak.locator("g.node.scope")
    assert sorted(boxes.evaluate_all("gs => gs.map(g => g.id)")) == \
        [f"s:step {i}" for i in range(7)]
    assert leak.locator("g.node.scope text").all_text_contents().count("kind A (x7)") == 7
    leak.locator('g.node[id="s:step 3"]').click()
    leak.locator('g.cluster[id="c:step 3"]').wait_for(timeout=30_000)
    assert leak.locator("g.node.scope").count() == 6
    leak.locator('g.cluster[id="c:step 3"] > text').first.click()
    leak.locator('g.node[id="s:step 3"]').wait_for(timeout=30_000)
