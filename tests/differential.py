"""The differential harness's program generator and its reference (tests/test_differential.py).

A program is a small DAG: leaves (parameters that require grad, or data) and steps (one op of
differential_ops.OPS on earlier nodes), ending in loss = sum_k sum(node_k * probe_k) with fixed
probes of mixed sign (a plain sum would hide errors: softmax sums to a constant). Four modes:

  finite   float64 data in [-2, 2] (zeros included); a step whose value leaves [-LIMIT, LIMIT] is
           dropped, inputs of log, div and fractional or negative powers go through a*a + 0.5
  edge     the same ops on data made of 0, -0, +-inf, nan, huge and tiny numbers, unguarded
  f16      float16 (and some float32) data, the ops a float16 model uses
  misuse   a finite program plus one step that breaks a rule (MISUSES), then its loss
"""
from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
from hypothesis import strategies as st

from differential_ops import OPS

LIMIT = 1e3
EDGE_VALUES = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e308, -1e308, 5e-324, 1.0, -1.0, 2.0,
               710.0, -710.0, 300.0]
SHAPES = [(), (3,), (4,), (2, 3), (3, 2), (1, 3), (2, 1), (2, 1, 3), (0, 3)]
POWERS = [0, 1, 2, 3, -1, -2, 0.5, 2.5]
UNARY = ["neg", "exp", "log", "tanh", "sigmoid", "relu", "silu", "gelu", "pow", "detach", "no_grad"]
BINARY = ["add", "sub", "mul", "div"]
# the first ones are drawn most often (hypothesis shrinks towards the start of the list)
ALL_OPS = ["transpose", "pow", "matmul", "mse", "getitem", "rmsnorm", "cross_entropy", "sum", "mean",
           "reshape", "broadcast_to", "softmax", "log_softmax", "max", "concat", "stack", "add",
           "sub", "mul", "div", "neg", "exp", "log", "tanh", "sigmoid", "relu", "silu", "gelu",
           "mse_broadcast", "detach", "no_grad"]
F16_OPS = ["rmsnorm", "matmul", "softmax", "mse", "sum", "mean", "add", "sub", "mul", "neg", "tanh",
           "sigmoid", "exp", "reshape", "transpose"]
ELEMENTWISE = ["pow", "add", "sub", "mul", "div", "neg", "exp", "log", "tanh", "sigmoid", "relu"]
NEEDS_POSITIVE = {"log"}   # (and div's denominator, and pow with p < 0 or fractional)


class Leaf(NamedTuple):
    array: np.ndarray
    requires_grad: bool
    bad: np.ndarray | None = None     # misuse: the data engines run on (aot captures `array`)


class Step(NamedTuple):
    op: str
    inputs: tuple
    attrs: dict


class Program(NamedTuple):
    mode: str
    nodes: tuple
    outputs: tuple            # (node index, probe)
    segment: tuple            # (first, end) node range that the checkpoint engine recomputes
    misuse: str | None = None

    def leaves(self):
        return [n for n in self.nodes if isinstance(n, Leaf)]

    def steps(self):
        return [n for n in self.nodes if isinstance(n, Step)]

    def ops(self):
        return {n.op for n in self.steps()}

    def describe(self) -> str:
        lines = [f"mode {self.mode}" + (f", misuse {self.misuse}" if self.misuse else "")]
        for k, n in enumerate(self.nodes):
            if isinstance(n, Leaf):
                lines.append(f"  {k}: leaf {n.array.dtype}{n.array.shape} grad={n.requires_grad} "
                             f"{np.array2string(n.array.ravel()[:12], precision=3)}"
                             + ("" if n.bad is None else f" runs on {n.bad}"))
            else:
                lines.append(f"  {k}: {n.op}{tuple(n.inputs)} {n.attrs}")
        lines.append(f"  loss = sum of node * probe over {[i for i, _ in self.outputs]}; "
                     f"checkpointed nodes {self.segment}")
        return "\n".join(lines)


# -- the numpy reference ------------------------------------------------------------------------
def node_values(program: Program, data: list):
    """Every node's value in float64 numpy on the given leaf data, and the kink margin: how
    close an input came to a point where its op is not differentiable (relu at 0, max ties)."""
    values, leaves, margin = [], iter(data), np.inf
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # the mean of an empty batch: nan
        for node in program.nodes:
            if isinstance(node, Leaf):
                a = next(leaves)
                values.append(a.astype(np.float64) if a.dtype.kind == "f" else a)
                continue
            op, args = OPS[node.op], [values[i] for i in node.inputs]
            if op.kink is not None:
                margin = min(margin, op.kink(*args, **node.attrs))
            values.append(np.asarray(op.ref(*args, **node.attrs), dtype=np.float64))
    return values, margin


def reference(program: Program, data: list):
    """(loss, kink margin) of the program in float64 numpy."""
    values, margin = node_values(program, data)
    with np.errstate(all="ignore"):
        return sum(float(np.sum(values[i] * probe)) for i, probe in program.outputs), margin


def order_sensitive(program: Program, data: list) -> bool:
    """Whether the loss's nan/inf depends on the order its terms are summed in: with values near
    float64's largest, a partial sum can overflow to inf before a -inf term arrives (nan) or
    not (-inf), and engines sum in different orders. Such a loss pins no rule."""
    values, _ = node_values(program, data)
    with np.errstate(all="ignore"):
        terms = np.concatenate([np.ravel(values[i] * probe) for i, probe in program.outputs])
        if terms.size == 0:
            return False
        sums = [np.sum(terms), np.add.accumulate(terms)[-1], np.add.accumulate(terms[::-1])[-1]]
        shaped = [values[i] * probe for i, probe in program.outputs]
        if len({np.shape(t) for t in shaped}) == 1:   # (a tape adds the terms element by element first)
            sums.append(np.sum(sum(shaped)))
    return len({"nan" if np.isnan(x) else str(np.sign(x)) if np.isinf(x) else "finite"
                for x in sums}) > 1


def central_differences(program: Program, data: list, eps: float = 1e-6) -> list:
    """d loss / d leaf by (f(x + eps) - f(x - eps)) / 2 eps, per element, in float64."""
    grads = []
    for k, (leaf, a) in enumerate(zip(program.leaves(), data)):
        if not leaf.requires_grad:
            grads.append(None)
            continue
        g = np.zeros(a.shape)
        for idx in np.ndindex(a.shape):
            moved = []
            for step in (eps, -eps):
                shifted = [x.astype(np.float64) if x.dtype.kind == "f" else x for x in data]
                shifted[k][idx] += step
                moved.append(reference(program, shifted)[0])
            g[idx] = (moved[0] - moved[1]) / (2 * eps)
        grads.append(g)
    return grads


def grad_nodes(program: Program) -> set:
    """Indices of the nodes whose value requires grad (detach and no_grad cut the flow)."""
    needs = set()
    for k, node in enumerate(program.nodes):
        if isinstance(node, Leaf):
            if node.requires_grad and node.array.dtype.kind == "f":
                needs.add(k)
        elif not OPS[node.op].stops_grad and needs & set(node.inputs):
            needs.add(k)
    return needs


def depends_on(program: Program, roots) -> set:
    """The nodes the roots are computed from (themselves included), through grad-carrying steps."""
    needs, seen, todo = grad_nodes(program), set(), list(roots)
    while todo:
        i = todo.pop()
        if i not in seen and i in needs:
            seen.add(i)
            todo.extend(program.nodes[i].inputs if isinstance(program.nodes[i], Step) else ())
    return seen


def reachable(program: Program) -> set:
    """Indices (among the leaves) of the leaves whose gradient the loss reaches."""
    seen = depends_on(program, [i for i, _ in program.outputs])
    leaf_ids = [i for i, n in enumerate(program.nodes) if isinstance(n, Leaf)]
    return {k for k, i in enumerate(leaf_ids) if i in seen}


def new_data(program: Program) -> list:
    """Other data of the same shapes and kinds, for a plan's second run."""
    out = []
    for leaf in program.leaves():
        a = leaf.array if leaf.bad is None else leaf.bad
        out.append(np.roll(a, 1) if a.dtype.kind in "iu" else (np.flip(a) * 0.75 - 0.125).astype(a.dtype))
    return out


def run_data(program: Program) -> list:
    return [leaf.array if leaf.bad is None else leaf.bad for leaf in program.leaves()]


# -- the generator --------------------------------------------------------------------------------
class Builder:
    """Draws nodes one at a time, keeping each node's reference value (finite mode drops steps
    whose value is not finite or beyond LIMIT, so central differences stay meaningful)."""

    def __init__(self, draw, mode: str):
        self.draw, self.mode = draw, mode
        self.nodes, self.values = [], []

    def shape(self, i):
        return self.values[i].shape

    def elements(self, shape, dtype=np.float64):
        if self.mode == "edge":
            return self.draw(st.lists(st.sampled_from(EDGE_VALUES + [0.5, -1.5]),
                                      min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
        width = 16 if dtype == np.float16 else 64
        return self.draw(st.lists(st.floats(-2, 2, allow_subnormal=False, width=width),
                                  min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))

    def leaf(self, shape, requires_grad=True, array=None) -> int:
        if array is None:
            dtype = np.float64
            if self.mode == "f16":
                dtype = self.draw(st.sampled_from([np.float16, np.float16, np.float32]))
            array = np.array(self.elements(shape, dtype), dtype=dtype).reshape(shape)
        self.nodes.append(Leaf(array, requires_grad))
        self.values.append(array.astype(np.float64) if array.dtype.kind == "f" else array)
        return len(self.nodes) - 1

    def pick(self, accept=lambda shape: True):
        """A float node whose shape accept()s (integer leaves are only class targets)."""
        fits = [i for i, v in enumerate(self.values) if v.dtype.kind == "f" and accept(v.shape)]
        return self.draw(st.sampled_from(fits)) if fits else None

    def step(self, op: str, inputs, **attrs):
        """Append op(inputs) unless its reference fails or (finite modes) leaves the limits."""
        try:
            with np.errstate(all="ignore"):
                value = np.asarray(OPS[op].ref(*(self.values[i] for i in inputs), **attrs), np.float64)
        except (ValueError, IndexError, TypeError):
            return None
        if self.mode != "edge" and not (np.all(np.isfinite(value)) and np.all(np.abs(value) <= LIMIT)):
            return None
        self.nodes.append(Step(op, tuple(inputs), attrs))
        self.values.append(value)
        return len(self.nodes) - 1

    def positive(self, i):
        """i, or (finite modes) a*a + 0.5 of it: an input log, div and x**-1 are defined on."""
        return i if self.mode == "edge" else self.step("square_plus", [i])


def broadcast_partner(b: Builder, shape) -> int:
    """A node whose shape broadcasts against shape: the same node (fan-out), one of that
    shape, or a fresh leaf with a trailing part of shape, or 1 in some axes."""
    kind = b.draw(st.sampled_from(["same", "node", "suffix", "ones"]))
    if kind == "node":
        found = b.pick(lambda s: _broadcasts(s, shape))
        if found is not None:
            return found
    if kind in ("suffix", "ones") and len(shape):
        cut = b.draw(st.integers(0, len(shape)))
        part = list(shape[cut:])
        if kind == "ones":
            part = [1 if b.draw(st.booleans()) else n for n in part]
        return b.leaf(tuple(part), requires_grad=b.draw(st.booleans()))
    return None   # the caller uses its own node: a shared input


def _broadcasts(s, t) -> bool:
    try:
        np.broadcast_shapes(s, t)
        return True
    except ValueError:
        return False


def draw_axis(b: Builder, ndim: int):
    if ndim == 0:
        return None
    return b.draw(st.integers(-ndim, ndim - 1))


def draw_step(b: Builder, op: str):
    """Add one step of op (and whatever leaves and guards it needs); None if it did not fit."""
    draw = b.draw
    if op in BINARY:
        a = b.pick()
        other = broadcast_partner(b, b.shape(a))
        other = a if other is None else other
        if op == "div":
            other = b.positive(other)
        return None if other is None else b.step(op, [a, other])
    if op == "pow":
        p = draw(st.sampled_from(POWERS))
        a = b.pick()
        a = b.positive(a) if (p < 0 or p != int(p)) else a
        return None if a is None else b.step("pow", [a], p=p)
    if op in UNARY:
        a = b.pick()
        a = b.positive(a) if op in NEEDS_POSITIVE else a
        return None if a is None else b.step(op, [a])
    return OTHER_DRAWS[op](b)


def _reduce(op):
    def draw_it(b):
        a = b.pick(lambda s: op != "max" or 0 not in s)
        if a is None:
            return None
        ndim = len(b.shape(a))
        axis = b.draw(st.sampled_from(["none", "int", "pair"]))
        if axis == "int" and ndim:
            axis = draw_axis(b, ndim)
        elif axis == "pair" and ndim >= 2 and op != "max":
            axis = tuple(b.draw(st.permutations(range(-ndim, 0)))[:2])
        else:
            axis = None
        return b.step(op, [a], axis=axis, keepdims=b.draw(st.booleans()))
    return draw_it


def draw_reshape(b):
    a = b.pick()
    s = b.shape(a)
    n = int(np.prod(s))
    choices = [(n,), (1, n), (n, 1), tuple(reversed(s)), (-1,)] + ([(n // 2, 2)] if n % 2 == 0 else [])
    return b.step("reshape", [a], shape=b.draw(st.sampled_from(choices)))


def draw_transpose(b):
    a = b.pick()
    ndim = len(b.shape(a))
    if b.draw(st.integers(0, 4)) == 0:
        return b.step("transpose", [a], axes=None)
    axes = [ax - ndim if b.draw(st.booleans()) else ax for ax in b.draw(st.permutations(range(ndim)))]
    return b.step("transpose", [a], axes=tuple(axes))


def draw_broadcast_to(b):
    a = b.pick()
    s = b.shape(a)
    grown = tuple(2 if n == 1 and b.draw(st.booleans()) else n for n in s)
    target = ((b.draw(st.integers(1, 3)),) if b.draw(st.booleans()) else ()) + grown
    return b.step("broadcast_to", [a], shape=target)


def draw_getitem(b):
    a = b.pick(lambda s: len(s) >= 1 and s[0] > 0)
    if a is None:
        return None
    s = b.shape(a)
    kind = b.draw(st.sampled_from(["array", "int", "slice", "pair"]))
    if kind == "int":
        index = b.draw(st.integers(-s[0], s[0] - 1))
    elif kind == "slice":
        index = slice(b.draw(st.integers(-s[0], s[0])), None, b.draw(st.sampled_from([1, 2, -1])))
    elif kind == "array" or len(s) < 2:
        index = np.array(b.draw(st.lists(st.integers(-s[0], s[0] - 1), min_size=1, max_size=4)))
    else:
        index = (b.draw(st.integers(-s[0], s[0] - 1)), slice(None, None, -1))
    return b.step("getitem", [a], index=index)


def draw_matmul(b):
    a = b.pick(lambda s: len(s) in (1, 2))
    if a is None:
        a = b.leaf((2, 3))
    k = b.shape(a)[-1]
    right = b.draw(st.sampled_from([(k,), (k, 1), (k, 2), (k, 3)]))
    other = b.pick(lambda s: s == right)
    if other is None or b.draw(st.booleans()):
        other = b.leaf(right, requires_grad=b.draw(st.booleans()))
    return b.step("matmul", [a, other])


def draw_along_axis(op):
    def draw_it(b):
        a = b.pick(lambda s: len(s) >= 1)
        return None if a is None else b.step(op, [a], axis=draw_axis(b, len(b.shape(a))))
    return draw_it


def draw_mse(b):
    a = b.pick()
    target = b.pick(lambda s: s == b.shape(a)) if b.draw(st.booleans()) else None
    if target is None or target == a:
        target = b.leaf(b.shape(a), requires_grad=False)
    return b.step("mse", [a, target])


def draw_mse_broadcast(b):
    """mse of a prediction and a target of another shape that broadcasts with it."""
    a = b.pick(lambda s: len(s) >= 1)
    if a is None:
        return None
    s = b.shape(a)
    target = b.draw(st.sampled_from([s[:-1] + (1,), s[1:], s[:-1] + (3,) if s[-1] == 1 else (2,) + s]))
    return b.step("mse_broadcast", [a, b.leaf(target, requires_grad=b.draw(st.booleans()))])


def draw_cross_entropy(b):
    logits = b.pick(lambda s: len(s) == 2 and s[0] > 0 and s[1] > 0)
    if logits is None:
        logits = b.leaf(b.draw(st.sampled_from([(2, 3), (4, 2), (1, 3)])))
    n, c = b.shape(logits)
    targets = b.leaf((n,), False, np.array(b.draw(st.lists(st.integers(0, c - 1), min_size=n,
                                                           max_size=n)), dtype=np.int64))
    return b.step("cross_entropy", [logits, targets])


def draw_rmsnorm(b):
    x = b.pick(lambda s: len(s) >= 1 and s[-1] > 0)
    if x is None:
        return None
    return b.step("rmsnorm", [x, b.leaf(b.shape(x)[-1:])])


def draw_join(op):
    def draw_it(b):
        a = b.pick(lambda s: len(s) >= 1)
        if a is None:
            return None
        s = b.shape(a)
        other = b.pick(lambda t: t == s) if b.draw(st.booleans()) else a   # a with itself: fan-out
        ndim = len(s) + (op == "stack")
        return b.step(op, [a, other], axis=b.draw(st.integers(-ndim, ndim - 1)))
    return draw_it


OTHER_DRAWS = {
    "sum": _reduce("sum"), "mean": _reduce("mean"), "max": _reduce("max"),
    "reshape": draw_reshape, "transpose": draw_transpose, "broadcast_to": draw_broadcast_to,
    "getitem": draw_getitem, "matmul": draw_matmul, "softmax": draw_along_axis("softmax"),
    "log_softmax": draw_along_axis("log_softmax"), "mse": draw_mse,
    "cross_entropy": draw_cross_entropy, "mse_broadcast": draw_mse_broadcast, "rmsnorm": draw_rmsnorm,
    "concat": draw_join("concat"), "stack": draw_join("stack"),
}


@st.composite
def programs(draw, mode: str = "finite", ops=None, max_steps: int = 6):
    """A random program of the mode; ops: the op names to draw from."""
    b = Builder(draw, mode)
    names = ops or (F16_OPS if mode == "f16" else ALL_OPS)
    for _ in range(draw(st.integers(1, 2))):
        b.leaf(draw(st.sampled_from(SHAPES)))
    if mode == "f16" and draw(st.booleans()):   # rmsnorm of large float16 values
        b.values[0] = b.values[0] * 0 + 300.0 * np.sign(b.values[0] + 0.5)
        b.nodes[0] = Leaf(np.asarray(b.values[0], dtype=b.nodes[0].array.dtype), True)
    for _ in range(draw(st.integers(1, max_steps)) + draw(st.integers(0, 2))):
        # a wide integer rather than sampled_from: the fixed CI examples then spread over all ops
        draw_step(b, names[draw(st.integers(0, 2**16)) % len(names)])
    misuse = None
    if mode == "misuse":
        misuse = draw(st.sampled_from(sorted(MISUSES)))
        MISUSES[misuse](b)
    return finish(b, misuse)


def probe(shape, mode: str, seed: int) -> np.ndarray:
    """Fixed weights of mixed sign for a node's elements in the loss."""
    rng = np.random.default_rng(seed)
    return np.asarray(rng.uniform(0.5, 1.5, shape) * rng.choice([-1, 1], shape),
                      dtype=np.float16 if mode == "f16" else np.float64)


def finish(b: Builder, misuse) -> Program:
    draw, n = b.draw, len(b.nodes)
    if misuse:   # the loss is the misused op's result, whatever its shape
        outputs = [(n - 1, np.array(1.0))]
    else:
        steps = [i for i in range(n) if isinstance(b.nodes[i], Step)] or [0]
        chosen = sorted(set(draw(st.lists(st.sampled_from(steps), min_size=1, max_size=2))))
        seed = draw(st.integers(0, 2**16))
        outputs = [(i, probe(b.shape(i), b.mode, seed + i)) for i in chosen]
    first = draw(st.integers(0, n - 1))
    segment = (first, draw(st.integers(first + 1, n)))
    program = Program(b.mode, tuple(b.nodes), tuple(outputs), segment, misuse)
    params = {k for k, leaf in enumerate(program.leaves()) if leaf.requires_grad}
    if not reachable(program) & params:   # backward needs something to differentiate
        first = next(i for i, node in enumerate(b.nodes) if isinstance(node, Leaf) and node.requires_grad)
        program = program._replace(outputs=program.outputs + ((first, probe(b.shape(first), b.mode, 0)),))
    return program


def written(mode: str, *nodes, segment=(0, 1)) -> Program:
    """A program written out by hand (a known case every run must include): nodes are Leaf and
    Step; the loss reads the last node, with a fixed probe of mixed sign."""
    if mode == "misuse":
        return Program(mode, nodes, ((len(nodes) - 1, np.array(1.0)),), segment, "written")
    data = [n.array for n in nodes if isinstance(n, Leaf)]
    last = node_values(Program(mode, nodes, (), segment), data)[0][-1]
    return Program(mode, nodes, ((len(nodes) - 1, probe(last.shape, mode, 0)),), segment)


# -- misuse: one step that breaks a rule; every engine must refuse it ------------------------------
def _mse_column_vs_flat(b):        # (n, 1) prediction, (n,) target: n*n terms (issue 24, item 9)
    n = b.draw(st.integers(2, 4))
    b.nodes.append(Step("mse", (b.leaf((n, 1)), b.leaf((n,), False)), {}))


def _matmul_inner_mismatch(b):
    b.nodes.append(Step("matmul", (b.leaf((2, 3)), b.leaf((2, 3))), {}))


def _reshape_wrong_size(b):
    a = b.pick()
    b.nodes.append(Step("reshape", (a,), {"shape": (int(np.prod(b.shape(a))) + 1,)}))


def _transpose_bad_axes(b):
    a = b.leaf((2, 3))
    axes = b.draw(st.sampled_from([(0,), (0, 0), (1, -1), (0, 2)]))
    b.nodes.append(Step("transpose", (a,), {"axes": axes}))


def _sum_axis_out_of_range(b):
    a = b.pick()
    ndim = len(b.shape(a))
    b.nodes.append(Step("sum", (a,), {"axis": b.draw(st.sampled_from([ndim, -ndim - 1])), "keepdims": False}))


def _getitem_out_of_range(b):
    a = b.leaf((3,))
    b.nodes.append(Step("getitem", (a,), {"index": b.draw(st.sampled_from([3, -4, np.array([0, 3])]))}))


def _broadcast_incompatible(b):
    b.nodes.append(Step("broadcast_to", (b.leaf((2, 3)),), {"shape": (3, 3)}))


def _add_not_broadcastable(b):
    b.nodes.append(Step(b.draw(st.sampled_from(BINARY)), (b.leaf((2, 3)), b.leaf((2,))), {}))


def _cross_entropy_bad_target(b):   # a plan compiled on good targets must check them on run
    logits = b.leaf((3, 4))
    bad = np.array([0, b.draw(st.sampled_from([-1, 4, 7])), 1])
    b.nodes.append(Leaf(np.array([0, 2, 1]), False, bad))
    b.values.append(bad)
    b.nodes.append(Step("cross_entropy", (logits, len(b.nodes) - 1), {}))


def _cross_entropy_float_targets(b):
    b.nodes.append(Step("cross_entropy", (b.leaf((3, 4)), b.leaf((3,), False)), {}))


def _rmsnorm_weight_mismatch(b):
    b.nodes.append(Step("rmsnorm", (b.leaf((2, 3)), b.leaf((4,))), {}))


def _softmax_axis_out_of_range(b):
    b.nodes.append(Step(b.draw(st.sampled_from(["softmax", "log_softmax"])), (b.leaf((2, 3)),),
                        {"axis": b.draw(st.sampled_from([2, -3]))}))


MISUSES = {
    "mse_column_vs_flat": _mse_column_vs_flat, "matmul_inner_mismatch": _matmul_inner_mismatch,
    "reshape_wrong_size": _reshape_wrong_size, "transpose_bad_axes": _transpose_bad_axes,
    "sum_axis_out_of_range": _sum_axis_out_of_range, "getitem_out_of_range": _getitem_out_of_range,
    "broadcast_incompatible": _broadcast_incompatible, "add_not_broadcastable": _add_not_broadcastable,
    "cross_entropy_bad_target": _cross_entropy_bad_target,
    "cross_entropy_float_targets": _cross_entropy_float_targets,
    "rmsnorm_weight_mismatch": _rmsnorm_weight_mismatch,
    "softmax_axis_out_of_range": _softmax_axis_out_of_range,
}
