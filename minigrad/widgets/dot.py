"""DOT text for a trace's graph, built with the graphviz package (layout happens in the browser).

Every node and edge carries an `id` equal to its trace id (edges: `e<index>`) and a `class`, so
the browser can restyle the drawn SVG step by step without laying it out again.
"""
from __future__ import annotations

from collections import Counter

import graphviz

from ..names import shape_text
from .collapse import BOX, FRAME, all_scopes, representative

STYLE = {
    "param": {"shape": "box", "style": "filled,rounded", "fillcolor": "#fde68a"},
    "data": {"shape": "box", "style": "filled", "fillcolor": "#e5e7eb"},
    "intermediate": {"shape": "box", "style": "filled,rounded", "fillcolor": "#dbeafe"},
    "output": {"shape": "box", "style": "filled,rounded,bold", "fillcolor": "#fecaca"},
    "op": {"shape": "ellipse", "style": "filled", "fillcolor": "#ede9fe"},
    "scope": {"shape": "box", "style": "filled,rounded", "fillcolor": "#f3f4f6",
              "peripheries": "2"},
}
EDGE_STYLE = {
    "parent": {"color": "#374151"},
    "output": {"color": "#374151"},
    # Saved-tensor edges must not bend the layout: the topology is the parent edges.
    "saved": {"color": "#d97706", "style": "dashed", "constraint": "false", "arrowhead": "odot"},
    # A checkpoint's recompute reads an input again: a dotted line joins its new leaf to that
    # input, without moving the layout (the recomputed segment keeps its own row).
    "again": {"color": "#6b7280", "style": "dotted", "arrowhead": "empty", "constraint": "false"},
}


def _text(text: str) -> str:
    """User text as Graphviz must read it to give it back as written: no HTML-like label, no
    backslash escapes (labels and ids are escStrings: "\\N" would become the node's name), and
    `&` as `&amp;` (Graphviz decodes entities: a name "a&lt;b" would be drawn as "a<b", and a
    box id "s:a&amp;b" would reach the page as "s:a&b"). open-scopes-dot.js `userText` writes the same."""
    return graphviz.escape(text.replace("&", "&amp;"))


def multiline_label(*parts: str) -> str:
    """A multi-line label of user text (never an HTML-like label, even when it is one part
    that starts with "<" and ends with ">")."""
    return graphviz.nohtml("\\n".join(_text(p) for p in parts if p))


FRAME_STYLE = {"class": "scope-frame", "style": "rounded,dashed", "color": "#9ca3af",
               "fontsize": "10", "fontname": "Helvetica", "labeljust": "l"}


def _digraph():
    return graphviz.Digraph(graph_attr={"rankdir": "LR", "nodesep": "0.25", "ranksep": "0.35",
                                        "fontname": "Helvetica", "bgcolor": "transparent"},
                            node_attr={"fontname": "Helvetica", "fontsize": "11",
                                       "height": "0.3"},
                            edge_attr={"arrowsize": "0.6"})


def dot_style(show_saved: bool = True) -> dict:
    """The DOT's fixed parts, for the page to write the same DOT for other open scopes
    (widgets/src/trace/open-scopes-dot.js): its first lines, and the attributes of each kind of element."""
    head = _digraph().source
    return {"head": head[:head.rindex("}")], "node": STYLE, "edge": EDGE_STYLE,
            "frame": FRAME_STYLE, "show_saved": show_saved}


def to_dot(trace: dict, *, show_saved: bool = True, fold: dict | None = None) -> str:
    """The trace's variables and ops as a left-to-right Graphviz digraph; with fold
    (collapse.folding), closed scopes are drawn as one box each and open ones as frames.
    Boxes and frames are named and written in one fixed order (collapse.all_scopes), whatever
    is open, so that Graphviz places the rest alike after a box is opened or closed."""
    dot = _digraph()
    paths = fold["paths"] if fold else {}
    opened = fold["opened"] if fold else set()
    order = all_scopes(paths) if fold else []
    frames = _frames(order, opened)
    # DOT names of boxes: "s:..." would read as a node and a port in an edge; ids keep "s:".
    names = {BOX + scope: f"box{k}" for k, scope in enumerate(order)}
    where = {}
    for node in trace["nodes"]:
        path = paths.get(node["id"], ())
        rep = representative(path, node["id"], opened)
        where[node["id"]] = names.get(rep, rep)
        if rep != node["id"]:
            continue
        if node["type"] == "variable":
            style = STYLE[node["role"]]
            label = multiline_label(node["label"], shape_text(node["shape"]))
            css = f"var {node['role']}"
        else:
            style, label, css = STYLE["op"], multiline_label(node["label"]), "op"
        graph = frames[path[-1]] if path else dot
        graph.node(node["id"], label=label, id=node["id"], **{"class": css}, **style)
    for box_id, box in (fold["boxes"] if fold else {}).items():
        scope, path = box["scope"], paths[box["members"][0]]
        around = path[path.index(scope) - 1] if path.index(scope) else None
        kind = f"kind {box['kind']} (x{box['alike']})" if box["kind"] else ""
        (frames[around] if around else dot).node(
            names[box_id],
            label=multiline_label(scope, f"{len(box['members'])} nodes, {box['ops']} ops", kind),
            id=_text(box_id), group=box_group(around), **{"class": "scope"}, **STYLE["scope"])
    _attach_frames(dot, frames, paths)
    for source, target, attrs in _edges(trace, where, show_saved):
        dot.edge(source, target, **attrs)
    return dot.source


def _edges(trace: dict, where: dict, show_saved: bool) -> list:
    """(source, target, attributes) of every edge drawn: the trace's own between nodes drawn as
    themselves, and one per pair of boxes (or box and node) that some parent edge joins."""
    drawn, edges = set(), []
    for index, edge in enumerate(trace["edges"]):
        if edge["kind"] == "saved" and not show_saved:
            continue
        source, target = where[edge["source"]], where[edge["target"]]
        if source == edge["source"] and target == edge["target"]:
            edges.append((source, target, {"id": f"e{index}", "class": edge["kind"],
                                           **EDGE_STYLE[edge["kind"]]}))
        elif source != target and edge["kind"] != "saved" and (source, target) not in drawn:
            drawn.add((source, target))
            edges.append((source, target, {"id": f"b{index}", "class": "parent scope-edge",
                                           **EDGE_STYLE["parent"]}))
    # A leaf feeding many boxes (a parameter shared along a chain) would pull every box towards
    # itself, bending the chain into a staircase that changes with each click: its edges into
    # boxes get no weight in the placement (they still rank the boxes after it).
    leaves = {n["id"] for n in trace["nodes"] if n["type"] == "variable" and n.get("op") is None}
    fan = Counter(source for source, _, attrs in edges
                  if source in leaves and attrs["class"] == "parent scope-edge")
    for source, _, attrs in edges:
        if fan[source] > 2 and attrs["class"] == "parent scope-edge":
            attrs["weight"] = "0"
    return edges


def box_group(around: str | None) -> str:
    """The boxes side by side in one frame (or at the top level) form one Graphviz group: dot
    keeps their chain straight, so opening one box shifts the boxes after it but does not
    reshuffle the rest (bounded layouts otherwise draw a chain of boxes as a staircase that
    changes shape with every click)."""
    return f"boxes in {around}" if around else "boxes"


def _frames(order: list, opened: set) -> dict:
    """scope -> a cluster subgraph, for every open scope (its frame: click it to close)."""
    return {scope: graphviz.Digraph(name=f"cluster_{k}", graph_attr={
                "label": multiline_label(scope), "id": _text(FRAME + scope), **FRAME_STYLE})
            for k, scope in enumerate(order) if scope in opened}


def _attach_frames(dot, frames: dict, paths: dict) -> None:
    """Put each frame inside the frame around it, innermost first (a subgraph is copied when
    attached, so its contents must be complete by then)."""
    around = {}
    for path in paths.values():
        for k, scope in enumerate(path):
            around[scope] = path[k - 1] if k else None
    depth = {scope: k for path in paths.values() for k, scope in enumerate(path)}
    for scope in sorted(frames, key=lambda s: -depth[s]):
        parent = around.get(scope)
        (frames[parent] if parent in frames else dot).subgraph(frames[scope])
