"""Fixtures for the browser tests: a real JupyterLab server and Debian's Chromium.

Chromium is never downloaded (``playwright install`` is not used): the system binary is
driven through pytest-playwright's fixtures with ``executable_path``. Without one the
browser tests are skipped -- unless ``MINIGRAD_REQUIRE_BROWSER=1`` (CI sets it whenever
it has Chromium), which turns the skip into an error.

Fixtures:
  ``chromium_executable``  path of the browser (session)
  ``lab``                  a running :class:`JupyterLabServer` (session); notebooks go in
                           ``lab.root``; every kernel session is shut down after each test
  ``browser_log``          console errors, page errors and requests of the test's page
                           (autouse here, so nothing goes unrecorded)
  ``page``                 pytest-playwright's, in a fresh context per test
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# tests/ is no package: make the helper module importable whatever --import-mode is used.
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

from browser_harness import (  # noqa: E402
    CHROMIUM_ARGS,
    BrowserLog,
    JupyterLabServer,
    find_chromium,
)

# (label, seconds) pairs, shown at the end of the run (print() in tests is captured).
TIMINGS: list[tuple[str, float]] = []
# The figures the widget tests measure (payload, first paint, step times), shown at the end too.
FIGURES: list[str] = []


@pytest.fixture(scope="session")
def chromium_executable() -> str:
    path, why = find_chromium()
    if path is None:
        message = f"browser tests need Chromium: {why}"
        if os.environ.get("MINIGRAD_REQUIRE_BROWSER") == "1":
            pytest.fail(f"{message} -- and MINIGRAD_REQUIRE_BROWSER=1", pytrace=False)
        print(f"\nSKIP: {message}", file=sys.stderr)
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def browser_type_launch_args(
    browser_type_launch_args, chromium_executable, browser_name, tmp_path_factory
):
    """pytest-playwright's launch options (--headed, --slowmo, ...) plus ours.

    Playwright gives every launch a fresh temporary --user-data-dir; HOME and the XDG dirs
    point at a temporary directory too, so the browser writes nothing to the real home.
    """
    if browser_name != "chromium":
        pytest.skip(f"the browser tests drive Chromium, not {browser_name}")
    args = list(browser_type_launch_args.get("args", []))
    headless = browser_type_launch_args.get("headless", True)
    args += [a for a in CHROMIUM_ARGS if headless or a != "--headless"]
    home = tmp_path_factory.mktemp("chromium-home")
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }
    return {
        **browser_type_launch_args,
        "executable_path": chromium_executable,
        "args": args,
        "headless": headless,
        "env": env,
    }


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    # Wide enough that JupyterLab's toolbar does not collapse items into a "..." menu.
    return {**browser_context_args, "viewport": {"width": 1400, "height": 900}}


@pytest.fixture(scope="session")
def lab(chromium_executable, tmp_path_factory):
    """A JupyterLab server for the whole session (it depends on the browser being there
    only so that nothing is started when the browser tests are skipped anyway)."""
    server = JupyterLabServer(tmp_path_factory.mktemp("jupyterlab"))
    server.start()
    TIMINGS.append(("JupyterLab server start (until /api/status answers)", server.startup_seconds))
    yield server
    leftovers = server.stop()
    if leftovers:
        pytest.fail(f"JupyterLab processes had to be killed: {leftovers}", pytrace=False)


@pytest.fixture(autouse=True)
def _shutdown_kernels_after_test(lab):
    # Set up before `page` (autouse fixtures come first), so torn down after the page's
    # context is closed: no kernel "died" messages reach a page that is still open.
    yield
    lab.shutdown_all_sessions()


@pytest.fixture(autouse=True)
def browser_log(_shutdown_kernels_after_test, page) -> BrowserLog:
    return BrowserLog().attach(page.context, page)


@pytest.fixture
def record_timing():
    def record(label: str, seconds: float) -> None:
        TIMINGS.append((label, seconds))
        print(f"{label}: {seconds:.2f}s")

    return record


@pytest.fixture
def report_figure():
    """Print a measured figure and repeat it in the run's summary."""
    def report(text: str) -> None:
        FIGURES.append(text)
        print(text)

    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed and call.when == "call":
        log = item.funcargs.get("browser_log")
        if isinstance(log, BrowserLog):
            report.sections.append(("browser console", "\n".join(log.console) or "(empty)"))
            report.sections.append(("browser requests", "\n".join(log.requests) or "(none)"))
        server = item.funcargs.get("lab")
        if isinstance(server, JupyterLabServer):
            report.sections.append(("jupyter server log (tail)", server.log_tail()))
    return report


def summary_sections() -> list[tuple[str, list[str]]]:
    """The figures and timings, for tests/conftest.py to print at the end of the run (under
    pytest-xdist it gets them from the worker that ran the browser tests)."""
    sections = []
    if FIGURES:
        sections.append(("browser figures", list(FIGURES)))
    if TIMINGS:
        sections.append(("browser harness timings",
                         [f"{seconds:7.2f}s  {label}" for label, seconds in TIMINGS]))
    return sections
