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


def pytest_terminal_summary(terminalreporter):
    """Print each lesson's run time (tests/test_lessons.py measures them) and each nbgrader
    call's (tests/test_nbgrader.py)."""
    module = sys.modules.get("test_lessons") or sys.modules.get("tests.test_lessons")
    times = getattr(module, "RUN_TIMES", {})
    if times:
        terminalreporter.section("lesson run times")
        for name, seconds in sorted(times.items()):
            terminalreporter.write_line(f"{seconds:7.1f}s  {name}")
    module = sys.modules.get("test_nbgrader") or sys.modules.get("tests.test_nbgrader")
    times = getattr(module, "NBGRADER_TIMES", {})
    if times:
        terminalreporter.section("nbgrader run times (wall, CPU of nbgrader and its kernels)")
        for name, (wall, cpu) in times.items():
            terminalreporter.write_line(f"{wall:7.1f}s {cpu:7.1f}s  nbgrader {name}")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "build: builds minigrad in a subprocess (a minute or so); "
                   "-m 'not build' leaves these out")
