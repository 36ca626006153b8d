"""Counting the cyclic collector's runs: what the scale tests pin instead of a time."""
from __future__ import annotations

import gc


def collections_during(run) -> tuple:
    """(run()'s result, {generation: how many collections the cyclic collector ran meanwhile})."""
    ran = {}

    def count(phase, info):
        if phase == "start":
            ran[info["generation"]] = ran.get(info["generation"], 0) + 1
    gc.collect()   # (the collector's counts start from zero: the same schedule every time)
    gc.callbacks.append(count)
    try:
        result = run()
    finally:
        gc.callbacks.remove(count)
    return result, ran
