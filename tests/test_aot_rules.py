"""Every backward rule of minigrad.aot: executor gradients = eager (pending and topo) = central
differences, in float64. Each case names the IR op types it must exercise, so a capture that
translated to something else would fail instead of passing silently."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import aot
from minigrad.aot import Graph, Operation, TensorInfo

from aot_helpers import aot_grads, central_differences, eager_grads, run_graphs

RNG = np.random.default_rng(0)


def normal(*shape):
    return RNG.normal(size=shape)


def away_from_zero(*shape):
    v = RNG.uniform(0.3, 1.5, size=shape)
    return v * RNG.choice([-1.0, 1.0], size=shape)


W3 = normal(3, 4)          # fixed weights that turn an output into a scalar loss
TARGETS = np.array([0, 3, 1])

CASES = [
    ("matmul", lambda a, b: (a @ b).tanh().sum(), [normal(3, 4), normal(4, 2)]),
    ("linear", lambda x, w, b: mg.linear(x, w, b).tanh().sum(), [normal(3, 4), normal(4, 2), normal(2)]),
    ("bias_add", lambda x, b: ((x + b) * W3).sum(), [normal(3, 4), normal(4)]),
    ("add", lambda a, b: ((a + b) * W3).sum(), [normal(3, 4), normal(3, 4)]),
    ("add", lambda a, b: ((a + b) * W3).sum(), [normal(3, 4), normal(3, 1)]),   # broadcast
    ("sub", lambda a, b: ((a - b) * W3).sum(), [normal(3, 4), normal(1, 4)]),
    ("mul", lambda a, b: (a * b * W3).sum(), [normal(3, 4), normal(3, 4)]),
    ("mul", lambda a, b: (a * b).sum(), [normal(3, 4), normal(3, 1)]),     # broadcast
    ("div", lambda a, b: (a / b).sum(), [normal(3, 4), away_from_zero(3, 4)]),
    ("neg", lambda a: ((-a) * W3).sum(), [normal(3, 4)]),
    ("pow", lambda a: (a ** 3).sum(), [normal(3, 4)]),
    ("exp", lambda a: a.exp().sum(), [normal(3, 4)]),
    ("log", lambda a: (a * a + 1.0).log().sum(), [normal(3, 4)]),
    ("tanh", lambda a: (a.tanh() * W3).sum(), [normal(3, 4)]),
    ("sigmoid", lambda a: (a.sigmoid() * W3).sum(), [normal(3, 4)]),
    ("relu", lambda a: (a.relu() * W3).sum(), [away_from_zero(3, 4)]),
    ("silu", lambda a: (mg.silu(a) * W3).sum(), [normal(3, 4)]),
    ("gelu", lambda a: (mg.gelu(a) * W3).sum(), [normal(3, 4)]),
    ("softmax", lambda a: (mg.softmax(a, axis=-1) * W3).sum(), [normal(3, 4)]),
    ("softmax", lambda a: (mg.softmax(a, axis=0) * W3).sum(), [normal(3, 4)]),
    ("log_softmax", lambda a: (mg.log_softmax(a) * W3).sum(), [normal(3, 4)]),
    ("reshape", lambda a: (a.reshape(4, 3).tanh() * W3.reshape(4, 3)).sum(), [normal(3, 4)]),
    ("transpose", lambda a: (a.T.tanh() * W3.T).sum(), [normal(3, 4)]),
    ("sum", lambda a: (a.sum(axis=0) * W3[0]).tanh().sum(), [normal(3, 4)]),
    ("sum", lambda a: (a.sum(axis=1, keepdims=True) * W3).sum(), [normal(3, 4)]),
    ("mean", lambda a: (a.mean(axis=1) * W3[:, 0]).sum(), [normal(3, 4)]),
    ("mean", lambda a: a.tanh().mean(), [normal(3, 4)]),
    ("cross_entropy", lambda a: mg.cross_entropy(a, TARGETS), [normal(3, 5)]),
    ("mse", lambda p, t: mg.mse(p.tanh(), t), [normal(3, 4), normal(3, 4)]),
    ("broadcast_to", lambda a: (mg.broadcast_to(a, (3, 4)) * W3).sum(), [normal(4)]),
    ("broadcast_to", lambda a: (mg.broadcast_to(a, (3, 4)).tanh() * W3).sum(), [normal(3, 1)]),
]


@pytest.mark.parametrize("op_type, fn, arrays", CASES, ids=[c[0] for c in CASES])
def test_rule_matches_eager_and_central_differences(op_type, fn, arrays):
    loss, got, forward, backward = aot_grads(fn, arrays)
    assert op_type in [op.type for op in forward.operations], forward.text()
    want_loss, pending = eager_grads(fn, arrays, "pending")
    _, topo = eager_grads(fn, arrays, "topo")
    numeric = central_differences(fn, arrays)
    assert loss == pytest.approx(want_loss, rel=1e-12, abs=1e-12)
    for g, p, t, n in zip(got, pending, topo, numeric):
        np.testing.assert_allclose(g, p, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(g, t, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(g, n, rtol=1e-5, atol=1e-7)


def hand_graph(operations, shapes, loss="loss"):
    """A forward Graph written by hand: inputs a, b; ops as (type, inputs, output, attrs)."""
    graph = Graph(inputs=[n for n in ("a", "b") if n in shapes], name="forward")
    for name, shape in shapes.items():
        graph.shape_env[name] = TensorInfo(shape, np.dtype(np.float64))
    for i, (type_, inputs, output, attrs) in enumerate(operations):
        graph.operations.append(Operation(f"{type_}_{i}", type_, tuple(inputs), (output,), attrs))
    graph.outputs = [loss]
    return graph


@pytest.mark.parametrize("transpose, shape_a, shape_b, eager", [
    ("NN", (3, 4), (4, 2), lambda a, b: a @ b),
    ("NT", (3, 4), (2, 4), lambda a, b: a @ b.T),
    ("TN", (4, 3), (4, 2), lambda a, b: a.T @ b),
    ("TT", (4, 3), (2, 4), lambda a, b: a.T @ b.T),
])
def test_matmul_transpose_attrs(transpose, shape_a, shape_b, eager):
    arrays = [normal(*shape_a), normal(*shape_b)]
    forward = hand_graph([("matmul", ["a", "b"], "c", {"transpose": transpose}),
                          ("tanh", ["c"], "t", {}), ("sum", ["t"], "loss", {})],
                         {"a": shape_a, "b": shape_b, "c": (3, 2), "t": (3, 2), "loss": ()})
    backward = aot.derive_backward_graph(forward)
    loss, got, _, _ = run_graphs(forward, backward, arrays)
    fn = lambda a, b: eager(a, b).tanh().sum()   # noqa: E731
    want_loss, want = eager_grads(fn, arrays)
    assert loss == pytest.approx(want_loss, rel=1e-12)
    for g, w, n in zip(got, want, central_differences(fn, arrays)):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(g, n, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("op_type", ["identity", "copy"])
def test_identity_and_copy_pass_the_gradient_through(op_type):
    arrays = [normal(3, 4)]
    forward = hand_graph([(op_type, ["a"], "c", {}), ("mul", ["c", "c"], "m", {}),
                          ("sum", ["m"], "loss", {})], {"a": (3, 4), "c": (3, 4), "m": (3, 4), "loss": ()})
    backward = aot.derive_backward_graph(forward)
    assert op_type in [op.type for op in forward.operations]
    fn = lambda a: (a * a).sum()   # noqa: E731
    loss, got, _, _ = run_graphs(forward, backward, arrays)
    assert loss == pytest.approx(eager_grads(fn, arrays)[0], rel=1e-12)
    np.testing.assert_allclose(got[0], eager_grads(fn, arrays)[1][0], rtol=1e-12)
    np.testing.assert_allclose(got[0], central_differences(fn, arrays)[0], rtol=1e-5, atol=1e-7)


def test_zeros_is_a_constant_with_no_gradient_path():
    arrays = [normal(3, 4)]
    forward = hand_graph([("zeros", [], "z", {"shape": (3, 4), "dtype": "float64"}),
                          ("add", ["a", "z"], "s", {}), ("tanh", ["s"], "t", {}), ("sum", ["t"], "loss", {})],
                         {"a": (3, 4), "z": (3, 4), "s": (3, 4), "t": (3, 4), "loss": ()})
    backward, steps = aot.derive_backward_graph(forward, steps=True)
    assert not any("d_z" in op.outputs for op in backward.operations)
    fn = lambda a: a.tanh().sum()   # noqa: E731
    loss, got, _, _ = run_graphs(forward, backward, arrays)
    np.testing.assert_allclose(got[0], eager_grads(fn, arrays)[1][0], rtol=1e-12)
    np.testing.assert_allclose(got[0], central_differences(fn, arrays)[0], rtol=1e-5, atol=1e-7)


def test_every_issue_rule_is_registered():
    wanted = ("matmul linear add mul bias_add relu tanh silu gelu softmax reshape "
              "zeros identity copy sum mean cross_entropy").split()
    assert set(wanted) <= set(aot.registry.registered_ops())
    assert all(aot.registry.has_rule(t) for t in wanted)
    assert not aot.registry.has_rule("no_such_op")


@pytest.mark.parametrize("fn", [mg.silu, mg.gelu], ids=["silu", "gelu"])
def test_eager_silu_and_gelu_pass_gradcheck_in_float64(fn):
    assert mg.check.gradcheck(fn, normal(3, 4))


def test_eager_silu_and_gelu_forward_match_their_formulas():
    x = normal(5)
    np.testing.assert_allclose(mg.silu(mg.create_leaf(x)).data, x / (1 + np.exp(-x)), rtol=1e-12)
    c = np.sqrt(2 / np.pi)
    np.testing.assert_allclose(mg.gelu(mg.create_leaf(x)).data,
                               0.5 * x * (1 + np.tanh(c * (x + 0.044715 * x ** 3))), rtol=1e-12)
