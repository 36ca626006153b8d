"""Per-op gradient checks, float32 preservation and forward-vs-numpy checks.

Every differentiable case is checked twice:
  * with the library's ``minigrad.check.gradcheck``;
  * with this file's own central-difference helper, comparing ``.grad`` after
    ``backward()`` against a numeric estimate (so we do not only trust the
    library's checker).
"""
from math import prod

import numpy as np
import pytest

import minigrad as mg
from minigrad.check import gradcheck

RNG = np.random.default_rng(20240601)


# --------------------------------------------------------------------------
# input makers (float64, deterministic, away from kinks)
# --------------------------------------------------------------------------
def randn(*shape):
    return np.asarray(RNG.standard_normal(shape), dtype=np.float64)


def positive(*shape):
    return np.asarray(RNG.uniform(0.5, 2.0, shape), dtype=np.float64)


def away_from_zero(*shape):
    """Values with |v| in [0.5, 2]: safe for relu, division and x**-1."""
    sign = RNG.choice([-1.0, 1.0], size=shape)
    return np.asarray(sign * RNG.uniform(0.5, 2.0, shape), dtype=np.float64)


def distinct(*shape):
    """Values at least ~0.27 apart: no ties for max."""
    n = prod(shape)
    values = RNG.permutation(n) * 0.37 - 0.15 * n + RNG.uniform(-0.05, 0.05, n)
    return np.asarray(values, dtype=np.float64).reshape(shape)


def case(case_id, fn, *arrays):
    return pytest.param(fn, arrays, id=case_id)


REPEATED = np.array([0, 2, 0, 0, 3])
TARGETS = np.array([1, 0, 4, 1])


# --------------------------------------------------------------------------
# the case table: (fn taking Variables -> Variable, float64 input arrays)
# --------------------------------------------------------------------------
ADD_CASES = [
    case("add-same-shape", lambda a, b: a + b, randn(3, 4), randn(3, 4)),
    case("add-(3,4)+(4,)", lambda a, b: a + b, randn(3, 4), randn(4)),
    case("add-(4,)+(3,4)", lambda a, b: a + b, randn(4), randn(3, 4)),
    case("add-(3,1)+(1,4)", lambda a, b: a + b, randn(3, 1), randn(1, 4)),
    case("add-0d+(3,4)", lambda a, b: a + b, randn(), randn(3, 4)),
    case("add-(3,4)+0d", lambda a, b: a + b, randn(3, 4), randn()),
    case("add-(2,3,4)+(3,1)", lambda a, b: a + b, randn(2, 3, 4), randn(3, 1)),
    case("add-var+pyfloat", lambda a: a + 2.5, randn(3, 4)),
    case("add-pyfloat+var", lambda a: 2.5 + a, randn(3, 4)),
    case("add-var+pyint", lambda a: a + 3, randn(3, 4)),
    case("add-functional", lambda a, b: mg.add(a, b), randn(3, 4), randn(4)),
    case("add-same-var-twice", lambda a: a + a, randn(3, 4)),
]

SUB_CASES = [
    case("sub-same-shape", lambda a, b: a - b, randn(3, 4), randn(3, 4)),
    case("sub-(3,4)-(4,)", lambda a, b: a - b, randn(3, 4), randn(4)),
    case("sub-(4,)-(3,4)", lambda a, b: a - b, randn(4), randn(3, 4)),
    case("sub-(3,1)-(1,4)", lambda a, b: a - b, randn(3, 1), randn(1, 4)),
    case("sub-0d-(3,4)", lambda a, b: a - b, randn(), randn(3, 4)),
    case("sub-var-pyint", lambda a: a - 1, randn(3, 4)),
    case("sub-pyfloat-var", lambda a: 2.0 - a, randn(3, 4)),
    case("sub-functional", lambda a, b: mg.sub(a, b), randn(3, 1), randn(4)),
]

MUL_CASES = [
    case("mul-same-shape", lambda a, b: a * b, randn(3, 4), randn(3, 4)),
    case("mul-(3,4)*(4,)", lambda a, b: a * b, randn(3, 4), randn(4)),
    case("mul-(3,1)*(1,4)", lambda a, b: a * b, randn(3, 1), randn(1, 4)),
    case("mul-0d*(3,4)", lambda a, b: a * b, randn(), randn(3, 4)),
    case("mul-(3,4)*0d", lambda a, b: a * b, randn(3, 4), randn()),
    case("mul-var*pyfloat", lambda a: a * 2.0, randn(3, 4)),
    case("mul-pyfloat*var", lambda a: 2.0 * a, randn(3, 4)),
    case("mul-pyint*var", lambda a: 3 * a, randn(3, 4)),
    case("mul-square-same-var", lambda a: a * a, randn(3, 4)),
    case("mul-functional", lambda a, b: mg.mul(a, b), randn(2, 3, 4), randn(4)),
]

DIV_CASES = [
    case("div-same-shape", lambda a, b: a / b, randn(3, 4), away_from_zero(3, 4)),
    case("div-(3,4)/(4,)", lambda a, b: a / b, randn(3, 4), away_from_zero(4)),
    case("div-(3,1)/(1,4)", lambda a, b: a / b, randn(3, 1), away_from_zero(1, 4)),
    case("div-0d/(3,4)", lambda a, b: a / b, randn(), away_from_zero(3, 4)),
    case("div-var/pyint", lambda a: a / 3, randn(3, 4)),
    case("div-pyfloat/var", lambda a: 3.0 / a, away_from_zero(3, 4)),
    case("div-functional", lambda a, b: mg.div(a, b), randn(4), away_from_zero(3, 4)),
]

UNARY_CASES = [
    case("neg-operator", lambda a: -a, randn(3, 4)),
    case("neg-functional", lambda a: mg.neg(a), randn(3, 4)),
    case("pow-2", lambda a: a ** 2, randn(3, 4)),
    case("pow-3", lambda a: a ** 3, randn(3, 4)),
    case("pow-0.5-positive", lambda a: a ** 0.5, positive(3, 4)),
    case("pow-minus1", lambda a: a ** -1, away_from_zero(3, 4)),
    case("pow-functional-3", lambda a: mg.pow(a, 3), randn(2, 3)),
    case("exp-method", lambda a: a.exp(), randn(3, 4)),
    case("exp-functional", lambda a: mg.exp(a), randn(3, 4)),
    case("log-method-positive", lambda a: a.log(), positive(3, 4)),
    case("log-functional-positive", lambda a: mg.log(a), positive(3, 4)),
    case("tanh-method", lambda a: a.tanh(), randn(3, 4)),
    case("tanh-functional", lambda a: mg.tanh(a), randn(3, 4)),
    case("sigmoid-method", lambda a: a.sigmoid(), randn(3, 4)),
    case("sigmoid-functional", lambda a: mg.sigmoid(a), randn(3, 4)),
    case("relu-method", lambda a: a.relu(), away_from_zero(3, 4)),
    case("relu-functional", lambda a: mg.relu(a), away_from_zero(3, 4)),
]

MATMUL_CASES = [
    case("matmul-2d", lambda a, b: a @ b, randn(3, 4), randn(4, 5)),
    case("matmul-batched", lambda a, b: a @ b, randn(2, 3, 4), randn(2, 4, 5)),
    case("matmul-broadcast-batch", lambda a, b: a @ b, randn(2, 3, 4), randn(4, 5)),
    case("matmul-vector@matrix", lambda a, b: a @ b, randn(4), randn(4, 5)),
    case("matmul-matrix@vector", lambda a, b: a @ b, randn(3, 4), randn(4)),
    case("matmul-functional", lambda a, b: mg.matmul(a, b), randn(3, 4), randn(4, 2)),
]

REDUCE_CASES = [
    case("sum-all", lambda a: a.sum(), randn(3, 4)),
    case("sum-axis0", lambda a: a.sum(axis=0), randn(3, 4)),
    case("sum-axis1-keepdims", lambda a: a.sum(axis=1, keepdims=True), randn(3, 4)),
    case("sum-axis-neg1", lambda a: a.sum(axis=-1), randn(2, 3, 4)),
    case("sum-axis-tuple", lambda a: a.sum(axis=(0, 2)), randn(2, 3, 4)),
    case("sum-axis-tuple-keepdims", lambda a: a.sum(axis=(0, -1), keepdims=True), randn(2, 3, 4)),
    case("sum-all-keepdims", lambda a: a.sum(keepdims=True), randn(3, 4)),
    case("sum-functional", lambda a: mg.sum(a, axis=1), randn(3, 4)),
    case("mean-all", lambda a: a.mean(), randn(3, 4)),
    case("mean-axis0", lambda a: a.mean(axis=0), randn(3, 4)),
    case("mean-axis1-keepdims", lambda a: a.mean(axis=1, keepdims=True), randn(3, 4)),
    case("mean-axis-neg1", lambda a: a.mean(axis=-1), randn(2, 3, 4)),
    case("mean-axis-tuple", lambda a: a.mean(axis=(0, 2)), randn(2, 3, 4)),
    case("mean-axis-tuple-keepdims", lambda a: a.mean(axis=(1, 2), keepdims=True), randn(2, 3, 4)),
    case("mean-functional", lambda a: mg.mean(a, axis=0, keepdims=True), randn(3, 4)),
    case("max-all", lambda a: a.max(), distinct(3, 4)),
    case("max-axis0", lambda a: a.max(axis=0), distinct(3, 4)),
    case("max-axis1-keepdims", lambda a: a.max(axis=1, keepdims=True), distinct(3, 4)),
    case("max-axis-neg1", lambda a: a.max(axis=-1), distinct(2, 3, 4)),
    case("max-axis-tuple", lambda a: a.max(axis=(0, 2)), distinct(2, 3, 4)),
    case("max-all-keepdims", lambda a: a.max(keepdims=True), distinct(3, 4)),
    case("max-functional", lambda a: mg.max(a, axis=-1, keepdims=True), distinct(3, 4)),
]

SHAPE_CASES = [
    case("reshape-method", lambda a: a.reshape(2, 6), randn(3, 4)),
    case("reshape-method-minus1", lambda a: a.reshape(-1), randn(3, 4)),
    case("reshape-functional", lambda a: mg.reshape(a, (4, 3)), randn(3, 4)),
    case("transpose-T", lambda a: a.T, randn(3, 4)),
    case("transpose-method-axes", lambda a: a.transpose(2, 0, 1), randn(2, 3, 4)),
    case("transpose-functional-default", lambda a: mg.transpose(a), randn(2, 3, 4)),
    case("transpose-functional-axes", lambda a: mg.transpose(a, (1, 2, 0)), randn(2, 3, 4)),
    case("broadcast_to-(4,)->(3,4)", lambda a: mg.broadcast_to(a, (3, 4)), randn(4)),
    case("broadcast_to-(3,1)->(2,3,4)", lambda a: mg.broadcast_to(a, (2, 3, 4)), randn(3, 1)),
    case("broadcast_to-0d->(2,3)", lambda a: mg.broadcast_to(a, (2, 3)), randn()),
]

INDEX_CASES = [
    case("getitem-int", lambda a: a[1], randn(3, 4)),
    case("getitem-negative-int", lambda a: a[-1], randn(3, 4)),
    case("getitem-slice", lambda a: a[1:3], randn(4, 3)),
    case("getitem-step-slice", lambda a: a[::2], randn(5, 2)),
    case("getitem-int-array-repeated", lambda a: a[REPEATED], randn(4, 3)),
    case("getitem-int-array-repeated-1d", lambda a: a[REPEATED], randn(4)),
    case("getitem-tuple-slice-int", lambda a: a[1:, 2], randn(3, 4)),
    case("getitem-tuple-int-negslice", lambda a: a[0, -3:], randn(3, 4)),
    case("getitem-tuple-slice-negint", lambda a: a[:, -2], randn(3, 4)),
    case("getitem-functional", lambda a: mg.getitem(a, (slice(0, 2), 1)), randn(3, 4)),
]

CONCAT_STACK_CASES = [
    case("concat-1-axis0", lambda a: mg.concat([a], axis=0), randn(2, 3)),
    case("concat-2-axis0", lambda a, b: mg.concat([a, b], axis=0), randn(2, 3), randn(1, 3)),
    case("concat-3-axis0", lambda a, b, c: mg.concat([a, b, c], axis=0),
         randn(2, 3), randn(1, 3), randn(4, 3)),
    case("concat-1-axis1", lambda a: mg.concat([a], axis=1), randn(3, 2)),
    case("concat-2-axis1", lambda a, b: mg.concat([a, b], axis=1), randn(3, 2), randn(3, 1)),
    case("concat-3-axis1", lambda a, b, c: mg.concat([a, b, c], axis=1),
         randn(3, 2), randn(3, 1), randn(3, 4)),
    case("concat-same-var-twice", lambda a: mg.concat([a, a], axis=0), randn(2, 3)),
    case("stack-1-axis0", lambda a: mg.stack([a], axis=0), randn(2, 3)),
    case("stack-2-axis0", lambda a, b: mg.stack([a, b], axis=0), randn(2, 3), randn(2, 3)),
    case("stack-3-axis0", lambda a, b, c: mg.stack([a, b, c], axis=0),
         randn(2, 3), randn(2, 3), randn(2, 3)),
    case("stack-1-axis1", lambda a: mg.stack([a], axis=1), randn(2, 3)),
    case("stack-2-axis1", lambda a, b: mg.stack([a, b], axis=1), randn(2, 3), randn(2, 3)),
    case("stack-3-axis1", lambda a, b, c: mg.stack([a, b, c], axis=1),
         randn(2, 3), randn(2, 3), randn(2, 3)),
]

NN_CASES = [
    case("softmax-axis-neg1", lambda a: a.softmax(axis=-1), randn(3, 4)),
    case("softmax-axis0", lambda a: a.softmax(axis=0), randn(3, 4)),
    case("softmax-functional", lambda a: mg.softmax(a, axis=-1), randn(2, 3, 4)),
    case("log_softmax-axis-neg1", lambda a: a.log_softmax(axis=-1), randn(3, 4)),
    case("log_softmax-axis0", lambda a: a.log_softmax(axis=0), randn(3, 4)),
    case("log_softmax-functional", lambda a: mg.log_softmax(a, axis=0), randn(2, 3, 4)),
    case("cross_entropy-numpy-targets", lambda z: mg.cross_entropy(z, TARGETS), randn(4, 5)),
    case("cross_entropy-variable-targets",
         lambda z: mg.cross_entropy(z, mg.create_leaf(TARGETS)), randn(4, 5)),
    case("mse-both-require-grad", lambda p, t: mg.mse(p, t), randn(3, 4), randn(3, 4)),
    case("mse-pred-only", lambda p: mg.mse(p, mg.create_leaf(np.linspace(-1, 1, 12).reshape(3, 4))),
         randn(3, 4)),
    case("linear-with-bias", lambda x, w, b: mg.linear(x, w, b), randn(3, 4), randn(4, 2), randn(2)),
    case("linear-without-bias", lambda x, w: mg.linear(x, w), randn(3, 4), randn(4, 2)),
    case("linear-bias-keyword", lambda x, w, b: mg.linear(x, w, b=b), randn(3, 4), randn(4, 2), randn(2)),
]

def shared_node_at_two_depths(a):
    h = a.tanh()
    return h + (a + h).exp() * 3.0   # h feeds the output directly and, via a + h, two levels deeper


COMPOSITE_CASES = [
    case("shared-node-at-two-depths", shared_node_at_two_depths, randn(3)),
    case("mlp-chain", lambda x, w, b: (mg.linear(x, w, b).tanh() * 2.0 - 1).softmax().sum(axis=0),
         randn(3, 4), randn(4, 5), randn(5)),
    case("shared-subexpression", lambda a: (a.exp() * a.exp() + a.exp() / 2), randn(3)),
]

ALL_CASES = (ADD_CASES + SUB_CASES + MUL_CASES + DIV_CASES + UNARY_CASES + MATMUL_CASES
             + REDUCE_CASES + SHAPE_CASES + INDEX_CASES + CONCAT_STACK_CASES + NN_CASES
             + COMPOSITE_CASES)


# --------------------------------------------------------------------------
# our own, independent numeric check
# --------------------------------------------------------------------------
def central_difference(f, arrays, eps=1e-6):
    """Numeric gradient of scalar f(*arrays) with respect to every array."""
    grads = []
    for i, a in enumerate(arrays):
        g = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            plus = [x.copy() for x in arrays]
            minus = [x.copy() for x in arrays]
            plus[i][idx] += eps
            minus[i][idx] -= eps
            g[idx] = (f(*plus) - f(*minus)) / (2 * eps)
        grads.append(g)
    return grads


def forward_data(fn, arrays):
    return fn(*[mg.create_leaf(a.copy()) for a in arrays]).data


def assert_backward_matches_central_difference(fn, arrays, order):
    """loss = sum(fn(*inputs) * probe) with a fixed random probe, so every output
    element gets a distinct weight (plain sum would hide e.g. softmax errors)."""
    out_shape = np.shape(forward_data(fn, arrays))
    probe = np.random.default_rng(7).uniform(0.5, 1.5, out_shape) * np.random.default_rng(8).choice(
        [-1.0, 1.0], out_shape)

    def numeric_loss(*arrs):
        return float(np.sum(forward_data(fn, arrs) * probe))

    leaves = [mg.create_leaf(a.copy(), requires_grad=True) for a in arrays]
    loss = (fn(*leaves) * mg.create_leaf(probe)).sum()
    loss.backward(order=order)

    expected = central_difference(numeric_loss, arrays)
    for k, (leaf, g) in enumerate(zip(leaves, expected)):
        assert leaf.grad is not None, f"input {k} got no grad"
        assert leaf.grad.shape == leaf.shape, f"input {k}: grad shape {leaf.grad.shape} != {leaf.shape}"
        np.testing.assert_allclose(leaf.grad, g, rtol=1e-5, atol=1e-7, err_msg=f"input {k}")


@pytest.mark.parametrize("fn, arrays", ALL_CASES)
def test_library_gradcheck_passes(fn, arrays):
    assert gradcheck(fn, *[a.copy() for a in arrays]) is True


@pytest.mark.parametrize("order", ["pending", "topo"])
@pytest.mark.parametrize("fn, arrays", ALL_CASES)
def test_backward_matches_own_central_difference(fn, arrays, order):
    assert_backward_matches_central_difference(fn, arrays, order)


def test_library_gradcheck_accepts_variables():
    a = mg.create_leaf(randn(3, 4), requires_grad=True)
    b = mg.create_leaf(randn(4), requires_grad=True)
    assert gradcheck(lambda x, y: x * y + x, a, b) is True


def test_library_gradcheck_rejects_wrong_gradient():
    # x * detach(x) has analytic grad x but true derivative 2x
    with pytest.raises(mg.errors.GradcheckError):
        gradcheck(lambda x: x * x.detach(), away_from_zero(3))


def test_getitem_repeated_indices_accumulate():
    x = mg.create_leaf(np.array([1.0, 2.0, 3.0, 4.0]), requires_grad=True)
    x[np.array([0, 2, 0, 0])].sum().backward()
    np.testing.assert_array_equal(x.grad, [3.0, 0.0, 1.0, 0.0])


def test_max_routes_gradient_only_to_argmax():
    x = mg.create_leaf(np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]]), requires_grad=True)
    x.max(axis=1).sum().backward()
    np.testing.assert_array_equal(x.grad, [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])


def test_broadcast_add_grad_is_reduced_to_operand_shape():
    a = mg.create_leaf(np.zeros((3, 1)), requires_grad=True)
    b = mg.create_leaf(np.zeros(4), requires_grad=True)
    (a + b).sum().backward()
    np.testing.assert_array_equal(a.grad, np.full((3, 1), 4.0))
    np.testing.assert_array_equal(b.grad, np.full(4, 3.0))


def test_ops_registry_lists_every_op():
    names = ("add sub mul div neg pow exp log tanh sigmoid relu matmul sum mean max reshape "
             "transpose broadcast_to concat stack getitem softmax log_softmax cross_entropy mse linear")
    assert set(names.split()) <= set(mg.OPS)


# --------------------------------------------------------------------------
# float32 stays float32
# --------------------------------------------------------------------------
def f32(a):
    return np.asarray(a, dtype=np.float32)


F32_UNARY = [
    pytest.param(lambda x: x * 2.0, id="x*2.0"),
    pytest.param(lambda x: 2.0 * x, id="2.0*x"),
    pytest.param(lambda x: x * 2, id="x*2"),
    pytest.param(lambda x: 2.0 - x, id="2.0-x"),
    pytest.param(lambda x: x - 1, id="x-1"),
    pytest.param(lambda x: x + 0.5, id="x+0.5"),
    pytest.param(lambda x: 3 + x, id="3+x"),
    pytest.param(lambda x: x / 3, id="x/3"),
    pytest.param(lambda x: x / 3.0, id="x/3.0"),
    pytest.param(lambda x: 3.0 / x, id="3.0/x"),
    pytest.param(lambda x: 1 / x, id="1/x"),
    pytest.param(lambda x: x ** 2, id="x**2"),
    pytest.param(lambda x: x ** 2.0, id="x**2.0"),
    pytest.param(lambda x: x ** 0.5, id="x**0.5"),
    pytest.param(lambda x: x ** -1, id="x**-1"),
    pytest.param(lambda x: mg.pow(x, 3), id="pow3"),
    pytest.param(lambda x: -x, id="neg"),
    pytest.param(lambda x: (x * 2 + 1) / 4.0 - 0.5 * x, id="mixed-int-float-chain"),
    pytest.param(lambda x: x.exp(), id="exp"),
    pytest.param(lambda x: x.log(), id="log"),
    pytest.param(lambda x: x.tanh(), id="tanh"),
    pytest.param(lambda x: x.sigmoid(), id="sigmoid"),
    pytest.param(lambda x: x.relu(), id="relu"),
    pytest.param(lambda x: x.sum(axis=0), id="sum"),
    pytest.param(lambda x: x.mean(), id="mean"),
    pytest.param(lambda x: x.max(axis=1), id="max"),
    pytest.param(lambda x: x.softmax(), id="softmax"),
    pytest.param(lambda x: x.log_softmax(axis=0), id="log_softmax"),
    pytest.param(lambda x: x.reshape(4, 3), id="reshape"),
    pytest.param(lambda x: x.T, id="T"),
    pytest.param(lambda x: x[np.array([0, 0, 2])], id="getitem"),
    pytest.param(lambda x: mg.broadcast_to(x, (2, 3, 4)), id="broadcast_to"),
    pytest.param(lambda x: mg.cross_entropy(x, np.array([0, 3, 1])), id="cross_entropy"),
]


def assert_float32_through_backward(fn, leaves):
    for leaf in leaves:
        assert leaf.dtype == np.float32 and leaf.data.dtype == np.float32
    out = fn(*leaves)
    assert out.dtype == np.float32, out.dtype
    assert out.data.dtype == np.float32, out.data.dtype
    loss = out.sum()
    assert loss.data.dtype == np.float32
    loss.backward()
    for k, leaf in enumerate(leaves):
        assert leaf.data.dtype == np.float32
        assert leaf.grad is not None
        assert leaf.grad.dtype == np.float32, f"input {k}: grad dtype {leaf.grad.dtype}"


@pytest.mark.parametrize("fn", F32_UNARY)
def test_float32_stays_float32_unary(fn):
    x = mg.create_leaf(f32(positive(3, 4)), requires_grad=True)
    assert_float32_through_backward(fn, [x])


F32_MULTI = [
    pytest.param(lambda a, b: a + b, [(3, 4), (4,)], id="add-broadcast"),
    pytest.param(lambda a, b: a - b, [(3, 1), (1, 4)], id="sub-broadcast"),
    pytest.param(lambda a, b: a * b, [(3, 4), (3, 4)], id="mul"),
    pytest.param(lambda a, b: a / b, [(3, 4), (4,)], id="div"),
    pytest.param(lambda a, b: a @ b, [(3, 4), (4, 2)], id="matmul"),
    pytest.param(lambda a, b: a @ b, [(2, 3, 4), (4, 2)], id="matmul-batched"),
    pytest.param(lambda a, b: mg.concat([a, b], axis=1), [(3, 4), (3, 2)], id="concat"),
    pytest.param(lambda a, b: mg.stack([a, b], axis=0), [(3, 4), (3, 4)], id="stack"),
    pytest.param(lambda a, b: mg.mse(a, b), [(3, 4), (3, 4)], id="mse"),
    pytest.param(lambda x, w, b: mg.linear(x, w, b), [(3, 4), (4, 2), (2,)], id="linear"),
    pytest.param(lambda a, b: (a * 2 - b / 3) ** 2 * 0.5, [(3, 4), (3, 4)], id="mixed-scalars"),
]


@pytest.mark.parametrize("fn, shapes", F32_MULTI)
def test_float32_stays_float32_multi_input(fn, shapes):
    leaves = [mg.create_leaf(f32(positive(*s)), requires_grad=True) for s in shapes]
    assert_float32_through_backward(fn, leaves)


def test_create_leaf_keeps_float32_and_honours_dtype():
    assert mg.create_leaf(f32([1.0, 2.0])).dtype == np.float32
    assert mg.create_leaf(np.array([1.0, 2.0]), dtype=np.float32).dtype == np.float32
    assert mg.create_leaf(np.array([1.0, 2.0])).dtype == np.float64


def test_create_leaf_copies_data():
    data = np.array([1.0, 2.0, 3.0])
    x = mg.create_leaf(data, requires_grad=True)
    data[0] = 100.0
    assert x.data[0] == 1.0


def test_integer_leaf_requiring_grad_raises_dtype_error():
    with pytest.raises(mg.errors.DtypeError):
        mg.create_leaf(np.array([1, 2, 3]), requires_grad=True)


# --------------------------------------------------------------------------
# forward matches plain numpy
# --------------------------------------------------------------------------
def np_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_log_softmax(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def fwd(case_id, engine_fn, numpy_fn, *arrays):
    return pytest.param(engine_fn, numpy_fn, arrays, id=case_id)


FORWARD_CASES = [
    fwd("add-broadcast", lambda a, b: a + b, lambda a, b: a + b, randn(3, 4), randn(4)),
    fwd("radd-scalar", lambda a: 2.5 + a, lambda a: 2.5 + a, randn(3)),
    fwd("sub-broadcast", lambda a, b: a - b, lambda a, b: a - b, randn(3, 1), randn(1, 4)),
    fwd("rsub-scalar", lambda a: 2.0 - a, lambda a: 2.0 - a, randn(3)),
    fwd("mul-broadcast", lambda a, b: mg.mul(a, b), lambda a, b: a * b, randn(3, 1), randn(1, 4)),
    fwd("div", lambda a, b: a / b, lambda a, b: a / b, randn(3, 4), away_from_zero(4)),
    fwd("rdiv-scalar", lambda a: 3.0 / a, lambda a: 3.0 / a, away_from_zero(3)),
    fwd("neg", lambda a: -a, lambda a: -a, randn(3)),
    fwd("pow-3", lambda a: a ** 3, lambda a: a ** 3, randn(3, 4)),
    fwd("pow-0.5", lambda a: mg.pow(a, 0.5), np.sqrt, positive(3, 4)),
    fwd("pow-minus1", lambda a: a ** -1, lambda a: 1.0 / a, away_from_zero(3, 4)),
    fwd("exp", lambda a: a.exp(), np.exp, randn(3, 4)),
    fwd("log", lambda a: mg.log(a), np.log, positive(3, 4)),
    fwd("tanh", lambda a: a.tanh(), np.tanh, randn(3, 4)),
    fwd("sigmoid", lambda a: mg.sigmoid(a), np_sigmoid, randn(3, 4)),
    fwd("relu", lambda a: a.relu(), lambda a: np.where(a > 0, a, 0.0), away_from_zero(3, 4)),
    fwd("matmul-2d", lambda a, b: a @ b, lambda a, b: a @ b, randn(3, 4), randn(4, 5)),
    fwd("matmul-broadcast-batch", lambda a, b: a @ b, np.matmul, randn(2, 3, 4), randn(4, 5)),
    fwd("matmul-vector@matrix", lambda a, b: a @ b, np.matmul, randn(4), randn(4, 5)),
    fwd("matmul-matrix@vector", lambda a, b: a @ b, np.matmul, randn(3, 4), randn(4)),
    fwd("sum-tuple-keepdims", lambda a: a.sum(axis=(0, 2), keepdims=True),
        lambda a: a.sum(axis=(0, 2), keepdims=True), randn(2, 3, 4)),
    fwd("sum-all", lambda a: mg.sum(a), np.sum, randn(2, 3)),
    fwd("mean-axis-neg1", lambda a: a.mean(axis=-1), lambda a: a.mean(axis=-1), randn(2, 3, 4)),
    fwd("mean-all-keepdims", lambda a: a.mean(keepdims=True), lambda a: a.mean(keepdims=True), randn(2, 3)),
    fwd("max-axis0-keepdims", lambda a: a.max(axis=0, keepdims=True),
        lambda a: a.max(axis=0, keepdims=True), distinct(3, 4)),
    fwd("max-all", lambda a: a.max(), np.max, distinct(3, 4)),
    fwd("reshape", lambda a: a.reshape(4, 3), lambda a: a.reshape(4, 3), randn(3, 4)),
    fwd("transpose-axes", lambda a: a.transpose(1, 2, 0), lambda a: a.transpose(1, 2, 0), randn(2, 3, 4)),
    fwd("transpose-default", lambda a: mg.transpose(a), np.transpose, randn(2, 3, 4)),
    fwd("T", lambda a: a.T, lambda a: a.T, randn(3, 4)),
    fwd("broadcast_to", lambda a: mg.broadcast_to(a, (2, 3, 4)),
        lambda a: np.broadcast_to(a, (2, 3, 4)), randn(3, 1)),
    fwd("concat-axis1", lambda a, b, c: mg.concat([a, b, c], axis=1),
        lambda a, b, c: np.concatenate([a, b, c], axis=1), randn(3, 2), randn(3, 1), randn(3, 4)),
    fwd("stack-axis1", lambda a, b: mg.stack([a, b], axis=1),
        lambda a, b: np.stack([a, b], axis=1), randn(2, 3), randn(2, 3)),
    fwd("getitem-int-array", lambda a: a[REPEATED], lambda a: a[REPEATED], randn(4, 3)),
    fwd("getitem-tuple", lambda a: mg.getitem(a, (slice(1, None), -1)), lambda a: a[1:, -1], randn(3, 4)),
    fwd("softmax-axis-neg1", lambda a: a.softmax(), lambda a: np_softmax(a, -1), randn(3, 4)),
    fwd("softmax-axis0", lambda a: mg.softmax(a, axis=0), lambda a: np_softmax(a, 0), randn(3, 4)),
    fwd("log_softmax-axis-neg1", lambda a: a.log_softmax(),
        lambda a: np.log(np.exp(a) / np.exp(a).sum(axis=-1, keepdims=True)), randn(3, 4)),
    fwd("log_softmax-axis0", lambda a: mg.log_softmax(a, axis=0), lambda a: np_log_softmax(a, 0), randn(3, 4)),
    fwd("mse", lambda p, t: mg.mse(p, t), lambda p, t: np.mean((p - t) ** 2), randn(3, 4), randn(3, 4)),
    fwd("linear-bias", lambda x, w, b: mg.linear(x, w, b), lambda x, w, b: x @ w + b,
        randn(3, 4), randn(4, 2), randn(2)),
    fwd("linear-no-bias", lambda x, w: mg.linear(x, w), lambda x, w: x @ w, randn(3, 4), randn(4, 2)),
]


@pytest.mark.parametrize("engine_fn, numpy_fn, arrays", FORWARD_CASES)
def test_forward_matches_numpy(engine_fn, numpy_fn, arrays):
    got = engine_fn(*[mg.create_leaf(a.copy(), requires_grad=True) for a in arrays]).data
    want = numpy_fn(*arrays)
    assert np.shape(got) == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_sums_to_one_along_axis(axis):
    x = randn(3, 4)
    probs = mg.softmax(mg.create_leaf(x), axis=axis).data
    np.testing.assert_allclose(probs.sum(axis=axis), 1.0, rtol=0, atol=1e-12)
    assert np.all(probs > 0)


def test_softmax_is_stable_for_large_logits():
    x = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1001.0, -1002.0]])
    probs = mg.create_leaf(x).softmax().data
    log_probs = mg.create_leaf(x).log_softmax().data
    small = np.array([0.0, 1.0, 2.0])
    want = np.exp(small) / np.exp(small).sum()
    np.testing.assert_allclose(probs[0], want, rtol=1e-12)
    np.testing.assert_allclose(probs[1], want[::-1], rtol=1e-12)
    np.testing.assert_allclose(log_probs[0], np.log(want), rtol=1e-12)


def test_exp_of_log_softmax_is_softmax():
    x = mg.create_leaf(randn(3, 4))
    np.testing.assert_allclose(np.exp(x.log_softmax().data), x.softmax().data, rtol=1e-12)


def test_cross_entropy_matches_numpy_formula():
    logits = randn(4, 5)
    loss = mg.cross_entropy(mg.create_leaf(logits, requires_grad=True), TARGETS)
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    want = -np.mean(log_probs[np.arange(4), TARGETS])
    assert loss.data.size == 1
    assert loss.item() == pytest.approx(want, rel=1e-12)


def test_cross_entropy_accepts_int_variable_targets():
    logits = randn(4, 5)
    with_array = mg.cross_entropy(mg.create_leaf(logits), TARGETS).item()
    with_var = mg.cross_entropy(mg.create_leaf(logits), mg.create_leaf(TARGETS)).item()
    assert with_var == pytest.approx(with_array, rel=1e-15)


def test_cross_entropy_gradient_is_softmax_minus_onehot_over_n():
    logits = randn(4, 5)
    z = mg.create_leaf(logits, requires_grad=True)
    mg.cross_entropy(z, TARGETS).backward()
    onehot = np.zeros((4, 5))
    onehot[np.arange(4), TARGETS] = 1.0
    np.testing.assert_allclose(z.grad, (np_softmax(logits, -1) - onehot) / 4, rtol=1e-10, atol=1e-12)


# --- 0-d (scalar) Variables: numpy hands back scalars, not arrays, for 0-d results -------------

SCALAR_UNARY = {
    "neg": lambda a: -a, "exp": lambda a: a.exp(), "log": lambda a: a.log(),
    "tanh": lambda a: a.tanh(), "sigmoid": lambda a: a.sigmoid(), "relu": lambda a: a.relu(),
    "pow": lambda a: a ** 3, "sum": lambda a: a.sum(), "mean": lambda a: a.mean(),
}
SCALAR_BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
}


@pytest.mark.parametrize("name", sorted(SCALAR_UNARY))
def test_scalar_variables_work_and_pass_gradcheck(name):
    assert mg.check.gradcheck(SCALAR_UNARY[name], np.array(0.7))
    x = mg.create_leaf(np.float32(0.7), requires_grad=True)
    SCALAR_UNARY[name](x).backward()
    assert x.grad.shape == () and x.grad.dtype == np.float32


@pytest.mark.parametrize("name", sorted(SCALAR_BINARY))
def test_scalar_binary_ops_pass_gradcheck(name):
    assert mg.check.gradcheck(SCALAR_BINARY[name], np.array(0.7), np.array(-1.3))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sigmoid_of_large_inputs_does_not_overflow(dtype):
    """e^800 overflows float64 (and e^100 float32): sigmoid must not compute it."""
    import warnings
    big = 800.0 if dtype == np.float64 else 100.0
    x = mg.create_leaf(np.array([-big, -30.0, 0.0, 30.0, big], dtype=dtype), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise", under="ignore"):   # e^-800 may underflow to 0: that is fine
            z = mg.sigmoid(x)
            z.sum().backward()
    assert z.dtype == dtype
    expected = [0.0, 1 / (1 + np.exp(np.float64(30.0))), 0.5, 1 / (1 + np.exp(-30.0)), 1.0]
    # (e^-100 is a float32 subnormal, 3.7e-44: hence atol. The tail at -30 keeps its relative
    # precision: no 1 - (nearly 1) cancellation.)
    tiny = 1e-40 if dtype == np.float32 else 1e-300
    assert np.allclose(z.data, expected, rtol=1e-6 if dtype == np.float32 else 1e-12, atol=tiny)
    # The gradient z (1 - z) is exact to an absolute rounding error (z rounds to 1 at +30).
    slope = [0.0, np.exp(-30.0), 0.25, np.exp(-30.0), 0.0]   # e^-|a| / (1 + e^-|a|)^2
    eps = np.finfo(dtype).eps
    assert np.allclose(x.grad, slope, rtol=1e-5, atol=eps)
