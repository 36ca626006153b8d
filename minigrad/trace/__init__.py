"""The parts of a trace Recorder (minigrad/trace.py), one concern each.

    events.py    EventLog: the events in order, grouped into frames, by phase
    tables.py    Ids and GraphTables: trace ids, and the nodes and edges of the graph
    memory.py    MemoryEvents: arenas, blocks and their alloc / free / pop events
    forward.py   ForwardEvents: leaves and ops as they run, or read off a graph
    backward.py  BackwardEvents: backward's steps, kept raw and turned into events when read
    document.py  build_document: the versioned JSON document (docs/trace.md)
"""
