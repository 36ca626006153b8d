"""Lesson 03, backward in topological order: check_topo_sort.

Any valid order passes. The library's topo_order() only says which nodes are reachable; the
order itself is checked directly: every reachable node exactly once, each after the nodes that
feed it (the grad_fns of its inputs).
"""
from __future__ import annotations

import time

import numpy as np

from ._report import StudentError, call_own, failed, passed

CHAIN_LENGTH = 10_000
RANDOM_GRAPHS = 30


# -- the graphs ------------------------------------------------------------------------------------
def _small_chain():
    import minigrad as mg
    w = mg.create_leaf([0.5, -1.0], requires_grad=True, name="w")
    x = mg.create_leaf([2.0, 3.0], name="x")
    return (w * x).tanh().sum()


def _diamond():
    import minigrad as mg
    w = mg.create_leaf([0.5, -1.0], requires_grad=True, name="w")
    x = mg.create_leaf([2.0, 3.0], name="x")
    a = w * x
    return (a * a + a).sum()


def _random_graph(seed: int):
    """A random DAG: parameters and data, unary and binary ops on earlier values (recent ones
    more often), a value sometimes used twice by one op, ops on data alone (which record no
    node), and a loss that sums a few of the values."""
    import minigrad as mg
    rng = np.random.default_rng(seed)
    values = [mg.create_leaf(rng.normal(size=3), requires_grad=True, name=f"p{i}")
              for i in range(int(rng.integers(1, 4)))]
    values += [mg.create_leaf(rng.normal(size=3), name=f"d{i}")
               for i in range(int(rng.integers(1, 3)))]

    def pick():
        back = min(int(rng.geometric(0.3)), len(values))
        return values[-back]

    unary = [lambda a: a.tanh(), lambda a: a.sigmoid(), lambda a: -a, lambda a: a.relu()]
    binary = [lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a - b]
    with np.errstate(all="ignore"):
        for _ in range(int(rng.integers(3, 41))):
            if rng.random() < 0.5:
                value = unary[int(rng.integers(len(unary)))](pick())
            else:
                a = pick()
                b = a if rng.random() < 0.1 else pick()
                value = binary[int(rng.integers(len(binary)))](a, b)
            values.append(value)
        recorded = [v for v in values if v.grad_fn is not None] or [values[0] * 1.0]
        total = recorded[-1]
        for i in rng.choice(len(recorded), size=min(3, len(recorded)), replace=False):
            total = total + recorded[int(i)]
        return total.sum()


def _long_chain():
    import minigrad as mg
    x = mg.create_leaf([0.1, -0.2, 0.3], requires_grad=True, name="x")
    for i in range(CHAIN_LENGTH):
        x = x.tanh() if i % 2 else x + x
    return x.sum()


def _cases():
    yield "a chain: (w * x).tanh().sum()", _small_chain
    yield "a diamond: a = w * x; (a * a + a).sum()", _diamond
    for seed in range(RANDOM_GRAPHS):
        yield f"random graph, seed {seed}", lambda seed=seed: _random_graph(seed)
    yield (f"a chain of {CHAIN_LENGTH:,} ops (x + x and tanh, alternating)", _long_chain)


# -- validity --------------------------------------------------------------------------------------
def _feeders(node) -> list:
    """(slot, node) for each input of node that an op made: the nodes that feed it."""
    return [(slot, v.grad_fn) for slot, v in enumerate(node.inputs) if v.grad_fn is not None]


def _out_of_order(order: list, position: dict):
    for node in order:
        for slot, feeder in _feeders(node):
            if position[feeder] > position[node]:
                return node, slot, feeder
    return None


def _problem(result, reference: list):
    """None if result is a valid order of the reachable nodes, else (what is wrong, hint)."""
    from ..eager.function import AccumulateGrad, Function
    from ..eager.variable import Variable

    try:
        order = list(result)
    except TypeError:
        return (f"your function returned {type(result).__name__}, not a list",
                "return a list of the grad_fn nodes")
    for i, item in enumerate(order):
        if isinstance(item, Variable):
            return (f"item {i} of your list is a Variable",
                    "list the nodes (v.grad_fn), not the Variables")
        if item is None or isinstance(item, AccumulateGrad):
            return (f"item {i} of your list is {item!r}",
                    "list only op nodes: skip inputs whose grad_fn is None (leaves); they have "
                    "no node to sort")
        if not isinstance(item, Function):
            return (f"item {i} of your list is a {type(item).__name__}",
                    "list the grad_fn nodes (minigrad Function instances)")
    position = {}
    for i, node in enumerate(order):
        if node in position:
            return (f"the {node.name} node appears twice, at positions {position[node]} and {i}",
                    "remember which nodes you have visited (a set) and add each one once")
        position[node] = i
    reachable = set(reference)
    missing = [n for n in reference if n not in position]
    if missing:
        return (f"{len(missing)} of the {len(reference)} reachable nodes are missing, for "
                f"example a {missing[0].name} node",
                "start from loss.grad_fn and follow every input's grad_fn, from every node "
                "you reach")
    extra = [n for n in order if n not in reachable]
    if extra:
        return (f"your list has {len(extra)} node(s) the loss does not depend on",
                "list only nodes reachable from loss.grad_fn")
    wrong = _out_of_order(order, position)
    if wrong is None:
        return None
    node, slot, feeder = wrong
    detail = (f"the {node.name} node (position {position[node]}) comes before the {feeder.name} "
              f"node (position {position[feeder]}), which produces its input {slot}")
    backwards = {n: len(order) - 1 - i for i, n in enumerate(order)}
    if _out_of_order(order, backwards) is None:
        return (detail, "your list is in backward order (the loss's node first). A topological "
                        "order puts every node after the nodes that feed it, so the loss's node "
                        "comes last: reverse your list")
    return (detail, "append a node only after all the nodes that feed it are in the list "
                    "(DFS post-order: finish a node's inputs first, then the node)")


# -- the check ---------------------------------------------------------------------------------------
def check_topo_sort(topo_sort) -> bool:
    """Grade topo_sort(loss) on small graphs, random graphs and a 10,000-op chain."""
    from ..eager.engine import topo_order

    name = "check_topo_sort"
    count, chain_seconds = 0, 0.0
    for description, build in _cases():
        loss = build()
        reference = topo_order(loss.grad_fn)
        start = time.perf_counter()
        try:
            result = call_own(topo_sort, (topo_order,), loss)
        except StudentError as exc:
            hint = ("Python allows about 1,000 nested calls: replace the recursion with a loop "
                    "over an explicit stack (a list you append to and pop from)"
                    if "RecursionError" in exc.description else "")
            return failed(name, description, exc.description, hint)
        seconds = time.perf_counter() - start
        if any(node.released for node in reference):
            return failed(name, description, "after your function ran, the graph was consumed",
                          "topo_sort only reads the graph: do not call backward() in it")
        problem = _problem(result, reference)
        if problem is not None:
            return failed(name, description, *problem)
        count += 1
        if description.startswith("a chain of"):
            chain_seconds = seconds
    note = ""
    if chain_seconds > 1.0:
        note = (f" (the long chain took {chain_seconds:.1f} s: checking `node in some_list` "
                f"scans the list; a set answers at once)")
    return passed(name, f"{count} graphs (2 small, {RANDOM_GRAPHS} random, a {CHAIN_LENGTH:,}-op "
                        f"chain): every node once, each after the nodes that feed it{note}")
