"""Traces: what forward and backward did, as one JSON document that widgets replay.

    with minigrad.record() as rec:
        loss = model(x).sum()
        loss.backward()
    doc = rec.trace          # plain dicts and lists: json.dumps(doc) works

recorder.py is the Recorder the engine calls while recording; each concern of it is one part:

    events.py    EventLog: the events in order, grouped into frames, by phase
    tables.py    Ids and GraphTables: trace ids, and the nodes and edges of the graph
    memory.py    MemoryEvents: arenas, blocks and their alloc / free / pop events
    forward.py   ForwardEvents: leaves and ops as they run, or read off a graph
    backward.py  BackwardEvents: backward's steps, kept raw and turned into events when read
    document.py  build_document: the versioned JSON document (docs/trace.md, trace.schema.json)
"""
from .recorder import SCHEMA, VERSION, Recorder, record, trace_of, values

__all__ = ["Recorder", "record", "trace_of", "values", "SCHEMA", "VERSION"]
