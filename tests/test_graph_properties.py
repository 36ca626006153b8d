"""Property tests on random DAGs: every backward order (topo, pending, and the
slot tape of minigrad.tape) agrees with the others and with central differences,
including fan-out, diamonds, shared subexpressions and dead branches (consumers
that are never backpropagated)."""
import math
import random
from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import minigrad as mg
from minigrad.tape import Tape, TensorTape

# --------------------------------------------------------------------------
# the recipe: leaves, then ops on EARLIER nodes, then the nodes summed as loss
# --------------------------------------------------------------------------
LEAF_BOUND = 2.0
MAX_BOUND = 50.0  # keep every node's |value| below this so nothing overflows

# name -> (arity, function, bound of the result given the bounds of the inputs)
OPS = {
    "add": (2, lambda a, b: a + b, lambda ba, bb: ba + bb),
    "sub": (2, lambda a, b: a - b, lambda ba, bb: ba + bb),
    "mul": (2, lambda a, b: a * b, lambda ba, bb: ba * bb),
    "mg.mul": (2, lambda a, b: mg.mul(a, b), lambda ba, bb: ba * bb),
    "tanh": (1, lambda a: a.tanh(), lambda ba: 1.0),
    "sigmoid": (1, lambda a: a.sigmoid(), lambda ba: 1.0),
    "exp_tanh": (1, lambda a: a.tanh().exp(), lambda ba: math.e),
    "neg": (1, lambda a: -a, lambda ba: ba),
    "diamond_x_plus_x": (1, lambda a: a + a, lambda ba: 2 * ba),
    "scale_half": (1, lambda a: a * 0.5, lambda ba: 0.5 * ba),
    "one_minus": (1, lambda a: 1.0 - a, lambda ba: 1.0 + ba),
}


class Recipe(NamedTuple):
    shape: tuple
    leaves: tuple            # float64 arrays
    steps: tuple             # (op name, input node indices)
    outputs: tuple           # node indices summed into the loss


@st.composite
def recipes(draw):
    shape = draw(st.sampled_from([(3,), (2, 3)]))
    n_leaves = draw(st.integers(1, 3))
    elements = st.floats(-LEAF_BOUND, LEAF_BOUND, allow_nan=False, allow_subnormal=False)
    leaves = tuple(draw(arrays(np.float64, shape, elements=elements)) for _ in range(n_leaves))
    bounds = [LEAF_BOUND] * n_leaves
    steps = []
    for _ in range(draw(st.integers(1, 12))):
        n = len(bounds)
        a, b = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        allowed = [name for name, (arity, _, bound) in OPS.items()
                   if (bound(bounds[a]) if arity == 1 else bound(bounds[a], bounds[b])) <= MAX_BOUND]
        name = draw(st.sampled_from(allowed))
        arity, _, bound = OPS[name]
        inputs = (a,) if arity == 1 else (a, b)
        steps.append((name, inputs))
        bounds.append(bound(*(bounds[i] for i in inputs)))
    n_nodes = len(bounds)
    outputs = draw(st.lists(st.integers(0, n_nodes - 1), min_size=1, max_size=3))
    return Recipe(shape, leaves, tuple(steps), tuple(outputs))


def build_on(recipe, leaves):
    """Run the recipe's ops on the given leaf Variables; returns (all nodes, loss)."""
    nodes = list(leaves)
    for name, inputs in recipe.steps:
        nodes.append(OPS[name][1](*(nodes[i] for i in inputs)))
    total = nodes[recipe.outputs[0]]
    for i in recipe.outputs[1:]:
        total = total + nodes[i]
    return nodes, total.sum()


def build(recipe, leaf_arrays, requires_grad=True):
    """Build the graph afresh on new leaves; returns (leaf Variables, all nodes, loss)."""
    leaves = [mg.create_leaf(a.copy(), requires_grad=requires_grad) for a in leaf_arrays]
    return (leaves, *build_on(recipe, leaves))


def reachable_leaves(recipe):
    """Indices of leaves that the loss depends on (by graph structure)."""
    n_leaves = len(recipe.leaves)
    seen, todo = set(), list(recipe.outputs)
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        if i >= n_leaves:
            todo.extend(recipe.steps[i - n_leaves][1])
    return {i for i in seen if i < n_leaves}


def grads_with(recipe, run_backward):
    leaves, _, loss = build(recipe, recipe.leaves)
    run_backward(loss)
    return [leaf.grad for leaf in leaves]


def numeric_grads(recipe, eps=1e-6):
    def f(arrs):
        return build(recipe, arrs, requires_grad=False)[2].item()

    grads = []
    for k, a in enumerate(recipe.leaves):
        g = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            plus = [x.copy() for x in recipe.leaves]
            minus = [x.copy() for x in recipe.leaves]
            plus[k][idx] += eps
            minus[k][idx] -= eps
            g[idx] = (f(plus) - f(minus)) / (2 * eps)
        grads.append(g)
    return grads


def as_array(grad, shape):
    return np.zeros(shape) if grad is None else grad


def grad_mismatches(got, want, rtol, atol, label):
    return [f"{label}: leaf {k}: {g} vs {w}"
            for k, (g, w) in enumerate(zip(got, want)) if not np.allclose(g, w, rtol=rtol, atol=atol)]


SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(recipes())
def test_all_backward_orders_agree_with_central_differences(recipe):
    reachable = reachable_leaves(recipe)
    runs = {
        "topo": lambda loss: mg.backward(loss, order="topo"),
        "pending": lambda loss: mg.backward(loss, order="pending"),
        "method-default": lambda loss: loss.backward(),
    }
    for seed in (0, 1, 12345):
        runs[f"pending-shuffle-{seed}"] = lambda loss, s=seed: mg.backward(loss, order="pending", shuffle=s)
    runs["pending-shuffle-Random"] = lambda loss: mg.backward(loss, order="pending", shuffle=random.Random(3))

    want = numeric_grads(recipe)
    results, problems = {}, []
    for label, run in runs.items():
        grads = grads_with(recipe, run)
        for k, g in enumerate(grads):
            if k in reachable:
                assert g is not None, f"{label}: reachable leaf {k} has no grad"
                assert g.shape == recipe.shape and g.dtype == np.float64
        results[label] = [as_array(g, recipe.shape) for g in grads]
        problems += grad_mismatches(results[label], want, rtol=1e-5, atol=1e-6, label=f"{label} vs numeric")

    for label, grads in results.items():
        problems += grad_mismatches(grads, results["pending"], rtol=1e-9, atol=1e-12,
                                    label=f"{label} vs pending")
    assert not problems, "\n".join(problems)


@SETTINGS
@given(recipes(), st.sampled_from([("topo", None), ("pending", None), ("pending", 0), ("pending", 7)]))
def test_consuming_backward_steps_equals_backward(recipe, order_and_shuffle):
    order, shuffle = order_and_shuffle
    want = grads_with(recipe, lambda loss: mg.backward(loss, order=order, shuffle=shuffle))

    steps = []
    got = grads_with(recipe, lambda loss: steps.extend(mg.backward_steps(loss, order=order, shuffle=shuffle)))

    for g, w in zip(got, want):
        assert (g is None) == (w is None)
        if g is not None:
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=0)
    kinds = [s.kind for s in steps]
    assert set(kinds) <= {"start", "apply", "accumulate", "pending", "ready", "done"}
    assert kinds[0] == "start" and kinds[-1] == "done"


@settings(max_examples=100, deadline=None)
@given(recipes())
def test_leaf_grads_accumulate_across_two_graphs(recipe):
    once = grads_with(recipe, lambda loss: loss.backward())

    leaves = [mg.create_leaf(a.copy(), requires_grad=True) for a in recipe.leaves]
    for _ in range(2):
        build_on(recipe, leaves)[1].backward()

    for leaf, g in zip(leaves, once):
        if g is None:
            assert leaf.grad is None
        else:
            np.testing.assert_allclose(leaf.grad, 2 * g, rtol=1e-12, atol=1e-15)


# --------------------------------------------------------------------------
# the slot tape (minigrad.tape) on the same recipes: topo = pending = tape
# --------------------------------------------------------------------------
# the recipe's ops written with tape slots (the tape has no sigmoid: 1 / (1 + e^-a))
TAPE_OPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "mg.mul": lambda a, b: a.tape.mul(a, b),
    "tanh": lambda a: a.tanh(),
    "sigmoid": lambda a: 1.0 / (1.0 + (-a).exp()),
    "exp_tanh": lambda a: a.tanh().exp(),
    "neg": lambda a: -a,
    "diamond_x_plus_x": lambda a: a + a,
    "scale_half": lambda a: a * 0.5,
    "one_minus": lambda a: 1.0 - a,
}


def tape_loss(recipe, leaves):
    nodes = list(leaves)
    for name, inputs in recipe.steps:
        nodes.append(TAPE_OPS[name](*(nodes[i] for i in inputs)))
    total = nodes[recipe.outputs[0]]
    for i in recipe.outputs[1:]:
        total = total + nodes[i]
    return total


def tensor_tape_grads(recipe):
    """TensorTape: arrays in the slots; backward of the array loss differentiates its sum."""
    tape = TensorTape()
    leaves = [tape.var(a.copy()) for a in recipe.leaves]
    tape.backward(tape_loss(recipe, leaves))
    # use counts gave back every value that was read, and every temp's grad: the pool holds
    # the vars, their grads and the consts no instruction read, nothing else
    uses = tape.use_counts()
    kept = [i for i, v in enumerate(tape.values) if v is not None]
    assert all(tape.kinds[i] == "var" or uses[i] == 0 for i in kept)
    assert all(tape.kinds[i] == "var" for i in tape._grad_blocks)
    live = {id(block) for block in tape.pool.blocks if block.alive}
    assert live == {id(tape._blocks[i]) for i in kept} | {id(b) for b in tape._grad_blocks.values()}
    return [leaf.grad for leaf in leaves]


def scalar_tape_grads(recipe, plain):
    """The scalar Tape, once per element (every op of the recipe is elementwise)."""
    grads = [np.zeros(recipe.shape) for _ in recipe.leaves]
    reached = [False] * len(recipe.leaves)
    tape = Tape()
    for idx in np.ndindex(recipe.shape):
        tape.reset()
        leaves = [tape.var(float(a[idx])) for a in recipe.leaves]
        tape.backward(tape_loss(recipe, leaves), plain=plain)
        for k, leaf in enumerate(leaves):
            if leaf.grad is not None:
                grads[k][idx], reached[k] = leaf.grad, True
    return [g if r else None for g, r in zip(grads, reached)]


@SETTINGS
@given(recipes())
def test_tape_agrees_with_topo_and_pending_and_central_differences(recipe):
    want = numeric_grads(recipe)
    topo = grads_with(recipe, lambda loss: mg.backward(loss, order="topo"))
    pending = grads_with(recipe, lambda loss: mg.backward(loss, order="pending"))
    runs = {"topo": topo, "tensor-tape": tensor_tape_grads(recipe),
            "tape": scalar_tape_grads(recipe, plain=False),
            "tape-plain": scalar_tape_grads(recipe, plain=True)}
    problems = []
    for label, grads in runs.items():
        # the same leaves are reached (a leaf cut off from the loss gets no grad)
        assert [g is None for g in grads] == [g is None for g in pending], label
        grads = [as_array(g, recipe.shape) for g in grads]
        problems += grad_mismatches(grads, want, rtol=1e-5, atol=1e-6, label=f"{label} vs numeric")
        problems += grad_mismatches(grads, [as_array(g, recipe.shape) for g in pending],
                                    rtol=1e-9, atol=1e-12, label=f"{label} vs pending")
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------
# explicit structural cases
# --------------------------------------------------------------------------
@pytest.mark.parametrize("order", ["pending", "topo"])
def test_dead_branch_consumer_does_not_block_backward(order):
    xv, wv = np.array([1.0, -2.0, 3.0]), np.array([0.5, 4.0, -1.5])
    x = mg.create_leaf(xv, requires_grad=True)
    w = mg.create_leaf(wv, requires_grad=True)
    h = x * w
    loss = h.sum()
    other = (h * 3).mean()  # consumer of h that is never backpropagated
    mg.backward(loss, order=order)
    np.testing.assert_allclose(x.grad, wv)
    np.testing.assert_allclose(w.grad, xv)
    assert other.data == pytest.approx(np.mean(xv * wv * 3))


def test_dead_branch_node_is_applied_once_and_unused_consumer_never():
    x = mg.create_leaf(np.array([1.0, -2.0, 3.0]), requires_grad=True)
    w = mg.create_leaf(np.array([0.5, 4.0, -1.5]), requires_grad=True)
    h = x * w
    loss = h.sum()
    unused = h * 3
    other = unused.mean()
    applied = [s.node for s in mg.backward_steps(loss, order="pending") if s.kind == "apply"]
    assert sum(node is h.grad_fn for node in applied) == 1
    assert not any(node is unused.grad_fn or node is other.grad_fn for node in applied)
    np.testing.assert_allclose(x.grad, w.data)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_dead_branch_with_shuffled_pending_order(seed):
    xv, wv = np.array([[1.0, -2.0, 3.0]]), np.array([[0.5], [4.0]])
    x = mg.create_leaf(xv, requires_grad=True)
    w = mg.create_leaf(wv, requires_grad=True)
    h = (x * w).tanh()             # (2, 3), consumed three times below
    loss = (h * h + h).sum()       # diamond through h
    _unused = (h * 3).mean() + h.sum()
    mg.backward(loss, order="pending", shuffle=seed)
    t = np.tanh(xv * wv)
    dh = (2 * t + 1) * (1 - t ** 2)
    np.testing.assert_allclose(x.grad, (dh * wv).sum(axis=0, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(w.grad, (dh * xv).sum(axis=1, keepdims=True), rtol=1e-12)


@pytest.mark.parametrize("order", ["pending", "topo"])
def test_node_reached_by_paths_of_different_length(order):
    # h feeds the loss directly and through g = x + h: h must run after g sent its grad.
    x = mg.create_leaf(np.zeros(3), requires_grad=True)
    h = x * 2.0
    g = x + h
    mg.backward((h + g).sum(), order=order)   # loss = sum(5x)
    np.testing.assert_array_equal(x.grad, [5.0, 5.0, 5.0])


def test_diamond_x_plus_x_gives_gradient_two():
    x = mg.create_leaf(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    (x + x).sum().backward(order="pending")
    np.testing.assert_array_equal(x.grad, [2.0, 2.0, 2.0])


def test_second_backward_through_consumed_graph_raises():
    x = mg.create_leaf(np.array([1.0, 2.0]), requires_grad=True)
    loss = (x * x).sum()
    loss.backward()
    with pytest.raises(mg.errors.BackwardError):
        loss.backward()


# --------------------------------------------------------------------------
# ahead-of-time: the same random graphs captured, derived and executed
# --------------------------------------------------------------------------
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recipes())
def test_aot_equals_eager_topo_and_pending(recipe):
    from minigrad import aot

    inputs = [mg.create_leaf(a.copy(), requires_grad=True, name=f"leaf{k}")
              for k, a in enumerate(recipe.leaves)]
    forward = aot.capture(lambda *leaves: build_on(recipe, leaves)[1], *inputs)
    backward = aot.derive_backward_graph(forward)
    executor = aot.Executor(forward, backward, None, *recipe.leaves)
    loss = float(executor.run(*recipe.leaves))
    grads = executor.grads()
    got = [grads.get(f"d_leaf{k}", np.zeros(recipe.shape)) for k in range(len(recipe.leaves))]
    topo = [as_array(g, recipe.shape) for g in grads_with(recipe, lambda l: mg.backward(l, order="topo"))]
    pending = [as_array(g, recipe.shape) for g in grads_with(recipe, lambda l: mg.backward(l, order="pending"))]
    assert loss == pytest.approx(build(recipe, recipe.leaves, requires_grad=False)[2].item(), rel=1e-12)
    problems = (grad_mismatches(got, topo, rtol=1e-9, atol=1e-12, label="aot vs topo")
                + grad_mismatches(got, pending, rtol=1e-9, atol=1e-12, label="aot vs pending"))
    assert not problems, "\n".join(problems) + "\n" + forward.text() + "\n" + backward.text()
    reachable = reachable_leaves(recipe)
    assert {f"d_leaf{k}" for k in reachable} == set(backward.outputs)


# the ops of the aot rules (shape (2, 3) throughout), each with a bound on its result
AOT_OPS = {
    "add": (2, lambda a, b: a + b, lambda ba, bb: ba + bb),
    "sub": (2, lambda a, b: a - b, lambda ba, bb: ba + bb),
    "mul": (2, lambda a, b: a * b, lambda ba, bb: ba * bb),
    "div": (2, lambda a, b: a / (b * b + 1.0), lambda ba, bb: ba),
    "bias_add": (2, lambda a, b: a + b.sum(axis=0), lambda ba, bb: ba + 2 * bb),
    "matmul_t": (2, lambda a, b: (a @ b.T) @ a * 0.1, lambda ba, bb: 0.1 * 9 * ba * ba * bb),
    "relu": (1, lambda a: a.relu(), lambda ba: ba),
    "tanh": (1, lambda a: a.tanh(), lambda ba: 1.0),
    "sigmoid": (1, lambda a: a.sigmoid(), lambda ba: 1.0),
    "silu": (1, lambda a: mg.silu(a), lambda ba: ba),
    "gelu": (1, lambda a: mg.gelu(a), lambda ba: ba),
    "softmax": (1, lambda a: mg.softmax(a), lambda ba: 1.0),
    "center": (1, lambda a: a - a.mean(axis=1, keepdims=True), lambda ba: 2 * ba),
    "colsum": (1, lambda a: a * a.sum(axis=0) * 0.2, lambda ba: 0.4 * ba * ba),
    "reshape": (1, lambda a: a.reshape(3, 2).tanh().reshape(2, 3), lambda ba: 1.0),
    "pow": (1, lambda a: a ** 2, lambda ba: ba * ba),
}


@st.composite
def aot_recipes(draw):
    elements = st.floats(-LEAF_BOUND, LEAF_BOUND, allow_nan=False, allow_subnormal=False)
    leaves = tuple(draw(arrays(np.float64, (2, 3), elements=elements))
                   for _ in range(draw(st.integers(1, 3))))
    bounds, steps = [LEAF_BOUND] * len(leaves), []
    for _ in range(draw(st.integers(1, 10))):
        a, b = (draw(st.integers(0, len(bounds) - 1)) for _ in range(2))
        allowed = [name for name, (arity, _, bound) in AOT_OPS.items()
                   if (bound(bounds[a]) if arity == 1 else bound(bounds[a], bounds[b])) <= MAX_BOUND]
        name = draw(st.sampled_from(allowed))
        inputs = (a,) if AOT_OPS[name][0] == 1 else (a, b)
        steps.append((name, inputs))
        bounds.append(AOT_OPS[name][2](*(bounds[i] for i in inputs)))
    outputs = draw(st.lists(st.integers(0, len(bounds) - 1), min_size=1, max_size=3))
    return Recipe((2, 3), leaves, tuple(steps), tuple(outputs))


def run_aot_ops(recipe, leaves):
    nodes = list(leaves)
    for name, inputs in recipe.steps:
        nodes.append(AOT_OPS[name][1](*(nodes[i] for i in inputs)))
    return sum((nodes[i] for i in recipe.outputs[1:]), nodes[recipe.outputs[0]]).mean()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(aot_recipes())
def test_aot_equals_eager_on_graphs_of_the_rule_ops(recipe):
    from minigrad import aot

    def eager(order):
        leaves = [mg.create_leaf(a.copy(), requires_grad=True) for a in recipe.leaves]
        mg.backward(run_aot_ops(recipe, leaves), order=order)
        return [as_array(v.grad, (2, 3)) for v in leaves]

    inputs = [mg.create_leaf(a.copy(), requires_grad=True, name=f"leaf{k}")
              for k, a in enumerate(recipe.leaves)]
    forward = aot.capture(lambda *leaves: run_aot_ops(recipe, leaves), *inputs)
    executor = aot.Executor(forward, aot.derive_backward_graph(forward), None, *recipe.leaves)
    executor.run(*recipe.leaves)
    got = [executor.grads().get(f"d_leaf{k}", np.zeros((2, 3))) for k in range(len(recipe.leaves))]
    problems = (grad_mismatches(got, eager("topo"), rtol=1e-9, atol=1e-12, label="aot vs topo")
                + grad_mismatches(got, eager("pending"), rtol=1e-9, atol=1e-12, label="aot vs pending"))
    assert not problems, "\n".join(problems) + "\n" + forward.text()
