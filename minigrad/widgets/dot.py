"""DOT text for a trace's graph, built with the graphviz package (layout happens in the browser).

Every node and edge carries an `id` equal to its trace id (edges: `e<index>`) and a `class`, so
the browser can restyle the drawn SVG step by step without laying it out again.
"""
from __future__ import annotations

import graphviz

STYLE = {
    "param": {"shape": "box", "style": "filled,rounded", "fillcolor": "#fde68a"},
    "data": {"shape": "box", "style": "filled", "fillcolor": "#e5e7eb"},
    "intermediate": {"shape": "box", "style": "filled,rounded", "fillcolor": "#dbeafe"},
    "output": {"shape": "box", "style": "filled,rounded,bold", "fillcolor": "#fecaca"},
    "op": {"shape": "ellipse", "style": "filled", "fillcolor": "#ede9fe"},
}
EDGE_STYLE = {
    "parent": {"color": "#374151"},
    "output": {"color": "#374151"},
    # Saved-tensor edges must not bend the layout: the topology is the parent edges.
    "saved": {"color": "#d97706", "style": "dashed", "constraint": "false", "arrowhead": "odot"},
}


def _label(*parts: str) -> str:
    """User text is escaped: no HTML-like labels, no backslash escapes from names."""
    return "\\n".join(graphviz.escape(p) for p in parts if p)


def _shape(shape: list) -> str:
    return "x".join(str(n) for n in shape) or "scalar"


def to_dot(trace: dict, *, show_saved: bool = True) -> str:
    """The trace's variables and ops as a left-to-right Graphviz digraph."""
    dot = graphviz.Digraph(graph_attr={"rankdir": "LR", "nodesep": "0.25", "ranksep": "0.35",
                                       "fontname": "Helvetica", "bgcolor": "transparent"},
                           node_attr={"fontname": "Helvetica", "fontsize": "11", "height": "0.3"},
                           edge_attr={"arrowsize": "0.6"})
    for node in trace["nodes"]:
        if node["type"] == "variable":
            style = STYLE[node["role"]]
            label = _label(node["label"], _shape(node["shape"]))
            css = f"var {node['role']}"
        else:
            style, label, css = STYLE["op"], _label(node["label"]), "op"
        dot.node(node["id"], label=label, id=node["id"], **{"class": css}, **style)
    for index, edge in enumerate(trace["edges"]):
        if edge["kind"] == "saved" and not show_saved:
            continue
        dot.edge(edge["source"], edge["target"], id=f"e{index}", **{"class": edge["kind"]},
                 **EDGE_STYLE[edge["kind"]])
    return dot.source
