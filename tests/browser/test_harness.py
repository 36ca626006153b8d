"""Self-test of the browser harness with a tiny anywidget defined in the notebook itself.

If these fail, the widget tests built on the harness cannot be trusted either way.
"""

from __future__ import annotations

import nbformat
import pytest
from playwright.sync_api import expect

from browser_harness import (
    BrowserLog,
    assert_all_requests_local,
    assert_no_console_errors,
    is_local_url,
    open_and_run_all,
    write_notebook,
)

# A counter widget: a button showing the synced `count`; clicking it adds one.
# The ESM imports nothing, so it needs no network and no bundler.
COUNTER_CELL = '''
import anywidget
import traitlets


class Counter(anywidget.AnyWidget):
    _esm = """
    function render({ model, el }) {
      const button = document.createElement("button");
      button.className = "harness-counter";
      const paint = () => {
        button.textContent = `count: ${model.get("count")}`;
        button.dataset.count = String(model.get("count"));
      };
      button.addEventListener("click", () => {
        model.set("count", model.get("count") + 1);
        model.save_changes();
      });
      model.on("change:count", paint);
      paint();
      el.appendChild(button);
      return () => model.off("change:count", paint);
    }
    export default { render };
    """
    count = traitlets.Int(0).tag(sync=True)
'''


def test_counter_widget_round_trip(lab, page, browser_log: BrowserLog, record_timing):
    path = write_notebook(lab.root, "harness_counter.ipynb", [
        COUNTER_CELL,
        "w = Counter()\nw",
        "print('count at start:', w.count)",
    ])
    print(f"JupyterLab server start: {lab.startup_seconds:.2f}s")

    nb = open_and_run_all(page, lab, path)
    record_timing("open notebook until kernel idle", nb.open_seconds)
    record_timing("Run All Cells (3 cells, widget included)", nb.run_seconds)

    # (a) the widget rendered in the output of cell 1
    button = nb.wait_for_output_selector(1, "button.harness-counter")
    expect(button).to_have_text("count: 0")
    assert nb.output_text(2).strip() == "count at start: 0"

    # (b) clicks in Chromium reach the kernel
    for _ in range(3):
        button.click()
    expect(button).to_have_text("count: 3")
    assert nb.run_new_cell("print(w.count)").strip() == "3"

    # (c) a change made in the kernel reaches the DOM
    nb.run_new_cell("w.count = 42")
    expect(button).to_have_text("count: 42")
    expect(button).to_have_attribute("data-count", "42")

    # (d) + (e)
    print(browser_log.summary())
    browser_log.assert_no_console_errors()
    browser_log.assert_all_requests_local()
    # The collector did see the traffic (an empty log would pass (e) vacuously).
    assert any("/api/kernels/" in u for u in browser_log.request_urls), browser_log.requests
    assert not browser_log.blocked


def test_console_errors_and_failing_cells_are_reported(lab, page, browser_log: BrowserLog):
    """The assertions are not vacuous: a widget that logs an error is caught, and a cell
    that raises makes the run fail with its traceback. Also: markdown cells, and a notebook
    saved with outputs (stale execution counts are cleared before Run All)."""
    stale = nbformat.v4.new_code_cell(
        "print('fresh')",
        execution_count=99,
        outputs=[nbformat.v4.new_output("stream", name="stdout", text="stale\n")],
    )
    path = write_notebook(lab.root, "harness_noisy.ipynb", [
        nbformat.v4.new_markdown_cell("# A heading"),
        "import anywidget\n"
        "class Noisy(anywidget.AnyWidget):\n"
        "    _esm = '''\n"
        "    export default { render({ el }) {\n"
        "      console.error('harness self-test: deliberate error');\n"
        "      el.innerHTML = '<span class=\"noisy\">noisy</span>';\n"
        "    } };\n"
        "    '''\n"
        "Noisy()",
        stale,
    ])
    nb = open_and_run_all(page, lab, path)
    nb.wait_for_output_selector(1, "span.noisy")
    expect(page.locator("span.noisy")).to_have_text("noisy")
    expect(nb.cell(2).locator(".jp-InputPrompt")).to_have_text("[2]:")
    assert nb.output_text(2).strip() == "fresh"

    with pytest.raises(AssertionError, match="deliberate error"):
        browser_log.assert_no_console_errors()
    browser_log.assert_no_console_errors(allow=[r"harness self-test: deliberate error"])

    with pytest.raises(AssertionError, match="ZeroDivisionError"):
        nb.run_new_cell("1 / 0")
    # The kernel is still usable afterwards.
    assert nb.run_new_cell("print(6 * 7)").strip() == "42"
    browser_log.assert_all_requests_local()


def test_request_locality_rules(browser_log: BrowserLog):
    """The URL rule itself, on made-up URLs (nothing is requested here)."""
    for url in ("http://127.0.0.1:8888/lab", "ws://localhost:1/api/kernels/x/channels",
                "data:text/javascript,export%20default%201", "blob:http://127.0.0.1:1/uuid"):
        assert is_local_url(url), url
    for url in ("https://example.org/x.js", "http://127.0.0.2/", "http://localhost.example/",
                "file:///etc/passwd", "chrome-extension://abc/x"):
        assert not is_local_url(url), url

    fake = BrowserLog(request_urls=["http://127.0.0.1:1/a", "https://cdn.example.org/lib.js"])
    with pytest.raises(AssertionError, match="cdn.example.org"):
        assert_all_requests_local(fake)
    fake = BrowserLog(console_errors=["error: boom @ x:1"])
    with pytest.raises(AssertionError, match="boom"):
        assert_no_console_errors(fake)
