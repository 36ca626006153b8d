"""Engine-wide switches: grad mode (per thread), debug assertions and anomaly detection.

They live in their own module, below everything else, because both the op layer (which builds
graphs) and the engine (which runs backward) read them.
"""
from __future__ import annotations

import os
import reprlib
import threading
from contextlib import contextmanager
from typing import Iterator

from .names import check_name


class _ThreadModes(threading.local):
    # Per thread, as in PyTorch: one thread's no_grad() never switches off another thread's graph.
    grad_enabled = True
    anomaly = False
    allocator = None    # the Arena or Pool of the innermost scope; None means plain numpy arrays
    recorder = None     # the trace Recorder of minigrad.record(), if one is active
    scope = ()          # the names of the enclosing name_scope()s and Module calls, outermost first
    capture = None      # the aot capture recording on this thread, told of detach() and no_grad()

    def __init__(self):
        # Every op reads these: copied into each thread's own dict they are found there at
        # once, instead of after a miss that falls back to the class (about a third faster).
        self.__dict__.update((k, v) for k, v in vars(_ThreadModes).items() if not k.startswith("_"))


modes = _ThreadModes()
# The debug switch, for all threads: a one-element list, so the engine's hot paths read
# debug_flag[0] (no call) and set_debug changes it in place for every module that imported it.
debug_flag = [os.environ.get("MINIGRAD_DEBUG", "") not in ("", "0")]


def is_debug() -> bool:
    """True when the engine asserts its invariants (pending counts, one apply per node, ...)."""
    return debug_flag[0]


def set_debug(flag: bool) -> bool:
    """Turn the invariant assertions on or off for all threads; returns the previous setting."""
    previous, debug_flag[0] = debug_flag[0], bool(flag)
    return previous


@contextmanager
def no_grad() -> Iterator[None]:
    """Inside this block ops build no graph: outputs never require grad (evaluation, optimiser steps)."""
    if modes.capture is not None:   # its results would be frozen into the plan: capture refuses
        modes.capture.entered_no_grad()
    previous, modes.grad_enabled = modes.grad_enabled, False
    try:
        yield
    finally:
        modes.grad_enabled = previous


def is_grad_enabled() -> bool:
    return modes.grad_enabled


class name_scope:
    """Every Variable made inside `with name_scope(name):` records `name` in its scope (nested
    scopes add up, outermost first); traces carry it, so views can group a model's graph by its
    parts. (A class, not a @contextmanager generator: every Module call enters one.)"""

    __slots__ = ("name", "previous")

    def __init__(self, name: str):
        if not (type(name) is str and name.isprintable() and name):   # (check_name's fast path,
            # without building its message: a model's forward passes here once per layer)
            name = check_name(name, f"name_scope({reprlib.repr(name)})", required=True,
                              example="name_scope('encoder')")
        self.name = name

    def __enter__(self) -> None:
        self.previous = modes.scope
        modes.scope = self.previous + (self.name,)

    def __exit__(self, *exc) -> bool:
        modes.scope = self.previous
        return False
