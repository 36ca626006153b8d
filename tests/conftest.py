import pytest

import minigrad as mg


@pytest.fixture(autouse=True)
def debug_mode():
    prev = mg.set_debug(True)
    yield
    mg.set_debug(prev)
