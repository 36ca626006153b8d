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
    """id(root) -> byte offset, and the arena size: a buffer reuses memory freed strictly before it starts."""
    offsets, active, size = {}, [], 0     # active: (last step, offset, nbytes)
    for key, (root, first, last) in sorted(spans.items(), key=lambda kv: (kv[1][1], -kv[1][0].nbytes)):
        active = [a for a in active if a[0] >= first]
        need = -(-max(root.nbytes, 1) // ALIGN) * ALIGN
        offset = 0
        for _, start, nbytes in sorted(active, key=lambda a: a[1]):
            if offset + need <= start:
                break
            offset = max(offset, start + nbytes)
        offsets[key] = offset
        active.append((last, offset, need))
        size = max(size, offset + need)
    return offsets, size


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
