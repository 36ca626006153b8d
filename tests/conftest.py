import sys

import pytest
from hypothesis import HealthCheck, settings

import minigrad as mg

# No property test may fail because the machine is slow or busy: a per-example deadline and the
# health check on slow data generation measure time, not correctness. Every @settings(...) in
# the suite starts from this profile.
settings.register_profile("any-machine", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("any-machine")


@pytest.fixture(autouse=True)
def debug_mode():
    prev = mg.set_debug(True)
    yield
    mg.set_debug(prev)


# Summaries that tests collect while they run (lesson run times, nbgrader calls, the browser's
# figures). Under pytest-xdist (`make test` runs two workers) they are gathered in the workers
# and printed by the controller, which runs no test: each worker sends its sections back in
# `workeroutput` when it finishes.
WORKER_SECTIONS: list[tuple[str, list[str]]] = []


def local_sections(config) -> list[tuple[str, list[str]]]:
    """(title, lines) of every summary this process collected."""
    sections = []
    # conftest files below this one (tests/browser/) offer theirs as `summary_sections()`
    for plugin in config.pluginmanager.get_plugins():
        if callable(getattr(plugin, "summary_sections", None)):
            sections += plugin.summary_sections()
    module = sys.modules.get("test_lessons") or sys.modules.get("tests.test_lessons")
    times = getattr(module, "RUN_TIMES", {})
    if times:
        sections.append(("lesson run times",
                         [f"{seconds:7.1f}s  {name}" for name, seconds in sorted(times.items())]))
    module = sys.modules.get("test_nbgrader") or sys.modules.get("tests.test_nbgrader")
    times = getattr(module, "NBGRADER_TIMES", {})
    if times:
        sections.append(("nbgrader run times (wall, CPU of nbgrader and its kernels)",
                         [f"{wall:7.1f}s {cpu:7.1f}s  nbgrader {name}"
                          for name, (wall, cpu) in times.items()]))
    return sections


def pytest_sessionfinish(session):
    if hasattr(session.config, "workeroutput"):   # an xdist worker: hand them to the controller
        session.config.workeroutput["summary_sections"] = local_sections(session.config)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """(xdist, in the controller) a worker finished: keep the sections it collected."""
    WORKER_SECTIONS.extend(tuple(s) for s in getattr(node, "workeroutput", {}).get(
        "summary_sections", []))


def pytest_terminal_summary(terminalreporter, config):
    """Print each lesson's run time (tests/test_lessons.py measures them), each nbgrader call's
    (tests/test_nbgrader.py) and the browser tests' figures and timings."""
    merged: dict[str, list[str]] = {}
    for title, lines in local_sections(config) + WORKER_SECTIONS:
        merged.setdefault(title, []).extend(lines)
    for title, lines in merged.items():
        terminalreporter.section(title)
        for line in lines:
            terminalreporter.write_line(line)


# `make test` runs `pytest -n 2 --dist loadfile` (pytest-xdist): a test file's tests stay on one
# worker, so module fixtures (nbgrader's course, the JupyterLite site) are made once. Here that
# scheduling keeps all of tests/browser/ on one worker too (one JupyterLab and one Chromium, never
# two competing for the two cores), and hands out the longest units first, so that none starts
# last (seconds from `--durations`, one run on a loaded machine: the browser tests ~500, nbgrader's
# course ~290, the lessons ~150, Binder's image ~100, the JupyterLite site ~80; every other file
# takes under a minute). A file not named here just comes later, in xdist's usual order.
# (Not `--dist loadgroup` with xdist_group marks: with pytest 9.2 xdist's loadgroup silently
# stops grouping, pytest-xdist issue 1386.)
LONGEST_FIRST = ("tests/browser", "tests/test_nbgrader.py", "tests/test_lessons.py",
                 "tests/test_binder.py", "tests/test_lite.py")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FilesBrowserTogetherLongestFirst(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "tests/browser" if path.startswith("tests/browser/") else path

        def _assign_work_unit(self, node) -> None:
            for scope in reversed(LONGEST_FIRST):
                if scope in self.workqueue:
                    self.workqueue.move_to_end(scope, last=False)
            super()._assign_work_unit(node)

    return FilesBrowserTogetherLongestFirst(config, log)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "build: builds minigrad in a subprocess (a minute or so); "
                   "-m 'not build' leaves these out")

