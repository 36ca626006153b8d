"""Scopes as boxes: which scopes a view opens, what each closed box stands for.

A node's scope (the name_scope()s and Module calls it was made in, docs/trace.md) gives it a path
of nested scopes, e.g. ("blocks.1", "blocks.1.attn"). A view keeps a set of *open* scopes; each
node is drawn as itself when every scope on its path is open, else as the box of the outermost
closed one. A graph with no scopes at all that is bigger than the budget gets automatic scopes:
runs of consecutive nodes ("nodes 1-100", inside it "nodes 1-10", ...), nested by tens.
"""
from __future__ import annotations

from collections import Counter

BOX = "s:"        # DOT id of a closed scope's box
FRAME = "c:"      # DOT id of an open scope's frame (a Graphviz cluster)
# Nodes drawn at most by default (a view's max_nodes): Graphviz lays out 150 nodes in a few
# hundred milliseconds, and a student can read about that many at once.
NODE_BUDGET = 150


def scope_paths(trace: dict, budget: int) -> dict[str, tuple[str, ...]]:
    """node id -> its nested scope path ("blocks.1", "blocks.1.attn"); () at the top level."""
    paths = {}
    for node in trace["nodes"]:
        names = node.get("scope") or []
        paths[node["id"]] = tuple(".".join(names[:k + 1]) for k in range(len(names)))
    if any(paths.values()) or len(paths) <= budget:
        return paths
    return automatic_runs(trace, budget)


def automatic_runs(trace: dict, budget: int) -> dict[str, tuple[str, ...]]:
    """Scopes for a graph that has none: runs of consecutive non-leaf nodes, in creation order.
    The run length is a power of ten leaving at most budget/2 runs; runs longer than ten hold
    runs ten times shorter (opening one draws about ten boxes, not a hundred nodes)."""
    inner = [n["id"] for n in trace["nodes"] if n["type"] == "op" or n.get("op") is not None]
    size = 10
    while len(inner) / size > max(2, budget // 2):
        size *= 10
    sizes = [size]
    while sizes[-1] > 10:   # nested by tens, so that opening one run draws few nodes
        sizes.append(sizes[-1] // 10)
    paths = {n["id"]: () for n in trace["nodes"]}
    for i, node_id in enumerate(inner):
        names = [f"nodes {i // s * s + 1}-{min(len(inner), i // s * s + s)}" for s in sizes]
        paths[node_id] = tuple(dict.fromkeys(names))   # (a last short run is not nested)
    # A leaf used inside one run only (a constant, say) joins it; one used across runs (a
    # parameter shared along a chain) stays outside, with an edge into each run.
    used_in: dict[str, set] = {}
    for edge in trace["edges"]:
        if edge["kind"] == "parent" and not paths[edge["source"]]:
            used_in.setdefault(edge["source"], set()).add(paths[edge["target"]])
    for leaf, runs in used_in.items():
        if len(runs) == 1:
            paths[leaf] = next(iter(runs))
    return paths


def all_scopes(paths: dict) -> list[str]:
    """Every scope, outermost first, in the order their first node was made (a scope's place in
    this list names its box and frame in the DOT, so a name never changes with what is open)."""
    seen: dict[str, tuple[int, int]] = {}
    for path in paths.values():
        for depth, scope in enumerate(path):
            seen.setdefault(scope, (depth, len(seen)))
    return sorted(seen, key=seen.__getitem__)


def representative(path: tuple[str, ...], node_id: str, opened: set) -> str:
    """What a node is drawn as: itself, or the box of the outermost closed scope on its path."""
    for scope in path:
        if scope not in opened:
            return BOX + scope
    return node_id


def visible_count(paths: dict, opened: set) -> int:
    return len({representative(path, node_id, opened) for node_id, path in paths.items()})


def default_open(paths: dict, budget: int) -> set[str]:
    """Small graphs open fully; big ones open every scope down to the deepest level whose
    drawing still fits the budget (at least the top level is drawn, as boxes)."""
    if len(paths) <= budget:
        return set(all_scopes(paths))
    opened: set[str] = set()
    depth = 0
    while True:
        level = {path[depth] for path in paths.values() if len(path) > depth}
        if not level or visible_count(paths, opened | level) > budget:
            return opened
        opened |= level
        depth += 1


def open_with_parents(paths: dict, opened: set, scope: str) -> set[str]:
    """opened plus scope and every scope around it."""
    for path in paths.values():
        if scope in path:
            return opened | set(path[:path.index(scope) + 1])
    raise ValueError(unknown_scope(paths, scope))


def close_with_children(paths: dict, opened: set, scope: str) -> set[str]:
    """opened without scope and every scope inside it."""
    inside = set()
    for path in paths.values():
        if scope in path:
            inside |= set(path[path.index(scope):])
    if not inside:
        raise ValueError(unknown_scope(paths, scope))
    return opened - inside


def without_orphans(paths: dict, opened: set) -> set[str]:
    """opened without the scopes inside a closed one (they cannot be seen)."""
    kept = set()
    for path in paths.values():
        for scope in path:
            if scope not in opened:
                break
            kept.add(scope)
    return kept


def unknown_scope(paths: dict, scope: str) -> str:
    known = all_scopes(paths)
    shown = ", ".join(repr(s) for s in known[:12]) + (", ..." if len(known) > 12 else "")
    return (f"expand/collapse({scope!r}): this graph has no scope {scope!r}; its scopes are "
            f"{shown or 'none (it was built outside any Module or name_scope)'}. Pass one of "
            f"those names (nested scopes are written with dots, e.g. 'blocks.1.attn').")


def boxes(trace: dict, paths: dict, opened: set) -> dict:
    """The closed boxes drawn: box id -> {scope, members, ops, border, kind, alike}.

    border: the ops inside whose output is used outside: their pending counts are the
    gradients still to come across the box's edge. Boxes with the same multiset of ops are of
    one kind (kind "A", "B", ...; alike: how many boxes share it), so 12 equal layers read as
    12 boxes of one kind."""
    nodes = {n["id"]: n for n in trace["nodes"]}
    found: dict[str, dict] = {}
    for node_id, path in paths.items():
        rep = representative(path, node_id, opened)
        if rep.startswith(BOX):
            box = found.setdefault(rep, {"scope": rep[len(BOX):], "members": [], "ops": 0,
                                         "border": []})
            box["members"].append(node_id)
            box["ops"] += nodes[node_id]["type"] == "op"
    where = {node_id: representative(path, node_id, opened) for node_id, path in paths.items()}
    for edge in trace["edges"]:
        source, target = edge["source"], edge["target"]
        if edge["kind"] == "parent" and where[source] != where[target] \
                and where[source] in found and nodes[source].get("op") is not None:
            border = found[where[source]]["border"]
            if nodes[source]["op"] not in border:
                border.append(nodes[source]["op"])
    signatures = {box_id: signature(nodes, box["members"]) for box_id, box in found.items()}
    counts = Counter(signatures.values())
    letters: dict = {}
    for box_id, box in found.items():
        alike = counts[signatures[box_id]]
        if alike > 1 and signatures[box_id] not in letters:
            letters[signatures[box_id]] = chr(ord("A") + len(letters) % 26)
        box["kind"] = letters.get(signatures[box_id])
        box["alike"] = alike
    return found


def signature(nodes: dict, members: list) -> tuple:
    """What a box holds, as a multiset of op names (and how many variables)."""
    return tuple(sorted(Counter(nodes[m]["name"] if nodes[m]["type"] == "op" else "var"
                                for m in members).items()))


def folding(trace: dict, budget: int, expand=(), opened: set | None = None,
            paths: dict | None = None) -> dict:
    """What a view draws: the scope paths (given, or read from the trace), the open scopes
    (default for the budget, plus expand), and the closed boxes."""
    paths = scope_paths(trace, budget) if paths is None else paths
    if opened is None:
        opened = default_open(paths, budget)
        for scope in expand:
            opened = open_with_parents(paths, opened, scope)
    return {"paths": paths, "opened": opened, "boxes": boxes(trace, paths, opened),
            "visible": visible_count(paths, opened)}


def scope_table(trace: dict, paths: dict) -> dict:
    """Everything the page needs to draw any choice of open scopes without asking Python (the
    `scope_table` trait; widgets/src/trace/open-scopes-dot.js): the scopes (outermost first), each node's path
    as indexes into them (paths[path_of[k]] for the k-th trace node; equal paths are listed
    once), and per scope what does not depend on what is open: its op count, its border ops
    and the signature of its content (equal signatures: boxes of one kind)."""
    if not any(paths.values()):
        return {}
    scopes = all_scopes(paths)
    number = {scope: k for k, scope in enumerate(scopes)}
    unique: dict[tuple, int] = {(): 0}
    path_of = [unique.setdefault(paths[n["id"]], len(unique)) for n in trace["nodes"]]
    every = {}   # a box per scope: close the outermost ones, then one level deeper each time
    opened: set[str] = set()
    while len(every) < len(scopes):
        level = boxes(trace, paths, opened)
        every.update(level)
        opened |= {box["scope"] for box in level.values()}
    signatures: dict = {}
    nodes = {n["id"]: n for n in trace["nodes"]}
    for scope in scopes:
        key = signature(nodes, every[BOX + scope]["members"])
        signatures.setdefault(key, len(signatures))
        every[BOX + scope]["signature"] = signatures[key]
    return {"scopes": scopes,
            "paths": [[number[s] for s in path] for path in unique],
            "path_of": path_of,
            "ops": [every[BOX + s]["ops"] for s in scopes],
            "border": [every[BOX + s]["border"] for s in scopes],
            "signature": [every[BOX + s]["signature"] for s in scopes]}
