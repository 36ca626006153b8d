"""build_document: the trace as one versioned JSON document (the schema is docs/trace.md)."""
from __future__ import annotations

from ..gcpause import gc_paused
from .backward import BackwardEvents
from .events import EventLog
from .memory import MemoryEvents
from .tables import GraphTables

SCHEMA = "minigrad-trace"
VERSION = 2


@gc_paused()
def build_document(title, tables: GraphTables, memory: MemoryEvents, log: EventLog,
                   backward: BackwardEvents, copy: bool = True) -> dict:
    """The trace so far as plain dicts and lists. Raw backward groups in the log are expanded
    into events here, once (the log keeps the expanded events). copy=False hands over the
    recorder's own node, edge and event dicts (a recorder that records nothing more: a third
    less memory per op)."""
    tables.refresh_names()
    fresh = dict if copy else (lambda entry: entry)
    nodes = [fresh(n) for n in tables.nodes.values()]
    consumed = {e["source"] for e in tables.edges if e["kind"] == "parent"}
    for node in nodes:
        if node["type"] == "variable" and node["role"] == "intermediate" \
                and node["id"] not in consumed:
            node["role"] = "output"
    expand_raw(log, backward)
    events = log.events
    frames = log.frames + open_frame(log)
    first_backward = next((i for i, e in enumerate(events) if e["type"] == "start"), None)
    before = [f for f in frames if first_backward is None or f < first_backward]
    return {
        "schema": SCHEMA, "version": VERSION, "title": title,
        "nodes": nodes, "edges": [fresh(e) for e in tables.edges],
        "arenas": [{k: v for k, v in a.items() if not k.startswith("_")}
                   for a in memory.arenas.values()],
        "blocks": list(memory.blocks.values()),
        "events": [fresh(e) for e in events], "frames": frames,
        "initial_frame": (len(before) - 1) if before else 0,
    }


def build_delta(log: EventLog, memory: MemoryEvents, backward: BackwardEvents,
                events_from: int, frames_from: int, blocks_from: int) -> dict:
    """What a document of that many events, frames and blocks lacks now: the new events,
    frames and blocks (and the arenas: a few small dicts). A live view's step costs what the
    step changed, where build_document would copy everything again."""
    expand_raw(log, backward)
    frames = log.frames[frames_from:] + open_frame(log)
    if frames_from > len(log.frames):   # the open frame was sent already
        frames = frames[frames_from - len(log.frames):]
    return {"events": [dict(e) for e in log.events[events_from:]], "frames": frames,
            "new_blocks": memory.in_order[blocks_from:],
            "arenas": [{k: v for k, v in a.items() if not k.startswith("_")}
                       for a in memory.arenas.values()]}


def expand_raw(log: EventLog, backward: BackwardEvents) -> None:
    """Turn the raw backward groups the log gained since the last call into event dicts, once
    each (the log keeps the expanded events)."""
    events, start = log.events, log.expanded_to
    if start < len(events):
        tail = []
        for event in events[start:]:
            tail.extend(backward.expand(event) if type(event) is tuple else [event])
        events[start:] = tail
        log.expanded_to = log.lazy_from = len(events)


def open_frame(log: EventLog) -> list:
    """[the last event] while the last step is still open (its frame not closed yet), else []."""
    last = len(log.events) - 1
    return [last] if last >= 0 and (not log.frames or log.frames[-1] != last) else []
