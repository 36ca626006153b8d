"""Put a compiled plan's buffers into one arena, sharing memory between tensors whose lives do not overlap.

Compiling gives every tensor a buffer of its own. Placement then reads the compiled calls as a
timeline: a buffer is alive from the first call that touches it (the call that writes it) to the
last call that touches it. Walking the buffers by start, each takes the lowest offset of one
flat byte array that no live buffer uses (first fit), and the calls' arguments are re-pointed
there. Graph outputs (the loss, the gradients) stay alive to the end and inputs from the start
to the end, so what run() returns and the inputs it was given are intact; an intermediate tensor
read after run() may have been overwritten (Executor(..., share_buffers=False) keeps every
buffer). Parameters, constants and d_loss are not placed: they are refreshed at the start of
each run or written once.
"""
from __future__ import annotations

import bisect
import heapq

import numpy as np

from ..errors import MinigradError

ALIGN = 64   # bytes: each buffer starts on a cache line


class PlacementError(MinigradError, ValueError):
    """A compiled call hides a buffer where placement cannot re-point it."""


def root_of(array: np.ndarray) -> np.ndarray:
    while array.base is not None and isinstance(array.base, np.ndarray):
        array = array.base
    return array


def address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def live_buffers(calls: list, external: set, keep_whole_run: list, written_before: list) -> dict:
    """id(root) -> [root, first call, last call] for every buffer the calls touch."""
    spans: dict = {}
    for step, (_, args) in enumerate(calls):
        for a in args:
            if isinstance(a, np.ndarray):
                r = root_of(a)
                if id(r) in external:
                    continue
                span = spans.setdefault(id(r), [r, step, step])
                span[2] = step
            elif isinstance(a, (tuple, list)) and any(isinstance(x, np.ndarray) for x in a):
                raise _hidden_buffer(calls[step][0], a)   # (a tuple of axes is fine)
    for array in keep_whole_run:
        span = spans.get(id(root_of(array)))
        if span is not None:
            span[2] = len(calls)
    for array in written_before:
        span = spans.get(id(root_of(array)))
        if span is not None:
            span[1] = -1
    return spans


def _hidden_buffer(fn, container) -> PlacementError:
    # Placement re-points only arrays that are arguments themselves: one inside a container would
    # keep pointing at its old buffer, and the plan would read stale memory without a word.
    return PlacementError(
        f"Executor: a compiled call of {getattr(fn, '__name__', fn)} takes a "
        f"{type(container).__name__} argument; buffer placement re-points only arrays passed as "
        f"arguments themselves, so an array inside it would keep its old memory. Fix: pass each "
        f"array as its own argument of the call (fn, (a, b, out_1, out_2)).")


def first_fit(spans: dict) -> tuple:
    """id(root) -> byte offset, and the arena size: a buffer reuses memory freed strictly before it starts.

    Buffers are placed in order of their first step; each takes the lowest offset where it fits
    between the buffers still alive. The plain way scans every live buffer for each new one; here
    live buffers that touch are kept merged into runs, so the scan passes one run per hole (the
    gradients, alive to the end and packed side by side, are one run), and buffers leave through
    a heap ordered by their last step instead of a pass over all of them."""
    offsets, size = {}, 0
    runs = _Runs()
    leaving: list = []                 # heap of (last step, offset, bytes) of live buffers
    for key, (root, first, last) in sorted(spans.items(), key=lambda kv: (kv[1][1], -kv[1][0].nbytes)):
        while leaving and leaving[0][0] < first:
            _, offset, need = heapq.heappop(leaving)
            runs.remove(offset, offset + need)
        need = -(-max(root.nbytes, 1) // ALIGN) * ALIGN
        offset = runs.lowest_gap(need)
        runs.add(offset, offset + need)
        heapq.heappush(leaving, (last, offset, need))
        offsets[key] = offset
        size = max(size, offset + need)
    return offsets, size


class _Runs:
    """Byte ranges in use, as sorted disjoint runs [start, end) with a gap between any two.

    lowest_gap(need) is first fit: the lowest gap start where need bytes fit, else the end of the
    last run. Scanning the gaps from 0 costs one step per hole, and small holes pile up at low
    offsets; so for each size asked for, a heap keeps the starts of gaps that were at least that
    big when made. A popped start is checked against the runs (gaps change as runs come and go)
    and dropped when it is no longer a gap that big: each gap is pushed once per size when made."""

    def __init__(self):
        self.starts, self.ends = [], []
        self.fits: dict = {}    # need -> heap of gap starts at least need bytes wide when made

    def gap_at(self, offset: int) -> int:
        """Width of the gap starting at offset (0 when offset starts no gap; the open end: -1)."""
        i = bisect.bisect_left(self.starts, offset)
        if offset != 0 and (i == 0 or self.ends[i - 1] != offset):
            return 0
        return self.starts[i] - offset if i < len(self.starts) else -1

    def lowest_gap(self, need: int) -> int:
        if need not in self.fits:
            self.fits[need] = [o for o, _ in self._gaps() if _ >= need]
            heapq.heapify(self.fits[need])
        heap = self.fits[need]
        while heap and not self.gap_at(heap[0]) >= need:
            heapq.heappop(heap)
        return heap[0] if heap else (self.ends[-1] if self.ends else 0)

    def _gaps(self):
        before = 0
        for start, end in zip(self.starts, self.ends):
            if start > before:
                yield before, start - before
            before = end

    def _made_gap(self, offset: int) -> None:
        width = self.gap_at(offset)
        for need, heap in self.fits.items():
            if 0 < need <= width:
                heapq.heappush(heap, offset)

    def add(self, start: int, end: int) -> None:
        i = bisect.bisect_left(self.starts, start)
        if i < len(self.starts) and self.starts[i] == end:     # touches the run after it
            end = self.ends[i]
            del self.starts[i], self.ends[i]
        if i > 0 and self.ends[i - 1] == start:                # touches the run before it
            self.ends[i - 1] = end
        else:
            self.starts.insert(i, start)
            self.ends.insert(i, end)
        self._made_gap(end)                                    # what is left of the gap it took

    def remove(self, start: int, end: int) -> None:
        i = bisect.bisect_right(self.starts, start) - 1        # the run holding [start, end)
        run_start, run_end = self.starts[i], self.ends[i]
        del self.starts[i], self.ends[i]
        for piece in ((end, run_end), (run_start, start)):     # what is left of it, if anything
            if piece[0] < piece[1]:
                self.starts.insert(i, piece[0])
                self.ends.insert(i, piece[1])
        self._made_gap(start if run_start < start else self.ends[i - 1] if i > 0 else 0)


def place(calls: list, env: dict, external: set, keep_whole_run: list, written_before: list):
    """Re-point calls and env into one shared arena; returns (calls, env, arena bytes, unshared bytes)."""
    spans = live_buffers(calls, external, keep_whole_run, written_before)
    offsets, size = first_fit(spans)
    arena = np.zeros(size + ALIGN, np.uint8)
    shift = (-address(arena)) % ALIGN        # align the arena's start too
    moved: dict = {}

    def move(a):
        if not isinstance(a, np.ndarray):
            return a
        r = root_of(a)
        if id(r) not in offsets:
            return a
        offset = shift + offsets[id(r)] + address(a) - address(r)
        key = (offset, a.shape, a.dtype.str, a.strides)   # tensors placed alike share one view:
        if key not in moved:                              # fewer objects for each run to touch
            moved[key] = np.ndarray(a.shape, a.dtype, buffer=arena, offset=offset, strides=a.strides)
        return moved[key]
    calls = [(fn, tuple(move(a) for a in args)) for fn, args in calls]
    env = {name: move(a) for name, a in env.items()}
    return calls, env, size, sum(r.nbytes for r, _, _ in spans.values())
