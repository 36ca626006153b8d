"""Ids and GraphTables: the trace's ids, and the graph it draws (variables, ops, edges)."""
from __future__ import annotations

import numpy as np

from ..names import check_name, shape_in_parens, shape_text
from .events import EventLog, json_shape, values


class Ids:
    """One id per object met (v0, f1, b2, ...: one numbering for all kinds)."""

    def __init__(self):
        self._ids: dict[int, str] = {}       # id(object) -> trace id
        self._keep: list = []                # objects kept alive so their ids stay unique

    def get(self, obj, prefix: str) -> tuple[str, bool]:
        """The object's id, and whether it is new."""
        key = id(obj)
        if key in self._ids:
            return self._ids[key], False
        new = f"{prefix}{len(self._ids)}"
        self._ids[key] = new
        self._keep.append(obj)
        return new, True

    def known(self, obj) -> str | None:
        return self._ids.get(id(obj))

    def keep(self, obj) -> None:
        self._keep.append(obj)


class GraphTables:
    """The nodes (variables and ops) and edges (parent, output, saved) of the document."""

    def __init__(self, ids: Ids, log: EventLog, memory):
        self.ids, self.log, self.memory = ids, log, memory
        self.nodes: dict[str, dict] = {}
        self.edges: list[dict] = []
        self.variables: dict = {}            # variable id -> the Variable (its name may change)
        self.stand_in_for: dict = {}         # id(a recompute's leaf) -> the input it reads again

    def variable(self, v, op_id: str | None = None) -> str:
        """v's id; a variable met for the first time gets its node (and a leaf its event)."""
        var_id, new = self.ids.get(v, "v")
        if not new and op_id is not None and self.nodes[var_id]["op"] is None:
            self.nodes[var_id]["op"] = op_id   # met as an input before its op was read
        if new:
            role = ("param" if v.requires_grad else "data") if v.grad_fn is None else "intermediate"
            self.variables[var_id] = v
            name = name_of(v)
            self.nodes[var_id] = {
                "id": var_id, "type": "variable", "name": name, "label": label_of(v, name),
                "role": role, "shape": json_shape(v._data.shape), "dtype": dtype_name(v._data.dtype),
                "size": int(v._data.size), "value": values(v._data), "op": op_id,
                "block": self.memory.block_id(v._block),
                "scope": list(v.scope),
            }
            if v.grad_fn is None:
                what = "a parameter (requires grad)" if v.requires_grad else "data"
                if self.log.phase == "recompute":   # (a checkpoint's input, recorded again)
                    what = self.read_again(v, var_id)
                self.log.event("leaf", node=var_id, text=f"leaf {sentence_name(v)}: {what}.")
        return var_id

    def read_again(self, leaf, var_id: str) -> str:
        """A recompute's leaf stands for a checkpoint input: the same array, read again from what
        the checkpoint saved. An "again" edge joins the two (see Recorder.stand_ins)."""
        original = self.stand_in_for.pop(id(leaf), None)
        source = self.ids.known(original) if original is not None else None
        if source is not None:
            self.edges.append({"kind": "again", "source": source, "target": var_id, "slot": 0})
        which = sentence_name(original) if original is not None else "the segment's input"
        return (f"the same array as {which}, read again from the checkpoint's saved inputs "
                f"(detached for the recompute: a leaf of the segment's new graph); it requires "
                f"grad so that its gradient is handed back to the checkpoint")

    def refresh_names(self) -> None:
        """Names given after a variable was recorded (`y = f(x); y.name = "y"`) are read again
        when the document is built, so the trace shows the names the program ended with."""
        for var_id, v in self.variables.items():
            node, name = self.nodes[var_id], name_of(v)
            if name != node["name"]:
                node["name"], node["label"] = name, label_of(v, name)

    def saved(self, node, output) -> list:
        """The entries of a node's saved tensors: which input (or its output) each one is."""
        entries, named = [], set()
        for slot, array in enumerate(node.saved_tensors):
            source, what = None, "an extra array"
            # (h * h: both inputs are one array; each save names an input not named yet)
            matches = [i for i, v in enumerate(node.inputs) if v._data is array]
            fresh = [i for i in matches if i not in named]
            for i in (fresh or matches)[:1]:
                named.add(i)
                v = node.inputs[i]
                source, what = self.ids.known(v), f"input {i} ({sentence_name(v)})"
            if not matches and array is output._data:
                source, what = self.ids.known(output), "its output"
            shape = np.shape(array)
            entries.append({"slot": slot, "source": source, "what": what,
                            "shape": json_shape(shape), "dtype": dtype_name(np.asarray(array).dtype)})
        return entries


_DTYPE_NAMES: dict = {}


def dtype_name(dtype) -> str:
    """str(dtype), remembered: numpy builds the name in Python each time (a tenth of a trace's
    cost per node before)."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype)
    return name


def name_of(v) -> str | None:
    """v.name, checked as it enters the trace (a name set by `v.name = ...` is checked here)."""
    shape = shape_text(v._data.shape)
    return check_name(v.name, f"the name of a Variable of shape {shape} (v.name = ...)")


def label_of(v, name: str | None) -> str:
    return name or (v.grad_fn.name if v.grad_fn is not None else "data")


def sentence_name(v) -> str:
    """A Variable as the trace's sentences name it, e.g. "W (3x2)", "tanh output (4x2)" or
    "b (5,)" (the documents keep this short form; error messages use eager.guards.describe)."""
    shape = shape_in_parens(v._data.shape)
    if v.name:
        return f"{v.name} {shape}"
    if v.grad_fn is not None:
        return f"{v.grad_fn.name} output {shape}"
    return f"data {shape}"
