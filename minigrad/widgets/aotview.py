"""AotView: a captured forward graph and the backward graph derived from it, side by side.

Python builds the document (minigrad/aot/document.py) and its DOT once; the browser lays the
two graphs out together and replays the derivation, one backward rule per step.
"""
from __future__ import annotations

import graphviz
import traitlets

from ._base import MAX_NODES, TraceWidget, too_big_message
from ..names import shape_text
from .dot import multiline_label

TENSOR_STYLE = {
    "input": {"shape": "box", "style": "filled", "fillcolor": "#e5e7eb"},
    "constant": {"shape": "box", "style": "filled", "fillcolor": "#e5e7eb"},
    "param": {"shape": "box", "style": "filled,rounded", "fillcolor": "#fde68a"},
    "activation": {"shape": "box", "style": "filled,rounded", "fillcolor": "#ffffff"},
    "output": {"shape": "box", "style": "filled,rounded,bold", "fillcolor": "#e1f4e8"},
    "grad": {"shape": "box", "style": "filled,rounded", "fillcolor": "#ebfbee"},
}
OP_STYLE = {
    "forward": {"shape": "ellipse", "style": "filled", "fillcolor": "#efe8fb"},
    "backward": {"shape": "ellipse", "style": "filled", "fillcolor": "#e3fafc"},
    "accumulate": {"shape": "doublecircle", "style": "filled", "fillcolor": "#fff4e6",
                   "width": "0.3", "fixedsize": "false"},
}
EDGE_STYLE = {
    "input": {}, "output": {},
    # Reads across the two graphs must not bend either layout: each graph keeps its own ranks.
    "saved": {"color": "#c2255c", "style": "dashed", "constraint": "false", "arrowhead": "odot"},
    "param": {"color": "#b7791f", "style": "dotted", "constraint": "false", "arrowhead": "vee"},
}


def _node_css(node: dict) -> str:
    if node["type"] == "op":
        kind = "fwd" if node["graph"] == "forward" else "bwd"
        extra = " accumulate" if node.get("kind") == "accumulate" else ""
        return f"op {kind}{extra}" + ("" if node.get("needs_grad", True) else " nograd")
    css = f"tensor {node['role']}"
    if node.get("piece"):
        css += " piece"
    if node.get("saved"):
        css += " saved"
    if node.get("why_no_grad"):
        css += " nograd"
    return css


def to_aot_dot(document: dict) -> str:
    """The forward graph (left) and the backward graph (right), top to bottom, as one digraph."""
    dot = graphviz.Digraph(graph_attr={"rankdir": "TB", "nodesep": "0.2", "ranksep": "0.3",
                                       "fontname": "Helvetica", "bgcolor": "transparent",
                                       "newrank": "true"},
                           node_attr={"fontname": "Helvetica", "fontsize": "10", "height": "0.28"},
                           edge_attr={"arrowsize": "0.55", "color": "#374151"})
    nodes = {n["id"]: n for n in document["nodes"]}
    for graph, title in (("forward", "forward (captured)"), ("backward", "backward (derived)")):
        with dot.subgraph(name=f"cluster_{graph}") as cluster:
            cluster.attr(label=title, fontsize="11", color="#d0d7de", style="rounded")
            for node in document["nodes"]:
                if node["graph"] != graph:
                    continue
                if node["type"] == "op":
                    kind = "accumulate" if node.get("kind") == "accumulate" else graph
                    style = OP_STYLE[kind]
                    label = multiline_label("+" if kind == "accumulate" else node["label"])
                else:
                    style = TENSOR_STYLE[node["role"]]
                    label = multiline_label(node["label"], shape_text(node.get("shape") or []))
                cluster.node(node["id"], label=label, id=node["id"],
                             **{"class": _node_css(node)}, **style)
    for index, edge in enumerate(document["edges"]):
        greyed = any(nodes[end].get("why_no_grad") or nodes[end].get("needs_grad") is False
                     for end in (edge["source"], edge["target"]))
        dot.edge(edge["source"], edge["target"], id=f"e{index}",
                 **{"class": edge["kind"] + (" nograd" if greyed else "")},
                 **EDGE_STYLE[edge["kind"]])
    return dot.source


class AotView(TraceWidget):
    """The forward graph and its derived backward graph side by side: `saved.` reads drawn from
    the forward tensors to the backward operations that read them, fan-out sums marked, tensors
    without a gradient greyed; the derivation replays one rule per step (`frame` is the step
    shown, synced both ways), and the memory plan is drawn as live ranges.

    With only `forward`, the backward graph is derived here (`options`, `registry`). `plan`: a
    MemoryPlan from `minigrad.aot.plan.plan_memory` (by default the save-all plan of the two
    graphs), or False for no strip."""

    _bundle_name = "aot.js"
    frame = traitlets.Int(0).tag(sync=True)

    def __init__(self, forward, backward=None, *, steps=None, options=None, registry=None,
                 plan=None, title: str | None = None, max_nodes: int = MAX_NODES) -> None:
        from ..aot.document import aot_document   # (the aot package is not needed before)
        from ..aot.derive import derive_backward_graph
        from ..aot.ir import Graph
        from ..aot.plan import plan_memory

        for what, graph in (("forward", forward), ("backward", backward)):
            if graph is not None and not isinstance(graph, Graph):
                raise TypeError(
                    f"AotView({what}=...): expected a minigrad.aot Graph, got "
                    f"{type(graph).__name__}. Capture one first: forward = "
                    f"minigrad.aot.capture(fn, *example_inputs, params=model); AotView(forward). "
                    f"(For the graph of a Variable, use GraphView or BackwardStepper.)")
        if backward is None or steps is None:
            # Derive again to record the steps; a given backward graph must be what they make.
            derived, derived_steps = derive_backward_graph(forward, options, registry=registry,
                                                           steps=True)
            if backward is None:
                backward = derived
            if [o.text() for o in derived.operations] == [o.text() for o in backward.operations]:
                steps = derived_steps
        if plan is None:
            plan = plan_memory(forward, backward)
        document = aot_document(forward, backward, steps=steps, plan=plan or None, options=options,
                                title=title)
        message = too_big_message(document, max_nodes)
        super().__init__(document, dot="" if message else to_aot_dot(document), message=message,
                         title=title or "")
        self.forward, self.backward = forward, backward

    @traitlets.validate("frame")
    def _frame_in_range(self, proposal) -> int:
        frame, count = proposal["value"], len(self.trace.get("steps", ())) if self.trace else 0
        if count and not 0 <= frame < count:
            raise traitlets.TraitError(
                f"AotView.frame = {frame}: the derivation has {count} steps, numbered 0 to "
                f"{count - 1}. Fix: a frame in that range (view.steps lists them).")
        return frame

    @property
    def steps(self) -> list:
        """The derivation steps the view replays (one sentence each)."""
        return self.trace["steps"]
