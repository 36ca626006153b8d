"""The Recorder: the hooks the engine calls while a trace is recorded, and record() / trace_of().

The engine calls a Recorder's on_* methods only while one is active (minigrad.record(), or a
widget driving backward itself), so recording costs nothing when it is off. `trace_of(variable)`
builds the forward half of a trace from an existing graph, without having recorded it.

The document's schema is docs/trace.md; minigrad/trace/trace.schema.json checks it (tests do).
Recorders nest: inside an outer `record()`, an inner one records its block, and the outer one
records it too (every hook goes to each recorder of the nest, innermost first).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from ..modes import modes
from ..names import check_name
from .backward import BackwardEvents
from .document import SCHEMA, VERSION, build_delta, build_document
from .events import EventLog, values
from .forward import ForwardEvents
from .memory import MemoryEvents
from .tables import GraphTables, Ids
from ..eager.variable import Variable

__all__ = ["Recorder", "record", "trace_of", "values", "SCHEMA", "VERSION"]


class Recorder:
    """Collects trace events; `trace` is the document so far.

    Each concern is one part (see minigrad/trace/__init__.py): `log` (events and frames),
    `tables` (the graph), `memory` (arenas and blocks), `forward` and `backward` (their events).
    The on_* methods are the hooks the engine, the ops and the allocators call.
    """

    def __init__(self, title: str | None = None):
        self.title = check_name(title, "record(title=...)")
        self.ids = Ids()
        self.log = EventLog()
        self.memory = MemoryEvents(self.ids, self.log)
        self.tables = GraphTables(self.ids, self.log, self.memory)
        self.forward = ForwardEvents(self.tables, self.memory, self.log)
        self.backward = BackwardEvents(self.tables, self.forward, self.log)
        self.outer: tuple = ()   # the recorders this one is nested in (see record())

    @property
    def nest(self) -> tuple:
        """This recorder, then those it is nested in: each hook goes to every one of them.

        Only the outer ones are stored: a recorder holding itself would be a reference cycle,
        and a dropped trace (its nodes, edges and events) would wait for a full collection of
        the cyclic collector, which must rescan all of it, instead of being freed at once."""
        return (self, *self.outer)

    @nest.setter
    def nest(self, recorders: tuple) -> None:
        if not recorders or recorders[0] is not self:
            raise ValueError("Recorder.nest = ...: a nest starts with the recorder itself, then "
                             "the recorders it is nested in. Fix: recorder.nest = (recorder,) "
                             "+ outer.nest")
        self.outer = tuple(recorders[1:])

    # -- the hooks the engine, the ops and the allocators call (each recorder of the nest) ----
    def on_leaf(self, variable: Variable) -> None:
        for r in self.nest:
            r.forward.on_leaf(variable)

    def on_op(self, node, output: Variable) -> None:
        for r in self.nest:
            r.forward.on_op(node, output)

    def on_steps(self, group: list) -> None:
        for r in self.nest:
            r.backward.on_steps(group)

    def on_alloc(self, block) -> None:
        for r in self.nest:
            r.memory.on_alloc(block)

    def on_free(self, block) -> None:
        for r in self.nest:
            r.memory.on_free(block)

    def on_pop(self, allocator, blocks: list) -> None:
        for r in self.nest:
            r.memory.on_pop(allocator, blocks)

    def begin_recompute(self) -> tuple:
        """minigrad.checkpoint records a segment again during backward: its events get the
        "recompute" phase and a frame of their own. Returns the phases for end_recompute."""
        phases = self.phases()
        for r in self.nest:
            r.log.close_frame()
            r.log.phase = "recompute"
        return phases

    def stand_ins(self, pairs) -> None:
        """The leaves a checkpoint's recompute starts from, each with the input it reads again
        (leaf, input): recorded as they are made, one step each, with an "again" edge from the
        input, so that a drawing shows one W2 read twice rather than two unrelated W2s."""
        pairs = list(pairs)
        for r in self.nest:
            r.tables.stand_in_for = {id(leaf): x for leaf, x in pairs}
        for leaf, _ in pairs:
            self.on_leaf(leaf)

    def end_recompute(self, phases: tuple) -> None:
        for r in self.nest:
            r.tables.stand_in_for = {}
        self.restore_phases(phases)

    def phases(self) -> tuple:
        """Each nested recorder's phase (they may differ: an inner one may start mid-backward)."""
        return tuple(r.log.phase for r in self.nest)

    def restore_phases(self, phases: tuple) -> None:
        for r, phase in zip(self.nest, phases):
            r.log.phase = phase

    @property
    def phase(self) -> str:
        """forward, backward, release or recompute: what the next event belongs to."""
        return self.log.phase

    @phase.setter
    def phase(self, value: str) -> None:
        self.log.phase = value

    def keep_values(self) -> None:
        """Copy the gradient previews still held as whole arrays (see EventLog.keep_values)."""
        for r in self.nest:
            r.log.keep_values()

    # -- reading ------------------------------------------------------------------------------
    def known(self, obj) -> str | None:
        """The trace id of an object met so far, or None."""
        return self.ids.known(obj)

    def add_graph(self, variable: Variable) -> "Recorder":
        """Write the forward events of variable's graph as if they had been recorded
        (see ForwardEvents.add_graph)."""
        self.forward.add_graph(variable)
        return self

    def _arena(self, allocator) -> str:
        """Meet an allocator: its id, and what is on it written down."""
        return self.memory.arena(allocator)

    @property
    def trace(self) -> dict:
        """The trace so far as a JSON-serialisable dict (see docs/trace.md)."""
        return build_document(self.title, self.tables, self.memory, self.log, self.backward)

    def final_trace(self) -> dict:
        """The trace, made of the recorder's own dicts instead of copies: for a recorder that
        records nothing more (trace_of, a GraphView)."""
        return build_document(self.title, self.tables, self.memory, self.log, self.backward,
                              copy=False)

    def since(self, events: int, frames: int, blocks: int) -> dict:
        """What the trace gained since a document with that many events, frames and blocks:
        {"events", "frames", "new_blocks", "arenas"} (see tracing.document.build_delta)."""
        return build_delta(self.log, self.memory, self.backward, events, frames, blocks)


@contextmanager
def record(title: str | None = None) -> Iterator[Recorder]:
    """Record everything minigrad does on this thread inside the block into `rec.trace`."""
    recorder = Recorder(title)
    previous, modes.recorder = modes.recorder, recorder
    if previous is not None:   # nested: the outer recorders record this block too
        recorder.nest = (recorder,) + previous.nest
    try:
        yield recorder
    finally:
        modes.recorder = previous
        recorder.nest = (recorder,)   # (the outer ones keep recording on their own)
        recorder.keep_values()   # an arena scope around this block may pop after it


def trace_of(variable: Variable, title: str | None = None) -> dict:
    """The forward half of a trace, read off an existing graph (no recording needed)."""
    return Recorder(title).add_graph(variable).final_trace()
