"""Edges where the aot engine must agree with eager: an empty batch's mean, the dtype of a
gradient, softmax of a 0-d input. Expected values come from numpy or the mathematics."""
import numpy as np
import pytest

import minigrad as mg
from aot_helpers import aot_grads, eager_grads

quiet = pytest.mark.filterwarnings("ignore:.*(Mean of empty slice|invalid value|divide by zero)")

EMPTY_BATCH = {   # the function, and whether its loss is 0 / 0 = nan (numpy's mean of nothing)
    "mean": (lambda x, w: x.mean() + w.sum(), True),
    "mean_axis0": (lambda x, w: x.mean(axis=0).sum() + w.sum(), True),
    "matmul_mean": (lambda x, w: (x @ w).mean(), True),
    "mean_axis1": (lambda x, w: x.mean(axis=1).sum() + w.sum(), False),   # a sum of no rows: 6
}


@quiet
@pytest.mark.parametrize("name", EMPTY_BATCH)
def test_aot_mean_of_an_empty_batch_is_nan_as_in_eager(name):
    fn, is_nan = EMPTY_BATCH[name]
    x, w = np.zeros((0, 3)), np.ones((3, 2))
    eager_loss, eager = eager_grads(fn, [x, w])
    aot_loss, aot, _, _ = aot_grads(fn, [x, w])
    for loss in (eager_loss, aot_loss):
        assert np.isnan(loss) == is_nan and (is_nan or loss == pytest.approx(6.0))
    for e, a in zip(eager, aot):
        assert e.shape == a.shape and e.dtype == a.dtype
        np.testing.assert_allclose(a, e, equal_nan=True)
    assert np.all(aot[1] == (0.0 if name == "matmul_mean" else 1.0))   # w's gradient


def test_the_mean_of_an_empty_batch_matches_numpy_in_both_engines():
    x = np.zeros((0, 3))
    with np.errstate(invalid="ignore", divide="ignore"), \
            pytest.warns(RuntimeWarning):
        numpy_mean = np.mean(x)
        eager_loss, (eager_grad,) = eager_grads(lambda v: v.mean(), [x])
        aot_loss, (aot_grad,), _, _ = aot_grads(lambda v: v.mean(), [x])
    assert np.isnan(numpy_mean) and np.isnan(eager_loss) and np.isnan(aot_loss)
    assert eager_grad.shape == aot_grad.shape == (0, 3)


FLOAT16_MEANS = {   # the function of x (10,000 x 1 float16 values of 30), and numpy's value
    "mean": (lambda x: x.mean(), lambda a: a.mean()),
    "mean_axis0": (lambda x: x.mean(axis=0).sum(), lambda a: a.mean(axis=0).sum()),
    "mse": (lambda x: mg.mse(x, np.full((10000, 1), 27.0, np.float16)),
            lambda a: ((a - np.float16(27.0)) ** 2).mean()),
}


@pytest.mark.parametrize("name", FLOAT16_MEANS)
def test_aot_mean_of_many_float16_values_sums_in_float32_as_eager_and_numpy(name):
    """numpy's mean (so eager's) sums float16 in float32; the aot plan summed in float16, whose
    largest value is 65504, and gave inf for 10,000 values of 30 (eager: 30)."""
    fn, numpy_fn = FLOAT16_MEANS[name]
    x = np.full((10000, 1), 30.0, np.float16)
    want = float(numpy_fn(x))
    assert np.isfinite(want)
    eager_loss, (eager_grad,) = eager_grads(fn, [x])
    aot_loss, (aot_grad,), _, _ = aot_grads(fn, [x])
    assert eager_loss == pytest.approx(want, rel=1e-3) and aot_loss == pytest.approx(want, rel=1e-3)
    assert aot_grad.dtype == eager_grad.dtype == np.float16
    np.testing.assert_allclose(aot_grad.astype(np.float64), eager_grad.astype(np.float64),
                               rtol=1e-3)


BIG = 70000   # more than float16's largest value, 65504
BIG_TARGETS = np.random.default_rng(3).integers(0, 5, BIG)
FLOAT16_COUNTS = {
    "mean": (lambda x: (x * 2.0).mean(), (BIG, 2)),
    "cross_entropy": (lambda x: mg.cross_entropy(x, BIG_TARGETS), (BIG, 5)),
    "mse": (lambda x: mg.mse(x, np.zeros((BIG, 1), np.float16)), (BIG, 1)),
    "log_softmax_mean": (lambda x: x.log_softmax(-1).mean(), (BIG // 5, 6)),
}


@pytest.mark.parametrize("name", FLOAT16_COUNTS)
def test_a_float16_mean_over_more_than_65504_values_keeps_its_gradient(name):
    """n = 70,000 is inf in float16, so dividing by n gave a zero gradient in eager (and the
    cross-entropy loss -sum / inf = 0): the count is divided in float32 and rounded once."""
    fn, shape = FLOAT16_COUNTS[name]
    x = np.random.default_rng(4).standard_normal(shape).astype(np.float16)
    want_loss, (want,) = eager_grads(fn, [x.astype(np.float64)])
    for engine in (eager_grads, aot_grads):
        loss, (grad, *_), *_ = engine(fn, [x])
        assert grad.dtype == np.float16
        assert loss == pytest.approx(want_loss, rel=3e-3, abs=1e-4), engine.__name__
        assert np.abs(grad.astype(np.float64) - want).max() <= 1e-2 * np.abs(want).max(), \
            engine.__name__


DTYPE_MIXES = [(np.float16, np.float32), (np.float32, np.float16), (np.float32, np.float64),
               (np.float64, np.float32), (np.float16, np.float64), (np.float64, np.float16)]
MIXED = {
    "mean_plus_sum": lambda x, w: x.mean() + w.sum(),
    "product": lambda x, w: (x * w).sum(),
    "fan_out": lambda x, w: (x * w).sum() + (x.tanh() * w).mean() + x.sum(),
    "matmul": lambda x, w: (x @ w.reshape(3, 1)).sum(),
}


@pytest.mark.parametrize("fn", MIXED.values(), ids=MIXED.keys())
@pytest.mark.parametrize("dtypes", DTYPE_MIXES,
                         ids=[f"{np.dtype(a).name}-{np.dtype(b).name}" for a, b in DTYPE_MIXES])
def test_an_aot_gradient_has_its_inputs_dtype_as_in_eager(fn, dtypes):
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(2, 3)).astype(dtypes[0]), rng.normal(size=3).astype(dtypes[1])
    _, eager = eager_grads(fn, [x, w])
    _, aot, _, _ = aot_grads(fn, [x, w])
    for array, e, a in zip((x, w), eager, aot):
        assert e.dtype == array.dtype and a.dtype == array.dtype, (e.dtype, a.dtype, array.dtype)
        tol = 2e-2 if np.float16 in dtypes else 1e-5
        np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=tol, atol=tol)


def test_an_aot_parameter_gradient_has_the_parameters_dtype():
    from minigrad import aot
    model = mg.nn.Linear(3, 2, seed=0, dtype=np.float32)
    x = np.random.default_rng(1).normal(size=(4, 3))          # float64 data, float32 weights
    forward = aot.capture(lambda v: model(v).sum(), x, params=model)
    executor = aot.Executor(forward, aot.derive_backward_graph(forward), model, x)
    executor.run(x)
    grads = executor.grads()
    model(mg.create_leaf(x)).sum().backward()
    for p in model.parameters():
        got = grads["d_" + p.name]
        assert got.dtype == p.data.dtype == np.float32
        np.testing.assert_allclose(got, p.grad, rtol=1e-5, atol=1e-6)


SOFTMAXES = {"softmax": (mg.softmax, 1.0), "log_softmax": (mg.log_softmax, 0.0)}


@pytest.mark.parametrize("name", SOFTMAXES)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_of_a_0d_input_is_over_one_element_with_zero_gradient(name, dtype, axis):
    """softmax over one element is 1 (log_softmax 0) whatever the value: the gradient is 0."""
    op, value = SOFTMAXES[name]
    fn = lambda v, w: (op(v, axis=axis) * w).sum()   # noqa: E731
    x, w = np.array(2.5, dtype), np.array(3.0, dtype)
    arena_x = mg.create_leaf(x.copy(), requires_grad=True)
    with mg.Arena("graph", 1 << 12).scope():
        y = op(arena_x, axis=axis)
        (y * 3.0).backward()
        arena_y = y.item()
    eager_loss, eager = eager_grads(fn, [x, w])
    aot_loss, aot, _, _ = aot_grads(fn, [x, w])
    for loss in (eager_loss, aot_loss, arena_y * 3.0):
        assert loss == pytest.approx(3.0 * value)
    for grads in (eager, aot, [arena_x.grad]):
        assert grads[0].shape == () and grads[0].dtype == dtype and grads[0] == 0.0
    assert eager[1] == pytest.approx(value) and aot[1] == pytest.approx(value)
