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

import math
import re
from contextlib import contextmanager
from typing import Iterator

import numpy as np

from .arena import Pool
from .engine import Step, expand, preview, topo_order
from .modes import modes
from .variable import Variable

SCHEMA = "minigrad-trace"
VERSION = 2


def values(array) -> list:
    """The first PREVIEW values of an array as JSON numbers (NaN and infinities as None)."""
    return [float(v) if math.isfinite(v) else None for v in np.asarray(preview(array), float)]


def _json_shape(shape) -> list:
    return [int(n) for n in shape]


class Recorder:
    """Collects trace events; `trace` is the document so far."""

    def __init__(self, title: str | None = None):
        self.title = title
        self._ids: dict[int, str] = {}       # id(object) -> trace id
        self._keep: list = []                # objects kept alive so their ids stay unique
        self._nodes: dict[str, dict] = {}
        self._edges: list[dict] = []
        self._arenas: dict[int, dict] = {}
        self._blocks: dict[str, dict] = {}
        self._events: list[dict] = []
        self._frames: list[int] = []
        self._held: list[dict] = []          # backward allocations, written after their "apply"
        self._phase = "forward"
        self._count = 0                      # events so far, counting raw groups expanded
        self._slot_seen: dict = {}
        self._last_total: dict = {}          # variable id -> preview of its gradient so far
        self._incomplete = False             # an op was recorded whose input's op was not
        self._lazy_from = 0                  # raw groups from here on may hold whole arrays
        self._lazy_on_allocator = False      # ... and some of those may be arena or pool memory

    # -- ids ----------------------------------------------------------------------------------
    def _id(self, obj, prefix: str) -> tuple[str, bool]:
        key = id(obj)
        if key in self._ids:
            return self._ids[key], False
        new = f"{prefix}{len(self._ids)}"
        self._ids[key] = new
        self._keep.append(obj)
        return new, True

    def known(self, obj) -> str | None:
        return self._ids.get(id(obj))

    # -- hooks the engine calls ---------------------------------------------------------------
    def on_leaf(self, variable: Variable) -> None:
        self._variable(variable)
        self._close_frame()

    def on_op(self, node, output: Variable) -> None:
        self._phase = "forward"
        for v in node.inputs:
            if v.grad_fn is not None and self.known(v.grad_fn) is None:
                self._incomplete = True   # made before recording began: read at backward
        inputs = [self._variable(v) for v in node.inputs]
        op_id, _ = self._id(node, "f")
        out_id = self._variable(output, op_id)
        saved = self._saved(node, output)
        self._nodes[op_id] = {
            "id": op_id, "type": "op", "name": node.name, "label": node.name,
            "formula": (type(node).__doc__ or node.name).strip().splitlines()[0],
            "output": out_id, "inputs": inputs, "saved": saved, "ctx": _ctx_summary(node),
            "grad_text": list(node.grad_text), "pending_count": 0, "block": self._block_id(node._block),
            "scope": list(output.scope),
        }
        for slot, v in enumerate(inputs):
            self._edges.append({"kind": "parent", "source": v, "target": op_id, "slot": slot})
        self._edges.append({"kind": "output", "source": op_id, "target": out_id, "slot": 0})
        for entry in saved:
            if entry["source"] is not None:
                self._edges.append({"kind": "saved", "source": entry["source"], "target": op_id,
                                    "slot": entry["slot"]})
        pending = []
        for v in node.inputs:
            parent_id = self.known(v.grad_fn) if v.grad_fn is not None else None
            if parent_id in self._nodes:
                count = int(v.grad_fn.pending_count)
                self._nodes[parent_id]["pending_count"] = count
                pending.append({"node": parent_id, "count": count})
        names = ", ".join(self._describe(v) for v in node.inputs)
        saves = ", ".join(e["what"] for e in saved) or "nothing"
        counts = "".join(f"; {self._nodes[p['node']]['name']} now has pending count {p['count']}"
                         for p in pending)
        shape = "x".join(str(n) for n in output._data.shape) or "scalar"
        self._event("op", node=op_id, output=out_id, pending=pending,
                    text=f"{node.name}({names}) -> {shape}; saves {saves}{counts}.")
        self._close_frame()

    def on_alloc(self, block) -> None:
        entry = self._block(block, fresh=True)
        event = {"type": "alloc", "block": entry["id"], "arena": entry["arena"],
                 "used": int(block.allocator.used), "high_water": int(block.allocator.high_water),
                 "text": f"{entry['kind']} block of {block.nbytes} bytes for "
                         f"{block.owner or 'an unnamed array'} on {block.allocator.name}."}
        self._write_or_hold(event)

    def on_free(self, block) -> None:
        self.keep_values()
        entry = self._block(block)
        event = {"type": "free", "block": entry["id"], "arena": entry["arena"],
                 "used": int(block.allocator.used), "high_water": int(block.allocator.high_water),
                 "text": f"{block.owner}'s {entry['kind']} block freed: its last user has run."}
        self._write_or_hold(event)

    def on_pop(self, allocator, blocks: list) -> None:
        self.keep_values()
        self._phase = "release"
        ids = [self._block(b)["id"] for b in blocks]
        freed = sum(b.nbytes for b in blocks)
        self._event("pop", arena=self._arena(allocator), blocks=ids, used=int(allocator.used),
                    high_water=int(allocator.high_water),
                    text=f"scope of {allocator.name} ends: {len(ids)} blocks ({freed} bytes) "
                         f"taken back at once.")
        self._close_frame()

    def on_steps(self, group: list) -> None:
        """Note one engine step (a list of Steps: the seed, one node's apply with all it caused,
        or done; compact or expanded, see engine.expand). Kept raw, with a copy of the values
        that may change later, and turned into event dicts only when the trace is read:
        recording backward stays cheap."""
        kind = group[0][0]   # compact groups hold plain tuples laid out like Step
        if kind == "apply":
            self._close_frame()
            held, self._held = self._held, []
            # A leaf's gradient grows in place, so its total is copied (a preview) now. A node's
            # grad_output is never written again once made (a later sum makes a new array), so
            # it is kept as is and previewed later: before the memory under it can be reused
            # (an arena pop, a pool free, the end of record()) or when the trace is read.
            # (The apply event's grad_output is the last total written into its output.)
            totals, count = [], len(group) + len(held)
            if group[0][1].arena is not None:   # its grads may live on an arena or a pool
                self._lazy_on_allocator = True
            for step in group:   # (kind, node, variable, grad, pending_count, first, total)
                if step[0] == "accumulate":
                    if step[4] is None:              # into a leaf (or already expanded)
                        totals.append(preview(step[6]))
                    else:                            # compact: pending (and ready) follow
                        totals.append(step[6])
                        count += 2 if step[4] == 0 else 1
            self._events.append(("group", self._phase, group, None, held, totals))
            self._count += count
        elif kind == "start":
            loss = group[0].variable
            if loss.grad_fn is not None and (self._incomplete or self.known(loss.grad_fn) is None):
                self.add_graph(loss)   # (some of) its forward ran before recording: read it now
                self._incomplete = False
            self._close_frame()
            self._phase = "backward"
            self._variable(group[0].variable)
            self._events.append(("group", self._phase, group[:1], preview(group[0].grad), [], []))
            self._count += 1
            self._close_frame()
            if len(group) > 1:   # a leaf loss: backward is done at once
                self.on_steps(group[1:])
        elif kind == "ready":    # a node freed from consumers that are not on the loss's path
            self._events.append(("group", self._phase, group, None, [], []))
            self._count += len(group)
        elif kind == "done":
            self._close_frame()
            self._release_held()
            self._event("done", text="backward done: every node ran once; only leaf gradients "
                                     "are kept.")
            self._phase = "release"
            self._event("consume", text="the graph is consumed: saved tensors are freed, a "
                                        "second backward needs a new forward.")
            self._close_frame()

    def keep_values(self) -> None:
        """Copy the previews of gradients still held as whole arrays (see on_steps): called
        before their memory can be reused. (Heap arrays are never reused while referenced.)"""
        if not self._lazy_on_allocator:
            return
        events = self._events
        for i in range(self._lazy_from, len(events)):
            entry = events[i]
            if type(entry) is tuple:
                entry[5][:] = [preview(total) for total in entry[5]]
        self._lazy_from = len(events)

    def _expand(self, entry) -> list:
        """The event dicts of one raw group entry (see on_steps)."""
        _, phase, group, first_values, held, totals = entry
        group = expand(group)
        if group[0].kind == "apply":
            output = self._nodes[self.known(group[0].node)]["output"]
            first_values = self._last_total.get(output)
        for step, total in zip([s for s in group if s.kind == "accumulate"], totals):
            self._last_total[self.known(step.variable)] = total
        totals = iter(totals)
        events = [self._step_event(phase, group[0], first_values)]
        events += [{"phase": phase, **event} for event in held]
        events += [self._step_event(phase, step, next(totals) if step.kind == "accumulate"
                                    else None) for step in group[1:]]
        return events

    def _step_event(self, phase: str, step: Step, values_now) -> dict:
        """The event dict of a raw engine step (see on_step)."""
        kind, node = step.kind, self.known(step.node)
        if kind == "start":
            self._last_total[self.known(step.variable)] = values_now
            return {"type": "start", "phase": phase, "node": node,
                    "variable": self.known(step.variable), "grad": values(values_now),
                    "text": f"backward starts: d loss / d loss = 1 is seeded into "
                            f"{self._describe(step.variable)}."}
        if kind == "apply":
            return {"type": "apply", "phase": phase, "node": node, "grad": values(values_now),
                    "text": self._apply_text(step.node)}
        if kind == "accumulate":
            var = self._variable(step.variable)
            how = "first write" if step.first_write else "added to the gradient already there"
            return {"type": "accumulate", "phase": phase, "node": node, "variable": var,
                    "slot": self._slot(node, var), "first_write": bool(step.first_write),
                    "grad": values(values_now),
                    "text": f"accumulate_grad into {self._describe(step.variable)}: {how}."}
        if kind == "pending":
            return {"type": "pending", "phase": phase, "node": node,
                    "count": int(step.pending_count),
                    "text": f"{step.node.name}: pending count drops to {step.pending_count}."}
        return {"type": "ready", "phase": phase, "node": node,
                "text": f"{step.node.name} is ready: every consumer has sent its gradient."}

    def _slot(self, op_id: str, var_id: str) -> int:
        """Which input slot an accumulate fed: the k-th time this op feeds var, slot of its k-th
        occurrence among the op's inputs (x + x feeds x twice)."""
        seen = self._slot_seen.get((op_id, var_id), 0)
        self._slot_seen[(op_id, var_id)] = seen + 1
        slots = [i for i, v in enumerate(self._nodes[op_id]["inputs"]) if v == var_id]
        return slots[min(seen, len(slots) - 1)] if slots else 0

    # -- reading a graph that was not recorded -------------------------------------------------
    def add_graph(self, variable: Variable) -> "Recorder":
        """Write the forward events of variable's graph as if they had been recorded.

        Ops come in the order they were created. Arena blocks get reconstructed "alloc" events
        (marked so): an arena allocates in address order, so its `used` after a block is the
        block's end. Pending counts are the nodes' real counts now, which include consumers
        outside this graph. Nodes this recorder already knows (recorded as they ran) are kept.
        """
        root = variable.grad_fn
        if root is None:
            self._leaf_with_block(variable)
            return self
        if root.released:
            raise ValueError(
                f"the graph of {self._describe(variable)} was consumed by backward(), which "
                f"frees it; draw or step it before calling backward, or run forward again.")
        outputs = {root: variable}
        for node in topo_order(root):
            for v in node.inputs:
                if v.grad_fn is not None:
                    outputs[v.grad_fn] = v
        for node in sorted(outputs, key=lambda n: n.seq):
            if self.known(node) is not None:   # recorded as it ran
                continue
            for v in node.inputs:
                if v.grad_fn is None and self.known(v) is None:
                    self._leaf_with_block(v)
            for block in (outputs[node]._block, node._block):
                self._block_id(block)
            self.on_op(node, outputs[node])
        for node in outputs:
            self._nodes[self.known(node)]["pending_count"] = int(node.pending_count)
        return self

    def _leaf_with_block(self, variable: Variable) -> None:
        self._block_id(variable._block)
        self.on_leaf(variable)

    def _reconstructed_alloc(self, block) -> None:
        """A block that existed before the trace met it, written as an allocation read from
        the ledger (an arena's `used` after a block is the block's end)."""
        entry = self._blocks[self.known(block)]
        allocator, arena = block.allocator, self._arenas[id(block.allocator)]
        if isinstance(allocator, Pool):
            used, high = int(allocator.used), int(allocator.high_water)
        else:
            used = int(block.offset + block.nbytes)
            high = arena["_high"] = max(arena.get("_high", 0), used)
        self._event("alloc", block=entry["id"], arena=entry["arena"], used=used, high_water=high,
                    reconstructed=True,
                    text=f"{entry['kind']} block of {block.nbytes} bytes for "
                         f"{block.owner or 'an unnamed array'} on {allocator.name} (already there; "
                         f"read from the ledger).")

    # -- the document -------------------------------------------------------------------------
    @property
    def trace(self) -> dict:
        """The trace so far as a JSON-serialisable dict (see docs/trace.md)."""
        nodes = [dict(n) for n in self._nodes.values()]
        consumed = {e["source"] for e in self._edges if e["kind"] == "parent"}
        for node in nodes:
            if node["type"] == "variable" and node["role"] == "intermediate" \
                    and node["id"] not in consumed:
                node["role"] = "output"
        if any(type(e) is tuple for e in self._events):   # raw groups, expanded once
            expanded = []
            for event in self._events:
                expanded.extend(self._expand(event) if type(event) is tuple else [event])
            self._events = expanded
            self._lazy_from = len(expanded)
        frames = list(self._frames)
        if self._events and (not frames or frames[-1] != len(self._events) - 1):
            frames.append(len(self._events) - 1)   # (the last step may still be open)
        first_backward = next((i for i, e in enumerate(self._events) if e["type"] == "start"),
                              None)
        before = [f for f in frames if first_backward is None or f < first_backward]
        return {
            "schema": SCHEMA, "version": VERSION, "title": self.title,
            "nodes": nodes, "edges": [dict(e) for e in self._edges],
            "arenas": [{k: v for k, v in a.items() if not k.startswith("_")}
                       for a in self._arenas.values()],
            "blocks": list(self._blocks.values()),
            "events": [dict(e) for e in self._events], "frames": frames,
            "initial_frame": (len(before) - 1) if before else 0,
        }

    # -- helpers ------------------------------------------------------------------------------
    def _variable(self, v: Variable, op_id: str | None = None) -> str:
        var_id, new = self._id(v, "v")
        if not new and op_id is not None and self._nodes[var_id]["op"] is None:
            self._nodes[var_id]["op"] = op_id   # met as an input before its op was read
        if new:
            role = ("param" if v.requires_grad else "data") if v.grad_fn is None else "intermediate"
            self._nodes[var_id] = {
                "id": var_id, "type": "variable", "name": v.name,
                "label": v.name or (v.grad_fn.name if v.grad_fn is not None else "data"),
                "role": role, "shape": _json_shape(v._data.shape), "dtype": str(v._data.dtype),
                "size": int(v._data.size), "value": values(v._data), "op": op_id,
                "block": self._block_id(v._block),
                "scope": list(v.scope),
            }
            if v.grad_fn is None:
                self._event("leaf", node=var_id,
                            text=f"leaf {self._describe(v)}: "
                                 f"{'a parameter (requires grad)' if v.requires_grad else 'data'}.")
        return var_id

    def _saved(self, node, output: Variable) -> list:
        entries = []
        for slot, array in enumerate(node.saved_tensors):
            source, what = None, "an extra array"
            for i, v in enumerate(node.inputs):
                if v._data is array:
                    source, what = self._ids.get(id(v)), f"input {i} ({self._describe(v)})"
                    break
            else:
                if array is output._data:
                    source, what = self._ids.get(id(output)), "its output"
            shape = np.shape(array)
            entries.append({"slot": slot, "source": source, "what": what,
                            "shape": _json_shape(shape), "dtype": str(np.asarray(array).dtype)})
        return entries

    def _arena(self, allocator) -> str:
        key = id(allocator)
        if key not in self._arenas:
            self._keep.append(allocator)
            self._arenas[key] = {"id": f"a{len(self._arenas)}", "name": allocator.name,
                                 "type": "pool" if isinstance(allocator, Pool) else "arena",
                                 "capacity": int(allocator.capacity)}
            # What was already on it when the trace first met it (parameters, their grads):
            # written as allocations read from the ledger, so the picture has no false gaps.
            for block in list(allocator.blocks):
                if block.alive:
                    self._block(block)
        self._arenas[key]["capacity"] = int(allocator.capacity)
        return self._arenas[key]["id"]

    def _block(self, block, fresh: bool = False) -> dict:
        """The block's entry; a block met for the first time that is not being allocated right
        now (fresh) existed before: it gets a reconstructed allocation event."""
        block_id, new = self._id(block, "b")
        if new:
            self._blocks[block_id] = {"id": block_id, "arena": None,
                                      "offset": int(block.offset), "nbytes": int(block.nbytes),
                                      "kind": block.kind, "owner": str(block.owner or "")}
            self._blocks[block_id]["arena"] = self._arena(block.allocator)
            if not fresh:
                self._reconstructed_alloc(block)
        return self._blocks[block_id]

    def _block_id(self, block) -> str | None:
        return None if block is None else self._block(block)["id"]

    def _describe(self, v: Variable) -> str:
        shape = "x".join(str(n) for n in v._data.shape) or "scalar"
        if v.name:
            return f"{v.name} ({shape})"
        if v.grad_fn is not None:
            return f"{v.grad_fn.name} output ({shape})"
        return f"data ({shape})"

    def _apply_text(self, node) -> str:
        """e.g. "mul.backward: grad for w = grad_output * b (a = w, b = x)"."""
        parts, formulas = [], []
        inputs = self._nodes[self.known(node)]["inputs"] if self.known(node) in self._nodes else []
        labels = [self._nodes[v]["label"] for v in inputs]
        for i, text in enumerate(node.grad_text):
            if i < len(inputs) and self._nodes[inputs[i]]["role"] != "data":
                parts.append(f"grad for {labels[i]} = {text}")
                formulas.append(text)
        said = " ".join(formulas)
        # The formulas use the op's own names for its inputs; say which variable each one is.
        names = [f"{name} = {label}" for name, label in zip(node.input_names, labels)
                 if re.search(rf"\b{re.escape(name)}\b", said)]
        where = f" ({', '.join(names)})" if names else ""
        return f"{node.name}.backward: " + ("; ".join(parts) or "gradients for its inputs") + \
            where + "."

    def _event(self, kind: str, **fields) -> None:
        self._events.append({"type": kind, "phase": self._phase, **fields})
        self._count += 1

    def _write_or_hold(self, event: dict) -> None:
        # Backward allocates while a node's backward runs, before the engine reports "apply";
        # hold those events so they land in that node's step.
        if self._phase == "backward":
            self._held.append(event)
        else:
            self._events.append({"phase": self._phase, **event})
            self._count += 1

    def _release_held(self) -> None:
        self._events.extend({"phase": self._phase, **event} for event in self._held)
        self._count += len(self._held)
        self._held = []

    def _close_frame(self) -> None:
        last = self._count - 1
        if last >= 0 and (not self._frames or self._frames[-1] != last):
            self._frames.append(last)


def _ctx_summary(node) -> dict:
    """The node's non-input data (axes, shapes, flags), as JSON scalars and lists."""
    summary = {}
    for key, value in getattr(node, "__dict__", {}).items():
        if key.startswith("_") or key == "created_at":
            continue
        if isinstance(value, (bool, int, float, str)) or value is None:
            summary[key] = value
        elif isinstance(value, (tuple, list)) and all(isinstance(x, (int, np.integer)) for x in value):
            summary[key] = [int(x) for x in value]
        elif isinstance(value, (np.integer, np.floating)):
            summary[key] = value.item()
        else:
            summary[key] = type(value).__name__
    return summary


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
