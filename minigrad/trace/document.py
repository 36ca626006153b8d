"""build_document: the trace as one versioned JSON document (the schema is docs/trace.md)."""
from __future__ import annotations

from .backward import BackwardEvents
from .events import EventLog
from .memory import MemoryEvents
from .tables import GraphTables

SCHEMA = "minigrad-trace"
VERSION = 2


def build_document(title, tables: GraphTables, memory: MemoryEvents, log: EventLog,
                   backward: BackwardEvents) -> dict:
    """The trace so far as plain dicts and lists. Raw backward groups in the log are expanded
    into events here, once (the log keeps the expanded events)."""
    tables.refresh_names()
    nodes = [dict(n) for n in tables.nodes.values()]
    consumed = {e["source"] for e in tables.edges if e["kind"] == "parent"}
    for node in nodes:
        if node["type"] == "variable" and node["role"] == "intermediate" \
                and node["id"] not in consumed:
            node["role"] = "output"
    if any(type(e) is tuple for e in log.events):   # raw groups, expanded once
        expanded = []
        for event in log.events:
            expanded.extend(backward.expand(event) if type(event) is tuple else [event])
        log.events = expanded
        log.lazy_from = len(expanded)
    events = log.events
    frames = list(log.frames)
    if events and (not frames or frames[-1] != len(events) - 1):
        frames.append(len(events) - 1)   # (the last step may still be open)
    first_backward = next((i for i, e in enumerate(events) if e["type"] == "start"), None)
    before = [f for f in frames if first_backward is None or f < first_backward]
    return {
        "schema": SCHEMA, "version": VERSION, "title": title,
        "nodes": nodes, "edges": [dict(e) for e in tables.edges],
        "arenas": [{k: v for k, v in a.items() if not k.startswith("_")}
                   for a in memory.arenas.values()],
        "blocks": list(memory.blocks.values()),
        "events": [dict(e) for e in events], "frames": frames,
        "initial_frame": (len(before) - 1) if before else 0,
    }
