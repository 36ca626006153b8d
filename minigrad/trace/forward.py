"""ForwardEvents: leaves and ops as forward makes them, or read off a graph made before."""
from __future__ import annotations

import numpy as np

from ..eager.engine import topo_order
from ..eager.function import Function
from ..gcpause import gc_paused
from ..names import shape_text
from .events import EventLog
from .memory import MemoryEvents
from .tables import GraphTables, sentence_name


class ForwardEvents:
    """The "leaf" and "op" events, and the graph tables they fill."""

    def __init__(self, tables: GraphTables, memory: MemoryEvents, log: EventLog):
        self.tables, self.memory, self.log = tables, memory, log
        self.incomplete = False   # an op was recorded whose input's op was not

    def on_leaf(self, variable) -> None:
        self.tables.variable(variable)
        self.log.close_frame()

    def on_op(self, node, output, counts=None) -> None:
        """counts: a replay's pending counts as of this op (add_graph); None while forward runs,
        when the nodes' own counts are the counts as of this op."""
        tables, known, log = self.tables, self.tables.ids.known, self.log
        if log.phase != "recompute":   # (minigrad.checkpoint rebuilding a segment in backward)
            log.phase = "forward"
        for v in node.inputs:
            if v.grad_fn is not None and known(v.grad_fn) is None:
                self.incomplete = True   # made before recording began: read at backward
        inputs = [tables.variable(v) for v in node.inputs]
        op_id, _ = tables.ids.get(node, "f")
        out_id = tables.variable(output, op_id)
        saved = tables.saved(node, output)
        nodes = tables.nodes
        nodes[op_id] = {
            "id": op_id, "type": "op", "name": node.name, "label": node.name,
            "formula": (type(node).__doc__ or node.name).strip().splitlines()[0],
            "output": out_id, "inputs": inputs, "saved": saved, "ctx": ctx_summary(node),
            "grad_text": list(node.grad_text), "pending_count": 0,
            "block": self.memory.block_id(node._block),
            "scope": list(output.scope),
        }
        for slot, v in enumerate(inputs):
            tables.edges.append({"kind": "parent", "source": v, "target": op_id, "slot": slot})
        tables.edges.append({"kind": "output", "source": op_id, "target": out_id, "slot": 0})
        for entry in saved:
            if entry["source"] is not None:
                tables.edges.append({"kind": "saved", "source": entry["source"], "target": op_id,
                                     "slot": entry["slot"]})
        pending = []
        for v in node.inputs:
            parent_id = known(v.grad_fn) if v.grad_fn is not None else None
            if parent_id in nodes:
                count = int(v.grad_fn.pending_count if counts is None else counts[v.grad_fn])
                nodes[parent_id]["pending_count"] = count
                pending.append({"node": parent_id, "count": count})
        names = ", ".join(sentence_name(v) for v in node.inputs)
        saves = ", ".join(e["what"] for e in saved) or "nothing"
        counts = "".join(f"; {nodes[p['node']]['name']} now has pending count {p['count']}"
                         for p in pending)
        shape = shape_text(output._data.shape)
        again = "recompute: " if log.phase == "recompute" else ""
        log.event("op", node=op_id, output=out_id, pending=pending,
                  text=f"{again}{node.name}({names}) -> {shape}; saves {saves}{counts}.")
        log.close_frame()   # (one op, one step: in forward and in a checkpoint's recompute)

    @gc_paused()
    def add_graph(self, variable) -> None:
        """Write the forward events of variable's graph as if they had been recorded.

        Ops come in the order they were created. Arena blocks get reconstructed "alloc" events
        (marked so): an arena allocates in address order, so its `used` after a block is the
        block's end. Each op tells the pending counts as of that op: the final counts minus
        the replayed ops still to come, so consumers outside this graph (a dead branch) count
        first, and after the last op every node is at its real count. Nodes already known
        (recorded as they ran) are kept.
        """
        known = self.tables.ids.known
        root = variable.grad_fn
        if root is None:
            self._leaf_with_block(variable)
            return
        if root.released:
            raise ValueError(
                f"the graph of {sentence_name(variable)} was consumed by backward(), which "
                f"frees it; draw or step it before calling backward, or run forward again.")
        outputs = {root: variable}
        for node in topo_order(root):
            for v in node.inputs:
                if v.grad_fn is not None:
                    outputs[v.grad_fn] = v
        replayed = [node for node in sorted(outputs, key=lambda n: n.seq)
                    if known(node) is None]   # (a node recorded as it ran is kept)
        counts = {node: node.pending_count for node in outputs}
        for node in replayed:
            for v in node.inputs:
                if v.grad_fn is not None:
                    counts[v.grad_fn] -= 1      # each edge is counted again as its op replays
        for node in replayed:
            for v in node.inputs:
                if v.grad_fn is None and known(v) is None:
                    self._leaf_with_block(v)
                elif v.grad_fn is not None:
                    counts[v.grad_fn] += 1
            for block in (outputs[node]._block, node._block):
                self.memory.block_id(block)
            self.on_op(node, outputs[node], counts)
        for node in outputs:
            self.tables.nodes[known(node)]["pending_count"] = int(node.pending_count)

    def _leaf_with_block(self, variable) -> None:
        self.memory.block_id(variable._block)
        self.on_leaf(variable)


def ctx_summary(node) -> dict:
    """The node's non-input data (axes, shapes, flags), as JSON scalars and lists."""
    summary = {}
    for key, value in node.__dict__.items():
        if key.startswith("_") or hasattr(Function, key):   # a node field Function declares
            continue
        if isinstance(value, (bool, int, float, str)) or value is None:
            summary[key] = value
        elif isinstance(value, (tuple, list)) and all(isinstance(x, (int, np.integer))
                                                      for x in value):
            summary[key] = [int(x) for x in value]
        elif isinstance(value, (np.integer, np.floating)):
            summary[key] = value.item()
        else:
            summary[key] = type(value).__name__
    return summary
