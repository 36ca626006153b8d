"""Traces: what forward and backward did, as one JSON document that widgets replay.

    with minigrad.record() as rec:
        loss = model(x).sum()
        loss.backward()
    doc = rec.trace          # plain dicts and lists: json.dumps(doc) works

The engine calls a Recorder's on_* methods only while one is active (minigrad.record(), or a
widget driving backward itself), so recording costs nothing when it is off. `trace_of(variable)`
builds the forward half of a trace from an existing graph, without having recorded it.

The document's schema is docs/trace.md; minigrad/trace.schema.json checks it (tests do).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from .modes import modes
from .tracing.backward import BackwardEvents
from .tracing.document import SCHEMA, VERSION, build_document
from .tracing.events import EventLog, values
from .tracing.forward import ForwardEvents
from .tracing.memory import MemoryEvents
from .tracing.tables import GraphTables, Ids
from .variable import Variable

__all__ = ["Recorder", "record", "trace_of", "values", "SCHEMA", "VERSION"]


class Recorder:
    """Collects trace events; `trace` is the document so far.

    Each concern is one part (see minigrad/tracing): `log` (events and frames), `tables` (the
    graph), `memory` (arenas and blocks), `forward` and `backward` (their events). The on_*
    methods are the hooks the engine, the ops and the allocators call.
    """

    def __init__(self, title: str | None = None):
        self.title = title
        self.ids = Ids()
        self.log = EventLog()
        self.memory = MemoryEvents(self.ids, self.log)
        self.tables = GraphTables(self.ids, self.log, self.memory)
        self.forward = ForwardEvents(self.tables, self.memory, self.log)
        self.backward = BackwardEvents(self.tables, self.forward, self.log)

    # -- the hooks the engine, the ops and the allocators call -------------------------------
    def on_leaf(self, variable: Variable) -> None:
        self.forward.on_leaf(variable)

    def on_op(self, node, output: Variable) -> None:
        self.forward.on_op(node, output)

    def on_steps(self, group: list) -> None:
        self.backward.on_steps(group)

    def on_alloc(self, block) -> None:
        self.memory.on_alloc(block)

    def on_free(self, block) -> None:
        self.memory.on_free(block)

    def on_pop(self, allocator, blocks: list) -> None:
        self.memory.on_pop(allocator, blocks)

    def keep_values(self) -> None:
        """Copy the gradient previews still held as whole arrays (see EventLog.keep_values)."""
        self.log.keep_values()

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


@contextmanager
def record(title: str | None = None) -> Iterator[Recorder]:
    """Record everything minigrad does on this thread inside the block into `rec.trace`."""
    recorder = Recorder(title)
    previous, modes.recorder = modes.recorder, recorder
    try:
        yield recorder
    finally:
        modes.recorder = previous
        recorder.keep_values()   # an arena scope around this block may pop after it


def trace_of(variable: Variable, title: str | None = None) -> dict:
    """The forward half of a trace, read off an existing graph (no recording needed)."""
    return Recorder(title).add_graph(variable).trace
