"""EventLog: the trace's events in order, the frames that group them, and the current phase."""
from __future__ import annotations

import math

import numpy as np

from ..eager.steps import preview


def values(array) -> list:
    """The first PREVIEW values of an array as JSON numbers (NaN and infinities as None)."""
    return [float(v) if math.isfinite(v) else None for v in np.asarray(preview(array), float)]


def json_shape(shape) -> list:
    return [int(n) for n in shape]


class EventLog:
    """Events are dicts, or raw backward groups (tuples) that BackwardEvents expands when the
    trace is read; `count` counts them as they will be once expanded."""

    def __init__(self):
        self.events: list = []
        self.frames: list[int] = []
        self.held: list[dict] = []          # backward allocations, written after their "apply"
        self.phase = "forward"
        self.count = 0                      # events so far, counting raw groups expanded
        self.lazy_from = 0                  # raw groups from here on may hold whole arrays
        self.expanded_to = 0                # events before this are dicts (none raw)
        self.lazy_on_allocator = False      # ... and some of those may be arena or pool memory

    def event(self, kind: str, **fields) -> None:
        self.events.append({"type": kind, "phase": self.phase, **fields})
        self.count += 1

    def write_or_hold(self, event: dict) -> None:
        # Backward allocates while a node's backward runs, before the engine reports "apply";
        # hold those events so they land in that node's step.
        if self.phase == "backward":
            self.held.append(event)
        else:
            self.events.append({"phase": self.phase, **event})
            self.count += 1

    def release_held(self) -> None:
        self.events.extend({"phase": self.phase, **event} for event in self.held)
        self.count += len(self.held)
        self.held = []

    def close_frame(self) -> None:
        last = self.count - 1
        if last >= 0 and (not self.frames or self.frames[-1] != last):
            self.frames.append(last)

    def keep_values(self) -> None:
        """Copy the previews of gradients still held as whole arrays (see BackwardEvents):
        called before their memory can be reused. (Heap arrays are never reused while
        referenced.)"""
        if not self.lazy_on_allocator:
            return
        events = self.events
        for i in range(self.lazy_from, len(events)):
            entry = events[i]
            if type(entry) is tuple:
                entry[5][:] = [preview(total) for total in entry[5]]
        self.lazy_from = len(events)
