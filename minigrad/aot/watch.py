"""What a captured function did that its graph cannot show: detach() calls and no_grad() blocks.

capture reads fn's graph from the grad_fn links. A detached value and a value computed under
no_grad() are both leaves there, so the walk would take them for constants and fold in their
capture-time data: the plan would then use stale numbers on every later run, without a word.
While fn runs, a profile hook (this thread only, restored afterwards) notes each detach() result
with the Variable it came from, and where fn entered no_grad(). capture then writes a detached
value as a stop_gradient of the live value, and refuses no_grad() with the line that entered it.
"""
from __future__ import annotations

import contextlib
import os
import sys

from ..modes import no_grad
from ..variable import Variable

_DETACH = Variable.detach.__code__
_NO_GRAD = getattr(no_grad, "__wrapped__", no_grad).__code__   # the generator inside @contextmanager


class Watch:
    """with Watch() as watch: fn(...) -> watch.detached (id(result) -> source), watch.no_grad_at."""

    def __init__(self):
        self.detached: dict = {}
        self.no_grad_at: str | None = None
        self._kept: list = []        # detach() results, alive so that their ids stay theirs
        self._previous = None

    def __enter__(self) -> "Watch":
        # Under a profiler (cProfile, %prun) the watch stays off: a C-level profiler cannot be put
        # back with sys.setprofile. capture then still finds detached values by their memory.
        self._previous = sys.getprofile()
        if self._previous is None:
            sys.setprofile(self._see)
        return self

    def __exit__(self, *exc) -> None:
        if self._previous is None:
            sys.setprofile(None)

    def _see(self, frame, event, arg) -> None:
        if event == "return" and frame.f_code is _DETACH and isinstance(arg, Variable):
            self.detached[id(arg)] = frame.f_locals["self"]
            self._kept.append(arg)
        elif event == "call" and frame.f_code is _NO_GRAD and self.no_grad_at is None:
            self.no_grad_at = _caller(frame.f_back)


def _caller(frame) -> str:
    """file:line of the first frame outside contextlib (the `with no_grad():` line)."""
    while frame is not None and frame.f_code.co_filename == contextlib.__file__:
        frame = frame.f_back
    if frame is None:
        return "an unknown line"
    return f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
