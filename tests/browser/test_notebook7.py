"""Lesson 00 in Notebook 7 (the `notebook` package), not JupyterLab: Run All draws every widget,
the stepper replays what the lesson ran, and a fresh stepper's Step button runs the real engine
in the kernel, click by click, as in the JupyterLab tests.

Notebook 7 is built from JupyterLab's pieces, so the harness's server and notebook driver serve
with three changes: the server command and page URL, and where the kernel status and the menu
bar are (a toolbar indicator instead of a status bar; `#menu-panel`).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from urllib.parse import quote

import nbformat
import pytest
from nbclient import NotebookClient

from browser_harness import (
    JupyterLabServer,
    Notebook,
    assert_all_requests_local,
    assert_no_console_errors,
)
from test_widgets import click, wait_for

# Notebook 7.6.5 itself throws this while it loads its settings (its keyboard-shortcut plugin
# reads the schema of a plugin it has not loaded): also on an empty notebook with every
# extension that is not Notebook's or JupyterLab's own disabled. Only with its stack in
# Notebook's bundle, so an error of ours with the same words would still fail the test.
NOTEBOOK7_NOISE = (r"(?s)reading 'schema'\).*/static/notebook/notebook_core\.",)

LESSON = Path(__file__).resolve().parents[2] / "lessons" / "00_welcome.ipynb"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def widget_views(path: Path) -> int:
    """How many widget views the lesson displays (run headless first to count them)."""
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=180, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return sum(WIDGET_VIEW in output.get("data", {})
               for cell in notebook.cells for output in cell.get("outputs", []))


class NotebookServer(JupyterLabServer):
    """`jupyter notebook` (Notebook 7) with the harness's isolation and no-network options."""

    def _prepare_dirs(self) -> dict[str, str]:
        dirs = super()._prepare_dirs()
        # Notebook 7 has no extension manager: a setting for it makes the page throw
        # ("Cannot read properties of undefined (reading 'schema')") while loading settings.
        overrides = Path(dirs["app-settings"]) / "overrides.json"
        settings = json.loads(overrides.read_text())
        settings.pop("@jupyterlab/extensionmanager-extension:plugin", None)
        overrides.write_text(json.dumps(settings, indent=2))
        return dirs

    def args(self, dirs: dict[str, str]) -> list[str]:
        args = super().args(dirs)
        args[args.index("lab")] = "notebook"
        # The page's settings come from the notebook app here, not from JupyterLab's.
        return [a.replace("--LabApp.app_settings_dir", "--JupyterNotebookApp.app_settings_dir")
                for a in args]

    def notebook_url(self, path: str) -> str:
        return f"{self.base_url}/notebooks/{quote(path)}?token={self.token}"


# Notebook 7's state in one DOM read, in the shape Notebook's waits expect: the kernel status
# reads "<kernel name> | Idle" like JupyterLab's status bar item.
_STATE_JS = """
() => {
  const panel = document.querySelector('.jp-NotebookPanel');
  const prompts = panel
    ? [...panel.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].map(e => e.textContent.trim())
    : [];
  const indicator = document.querySelector('.jp-Notebook-ExecutionIndicator');
  const kernel = document.querySelector('.jp-Toolbar-kernelName');
  const idle = indicator && indicator.getAttribute('data-status') === 'idle';
  const dialog = document.querySelector('.jp-Dialog .jp-Dialog-header');
  return {
    panels: document.querySelectorAll('.jp-NotebookPanel').length,
    prompts,
    status: kernel ? `${kernel.textContent.trim()} | ${idle ? 'Idle' : 'Busy'}` : null,
    dialog: dialog ? dialog.textContent.trim() : null,
  };
}
"""


class Notebook7(Notebook):
    def _state(self) -> dict:
        return self.page.evaluate(_STATE_JS)

    def _menu(self, menu: str, command: str) -> None:
        self.page.locator("#menu-panel .lm-MenuBar-itemLabel").get_by_text(menu, exact=True).click()
        self.page.locator(f'.lm-Menu-item[data-command="{command}"]').click()


@pytest.fixture(scope="module")
def notebook7(chromium_executable, tmp_path_factory):
    server = NotebookServer(tmp_path_factory.mktemp("notebook7"))
    server.start()
    yield server
    leftovers = server.stop()
    if leftovers:
        pytest.fail(f"Notebook 7 processes had to be killed: {leftovers}", pytrace=False)


def test_lesson_00_in_notebook_7_steps_the_stepper(notebook7, page, browser_log, record_timing):
    expected_views = widget_views(LESSON)
    shutil.copy(LESSON, notebook7.root / LESSON.name)
    nb = Notebook7(page, notebook7, LESSON.name, timeout=180)
    page.goto(notebook7.notebook_url(LESSON.name))
    nb.panel.wait_for(timeout=120_000)
    assert page.locator("#jp-main-statusbar").count() == 0, "this is Notebook 7, not JupyterLab"
    nb.wait_for_kernel_idle()
    record_timing("00_welcome: Run All in Notebook 7", nb.run_all())

    # every widget the lesson displays is drawn
    views = page.locator(".jp-NotebookPanel .mg-root")
    views.nth(expected_views - 1).wait_for(timeout=60_000)
    assert views.count() == expected_views
    # the lesson's stepper ran to the end (stepper.finish()); the view replays it
    lesson_stepper = page.locator(".jp-NotebookPanel .mg-stepper").first
    snap = wait_for(lesson_stepper, lambda s: s["dataPhase"] == "released" and s["graph"] == "ready",
                    "the lesson's stepper to show the end of backward")
    end = snap["frame"]
    click(lesson_stepper, "first")
    snap = wait_for(lesson_stepper, lambda s: s["frame"] == 0, "first")
    assert snap["dataPhase"] == "forward"
    click(lesson_stepper, "step")
    wait_for(lesson_stepper, lambda s: s["frame"] == 1, "a replayed step")
    assert end > 1

    # a fresh stepper: each click on Step runs the engine in the kernel. By hand (the lesson's
    # section 2): dloss/dc = 2 (w x + c - y) = -1.6 and dloss/dw = x * (-1.6) = -3.2.
    nb.run_new_cell("w, c, loss = model()\nfresh = BackwardStepper(loss)\nfresh")
    fresh = page.locator(".jp-NotebookPanel .mg-stepper").last
    snap = wait_for(fresh, lambda s: s["graph"] == "ready", "the fresh stepper's graph")
    start = snap["frame"]
    for n in range(1, 5):   # the seed, then pow, sub, add: c has its gradient, w not yet
        click(fresh, "step")
        wait_for(fresh, lambda s, n=n: s["frame"] == start + n, f"step {n}")
    assert nb.run_new_cell("print(fresh.frame, w.grad, c.grad)").split() == \
        [str(start + 4), "None", "-1.6"]
    click(fresh, "step")    # mul: w's gradient arrives
    wait_for(fresh, lambda s: s["frame"] == start + 5, "step 5")
    assert nb.run_new_cell("print(w.grad, c.grad)").split() == ["-3.2", "-1.6"]

    print(browser_log.summary())
    assert_no_console_errors(browser_log, allow=NOTEBOOK7_NOISE)
    assert_all_requests_local(browser_log)
