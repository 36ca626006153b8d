"""detach() inside a captured function: every op after it is recorded, never frozen (issue 24, 17).

Eager records only ops on values that require grad, and a detached value does not: so the ops
that read it together with constants only used to build no graph, and capture kept their
capture-time result as a constant. Each test runs the plan on new data (and new parameter
values) and compares loss and gradients with eager on the same data.
"""
import numpy as np
import pytest

import minigrad as mg
from minigrad import aot
from minigrad.eager.variable import OPS

RNG = np.random.default_rng(24)
P1, P0 = np.array(1.01182162), np.array(1.13696169)


def eager(fn, params, x, x_requires_grad):
    """fn's loss and gradients in eager, on a fresh leaf of x's values."""
    for p in params:
        p.zero_grad()
    leaf = mg.create_leaf(np.array(x), requires_grad=x_requires_grad, name="x")
    loss = fn(leaf)
    if x_requires_grad or any(p.requires_grad for p in params):
        loss.backward()
    grads = {f"d_{v.name}": v.grad.copy() for v in [leaf, *params]
             if v.requires_grad and v.grad is not None}
    return loss.item(), grads


def plan(fn, params, x, x_requires_grad):
    example = mg.create_leaf(np.array(x), requires_grad=x_requires_grad, name="x")
    forward = aot.capture(fn, example, params=params)
    return aot.Executor(forward, aot.derive_backward_graph(forward), params, np.array(x))


def assert_same_as_eager(executor, fn, params, x, x_requires_grad, wanted=None):
    loss = float(executor.run(np.array(x)))
    grads = {k: v.copy() for k, v in executor.grads().items()}
    want_loss, want = eager(fn, params, x, x_requires_grad)
    assert loss == pytest.approx(want_loss, rel=1e-10, abs=1e-12)
    for name in wanted if wanted is not None else sorted(want):
        np.testing.assert_allclose(grads[name], want[name], rtol=1e-10, atol=1e-12, err_msg=name)
    return grads


def _reproducer(x):
    d = x.detach()
    return (d * P1).sum() + (x * P0).sum()


def test_the_issue_reproducer_follows_new_data():
    forward = aot.capture(_reproducer, mg.create_leaf(np.array(0.), name="x"))
    assert "stop_gradient(x)" in forward.text()
    executor = aot.Executor(forward, aot.derive_backward_graph(forward), None, np.array(0.))
    for v in [0., 2., -1.]:
        loss = float(executor.run(np.array(v)))
        assert loss == pytest.approx(_reproducer(mg.create_leaf(np.array(v))).item(), rel=1e-12)
        assert loss == pytest.approx(v * (P1 + P0), rel=1e-12)   # by hand: d = x in value


@pytest.mark.parametrize("x_requires_grad", [False, True])
def test_detach_of_an_input_followed_by_constants_only(x_requires_grad):
    executor = plan(_reproducer, [], np.array(0.), x_requires_grad)
    for v in [2., -1., 0.5]:
        grads = assert_same_as_eager(executor, _reproducer, [], v, x_requires_grad)
        if x_requires_grad:   # only the direct path: the detached one gives no gradient
            np.testing.assert_allclose(grads["d_x"], P0, rtol=1e-12)


@pytest.mark.parametrize("w_requires_grad", [True, False])
def test_detach_of_a_parameter_followed_by_constants_only(w_requires_grad):
    W = mg.create_leaf(RNG.normal(size=3), requires_grad=w_requires_grad, name="W")

    def fn(x):
        return (W.detach() * 3.0).tanh().sum() + (x * W).sum()
    executor = plan(fn, [W], RNG.normal(size=3), False)
    assert "stop_gradient(W)" in str(executor.forward)
    # a frozen parameter gets no gradient in eager; the plan differentiates every parameter
    wanted = None if w_requires_grad else []
    assert_same_as_eager(executor, fn, [W], RNG.normal(size=3), False, wanted)
    W.data = RNG.normal(size=3)                  # the detached factor follows the parameter
    assert_same_as_eager(executor, fn, [W], RNG.normal(size=3), False, wanted)
    if w_requires_grad:                          # d/dW = x only (tanh(3 W) is detached)
        x = RNG.normal(size=3)
        executor.run(x)
        np.testing.assert_allclose(executor.grads()["d_W"], x, rtol=1e-12)


@pytest.mark.parametrize("x_requires_grad", [False, True])
def test_detach_of_an_intermediate_followed_by_constants_only(x_requires_grad):
    W = mg.create_leaf(RNG.normal(size=(3, 2)), requires_grad=True, name="W")
    scale = RNG.normal(size=2)

    def fn(x):
        h = (x @ W).tanh()
        d = h.detach()
        return ((d * scale).exp() * 0.5).sum() + (h * h).sum()
    executor = plan(fn, [W], RNG.normal(size=(4, 3)), x_requires_grad)
    text = str(executor.forward)
    assert "stop_gradient" in text and "exp" in text   # the ops after detach are in the plan
    assert_same_as_eager(executor, fn, [W], RNG.normal(size=(4, 3)), x_requires_grad)
    W.data = RNG.normal(size=(3, 2))
    assert_same_as_eager(executor, fn, [W], RNG.normal(size=(4, 3)), x_requires_grad)


def test_detach_of_an_integer_input_follows_new_tokens():
    """Integers never require grad: the plain detached leaf is read by memory (stop_gradient)."""
    emb = mg.create_leaf(RNG.normal(size=(5, 3)), requires_grad=True, name="emb")

    def fn(tokens):
        return (mg.embedding(tokens.detach(), emb) * 2.0).sum()
    forward = aot.capture(fn, np.array([[0, 1]]), params=[emb], input_names=["tokens"])
    executor = aot.Executor(forward, aot.derive_backward_graph(forward), [emb], np.array([[0, 1]]))
    tokens = np.array([[4, 4]])
    loss = float(executor.run(tokens))
    assert loss == pytest.approx(2.0 * 2.0 * emb.data[4].sum(), rel=1e-12)
    want = np.zeros((5, 3))
    want[4] = 4.0
    np.testing.assert_allclose(executor.grads()["d_emb"], want)


def test_a_detached_loss_is_refused_by_derive():
    W = mg.create_leaf(RNG.normal(size=3), requires_grad=True, name="W")
    forward = aot.capture(lambda x: (x * W).sum().detach(), np.ones(3), params=[W])
    with pytest.raises(aot.DeriveError, match=r"loss 'loss' is a detached value \(stop_gradient.*"
                       r"Rule: backward starts from a loss computed with gradients.*Fix: return "
                       r"the loss itself, not loss.detach\(\)"):
        aot.derive_backward_graph(forward)
    with pytest.raises(ValueError):   # (DeriveError is also a ValueError)
        aot.derive_backward_graph(forward)
    executor = aot.Executor(forward, None, [W], np.ones(3))   # forward only: still supported
    x = RNG.normal(size=3)
    assert float(executor.run(x)) == pytest.approx(float((x * W.data).sum()), rel=1e-12)


def test_the_stop_gradient_node_passes_no_gradient_back():
    """The node capture makes of x.detach(): a graph root that requires grad, no parent."""
    x = mg.create_leaf(np.array([1.5, -2.0]), requires_grad=True, name="x")
    y = OPS["stop_gradient"].apply(x)
    assert y.requires_grad and not y.is_leaf and y.parents == () and y.grad_fn.source is x
    np.testing.assert_array_equal(y.data, x.data)
    (y * x).sum().backward()
    np.testing.assert_allclose(x.grad, [1.5, -2.0])   # d/dx (c * x) with c = x held fixed, not 2x


def test_detach_outside_capture_is_a_plain_leaf():
    x = mg.create_leaf(np.array([1.0, 2.0]), requires_grad=True, name="x")
    d = (x * 2.0).detach()
    assert d.is_leaf and not d.requires_grad and d.grad_fn is None
    assert (d * 3.0).grad_fn is None                 # ops on it build no graph, as before
    inside = []
    aot.capture(lambda v: inside.append(v.detach()) or (v * 1.0).sum(), np.ones(2))
    assert inside[0].requires_grad and inside[0].grad_fn.name == "stop_gradient"
