"""Saved arrays are read-only while a graph needs them.

Writing into a saved array would silently change the gradient. An op's own output can only be
reached through Variable.data, which hands it out read-only, and arena or pool memory is only
written by minigrad, so the arrays to guard are those a user holds: the data of leaf inputs
(parameters, batches, constants), and the arrays that views point into. Function.apply clears
their writeable flag; the node's release() (backward ran), the end of its arena scope (it can
never run) or the garbage collector (the graph was dropped) restores it. A count per array lets
several live graphs share one. The counts are not locked against threads: threads that record
graphs at the same time must not share leaf arrays.
"""
from __future__ import annotations

import numpy as np

from .arena import BUFFER_OWNERS

_locks: dict = {}            # id(array) -> [array, count, was_writeable]


def lock_saved(saved: tuple, inputs: tuple):
    """Lock the user-held arrays behind a node's saved tensors (leaf inputs' data, and the bases
    of views); returns the lock, or None when there is nothing to guard.

    (A view of a leaf that lives on an arena points into the arena's buffer, which cannot be
    locked as a whole; such a view is not guarded, the leaf itself is when it is saved.)
    """
    guarded = ()
    for array in saved:
        if not isinstance(array, np.ndarray):
            continue
        base = array.base
        if base is not None and id(base) not in BUFFER_OWNERS:
            guarded += (base,)   # a view: guard the user's array it points into
            continue
        for v in inputs:
            if v._data is array:
                if v.grad_fn is None:
                    guarded += (array,)
                break
    return SavedLock(guarded) if guarded else None


class SavedLock:
    """The arrays one node keeps read-only; released by backward, by the end of the node's arena
    scope, or when the graph is dropped."""

    __slots__ = ("arrays",)

    def __init__(self, arrays: tuple):
        self.arrays = arrays
        for array in arrays:
            entry = _locks.get(id(array))
            if entry is None:
                writeable = array.flags.writeable
                _locks[id(array)] = [array, 1, writeable]
                if writeable:
                    array.setflags(write=False)   # (setflags: cheaper than .flags.writeable =)
            else:
                entry[1] += 1

    def release(self) -> None:
        arrays, self.arrays = self.arrays, ()
        if _locks is None:   # interpreter shutdown
            return
        for array in arrays:
            entry = _locks[id(array)]
            if entry[1] == 1:
                del _locks[id(array)]
                if entry[2]:
                    array.setflags(write=True)
            else:
                entry[1] -= 1

    def __del__(self) -> None:   # a graph dropped without backward
        if self.arrays:
            self.release()
