"""Where arrays live: Arena (a bump allocator over numpy byte buffers) and Pool (size-class free
lists), both with a ledger of blocks that is the memory picture the widgets draw.

An arena's batch discipline: parameters live on a permanent arena (or the ordinary heap); each
batch runs inside `with graph_arena.scope():`, where every op writes its output, and backward its
gradients, into the arena; leaving the scope takes the whole batch back in one pointer reset.
Outside any scope minigrad allocates ordinary numpy arrays, freed by Python.

The current allocator is per thread, so two threads can train two models side by side.
"""
from __future__ import annotations

import bisect
import math
import operator
import threading
import weakref
from sys import getrefcount

import numpy as np

from .errors import MinigradError
from .modes import modes
from .names import check_name

ALIGNMENT = 64          # bytes; a cache line, and enough for any numpy dtype
PAGE = 4096


class StaleVariableError(MinigradError, RuntimeError):
    """A Variable (or graph) whose memory was taken back by pop_to / free was used."""


class ScopeError(MinigradError, RuntimeError):
    """Allocator scopes entered and exited out of order."""


class Block:
    """One ledger entry: bytes [offset, offset + nbytes) of an allocator, who asked, and why.

    kind: "input" (batch data), "param" (parameter values), "activation" (op outputs), "node"
    (graph records, see Arena), "grad" (gradients), "saved" (arrays an op keeps only for backward).
    """

    __slots__ = ("offset", "nbytes", "kind", "owner", "alive", "allocator", "uses", "buffer",
                 "pinned", "lock", "handed", "grad_block")

    def __init__(self, offset: int, nbytes: int, kind: str, owner: str | None, allocator):
        self.offset, self.nbytes, self.kind, self.owner = offset, nbytes, kind, owner
        self.alive = True
        self.allocator = allocator
        self.uses = 0            # Pool only: how many graph nodes still need these bytes
        self.buffer = None       # Pool only: the byte buffer to return to the free list
        self.pinned = False      # leaves and their grads: never freed by use counts
        self.lock = None         # a graph node's record: its saved arrays' read-only lock
        self.handed = None       # tokens of the arrays handed to the user (see hand_out);
                                 # False: a leaf's block no scope takes back (handed out as is)
        self.grad_block = None   # a leaf's data block: the block of its gradient buffer

    def as_dict(self) -> dict:
        return {"offset": self.offset, "nbytes": self.nbytes, "kind": self.kind,
                "owner": self.owner, "alive": self.alive}

    def __repr__(self) -> str:
        state = "alive" if self.alive else "freed"
        return f"Block({self.kind}, {self.nbytes} B at {self.offset}, {self.owner!r}, {state})"


# The numpy arrays that own allocator memory, by id. Every array an allocator hands out has one
# of them as its .base; the read-only guard for saved arrays must stop there, or it would lock
# the whole arena. Weak references: when an arena dies its entry goes, and a new user array that
# gets the same id is not mistaken for allocator memory (is_allocator_buffer checks identity).
# (A dict of weak references rather than a WeakValueDictionary: the guard asks for every op
# that saves a leaf on an arena, and WeakValueDictionary.get is Python code, several times slower.)
BUFFER_OWNERS: dict = {}


def is_allocator_buffer(array) -> bool:
    """True when array is the byte buffer of a live Arena or Pool."""
    ref = BUFFER_OWNERS.get(id(array))
    return ref is not None and ref() is array


def hand_out(array: np.ndarray, block: Block) -> np.ndarray:
    """array, as given to the user, when it lives on block: the same memory, remembered.

    A Variable used after its scope ended raises StaleVariableError, but an array taken from it
    inside the scope (`kept.append(y.data)`) is plain numpy: it would silently show the next
    batch's numbers once the memory is reused. So the array handed out is made on a memoryview
    the block keeps (every view of that array leads to it, so its reference count says whether
    the user still holds one), and a block taken back while one is held does not have
    its memory reused: an arena swaps the chunk for a fresh one, a pool drops the buffer. The
    kept array keeps its values; Python frees the memory when the user lets go."""
    out = np.asarray(memoryview(array))
    handed = block.handed
    if handed is None:
        handed = block.handed = []
    elif len(handed) >= 16:        # forget the tokens nobody holds (bounded, as .data is read often)
        handed[:] = [token for token, count in zip(handed, _counts(handed)) if count > _UNHELD]
    handed.append(out.base)        # (numpy's own memoryview under out)
    return out


def _held(tokens: list) -> bool:
    """Does the user still hold an array handed out with these tokens? (A token referred to by
    more than the list and the count's own references is the base of a live array.)"""
    return any(count > _UNHELD for count in _counts(tokens))


def _counts(tokens: list) -> list:
    return [getrefcount(token) for token in tokens]


# What _counts gives for a token only its list holds: the list, the loop's variable and
# getrefcount's argument in CPython 3.10-3.13, but versions differ in what a frame's own
# references add, so it is measured here, not assumed.
_UNHELD = _counts([memoryview(b"")])[0]


def same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """Do a and b show the same numbers (same address, shape, strides and dtype)?"""
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
            and a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype)


def _aligned_bytes(nbytes: int) -> np.ndarray:
    """A uint8 buffer whose first byte starts a page (so ledger offsets are page offsets too)."""
    raw = np.empty(nbytes + PAGE, dtype=np.uint8)
    key = id(raw)

    def forget(ref):   # (called as raw dies, before its id can be reused)
        if BUFFER_OWNERS.get(key) is ref:
            del BUFFER_OWNERS[key]
    BUFFER_OWNERS[key] = weakref.ref(raw, forget)
    start = -raw.ctypes.data % PAGE
    return raw[start:start + nbytes]


_offset = operator.attrgetter("offset")


def _nbytes(shape: tuple, dtype: np.dtype) -> int:
    return math.prod(shape) * dtype.itemsize


class Arena:
    """A bump allocator: alloc moves a pointer up, pop_to(mark) moves it back down.

    Memory is one numpy byte buffer of `capacity_bytes`. When an allocation does not fit, the
    arena grows by adding a chunk (twice the last chunk, or the request if larger) and carries on
    there; chunks are never given back, so once a training loop has seen its largest batch the
    arena neither grows nor allocates again. Offsets in the ledger run across chunks as if they
    were one address space.

    "node" blocks: a graph node here is a Python object on the Python heap. So that the memory
    picture shows the graph's own footprint next to its tensors (as in the C++ engine, where the
    Variable structs live on the arena), every recorded op also reserves a small record on the
    arena sized like the C struct would be: a 32-byte header plus 8 bytes per parent and per
    saved tensor. Those bytes are reserved and freed like the rest, but nothing reads them.
    """

    def __init__(self, name: str, capacity_bytes: int = 1 << 20):
        if capacity_bytes <= 0:
            raise ValueError(f"Arena {name!r}: capacity_bytes must be positive, got {capacity_bytes}")
        self.name = check_name(name, "Arena(name)")
        self._chunks = [_aligned_bytes(int(capacity_bytes))]
        self._starts = [0]       # global offset of each chunk
        self._top = 0            # global offset of the first free byte
        self._set_chunk(0)       # the chunk the top is in, and where it ends
        self.high_water = 0
        self.blocks: list[Block] = []   # live blocks, in address order

    @property
    def capacity(self) -> int:
        return sum(len(c) for c in self._chunks)

    @property
    def used(self) -> int:
        """Bytes from the bottom of the arena to the top, alignment padding included."""
        return self._top

    def alloc(self, shape, dtype, kind: str = "activation", owner: str | None = None) -> np.ndarray:
        """An uninitialised array of shape/dtype on the arena."""
        return self._alloc(tuple(shape), np.dtype(dtype), kind, owner)[0]

    def _alloc(self, shape: tuple, dtype: np.dtype, kind, owner):
        """alloc for minigrad's own callers, which pass a tuple and a np.dtype (every op output
        on an arena comes here): (array, block)."""
        block = self.reserve(math.prod(shape) * dtype.itemsize, kind, owner)
        return np.ndarray(shape, dtype, self._chunk_bytes, block.offset - self._chunk_start), block

    def reserve(self, nbytes: int, kind: str, owner: str | None = None) -> Block:
        """Bump the top by nbytes (aligned) and record the block; no array is made."""
        start = -(-self._top // ALIGNMENT) * ALIGNMENT
        top = start + nbytes
        if top > self._end:
            start = self._grow(start, nbytes)
            top = start + nbytes
        block = Block(start, nbytes, kind, owner, self)
        self.blocks.append(block)
        self._top = top
        if top > self.high_water:
            self.high_water = top
        if modes.recorder is not None:
            modes.recorder.on_alloc(block)
        return block

    def _grow(self, start: int, nbytes: int) -> int:
        """Move the top to the first chunk with room for nbytes (adding one if none has);
        returns the new start offset."""
        i = self._chunk
        while start + nbytes > self._starts[i] + len(self._chunks[i]):
            i += 1
            if i == len(self._chunks):
                size = max(2 * len(self._chunks[-1]), nbytes)
                self._chunks.append(_aligned_bytes(size))
                # A chunk's memory starts a page; give it an aligned place in the offsets too,
                # so that an aligned offset is an aligned address in every chunk.
                end = self._starts[-1] + len(self._chunks[-2])
                self._starts.append(-(-end // ALIGNMENT) * ALIGNMENT)
            start = self._starts[i]
        self._set_chunk(i)
        return start

    def _set_chunk(self, i: int) -> None:
        self._chunk = i
        self._chunk_bytes, self._chunk_start = self._chunks[i], self._starts[i]
        self._end = self._starts[i] + len(self._chunks[i])   # the first byte past chunk i

    def mark(self) -> int:
        """The current top, to return to with pop_to."""
        return self._top

    def pop_to(self, mark: int) -> None:
        """Take back everything allocated since mark; its Variables become stale."""
        if not 0 <= mark <= self._top:
            raise ValueError(f"Arena {self.name!r}: pop_to({mark}) is above the top ({self._top}); "
                             f"marks must come from mark() and be popped innermost first.")
        blocks = self.blocks
        cut = bisect.bisect_left(blocks, mark, key=_offset)   # (the ledger is in address order)
        popped = blocks[cut:]
        del blocks[cut:]
        held = False
        for block in popped:
            block.alive = False   # (_take_back's first step, here for the many blocks with no lock)
            if block.lock is not None:
                _take_back(block)
            held = held or (bool(block.handed) and _held(block.handed))
        if held:                  # the user keeps an array on these bytes: do not reuse them
            self._swap_chunks_above(mark)
        self._top = mark
        i = self._chunk
        while i > 0 and self._starts[i] > mark:
            i -= 1
        self._set_chunk(i)
        if modes.recorder is not None and popped:
            popped.reverse()   # top first, the order they are taken back in
            modes.recorder.on_pop(self, popped)

    def _swap_chunks_above(self, mark: int) -> None:
        """Give every chunk holding bytes at or above mark a fresh buffer of its size: arrays on
        the old one (live blocks below mark, and what the user kept) keep it, and the arena
        allocates from the new one. Offsets, capacity and the ledger stay as they were."""
        first = bisect.bisect_right(self._starts, mark) - 1
        for i in range(max(first, 0), len(self._chunks)):
            self._chunks[i] = _aligned_bytes(len(self._chunks[i]))
        self._set_chunk(self._chunk)

    def scope(self) -> "Scope":
        """`with arena.scope():` makes this the thread's current allocator and pops everything
        allocated inside on exit."""
        return Scope(self)

    # An arena cannot free one block (only pop_to takes memory back), so it has no free().
    # Backward tells its allocator how arrays are used (see Pool); an arena frees nothing early.
    def retain(self, array) -> None:
        pass

    def use_instead(self, old, new) -> None:
        pass

    def retain_saved(self, saved: tuple) -> None:
        pass

    def done_with(self, grad_output, saved: tuple, grads: tuple) -> None:
        pass

    def __repr__(self) -> str:
        return (f"Arena({self.name!r}, used={self.used}, high_water={self.high_water}, "
                f"capacity={self.capacity}, blocks={len(self.blocks)})")


class Scope:
    """The context manager of Arena.scope() and Pool.scope(): mark on entry, pop on exit.

    (A class rather than a @contextmanager generator: a training loop enters one per batch.)
    Scopes nest: each thread keeps its open scopes on a stack, and only the innermost may exit
    (else the thread would be left allocating on an arena whose scope has ended).
    """

    __slots__ = ("allocator", "mark", "previous")

    def __init__(self, allocator):
        self.allocator = allocator

    def __enter__(self):
        allocator = self.allocator
        self.mark = allocator.mark()
        self.previous, modes.allocator = modes.allocator, allocator
        _open_scopes().append(self)
        return allocator

    def __exit__(self, *exc) -> bool:
        stack = _open_scopes()
        if not stack or stack[-1] is not self:
            raise _out_of_order(self, stack)
        stack.pop()
        modes.allocator = self.previous
        self.allocator.pop_to(self.mark)
        return False


_threads = threading.local()


def in_scope(allocator) -> bool:
    """Is a scope of allocator open on this thread (so what it allocates now is taken back)?"""
    return any(scope.allocator is allocator for scope in _open_scopes())


def _open_scopes() -> list:
    stack = getattr(_threads, "scopes", None)
    if stack is None:
        stack = _threads.scopes = []
    return stack


def _out_of_order(scope: Scope, stack: list) -> ScopeError:
    name = f"{type(scope.allocator).__name__}({scope.allocator.name!r})"
    if scope not in stack:
        return ScopeError(f"exiting the scope of {name}, which is not open on this thread (exited "
                          f"twice, or entered on another thread). Rule: each scope is entered "
                          f"and exited once, on one thread. Fix: use `with {name}.scope():`.")
    inner = stack[-1].allocator
    return ScopeError(
        f"exiting the scope of {name} while the scope of {type(inner).__name__}({inner.name!r}) "
        f"entered inside it is still open. Rule: scopes end innermost first (the thread would "
        f"otherwise keep allocating on an arena whose scope has ended). Fix: nest them as "
        f"`with` blocks, or exit the inner scope first.")


class Pool:
    """Size-class free lists: alloc takes a buffer of the next power of two, free gives it back.

    Unlike an arena, a pool can return one buffer at a time, so backward can free each saved
    tensor and each intermediate gradient as soon as its last user has run (use counts), and the
    next allocation of that size reuses it. Buffers are never returned to the system: `capacity`
    is what the pool ever took, `used` what is handed out now, `high_water` the peak of `used`.
    Each buffer gets a fixed address (its offset) when first created, so the ledger can be drawn
    as a strip; freed blocks stay in the ledger (alive=False) until the scope ends.
    """

    def __init__(self, name: str):
        self.name = check_name(name, "Pool(name)")
        self._free: dict[int, list] = {}         # size class -> [(offset, buffer), ...]
        self._live: dict[int, Block] = {}        # id of a buffer's owning array -> its live block
        self._released_early: set[int] = set()   # grad_outputs a node gave back before done_with
        self._kept: list = []                    # freed buffers the user still holds arrays on
        self.capacity = 0
        self.used = 0
        self.high_water = 0
        self.blocks: list[Block] = []

    def alloc(self, shape, dtype, kind: str = "activation", owner: str | None = None) -> np.ndarray:
        return self._alloc(shape, dtype, kind, owner)[0]

    def _alloc(self, shape, dtype, kind, owner):
        shape = tuple(shape)
        dtype = np.dtype(dtype)
        nbytes = _nbytes(shape, dtype)
        size = max(ALIGNMENT, 1 << max(nbytes - 1, 0).bit_length())
        free = self._free.get(size)
        if not free and self._kept:   # buffers the user held when freed, perhaps let go since
            free = self._reclaim(size)
        if free:
            offset, buffer = free.pop()
        else:
            offset, buffer = self.capacity, _aligned_bytes(size)
            self.capacity += size
        array = np.ndarray(shape, dtype, buffer=buffer)
        block = Block(offset, size, kind, owner, self)
        block.buffer = buffer
        self._live[id(buffer.base)] = block
        self.blocks.append(block)
        self.used += size
        if self.used > self.high_water:
            self.high_water = self.used
        if modes.recorder is not None:
            modes.recorder.on_alloc(block)
        return array, block

    def reserve(self, nbytes: int, kind: str, owner: str | None = None) -> Block:
        """A block of nbytes with no array (graph node records)."""
        return self._alloc((nbytes,), np.uint8, kind, owner)[1]

    def free(self, block: Block) -> None:
        """Give block's buffer back for reuse; arrays on it become stale."""
        if not block.alive:
            return
        _take_back(block)
        self.used -= block.nbytes
        del self._live[id(block.buffer.base)]
        if block.handed and _held(block.handed):   # the user keeps an array on it (hand_out)
            self._kept.append((block.offset, block.buffer, block.nbytes, block.handed))
        else:
            self._free.setdefault(block.nbytes, []).append((block.offset, block.buffer))
        block.buffer = None
        if modes.recorder is not None:
            modes.recorder.on_free(block)

    def _reclaim(self, size: int) -> list:
        """Put the kept buffers nobody holds any more back on their free lists; size's list."""
        still = []
        for offset, buffer, nbytes, handed in self._kept:
            if _held(handed):
                still.append((offset, buffer, nbytes, handed))
            else:
                self._free.setdefault(nbytes, []).append((offset, buffer))
        self._kept = still
        return self._free.get(size)

    # -- use counts: the engine calls these so backward can free memory early -----------------
    def block_of(self, array) -> Block | None:
        """The live block an array (or a view of it) sits on, or None if not from this pool."""
        base = getattr(array, "base", None)
        while base is not None:   # numpy usually points a view at the owner, but not always
            block = self._live.get(id(base))
            if block is not None:
                return block
            # (an array handed out by hand_out stands on a memoryview of the Variable's array)
            base = base.obj if isinstance(base, memoryview) else getattr(base, "base", None)
        return None

    def retain(self, array) -> None:
        """One more graph node needs array until it has run its backward."""
        block = self.block_of(array)
        if block is not None and not block.pinned:
            block.uses += 1

    def release(self, array) -> None:
        """One user of array is done; free it when none is left."""
        block = self.block_of(array)
        if block is not None and not block.pinned:
            block.uses -= 1
            if block.uses <= 0:
                self.free(block)

    def release_early(self, grad_output) -> None:
        """A node's backward frees its own grad_output now; done_with will not release it again."""
        self.release(grad_output)
        self._released_early.add(id(grad_output))   # (the engine still holds it: id stays unique)

    def free_if_unused(self, array) -> None:
        """Free a temporary (say, a gradient already summed into its target) nobody retained."""
        block = self.block_of(array)
        if block is not None and not block.pinned and block.uses <= 0:
            self.free(block)

    def use_instead(self, old, new) -> None:
        """A node's output gradient was replaced by a sum: the sum is needed, the old part not."""
        self.retain(new)
        self.release(old)

    def retain_saved(self, saved: tuple) -> None:
        """A new node saved these arrays: each is needed until the node's backward has run."""
        for array in saved:
            self.retain(array)

    def done_with(self, grad_output, saved: tuple, grads: tuple) -> None:
        """A node's backward ran: free what no node still needs (by use counts, as the tape does)."""
        if id(grad_output) in self._released_early:   # (a checkpoint gave it back already)
            self._released_early.discard(id(grad_output))
        else:
            self.release(grad_output)
        for array in saved:
            self.release(array)
        for grad in grads:
            self.free_if_unused(grad)

    def mark(self) -> int:
        return len(self.blocks)

    def pop_to(self, mark: int) -> None:
        """Free every block allocated since mark and drop them from the ledger."""
        popped = self.blocks[mark:]
        recorder, modes.recorder = modes.recorder, None   # one "pop" event, not one "free" each
        try:
            for block in popped:
                self.free(block)
        finally:
            modes.recorder = recorder
        del self.blocks[mark:]
        if recorder is not None and popped:
            recorder.on_pop(self, popped)

    scope = Arena.scope

    def __repr__(self) -> str:
        return (f"Pool({self.name!r}, used={self.used}, high_water={self.high_water}, "
                f"capacity={self.capacity}, blocks={len(self.blocks)})")


def _take_back(block: Block) -> None:
    """The block's memory is gone. A graph node recorded there can never run backward now, so
    the arrays it saved are unlocked (else a kept evaluation loss would block w.data -= ...)."""
    block.alive = False
    if block.lock is not None:
        block.lock.release()
        block.lock = None


def current_allocator():
    """The Arena or Pool of the innermost scope on this thread, or None (plain numpy)."""
    return modes.allocator


def stale_error(what: str, block: Block) -> StaleVariableError:
    allocator = block.allocator
    return StaleVariableError(
        f"{what} lives on {type(allocator).__name__.lower()} {allocator.name!r} at bytes "
        f"{block.offset}..{block.offset + block.nbytes}, which were taken back when its scope ended "
        f"(pop_to or free): the memory now holds other data. Fix: copy what you need before the "
        f"scope ends (.numpy() or .item()), and create parameters outside the batch scope (or with "
        f"create_leaf(..., arena=perm_arena)).")
