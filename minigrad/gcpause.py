"""gc_paused: Python's cyclic garbage collector paused while a big build of records runs."""
from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def gc_paused():
    """Pause the cyclic collector for a build that makes many containers and no cycle (a
    trace's dicts, a tape's Instrs); usable as a decorator.

    The collector runs after every 700 new containers, and after ten of those runs, on a big
    enough heap, rescans every container alive. A build of n records running with it on pays
    n/700 collections, some of them full ones over a heap that the build itself makes bigger,
    which grows faster than n: a trace of a 4x bigger graph cost 5x and more. Paused, the build
    is followed by one young collection over what it made (the count keeps running); nothing is
    skipped that could be garbage, since the build makes no cycle. It runs as usual after.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
