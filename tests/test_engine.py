"""The engine: backward orders, step-by-step backward, graph introspection, grad bookkeeping, custom ops."""
import os
import subprocess
import sys

import numpy as np
import pytest

import minigrad as mg
from minigrad import errors

ORDERS = ["topo", "pending"]
CHAIN_LENGTH = 10_000
CHAIN_START = np.array([-1.5, -0.2, 0.3, 2.0])


def leaf(values, requires_grad=False, **kwargs):
    return mg.create_leaf(np.array(values, dtype=np.float64), requires_grad=requires_grad, **kwargs)


def graph_nodes(root):
    """Every grad_fn reachable from root, found by walking Variable.parents (no recursion)."""
    nodes, seen, stack = [], set(), [root]
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if v.grad_fn is not None:
            nodes.append(v.grad_fn)
            stack.extend(v.parents)
    return nodes


# --- deep graphs ------------------------------------------------------------------------------

def build_chain(x, length=CHAIN_LENGTH):
    y = x
    for i in range(length):
        if i % 3 == 0:
            y = y + 0.05
        elif i % 3 == 1:
            y = y * -1.0
        else:
            y = y.tanh()
    return y.sum()


def chain_grad_by_hand(x0, length=CHAIN_LENGTH):
    """d sum(chain(x)) / dx computed with plain numpy: the product of the local derivatives."""
    v, d = x0.copy(), np.ones_like(x0)
    for i in range(length):
        if i % 3 == 0:
            v = v + 0.05
        elif i % 3 == 1:
            v, d = v * -1.0, d * -1.0
        else:
            v = np.tanh(v)
            d = d * (1.0 - v**2)
    return d


@pytest.mark.parametrize("order", ORDERS)
def test_backward_through_10000_op_chain_needs_no_recursion(order):
    x = mg.create_leaf(CHAIN_START, requires_grad=True)
    build_chain(x).backward(order=order)
    np.testing.assert_allclose(x.grad, chain_grad_by_hand(CHAIN_START), rtol=1e-9, atol=0)


def test_topo_and_pending_agree_on_10000_op_chain():
    grads = {}
    for order in ORDERS:
        x = mg.create_leaf(CHAIN_START, requires_grad=True)
        build_chain(x).backward(order=order)
        grads[order] = x.grad
    np.testing.assert_allclose(grads["topo"], grads["pending"], rtol=1e-12, atol=0)


def test_deleting_unbackwarded_10000_op_chain_does_not_crash():
    # In a subprocess: a C-stack overflow while freeing the graph would kill the test runner.
    script = (
        "import gc, numpy as np, minigrad as mg\n"
        "x = mg.create_leaf(np.array([-1.5, -0.2, 0.3, 2.0]), requires_grad=True)\n"
        "y = x\n"
        f"for i in range({CHAIN_LENGTH}):\n"
        "    y = y + 0.05 if i % 3 == 0 else (y * -1.0 if i % 3 == 1 else y.tanh())\n"
        "loss = y.sum()\n"
        "del y, loss\n"
        "gc.collect()\n"
        "x.data[0] = 1.0\n"  # nothing holds x read-only any more
        "print('survived')\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "survived" in result.stdout


# --- backward_steps ---------------------------------------------------------------------------

def small_mlp(seed=0):
    """x -> linear -> relu -> linear -> cross_entropy. Square weights so either weight layout fits."""
    rng = np.random.default_rng(seed)
    x = leaf(rng.normal(size=(4, 3)), name="x")
    w1 = leaf(rng.normal(size=(3, 3)), requires_grad=True, name="w1")
    b1 = leaf(rng.normal(size=3), requires_grad=True, name="b1")
    w2 = leaf(rng.normal(size=(3, 3)), requires_grad=True, name="w2")
    b2 = leaf(rng.normal(size=3), requires_grad=True, name="b2")
    targets = np.array([0, 2, 1, 2])
    loss = mg.cross_entropy(mg.linear(mg.relu(mg.linear(x, w1, b1)), w2, b2), targets)
    return loss, [w1, b1, w2, b2]


def near_and_far_leaves():
    """loss = sum(w_near * chain(w_far * x)): w_far's grad needs every node, w_near's only the last."""
    x = leaf([0.3, -0.7, 1.1])
    w_far = leaf([0.2, 0.4, -0.6], requires_grad=True, name="w_far")
    w_near = leaf([1.5, -0.5, 0.25], requires_grad=True, name="w_near")
    h = w_far * x
    for _ in range(10):
        h = (h * 1.1).tanh()
    loss = (w_near * h).sum()
    return loss, w_near, w_far


@pytest.mark.parametrize("order", ORDERS)
def test_backward_steps_yields_step_namedtuples_from_start_to_done(order):
    loss, _ = small_mlp()
    steps = list(mg.backward_steps(loss, order=order))
    assert all(isinstance(s, mg.Step) for s in steps)
    assert mg.Step._fields == ("kind", "node", "variable", "grad", "pending_count", "first_write",
                              "total")
    assert steps[0].kind == "start"
    assert steps[-1].kind == "done"
    assert [s.kind for s in steps].count("start") == 1
    assert [s.kind for s in steps].count("done") == 1
    assert {s.kind for s in steps} <= {"start", "apply", "accumulate", "pending", "ready", "done"}


@pytest.mark.parametrize("order", ORDERS)
def test_backward_steps_applies_every_node_exactly_once(order):
    loss, _ = small_mlp()
    nodes = graph_nodes(loss)
    applied = [s.node for s in mg.backward_steps(loss, order=order) if s.kind == "apply"]
    assert len(applied) == len(nodes)
    assert sorted(map(id, applied)) == sorted(map(id, nodes))


@pytest.mark.parametrize("order", ORDERS)
def test_stopping_backward_steps_half_way_leaves_some_grads_unwritten(order):
    loss, w_near, w_far = near_and_far_leaves()
    steps = mg.backward_steps(loss, order=order)
    for step in steps:
        assert step.kind != "done", "no leaf gradient was written before 'done'"
        if w_near.grad is not None or w_far.grad is not None:
            break
    written = [w.grad is not None for w in (w_near, w_far)]
    assert written.count(True) == 1 and written.count(False) == 1

    for _ in steps:  # finish the walk
        pass
    reference_loss, ref_near, ref_far = near_and_far_leaves()
    mg.backward(reference_loss, order=order)
    np.testing.assert_allclose(w_near.grad, ref_near.grad, rtol=1e-12)
    np.testing.assert_allclose(w_far.grad, ref_far.grad, rtol=1e-12)


@pytest.mark.parametrize("order", ORDERS)
def test_finished_backward_steps_gives_same_grads_as_backward(order):
    loss, params = small_mlp()
    for _ in mg.backward_steps(loss, order=order):
        pass
    ref_loss, ref_params = small_mlp()
    ref_loss.backward(order=order)
    for p, ref in zip(params, ref_params):
        np.testing.assert_allclose(p.grad, ref.grad, rtol=1e-12)


def test_pending_events_count_down_to_zero():
    x = leaf([1.0, 2.0])
    w = leaf([3.0, -1.0], requires_grad=True)
    h = x * w
    a = h + 1.0
    b = h * 2.0
    loss = (a + b).sum()
    initial = {id(n): n.pending_count for n in graph_nodes(loss)}
    counts = {}
    for s in mg.backward_steps(loss, order="pending"):
        if s.kind == "pending":
            counts.setdefault(id(s.node), []).append(s.pending_count)
    assert counts[id(h.grad_fn)] == [1, 0]
    for node_id, consumers in initial.items():
        assert counts.get(node_id, []) == list(range(consumers - 1, -1, -1))


def test_accumulate_events_flag_first_write_into_a_leaf():
    x = leaf([2.0, -3.0])
    w = leaf([0.5, 1.5], requires_grad=True)
    loss = (w * x + w).sum()
    writes = [s for s in mg.backward_steps(loss) if s.kind == "accumulate" and s.variable is w]
    assert [s.first_write for s in writes] == [True, False]
    np.testing.assert_allclose(sum(s.grad for s in writes), w.grad)
    np.testing.assert_allclose(w.grad, [3.0, -2.0])


# --- orders agree -----------------------------------------------------------------------------

def test_topo_and_pending_give_identical_grads_on_small_mlp():
    loss_topo, params_topo = small_mlp()
    loss_topo.backward(order="topo")
    loss_pending, params_pending = small_mlp()
    mg.backward(loss_pending, order="pending")
    for p_topo, p_pending in zip(params_topo, params_pending):
        assert p_topo.grad is not None
        np.testing.assert_allclose(p_topo.grad, p_pending.grad, rtol=1e-12, atol=1e-15)


def test_small_mlp_gradient_passes_gradcheck():
    rng = np.random.default_rng(1)
    x = leaf(rng.normal(size=(4, 3)))
    w1 = leaf(rng.normal(size=(3, 3)), requires_grad=True)
    w2 = leaf(rng.normal(size=(3, 3)), requires_grad=True)
    targets = np.array([0, 2, 1, 2])

    def loss_fn(a, b):
        return mg.cross_entropy(mg.linear(mg.relu(mg.linear(x, a)), b), targets)

    assert mg.check.gradcheck(loss_fn, w1, w2) is True


# --- graph introspection ----------------------------------------------------------------------

def test_pending_count_equals_consumers_after_forward_and_zero_after_backward():
    x = leaf([1.0, 2.0])
    w = leaf([3.0, -1.0], requires_grad=True)
    h = x * w
    a = h + 1.0
    b = h * 2.0
    loss = (a + b).sum()
    assert h.grad_fn.pending_count == 2
    assert a.grad_fn.pending_count == 1
    assert b.grad_fn.pending_count == 1
    assert loss.grad_fn.pending_count == 0
    nodes = graph_nodes(loss)
    loss.backward()
    assert all(n.pending_count == 0 for n in nodes)
    assert all(n.released for n in nodes)


def test_next_functions_point_to_accumulate_grad_for_parameters_and_none_for_data():
    x = leaf([1.0, 2.0], name="x")
    w = leaf([3.0, 4.0], requires_grad=True, name="w")
    y = x * w
    first, second = y.grad_fn.next_functions
    assert first is None
    assert isinstance(second, mg.AccumulateGrad)
    assert second.variable is w


def test_next_functions_of_chained_op_is_parent_grad_fn():
    x = leaf([1.0, 2.0])
    w = leaf([3.0, 4.0], requires_grad=True)
    y = x * w
    z = y.tanh()
    assert z.grad_fn.next_functions == (y.grad_fn,)
    assert z.grad_fn.name == "tanh"
    assert y.grad_fn.name == "mul"


def test_parents_are_the_input_variables():
    x = leaf([1.0, 2.0])
    w = leaf([3.0, 4.0], requires_grad=True)
    y = x * w
    assert len(y.parents) == 2
    assert y.parents[0] is x and y.parents[1] is w
    assert tuple(y.grad_fn.inputs) == tuple(y.parents)
    assert w.parents == ()
    assert w.is_leaf and not y.is_leaf


def test_saved_tensors_relu_saves_input_matmul_both_add_nothing():
    a = leaf([[1.0, -2.0], [3.0, 0.5]], requires_grad=True)
    b = leaf([[0.5, 1.0], [-1.0, 2.0]], requires_grad=True)

    r = a.relu()
    assert len(r.saved_tensors) == 1
    assert isinstance(r.saved_tensors[0], np.ndarray)
    np.testing.assert_array_equal(r.saved_tensors[0], a.data)

    m = a @ b
    assert len(m.saved_tensors) == 2
    assert all(isinstance(t, np.ndarray) for t in m.saved_tensors)
    np.testing.assert_array_equal(m.saved_tensors[0], a.data)
    np.testing.assert_array_equal(m.saved_tensors[1], b.data)

    s = a + b
    assert s.saved_tensors == ()
    assert m.grad_fn.saved_tensors == m.saved_tensors


# --- grad bookkeeping -------------------------------------------------------------------------

def test_leaf_grads_accumulate_over_two_backwards_until_zero_grad():
    x = leaf([4.0, 5.0, 6.0])
    w = leaf([1.0, 2.0, 3.0], requires_grad=True)
    (w * x).sum().backward()
    (w * x).sum().backward()
    np.testing.assert_allclose(w.grad, [8.0, 10.0, 12.0])

    w.zero_grad()
    assert w.grad is None or np.array_equal(w.grad, np.zeros(3))
    (w * x).sum().backward()
    np.testing.assert_allclose(w.grad, [4.0, 5.0, 6.0])


def test_no_grad_builds_no_graph():
    x = leaf([1.0, 2.0])
    w = leaf([3.0, 4.0], requires_grad=True)
    with mg.no_grad():
        y = (x * w).tanh()
    assert y.grad_fn is None
    assert not y.requires_grad
    assert (x * w).requires_grad  # graph building is back on after the block


@pytest.mark.parametrize(
    "leaf_shape, grad_shape, axes",
    [((3,), (5, 3), (0,)), ((1, 3), (5, 3), (0,)), ((5, 1), (2, 5, 3), (0, 2))],
)
def test_accumulate_grad_reduces_broadcast_gradient_to_leaf_shape(leaf_shape, grad_shape, axes):
    v = mg.create_leaf(np.zeros(leaf_shape), requires_grad=True)
    g = np.random.default_rng(0).normal(size=grad_shape)
    mg.accumulate_grad(v, g)
    assert v.grad.shape == leaf_shape
    expected = g.sum(axis=axes).reshape(leaf_shape)
    np.testing.assert_allclose(v.grad, expected)
    mg.accumulate_grad(v, g)
    np.testing.assert_allclose(v.grad, 2 * expected)


def test_accumulate_grad_casts_to_leaf_dtype():
    v = mg.create_leaf(np.zeros(3, dtype=np.float32), requires_grad=True)
    assert v.dtype == np.float32
    mg.accumulate_grad(v, np.array([0.1, 0.2, 0.3], dtype=np.float64))
    assert v.grad.dtype == np.float32
    np.testing.assert_allclose(v.grad, [0.1, 0.2, 0.3], rtol=1e-6)


def test_float32_leaf_gets_float32_grad_from_backward():
    w = mg.create_leaf(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    (w * 3.0).sum().backward()
    assert w.grad.dtype == np.float32
    np.testing.assert_allclose(w.grad, [3.0, 3.0])


# --- debug mode -------------------------------------------------------------------------------

def test_set_debug_returns_previous_flag():
    original = mg.set_debug(False)
    try:
        assert mg.set_debug(True) is False
        assert mg.set_debug(True) is True
        assert mg.set_debug(False) is True
    finally:
        mg.set_debug(original)


def debug_flag_at_import(env_value):
    env = {k: v for k, v in os.environ.items() if k != "MINIGRAD_DEBUG"}
    if env_value is not None:
        env["MINIGRAD_DEBUG"] = env_value
    script = "import minigrad as mg; print(mg.set_debug(False))"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_minigrad_debug_env_var_turns_debug_on_at_import():
    assert debug_flag_at_import("1") == "True"
    assert debug_flag_at_import(None) == "False"


# --- user-defined ops -------------------------------------------------------------------------

class Cube(mg.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * 3.0 * x**2


class CubeWrong(Cube):
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * 3.0 * x  # should be 3 * x**2


def test_custom_function_forward_and_backward():
    x = leaf([1.0, -2.0, 0.5], requires_grad=True)
    y = Cube.apply(x)
    np.testing.assert_allclose(y.data, [1.0, -8.0, 0.125])
    assert y.grad_fn is not None and y.requires_grad
    y.sum().backward()
    np.testing.assert_allclose(x.grad, [3.0, 12.0, 0.75])


def test_custom_function_passes_gradcheck():
    x = leaf([1.0, -2.0, 0.5], requires_grad=True)
    assert mg.check.gradcheck(lambda v: Cube.apply(v).sum(), x) is True


def test_wrong_custom_function_fails_gradcheck():
    x = leaf([1.0, -2.0, 0.5], requires_grad=True)
    with pytest.raises(errors.GradcheckError):
        mg.check.gradcheck(lambda v: CubeWrong.apply(v).sum(), x)


def test_custom_function_sees_which_inputs_need_grad():
    seen = []

    class Mul(mg.Function):
        @staticmethod
        def forward(ctx, a, b):
            seen.append(tuple(ctx.needs_input_grad))
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, grad_output):
            a, b = ctx.saved_tensors
            return grad_output * b, grad_output * a

    a = leaf([1.0, 2.0])
    b = leaf([3.0, 4.0], requires_grad=True)
    Mul.apply(a, b).sum().backward()
    assert seen == [(False, True)]
    np.testing.assert_allclose(b.grad, [1.0, 2.0])


# --- repr -------------------------------------------------------------------------------------

def test_repr_shows_name_or_op_and_shape():
    w = mg.create_leaf(np.zeros((2, 3)), requires_grad=True, name="weights")
    assert "weights" in repr(w)
    assert "(2, 3)" in repr(w)
    y = w * 2.0
    assert "mul" in repr(y)
    assert "(2, 3)" in repr(y)


@pytest.mark.parametrize("order", ORDERS)
def test_each_write_into_a_node_is_followed_by_its_pending_count_then_ready(order):
    loss, _ = small_mlp()
    for group in mg.backward_groups(loss, order=order):
        assert all(type(s) is mg.Step for s in group)
        for i, s in enumerate(group):
            if s.kind != "accumulate":
                continue
            assert s.pending_count is None
            if s.variable.grad_fn is None:       # a leaf: nothing counts down
                assert i + 1 == len(group) or group[i + 1].kind == "accumulate"
                continue
            pending = group[i + 1]
            assert (pending.kind, pending.node, pending.variable) == \
                ("pending", s.variable.grad_fn, s.variable)
            after = group[i + 2] if i + 2 < len(group) else None
            if pending.pending_count == 0:
                assert (after.kind, after.node, after.pending_count) == ("ready", pending.node, 0)
            else:
                assert after is None or after.kind == "accumulate"


def test_pending_scheduler_looks_for_a_waiting_node_only_when_one_waits(monkeypatch):
    # Counting what has run against what was reached tells the scheduler, in O(1), that nothing
    # waits; the waiting heap (engine._Waiting) is consulted only on a real stall.
    from minigrad.eager import engine
    calls = []
    newest = engine._Waiting.newest
    monkeypatch.setattr(engine._Waiting, "newest", lambda self: calls.append(1) or newest(self))
    x = mg.create_leaf(np.array([0.5, -1.0]), requires_grad=True)
    h = x
    for _ in range(50):
        h = (h * 1.5).tanh()
    h.sum().backward()
    assert calls == []
    x.grad = None
    y = x * 2.0
    unused = y.exp()                   # a consumer of y that the loss does not use
    (y * 3.0).sum().backward()
    assert len(calls) == 1
    np.testing.assert_allclose(x.grad, [6.0, 6.0])
    del unused
