"""0-d tensors in the aot executor: every reduction to a scalar (sum, mean, cross_entropy, mse)
feeding further ops. numpy gives a 0-d result back as a scalar, which cannot be an out= buffer
and would not change on the next run; the plan must hold real 0-d arrays. Gradients equal eager
and central differences in float64, on a first run and on a second run with new values."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import aot

from aot_helpers import central_differences, eager_grads

RNG = np.random.default_rng(7)
W3 = RNG.normal(size=(3, 4))
TARGETS = np.array([0, 3, 1])


def normal(*shape):
    return RNG.normal(size=shape)


# (id, IR op types the captured graph must contain, fn, arrays)
CASES = [
    ("sum+mean", {"sum", "mean", "add"},
     lambda a, b: (a @ b).sum() + (a @ b).tanh().mean(), [normal(2, 4), normal(4, 3)]),
    ("sum-mean", {"sum", "mean", "sub"},
     lambda a: a.sum() - a.tanh().mean(), [normal(3, 4)]),
    ("sum*mean", {"sum", "mean", "mul"},
     lambda a: a.sum() * (a * a).mean(), [normal(3, 4)]),
    ("sum/mean", {"sum", "mean", "div"},
     lambda a: a.tanh().sum() / ((a * a).mean() + 1.0), [normal(3, 4)]),
    ("neg", {"sum", "neg", "tanh"}, lambda a: (-(a * W3).sum()).tanh(), [normal(3, 4)]),
    ("pow", {"mean", "pow"}, lambda a: a.tanh().mean() ** 3, [normal(3, 4)]),
    ("exp", {"mean", "exp"}, lambda a: a.tanh().mean().exp(), [normal(3, 4)]),
    ("log", {"mean", "log"}, lambda a: ((a * a).mean() + 1.0).log(), [normal(3, 4)]),
    ("sigmoid", {"sum", "sigmoid"}, lambda a: (a * W3).sum().sigmoid(), [normal(3, 4)]),
    ("relu", {"sum", "relu"}, lambda a: (a * W3).sum().relu() + a.mean().relu(), [normal(3, 4)]),
    ("silu", {"mean", "silu"}, lambda a: mg.silu((a * W3).mean()), [normal(3, 4)]),
    ("gelu", {"mean", "gelu"}, lambda a: mg.gelu((a * W3).mean()), [normal(3, 4)]),
    ("sum over all axes", {"sum", "mul"},
     lambda a: a.sum(axis=(0, 1)) * a.tanh().mean(), [normal(3, 4)]),
    ("scalar times matrix", {"mean", "mul", "sum"},
     lambda a: (a.mean() * a).tanh().sum(), [normal(3, 4)]),
    ("view of a scalar", {"sum", "reshape"},
     lambda a: (a.tanh().sum().reshape(1, 1) * W3).sum(), [normal(3, 4)]),
    ("broadcast_to of a scalar", {"mean", "broadcast_to"},
     lambda a: (mg.broadcast_to(a.tanh().mean(), (3, 4)) * W3).sum(), [normal(3, 4)]),
    ("cross_entropy*cross_entropy", {"cross_entropy", "mul"},
     lambda a: mg.cross_entropy(a, TARGETS) * mg.cross_entropy(a.tanh(), TARGETS), [normal(3, 5)]),
    ("cross_entropy+sum", {"cross_entropy", "tanh", "add"},
     lambda a: mg.cross_entropy(a, TARGETS).tanh() + a.sum(), [normal(3, 5)]),
    ("mse+mse", {"mse", "sigmoid", "add"},
     lambda p, t: mg.mse(p.tanh(), t).sigmoid() + mg.mse(p, t), [normal(3, 4), normal(3, 4)]),
    ("mse*mean", {"mse", "mean", "mul"},
     lambda p, t: mg.mse(p, t) * p.mean(), [normal(3, 4), normal(3, 4)]),
]


def compiled(fn, arrays, setup="shared"):
    """setup: shared or unshared buffers, or recompute (backward re-runs the cheap ops' saves,
    among them 0-d ones such as a tanh of a sum)."""
    inputs = [mg.create_leaf(a.copy(), requires_grad=True, name=f"x{i}") for i, a in enumerate(arrays)]
    forward = aot.capture(fn, *inputs)
    backward = aot.derive_backward_graph(forward)
    if setup == "recompute":
        backward = aot.plan_memory(forward, backward, policy="recompute").backward
    return forward, aot.Executor(forward, backward, None, *arrays, share_buffers=setup != "unshared")


def check_run(forward, executor, fn, arrays):
    loss = float(executor.run(*arrays))
    grads = executor.grads()
    want_loss, want = eager_grads(fn, arrays)
    numeric = central_differences(fn, arrays)
    assert loss == pytest.approx(want_loss, rel=1e-12, abs=1e-12)
    for name, eager, central in zip(forward.inputs, want, numeric):
        got = grads["d_" + name]
        np.testing.assert_allclose(got, eager, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(got, central, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("setup", ["shared", "unshared", "recompute"])
@pytest.mark.parametrize("op_types, fn, arrays", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_scalar_reductions_feeding_further_ops(op_types, fn, arrays, setup):
    forward, executor = compiled(fn, arrays, setup)
    assert op_types <= {op.type for op in forward.operations}, forward.text()
    check_run(forward, executor, fn, arrays)
    # a second run on new values: a 0-d buffer held as a numpy scalar would keep the first value
    check_run(forward, executor, fn, [a + normal(*a.shape) for a in arrays])


def test_every_buffer_of_the_plan_is_an_ndarray():
    fn, arrays = CASES[0][2], CASES[0][3]
    forward, executor = compiled(fn, arrays)
    zero_d = [name for name, value in executor.env.items() if np.ndim(value) == 0]
    assert {"loss", "d_loss"} <= set(zero_d)
    assert all(isinstance(executor.env[name], np.ndarray) for name in zero_d), zero_d
    for _, args in executor.forward_calls + executor.backward_calls:
        assert not any(isinstance(a, np.generic) for a in args), args


def test_the_reported_case_with_a_parameter():
    """x data, W a parameter Variable: loss = sum(x @ W) + mean(tanh(x @ W))."""
    x, w = normal(2, 4), normal(4, 3)
    W = mg.create_leaf(w.copy(), requires_grad=True, name="W")
    forward = aot.capture(lambda x: (x @ W).sum() + (x @ W).tanh().mean(), x, params=[W])
    executor = aot.Executor(forward, aot.derive_backward_graph(forward), [W], x)
    loss = float(executor.run(x))
    eager = mg.create_leaf(w.copy(), requires_grad=True)
    want = (mg.create_leaf(x) @ eager).sum() + (mg.create_leaf(x) @ eager).tanh().mean()
    want.backward()
    assert loss == pytest.approx(want.item(), rel=1e-12)
    np.testing.assert_allclose(executor.grads()["d_W"], eager.grad, rtol=1e-10, atol=1e-12)
    numeric = central_differences(lambda w: (mg.create_leaf(x) @ w).sum()
                                  + (mg.create_leaf(x) @ w).tanh().mean(), [w])[0]
    np.testing.assert_allclose(executor.grads()["d_W"], numeric, rtol=1e-5, atol=1e-7)
