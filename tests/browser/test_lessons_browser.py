"""Every lesson, run in a real JupyterLab with Run All: no error output, no console error, no
request off the machine, and every widget it displays drawn."""
from __future__ import annotations

import pathlib
import shutil

import nbformat
import pytest
from nbclient import NotebookClient

from browser_harness import (
    BrowserLog,
    assert_all_requests_local,
    assert_no_console_errors,
    open_and_run_all,
)

LESSONS = sorted((pathlib.Path(__file__).parents[2] / "lessons").glob("[0-9][0-9]_*.ipynb"))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def widget_views(path: pathlib.Path) -> int:
    """How many widget views the lesson displays (run headless first to count them)."""
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return sum(WIDGET_VIEW in output.get("data", {})
               for cell in notebook.cells for output in cell.get("outputs", []))


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_lesson_runs_in_jupyterlab_with_its_widgets_drawn(lesson, lab, page,
                                                           browser_log: BrowserLog,
                                                           record_timing):
    expected = widget_views(lesson)
    assert expected >= 1, "every lesson shows at least one widget"
    shutil.copy(lesson, lab.root / lesson.name)
    notebook = open_and_run_all(page, lab, lab.root / lesson.name, timeout=180)
    record_timing(f"{lesson.stem}: Run All in JupyterLab", notebook.run_seconds)
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
