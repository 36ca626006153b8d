"""Higher-order gradients: mg.grad, create_graph, and second derivatives checked by central
differences of the first gradient (gradgradcheck), in float64."""
import numpy as np
import pytest

import minigrad as mg
from minigrad.check import gradgradcheck
from minigrad.errors import BackwardError, GradcheckError, ShapeError

rng = np.random.default_rng(7)


def _r(*shape):
    return rng.standard_normal(shape)


def _pos(*shape):
    return rng.uniform(0.5, 2.0, shape)


TARGETS = np.array([2, 0, 1])

# (name, fn, inputs): every op that has a differentiable backward, with broadcasting where the
# op broadcasts, so the recorded sum back to an input's shape is checked too.
CASES = [
    ("add", lambda a, b: a + b, [_r(3, 4), _r(4)]),
    ("sub", lambda a, b: a - b, [_r(3, 1), _r(3, 4)]),
    ("mul", lambda a, b: a * b, [_r(3, 4), _r(4)]),
    ("mul_self", lambda a: a * a * a, [_r(5)]),
    ("div", lambda a, b: a / b, [_r(3, 4), _pos(4)]),
    ("neg", lambda a: -a, [_r(3)]),
    ("pow", lambda a: a ** 3, [_r(4)]),
    ("pow_frac", lambda a: a ** 2.5, [_pos(4)]),
    ("exp", lambda a: a.exp(), [_r(3, 2)]),
    ("log", lambda a: a.log(), [_pos(3, 2)]),
    ("tanh", lambda a: a.tanh(), [_r(3, 2)]),
    ("sigmoid", lambda a: a.sigmoid(), [_r(3, 2)]),
    ("relu", lambda a: a.relu() * a, [np.array([-1.3, -0.4, 0.6, 1.7])]),   # away from the kink
    ("matmul", lambda a, b: a @ b, [_r(3, 4), _r(4, 2)]),
    ("matmul_batch", lambda a, b: a @ b, [_r(2, 3, 4), _r(4, 2)]),
    ("matmul_tanh", lambda a, b: (a @ b).tanh(), [_r(3, 4), _r(4, 2)]),
    ("linear", lambda x, w, b: mg.linear(x, w, b).tanh(), [_r(3, 4), _r(4, 2), _r(2)]),
    ("sum", lambda a: (a * a).sum(), [_r(3, 4)]),
    ("sum_axis", lambda a: (a * a).sum(axis=0), [_r(3, 4)]),
    ("sum_keepdims", lambda a: (a * a).sum(axis=1, keepdims=True), [_r(3, 4)]),
    ("mean", lambda a: (a * a).mean(), [_r(3, 4)]),
    ("mean_axis", lambda a: (a * a).mean(axis=(0, 2)), [_r(2, 3, 4)]),
    ("reshape", lambda a: (a * a).reshape(2, 6), [_r(3, 4)]),
    ("transpose", lambda a: (a * a).T, [_r(3, 4)]),
    ("transpose_axes", lambda a: (a * a).transpose(1, 2, 0), [_r(2, 3, 4)]),
    ("broadcast_to", lambda a: mg.broadcast_to(a * a, (3, 4)), [_r(4)]),
    ("softmax", lambda a: a.softmax(axis=1), [_r(3, 4)]),
    ("log_softmax", lambda a: a.log_softmax(axis=1), [_r(3, 4)]),
    ("mse", lambda p, t: mg.mse(p, t), [_r(3, 2), _r(3, 2)]),
    ("cross_entropy", lambda z: mg.cross_entropy(z, TARGETS), [_r(3, 4)]),
]


@pytest.mark.parametrize("name,fn,inputs", CASES, ids=[c[0] for c in CASES])
def test_second_derivatives_match_central_differences(name, fn, inputs):
    assert gradgradcheck(fn, *inputs)


def test_gradgradcheck_catches_a_wrong_differentiable_backward(monkeypatch):
    """The check can fail: tanh's recorded backward with a wrong sign is caught."""
    tanh = mg.OPS["tanh"]

    def wrong(ctx, grad_output):
        z = ctx.inputs[0].tanh()
        return grad_output * (1 + z * z)

    monkeypatch.setattr(tanh, "differentiable_backward", staticmethod(wrong))
    with pytest.raises(GradcheckError, match="gradgradcheck"):
        gradgradcheck(lambda a: a.tanh(), _r(3))


def test_a_second_derivative_by_hand():
    """d²/dx² of x³ + sin-free terms: f = x^3 tanh(x) at a few points, by the formula."""
    x0 = np.array([-0.8, 0.1, 1.2])
    x = mg.create_leaf(x0, requires_grad=True)
    (g,) = mg.grad((x ** 3 * x.tanh()).sum(), [x], create_graph=True)
    (h,) = mg.grad(g.sum(), [x])
    t = np.tanh(x0)
    d1 = 1 - t ** 2
    d2 = -2 * t * d1
    expected = 6 * x0 * t + 2 * 3 * x0 ** 2 * d1 + x0 ** 3 * d2
    np.testing.assert_allclose(g.data, 3 * x0 ** 2 * t + x0 ** 3 * d1, rtol=1e-12)
    np.testing.assert_allclose(h.data, expected, rtol=1e-10)


def _mlp_loss(params, x, y):
    w1, b1, w2, b2 = params
    h = mg.linear(x, w1, b1).tanh()
    return mg.mse(h @ w2 + b2, y)


def test_hessian_vector_product_of_a_small_mlp_matches_finite_differences():
    """H v by reverse over reverse vs (g(w + eps v) - g(w - eps v)) / 2 eps."""
    r = np.random.default_rng(3)
    x, y = r.standard_normal((5, 3)), r.standard_normal((5, 1))
    values = [r.standard_normal((3, 4)), r.standard_normal(4), r.standard_normal((4, 1)),
              r.standard_normal(1)]
    vs = [r.standard_normal(v.shape) for v in values]

    params = [mg.create_leaf(v, requires_grad=True) for v in values]
    grads = mg.grad(_mlp_loss(params, x, y), params, create_graph=True)
    dot = sum((g * v).sum() for g, v in zip(grads, vs))
    hvp = mg.grad(dot, params)

    def gradient(shift):
        leaves = [mg.create_leaf(p + shift * v, requires_grad=True) for p, v in zip(values, vs)]
        return [g.data for g in mg.grad(_mlp_loss(leaves, x, y), leaves)]

    eps = 1e-5
    plus, minus = gradient(eps), gradient(-eps)
    for got, p, m in zip(hvp, plus, minus):
        np.testing.assert_allclose(got.data, (p - m) / (2 * eps), rtol=1e-5, atol=1e-8)
    assert max(np.abs(h.data).max() for h in hvp) > 1e-3   # not a product of zeros


def test_nn_linear_mlp_hessian_vector_product_by_backward_create_graph():
    """backward(create_graph=True): .grad holds the values, .grad_variable the recorded
    gradient; an nn.Linear model's Hv from it matches mg.grad's."""
    model = mg.nn.Sequential(mg.nn.Linear(3, 4), mg.nn.Tanh(), mg.nn.Linear(4, 1)) \
        if hasattr(mg.nn, "Sequential") else None
    if model is None:
        pytest.skip("no nn.Sequential")
    r = np.random.default_rng(5)
    x, y = r.standard_normal((6, 3)), r.standard_normal((6, 1))
    params = list(model.parameters())
    vs = [r.standard_normal(p.shape) for p in params]
    mg.mse(model(mg.create_leaf(x)), y).backward(create_graph=True)
    for p in params:
        np.testing.assert_allclose(p.grad, p.grad_variable.data)
    dot = sum((p.grad_variable * v).sum() for p, v in zip(params, vs))
    hvp_backward = mg.grad(dot, params)
    grads = mg.grad(mg.mse(model(mg.create_leaf(x)), y), params, create_graph=True)
    hvp_grad = mg.grad(sum((g * v).sum() for g, v in zip(grads, vs)), params)
    for a, b in zip(hvp_backward, hvp_grad):
        np.testing.assert_allclose(a.data, b.data, rtol=1e-10, atol=1e-12)
    for p in params:
        p.zero_grad()
        assert p.grad is None and p.grad_variable is None


def test_grad_leaves_dot_grad_alone_and_returns_constants_without_create_graph():
    w = mg.create_leaf(np.array([1.0, 2.0]), requires_grad=True)
    (g,) = mg.grad((w * w).sum(), [w])
    assert w.grad is None
    assert g.grad_fn is None and not g.requires_grad
    np.testing.assert_allclose(g.data, [2.0, 4.0])


def test_grad_of_an_intermediate_and_with_grad_outputs():
    x = mg.create_leaf(np.array([0.5, -1.0]), requires_grad=True)
    h = x * 3.0
    y = h.tanh()
    u = np.array([2.0, -1.0])
    gh, gx = mg.grad(y, [h, x], grad_outputs=u)
    np.testing.assert_allclose(gh.data, u * (1 - np.tanh(h.data) ** 2))
    np.testing.assert_allclose(gx.data, 3.0 * gh.data)


def test_grad_by_numpy_backward_writes_no_parameter_buffer_it_returns():
    """Linear's backward may write a parameter's own gradient buffer: mg.grad must return
    copies, so a later backward cannot change a gradient it returned."""
    w = mg.create_leaf(np.ones((3, 2)), requires_grad=True)
    x = np.arange(6.0).reshape(2, 3)
    mg.linear(x, w).sum().backward()
    w.zero_grad()
    (g,) = mg.grad(mg.linear(x, w).sum() + mg.linear(2 * x, w).sum(), [w])
    kept = g.data.copy()
    mg.linear(x, w).sum().backward()
    np.testing.assert_allclose(g.data, kept)
    np.testing.assert_allclose(kept, 3 * x.sum(axis=0)[:, None] * np.ones((1, 2)))


def test_first_order_grad_works_for_ops_without_a_differentiable_backward():
    x = mg.create_leaf(np.array([[1.0, 5.0, 2.0]]), requires_grad=True)
    (g,) = mg.grad(x.max(), [x])
    np.testing.assert_allclose(g.data, [[0.0, 1.0, 0.0]])


# -- misuse ---------------------------------------------------------------------------------------
def test_create_graph_through_an_op_without_a_differentiable_backward_is_refused():
    x = mg.create_leaf(np.array([1.0, 3.0, 2.0]), requires_grad=True)
    with pytest.raises(BackwardError, match=r"max node.*create_graph needs a differentiable "
                                            r"backward for every op on the path.*Fix"):
        mg.grad((x * x).max(), [x], create_graph=True)


def test_create_graph_on_a_consumed_graph_is_refused():
    x = mg.create_leaf(np.array([1.0, 3.0]), requires_grad=True)
    h = x.tanh()
    loss = h.sum()
    loss.backward()
    with pytest.raises(BackwardError, match="consumed"):
        mg.grad(loss, [x], create_graph=True)
    # a second loss that reaches the consumed part of the graph
    with pytest.raises(BackwardError, match="consumed.*create_graph=True"):
        mg.grad((h * 2.0).sum(), [x], create_graph=True)


def test_differentiating_a_plain_gradient_again_is_refused():
    x = mg.create_leaf(np.array([1.0, 3.0]), requires_grad=True)
    (g,) = mg.grad((x * x).sum(), [x])          # create_graph=False: a constant
    with pytest.raises(BackwardError, match="output 0.*does not require grad.*create_graph=True"):
        mg.grad(g.sum(), [x])


def test_create_graph_keeps_the_graph_for_a_second_gradient():
    x = mg.create_leaf(np.array([1.0, 3.0]), requires_grad=True)
    loss = (x ** 3).sum()
    (g1,) = mg.grad(loss, [x], create_graph=True)
    (g2,) = mg.grad(loss, [x], create_graph=True)   # the graph was kept
    np.testing.assert_allclose(g1.data, g2.data)
    loss.backward()                                  # and an ordinary backward still works
    np.testing.assert_allclose(x.grad, 3 * x.data ** 2)


def test_grad_misuse_messages():
    x = mg.create_leaf(np.array([1.0, 3.0]), requires_grad=True)
    c = mg.create_leaf(np.array([1.0, 3.0]))
    with pytest.raises(BackwardError, match="scalar"):
        mg.grad(x * x, [x])
    with pytest.raises(BackwardError, match="grad_outputs of shape"):
        mg.grad(x * x, [x], grad_outputs=np.ones(3))
    with pytest.raises(BackwardError, match="does not require grad"):
        mg.grad((x * c).sum(), [c])
    y = mg.create_leaf(np.array([2.0]), requires_grad=True)
    with pytest.raises(BackwardError, match="do not depend on input 1"):
        mg.grad((x * x).sum(), [x, y])
    _, gy = mg.grad((x * x).sum(), [x, y], allow_unused=True)
    np.testing.assert_array_equal(gy.data, [0.0])


def test_create_graph_inside_no_grad_is_refused():
    x = mg.create_leaf(np.array([1.0, 3.0]), requires_grad=True)
    loss = (x * x).sum()
    with mg.no_grad(), pytest.raises(BackwardError, match="inside no_grad"):
        mg.grad(loss, [x], create_graph=True)
    (g,) = mg.grad(loss, [x], create_graph=True)   # refused before anything ran
    assert g.requires_grad


def test_matmul_of_a_vector_under_create_graph_says_how_to_fix_it():
    a = mg.create_leaf(np.ones(3), requires_grad=True)
    b = mg.create_leaf(np.ones((3, 2)), requires_grad=True)
    with pytest.raises(ShapeError, match=r"matmul under create_graph.*\(1, k\)"):
        mg.grad((a @ b).sum(), [a], create_graph=True)


def test_tape_says_it_has_no_create_graph():
    from minigrad.tape import Tape
    tape = Tape()
    x = tape.var(2.0)
    out = x * x
    with pytest.raises(BackwardError, match="scalar tape has no create_graph"):
        tape.backward(out, create_graph=True)
    with pytest.raises(BackwardError, match="scalar tape has no create_graph"):
        out.backward(create_graph=True)
    tape.backward(out)                       # the refusal consumed nothing
    assert tape.grads[x.index] == 4.0


def test_aot_says_it_has_no_create_graph():
    from minigrad import aot
    with pytest.raises(BackwardError, match="create_graph.*ahead-of-time"):
        aot.DeriveBackwardOptions(create_graph=True)


def test_create_graph_inside_aot_capture_is_refused():
    from minigrad import aot

    def fn(x):
        (g,) = mg.grad((x * x).sum(), [x], create_graph=True)
        return (g * g).sum()

    with pytest.raises(Exception, match="create_graph inside aot.capture"):
        aot.capture(fn, mg.create_leaf(np.ones(3), requires_grad=True))


@pytest.mark.parametrize("order", ["pending", "topo"])
def test_an_ordinary_backward_through_a_recorded_gradient_gives_h_v(order):
    """The second backward may be the engine's own: the forward graph's nodes then have
    consumers (the recorded backward's ops) that the second loss does not reach."""
    w0, v = np.array([0.4, -1.1, 0.8]), np.array([1.0, 0.5, -2.0])
    w = mg.create_leaf(w0, requires_grad=True)
    (g,) = mg.grad((w.tanh() * w * w).sum(), [w], create_graph=True)
    (g * v).sum().backward(order=order)
    t, d = np.tanh(w0), 1 - np.tanh(w0) ** 2
    second = -2 * t * d * w0 ** 2 + 4 * w0 * d + 2 * t   # d²/dw² of tanh(w) w²
    np.testing.assert_allclose(w.grad, second * v, rtol=1e-10)


def test_backward_create_graph_adds_up_across_calls_until_zero_grad():
    w = mg.create_leaf(np.array([1.0, 2.0]), requires_grad=True)
    (w ** 3).sum().backward(create_graph=True)
    (w * w).sum().backward(create_graph=True)
    np.testing.assert_allclose(w.grad, 3 * w.data ** 2 + 2 * w.data)
    np.testing.assert_allclose(w.grad_variable.data, w.grad)
    (h,) = mg.grad(w.grad_variable.sum(), [w])
    np.testing.assert_allclose(h.data, 6 * w.data + 2)
    w.grad = None
    assert w.grad_variable is None


def test_float32_stays_float32_under_create_graph():
    w = mg.create_leaf(np.array([0.3, -0.2], dtype=np.float32), requires_grad=True)
    (g,) = mg.grad((w.tanh() * w).sum(), [w], create_graph=True)
    (h,) = mg.grad(g.sum(), [w])
    assert g.dtype == np.float32 and h.dtype == np.float32


@pytest.mark.parametrize("allocator", ["arena", "pool"])
def test_create_graph_inside_an_allocator_scope(allocator):
    from minigrad.arena import Arena, Pool
    w0, v = np.array([0.4, -1.1, 0.8]), np.array([1.0, 0.5, -2.0])
    t, d = np.tanh(w0), 1 - np.tanh(w0) ** 2
    second = -2 * t * d * w0 ** 2 + 4 * w0 * d + 2 * t
    w = mg.create_leaf(w0, requires_grad=True)
    scope = Arena("graph", 1 << 16) if allocator == "arena" else Pool("graph")
    with scope.scope():
        x = mg.create_leaf(np.ones(3))
        (g,) = mg.grad((w.tanh() * w * w * x).sum(), [w], create_graph=True)
        (h,) = mg.grad((g * v).sum(), [w])
        np.testing.assert_allclose(h.data, second * v, rtol=1e-10)
