import sys

import pytest

import minigrad as mg


@pytest.fixture(autouse=True)
def debug_mode():
    prev = mg.set_debug(True)
    yield
    mg.set_debug(prev)


def pytest_terminal_summary(terminalreporter):
    """Print each lesson's run time (tests/test_lessons.py measures them)."""
    module = sys.modules.get("test_lessons") or sys.modules.get("tests.test_lessons")
    times = getattr(module, "RUN_TIMES", {})
    if times:
        terminalreporter.section("lesson run times")
        for name, seconds in sorted(times.items()):
            terminalreporter.write_line(f"{seconds:7.1f}s  {name}")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "build: builds minigrad in a subprocess (a minute or so); "
                   "-m 'not build' leaves these out")
