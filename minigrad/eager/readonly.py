"""What backward reads must be what forward saw: the guard on saved arrays.

Which arrays need a guard. Memory only minigrad writes needs none: an op's own output is handed
out read-only (Variable.data gives a read-only view) and arena or pool memory is written by
minigrad alone. A user can write the data of a leaf (parameters, batches, numpy constants) and
every array that shares its memory: a view of it, the array it views, other views of that, an
op output that is a view of a leaf (reshape, transpose, slicing; Function.apply marks those
nodes `exposes`). `guard_saved` keeps the saved arrays that share memory with such an input.

numpy has no write counter (PyTorch's saved tensors keep a version number that every in-place
op bumps), so the guard works in two layers:

1. The lock. The array that owns the saved memory (the saved array itself, or the user's
   ndarray it is a view of; on an arena, the leaf's own array) is made read-only while the
   graph lives, so a write through it raises at once, at the line that writes. backward
   (release), the end of the node's arena scope, or the garbage collector (the graph was
   dropped) restores the flag. Every node that saved an array holds a reference to that array's
   one ArrayLock, so CPython's reference count counts the holders: taking a held lock again is
   a dictionary look-up, letting go is dropping a reference, and the last holder's going sets
   the flag back. Several graphs and threads share one array that way.
2. The snapshot. A flag on one array does not stop writes through another array on the same
   memory: the array a view points into, a view made before the lock, a bytearray or memory
   map under it, arena memory. Wherever such an alias may exist, the node keeps a copy of the
   saved array's bytes, and before its backward reads them `SavedGuard.check` compares: any
   change raises InplaceError naming the op, the input and the fix. Short of setting numpy's
   flags back by hand or writing through a raw pointer, no write gets past this check.

When is the lock alone enough? When the saved array owns its memory (`.base is None`) and
nothing refers to it but its Variable and this node: every numpy view holds a reference to the
array it views, so a reference count at its minimum proves that no view exists, and any view
made later comes from a read-only array and is read-only too. That is a parameter made by
create_leaf in a training loop, which therefore costs no copy. A copy=False batch you also hold
by name, a view, a leaf on an arena cost one copy in forward and one comparison in backward
(figures in docs/errors.md). Counting references is a CPython fact, so the count the counting
code itself adds is measured once at import (_OVERHEAD), not assumed.
"""
from __future__ import annotations

import sys
import threading
import weakref

import numpy as np

from ..arena import is_allocator_buffer
from ..errors import InplaceError

_held: dict = {}             # id(array) -> _Held: a weak reference to the array's ArrayLock
# Making and ending locks, one thread at a time (taking a held one needs no thread lock: see
# _take). Re-entrant: the garbage collector may end another graph's lock while this thread
# holds the table.
_table = threading.RLock()


def exposes(out: np.ndarray, inputs: tuple) -> bool:
    """Whether an op's output shares memory with a user-writable input (a view op's output, or
    the input's own array handed back)."""
    if out.base is None:   # a fresh array (most ops): only an input's own array handed back
        for v in inputs:
            if out is v._data:
                return v.grad_fn is None or v.grad_fn.exposes
        return False
    for v in inputs:
        fn = v.grad_fn
        if (fn is None or fn.exposes) and (out is v._data or np.may_share_memory(out, v._data)):
            return True
    return False


def guard_saved(saved: tuple, inputs: tuple):
    """The guard of a node's saved arrays that a user could write; None when there are none."""
    user = None
    for v in inputs:   # (a loop, not a comprehension: this runs for every op that saves)
        if v.grad_fn is None or v.grad_fn.exposes:
            if user is None:
                user = [v._data]
            elif not any([v._data is d for d in user]):   # (x * x: its array once)
                user.append(v._data)
    if user is None:
        return None
    locks = _locks_held(saved, user)
    if locks is not None:   # the training loop's case, decided in one cheap pass
        if len(locks) == 1:
            return locks[0]   # (a lock alone is a whole guard: see ArrayLock)
        return SavedGuard.holding(locks) if locks else None
    found = _user_arrays(saved, inputs, user)
    return SavedGuard(found) if found else None


def _locks_held(saved: tuple, user: list):
    """A shortcut of _user_arrays + SavedGuard for the common case, with the same result: each
    saved array is either a user array already locked, with nothing else referring to it when it
    was (a parameter used again in the same graph, on the heap or an allocator: the lock alone is
    enough), or shares no memory with any user array. Returns those locks, or None when any saved
    array needs the general path (declining is always safe)."""
    locks = ()
    for array in saved:
        if type(array) is not np.ndarray:
            return None
        for d in user:
            if array is d:
                held = _held.get(id(array))   # (held.array is array: its own lock, not a base's)
                lock = held() if held is not None and held.array is array else None
                if lock is None or not lock.enough:
                    return None
                locks += (lock,)
                break
            # (two arrays that each own their memory share none: skip numpy's bounds check)
            if (array.base is not None or d.base is not None) and np.may_share_memory(array, d):
                return None
    return locks


def _user_arrays(saved: tuple, inputs: tuple, user: list) -> list:
    """[(saved array, references to it beyond the ones this node and its inputs hold, or None
    when it is locked already), ...] for the saved arrays that share memory with user (the data
    of user-writable inputs). (Plain loops: this runs for every op that saves a leaf.)"""
    found = []
    for array in saved:
        if not isinstance(array, np.ndarray) or (found and _listed(array, found)):
            continue
        reach = 0
        for d in user:
            if array is d:
                reach = 2
                break
            # (two arrays that each own their memory share none: skip numpy's bounds check)
            if (array.base is not None or d.base is not None) and np.may_share_memory(array, d):
                reach = 1
        if reach == 2:
            found.append((array, _extra_references(array, saved, inputs)))
        elif reach == 1:   # a view minigrad made of a user's array
            found.append((array, sys.maxsize))
    return found


def _listed(array, found: list) -> bool:
    for a, _ in found:
        if a is array:
            return True
    return False


def _extra_references(array: np.ndarray, saved: tuple, inputs: tuple):
    """sys.getrefcount(array) less the references this node and its inputs hold (None when the
    array is locked already: it was counted at its first lock)."""
    held = _held.get(id(array))
    if held is not None and held.array is array:
        return None
    known = len({id(v) for v in inputs if v._data is array})   # (x * x: one Variable)
    known += sum([s is array for s in saved])
    return sys.getrefcount(array) - known


def _probe_overhead() -> int:
    """The references _user_arrays itself holds while it counts (measured, not assumed)."""
    class Leaf:
        grad_fn = None

    leaf = Leaf()
    saved = (np.zeros(1),)
    leaf._data = saved[0]
    return _user_arrays(saved, (leaf,), [leaf._data])[0][1]   # (the same frames as in use)


_OVERHEAD = _probe_overhead()


def in_live_graph(array: np.ndarray) -> bool:
    """Whether a live graph saved array (or the array it views): its backward will read it."""
    for owner in (array, array.base):
        held = _held.get(id(owner))
        if held is not None and held.array is owner:
            return True
    return False


class SavedGuard:
    """One node's guarded arrays: the locks it holds, (array, bytes) snapshots for the others."""

    __slots__ = ("locks", "snapshots")

    def __init__(self, found: list):
        self.locks, self.snapshots = (), ()
        for array, extra in found:
            owner = array if array.base is None else _owner(array)
            lock = None if owner is None else _take(owner, extra is not None and extra <= _OVERHEAD
                                                    and (owner.base is None
                                                         or _leaf_memory(owner.base)))
            if lock is not None:
                self.locks += (lock,)
            # A lock taken when no alias existed stays enough while it is held: views made since
            # came from a read-only array. (unaliased only counts for the first lock.)
            if lock is None or owner is not array or not lock.enough:
                self.snapshots += ((array, array.tobytes()),)

    @classmethod
    def holding(cls, locks: tuple):
        """A guard of locks alone (no snapshot): see _locks_held."""
        guard = cls.__new__(cls)
        guard.locks, guard.snapshots = locks, ()
        return guard

    def check(self, node) -> None:
        """Raise if a saved array changed since forward (a write that went past the lock)."""
        for array, snapshot in self.snapshots:
            if array.tobytes() != snapshot:   # (the input is named only then: node.inputs)
                raise changed_error(node, array, _input_named(array, node.inputs))

    def release(self) -> None:
        """Let go of the locks (the last holder of each sets its array's flag back)."""
        self.locks, self.snapshots = (), ()


def releasable(guard):
    """guard in a form whose release() lets go of its locks, for a guard with two holders (a
    node and its arena or pool record: backward releases one, a scope's end the other). A lock
    alone is let go only by dropping every reference to it."""
    return SavedGuard.holding((guard,)) if type(guard) is ArrayLock else guard


class ArrayLock:
    """One array kept read-only: held (referenced) by every node that saved it, alive while any
    of them is. enough: taken when nothing else referred to the array (see the module doc).

    A lock that is enough is also a node's whole guard when it is the only one the node needs
    (a parameter's array): nothing to compare before backward, and letting go is dropping it.
    That saves a SavedGuard per op in a training loop."""

    __slots__ = ("enough", "__weakref__")
    snapshots = ()

    def check(self, node) -> None:
        pass

    def release(self) -> None:
        pass


class _Held(weakref.ref):
    """_held's entry for an array: a weak reference to its lock, and what unlocking needs."""

    __slots__ = ("array", "was_writeable", "enough")


def _owner(array: np.ndarray):
    """The array whose flag guards array's memory: array itself, the user's ndarray it views, or
    on an arena or pool array itself again (allocator buffers are never locked); None when a
    bytearray, a memory map or a view's view is under it (then the snapshot guards). A user's
    view is not locked itself: its flag could not be restored while its owner is still locked."""
    base = array.base
    owner = array if base is None or is_allocator_buffer(base) or _leaf_memory(base) else base
    if not isinstance(owner, np.ndarray) or (owner is base and owner.base is not None):
        return None
    return owner


def leaf_on_allocator(array: np.ndarray) -> np.ndarray:
    """A leaf's copy on an arena or pool, remade so that numpy's views of it refer to it.

    numpy points a view at the array that owns the memory, so a view of an allocator array
    points at the allocator's buffer: the leaf's reference count would not see it, and every
    node that saves the leaf would need a snapshot (for a layer's weights, a copy and a
    comparison of the whole matrix each step). numpy stops at an array whose base is not an
    array: with a memoryview under the leaf, its views refer to it, and the lock alone is
    enough, as for a parameter on the heap."""
    return np.asarray(memoryview(array))


def _leaf_memory(base) -> bool:
    """Whether base is the memoryview leaf_on_allocator put under a leaf's allocator memory."""
    return (type(base) is memoryview and type(base.obj) is np.ndarray
            and is_allocator_buffer(base.obj.base))


def _take(owner: np.ndarray, unaliased: bool) -> ArrayLock:
    """owner's lock: the one a live node holds (one more reference is one more holder), or a
    new one that makes owner read-only."""
    held = _held.get(id(owner))
    lock = held() if held is not None else None
    if lock is not None and held.array is owner:   # (a strong reference now: it stays alive)
        return lock
    with _table:
        held = _held.get(id(owner))
        lock = held() if held is not None else None
        if lock is not None and held.array is owner:   # another thread made it meanwhile
            return lock
        lock = ArrayLock()
        entry = _Held(lock, _unlock)
        entry.array = owner
        if held is not None and held.array is owner:
            # Its last holder just let go and its _unlock has not run: owner is still read-only
            # from that lock, which hands its state over (its _unlock then leaves owner alone).
            entry.was_writeable, entry.enough = held.was_writeable, held.enough
        else:
            entry.was_writeable, entry.enough = owner.flags.writeable, unaliased
            if entry.was_writeable:
                owner.setflags(write=False)   # (setflags: cheaper than .flags.writeable =)
        lock.enough = entry.enough
        _held[id(owner)] = entry
        return lock


def _unlock(entry: _Held) -> None:
    """The last holder of a lock let go (weakref callback): set the array's flag back."""
    if _table is None or _held is None:   # interpreter shutdown
        return
    with _table:
        if _held.get(id(entry.array)) is entry:   # (not handed over to a newer lock)
            del _held[id(entry.array)]
            if entry.was_writeable:
                entry.array.setflags(write=True)


def _input_named(array: np.ndarray, inputs: tuple) -> str:
    for i, v in enumerate(inputs):
        if v._data is array or np.may_share_memory(array, v._data):
            name = f"{v.name!r}" if v.name else f"of shape {v.shape}"
            return f"input {i} ({'leaf' if v.grad_fn is None else 'view'} {name})"
    return f"an array of shape {array.shape}"


def changed_error(node, array: np.ndarray, which: str) -> InplaceError:
    return InplaceError(
        f"{node.name}: backward needs the array it saved from {which}, shape {array.shape}, "
        f"and it was changed after forward (written through another array on the same memory: "
        f"the array it is a view of, a view made earlier, or the buffer under it). Rule: data a "
        f"graph saved must not change until backward has run; the gradient would be wrong. Fix: "
        f"run forward again after changing the data, or pass a copy (create_leaf(x) copies; "
        f"x.copy() for a numpy constant).")
