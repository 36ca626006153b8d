"""The op table (minigrad/optable.py): every op is one row that every engine reads, under one name.

Coverage: each row has an eager Function, an aot rule, compilers and a capture translation, or is
in one of the two commented sets below with its reason. And the op added to show it (`abs`) is
checked end to end: gradients in eager and aot against central differences, its misuse refused.
"""
import ast
import inspect
import pathlib

import numpy as np
import pytest

import minigrad as mg
from minigrad import aot, optable
from minigrad.check import gradcheck
from minigrad.errors import DtypeError

from aot_helpers import aot_grads, central_differences, eager_grads

RNG = np.random.default_rng(18)

# Eager ops with no aot form yet (capture refuses them with a CaptureError naming the op).
# Empty today: max, concat, stack and getitem got theirs with the table. (getitem's takes ints
# and slices; an index array is refused at capture, see the test below.)
EAGER_ONLY: dict = {}

# Ops only the aot engine writes: no eager Function, no capture (nothing eager records them).
AOT_ONLY = {
    "bias_add": "capture's reading of an eager add of a last-axis vector (a layer's bias)",
    "identity": "what a rule emits for dx = dy",
    "copy": "a copy in a buffer of its own (for hand-written graphs)",
    "zeros": "a constant of zeros (for hand-written graphs)",
}

# The few op names the aot engine itself uses, each for a structural reason (not a list of ops).
ENGINE_VOCABULARY = {
    ("derive", "add"): "fan-out: the second and later gradient pieces of a tensor are summed",
    ("rules", "sum_to_shape"): "ctx.to_input_shape sums a broadcast gradient back to its input",
    ("capture", "stop_gradient"): "x.detach() while fn is captured",
    ("ir", "stop_gradient"): "which tensors a graph detached",
}


def test_every_row_has_all_its_engines_or_a_stated_reason():
    for name, row in optable.TABLE.items():
        if name in EAGER_ONLY:
            assert row.function is not None and row.rule is None and row.capture is None, name
            continue
        assert row.rule is not None, f"{name}: no aot rule"
        assert name in row.compilers, f"{name}: no compiler of its own"
        if name in AOT_ONLY:
            assert row.function is None and row.capture is None, name
            continue
        assert row.function is not None, f"{name}: no eager Function"
        assert row.capture is not None, f"{name}: no capture translation"


def test_the_reason_sets_are_not_stale():
    # An op that gains its aot form must leave EAGER_ONLY (and the sets name real rows).
    assert set(EAGER_ONLY) == {n for n, r in optable.TABLE.items() if r.rule is None}
    assert set(AOT_ONLY) == {n for n, r in optable.TABLE.items() if r.function is None}


def test_one_key_per_op_in_every_engine():
    eager = {n for n, r in optable.TABLE.items() if r.function is not None}
    assert set(mg.OPS) == eager
    for name in eager:
        assert mg.OPS[name] is optable.TABLE[name].function and mg.OPS[name].name == name
    assert set(optable.rules()) == set(aot.registry.registered_ops())
    assert set(optable.rules()) <= set(optable.compilers())
    # The old IR spellings are gone: one name each.
    for old in ("multiply", "subtract", "divide", "view", "matmul_bias"):
        assert old not in optable.TABLE and old not in optable.compilers()
        assert not aot.registry.has_rule(old)


def test_the_public_names_and_the_planner_sets_are_read_from_the_rows():
    assert mg.ops.__all__ == optable.public_names() + ["rope_freqs"]
    assert all(callable(getattr(mg.ops, n)) for n in mg.ops.__all__)
    # (as aot/plan.py listed them by hand before the table, with the one-name spellings, and abs)
    assert optable.cheap() == {"relu", "tanh", "sigmoid", "silu", "gelu", "add", "bias_add", "sub",
                               "mul", "neg", "exp", "swiglu", "rmsnorm",
                               "fused_residual_rmsnorm", "rope", "abs"}
    assert optable.aliases() == {"reshape", "transpose", "identity", "stop_gradient",
                                 "broadcast_to"}


def test_the_engines_name_no_op_except_their_own_structural_few():
    root = pathlib.Path(aot.__file__).parent
    names = set(optable.TABLE) | set(optable.compilers())
    found = set()
    for module in ("capture", "derive", "execute", "plan", "placement", "ir", "document", "rules"):
        tree = ast.parse((root / f"{module}.py").read_text(encoding="utf-8"))
        found |= {(module, n.value) for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in names}
    assert found == set(ENGINE_VOCABULARY)


def test_a_second_row_for_one_name_is_refused():
    with pytest.raises(ValueError, match=r"optable.define: the op 'add' already has a row.*one key"):
        optable.define("add")


def test_two_rows_compiling_one_op_type_are_refused(monkeypatch):
    monkeypatch.setitem(optable.TABLE, "toy", optable.OpSpec("toy", compilers={"exp": len}))
    with pytest.raises(ValueError, match=r"two rows compile 'exp'"):
        optable.compilers()


def test_capture_refuses_an_op_whose_row_has_no_capture(monkeypatch):
    monkeypatch.setattr(optable.TABLE["exp"], "capture", None)
    x = mg.create_leaf(RNG.normal(size=(2, 3)), requires_grad=True, name="x")
    with pytest.raises(aot.CaptureError, match=r"the eager op 'exp' has no ahead-of-time form.*"
                                               r"Fix: .*op table"):
        aot.capture(lambda x: x.exp().sum(), x)


# -- abs: an op added in one file (ops/elementwise.py) for eager, aot and capture -----------------
def test_abs_lives_whole_in_one_file():
    row = optable.TABLE["abs"]
    files = {inspect.getsourcefile(obj) for obj in (row.function, row.rule, mg.ops.abs)}
    assert files == {inspect.getsourcefile(mg.ops.elementwise)}
    assert {"abs", "abs_backward"} <= set(row.compilers)


def away_from_zero(*shape):
    return RNG.choice([-1.0, 1.0], size=shape) * RNG.uniform(0.2, 2.0, shape)


def test_abs_gradchecks_in_float64_in_eager():
    assert gradcheck(lambda x: mg.ops.abs(x), away_from_zero(3, 4))
    assert gradcheck(lambda x, y: (mg.ops.abs(x - y) * y).sum(), away_from_zero(3), away_from_zero(3))


def test_abs_in_aot_equals_eager_and_central_differences():
    fn = lambda x, w: (mg.ops.abs(x * w) * w).sum()   # noqa: E731
    arrays = [away_from_zero(3, 4), away_from_zero(4)]
    loss, got, forward, backward = aot_grads(fn, arrays)
    assert "abs" in [op.type for op in forward.operations]
    assert "abs_backward" in [op.type for op in backward.operations]
    eager_loss, expected = eager_grads(fn, arrays)
    assert loss == pytest.approx(eager_loss, rel=1e-12)
    for g, e, c in zip(got, expected, central_differences(fn, arrays)):
        np.testing.assert_allclose(g, e, rtol=1e-12)
        np.testing.assert_allclose(g, c, rtol=1e-6, atol=1e-8)


def test_abs_gradient_at_zero_is_zero_in_both_engines():
    fn = lambda x: mg.ops.abs(x).sum()   # noqa: E731
    x = np.array([-2.0, 0.0, 3.0])
    assert eager_grads(fn, [x])[1][0].tolist() == [-1.0, 0.0, 1.0]
    assert aot_grads(fn, [x])[1][0].tolist() == [-1.0, 0.0, 1.0]


def test_abs_keeps_float32():
    x = mg.create_leaf(np.array([-1.5, 2.0], np.float32), requires_grad=True)
    y = mg.ops.abs(x)
    y.sum().backward()
    assert y.dtype == np.float32 and x.grad.dtype == np.float32


def test_abs_of_the_most_negative_integer_is_refused_not_returned_negative():
    with pytest.raises(DtypeError, match=r"abs: an array of dtype int8 \(shape \(2,\)\) holds "
                                         r"-128.*Rule: \|x\| must be representable.*Fix: "
                                         r"x.astype\(np.int64\)"):
        mg.ops.abs(np.array([-128, 5], np.int8))
    assert mg.ops.abs(np.array([-127, 5], np.int8)).data.tolist() == [127, 5]


def test_abs_of_a_non_number_is_refused_naming_the_op():
    with pytest.raises(DtypeError, match=r"abs: operand of dtype <U3"):
        mg.ops.abs(np.array(["abc"]))


# -- max: an eager-only op that got its aot form (rule and compilers beside Max in ops/reduce.py) --
@pytest.mark.parametrize("axis, keepdims", [(1, False), (None, False), ((0, 1), True), (-1, True)])
def test_max_in_aot_equals_eager_and_central_differences(axis, keepdims):
    arrays = [RNG.normal(size=(3, 4))]
    w = RNG.normal(size=np.max(arrays[0], axis=axis, keepdims=keepdims).shape)   # (mixed-sign probe)
    fn = lambda x: (x.max(axis=axis, keepdims=keepdims) * w).sum()   # noqa: E731
    loss, got, forward, _ = aot_grads(fn, arrays)
    assert "max" in [op.type for op in forward.operations]
    eager_loss, expected = eager_grads(fn, arrays)
    assert loss == pytest.approx(eager_loss, rel=1e-12)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-12)
    np.testing.assert_allclose(got[0], central_differences(fn, arrays)[0], rtol=1e-6, atol=1e-8)


def test_max_ties_share_the_gradient_in_aot_as_in_eager():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 0.0, 2.0]])
    fn = lambda x: x.max(axis=1).sum()   # noqa: E731
    assert aot_grads(fn, [x])[1][0].tolist() == [[0.0, 0.5, 0.5], [0.5, 0.0, 0.5]]
    assert eager_grads(fn, [x])[1][0].tolist() == [[0.0, 0.5, 0.5], [0.5, 0.0, 0.5]]


# -- concat and stack: their aot forms, one backward op writing every input's gradient ----------
@pytest.mark.parametrize("join, axis", [("concat", 0), ("concat", -1), ("stack", 0), ("stack", -1)])
def test_concat_and_stack_in_aot_equal_eager_and_central_differences(join, axis):
    arrays = [RNG.normal(size=(2, 3)), RNG.normal(size=(2, 3))]
    w = RNG.normal(size=getattr(np, "concatenate" if join == "concat" else "stack")(arrays, axis).shape)

    def fn(a, b):   # ([b, b]: one input twice in one join)
        joined = getattr(mg, join)
        return (joined([a, b], axis=axis) * w).sum() + (joined([b, b], axis=axis) ** 2).sum()
    loss, got, forward, backward = aot_grads(fn, arrays)
    assert join in [op.type for op in forward.operations]
    assert f"{join}_backward" in [op.type for op in backward.operations]
    eager_loss, expected = eager_grads(fn, arrays)
    assert loss == pytest.approx(eager_loss, rel=1e-12)
    for g, e, c in zip(got, expected, central_differences(fn, arrays)):
        np.testing.assert_allclose(g, e, rtol=1e-12)
        np.testing.assert_allclose(g, c, rtol=1e-6, atol=1e-8)


def test_a_join_with_data_writes_a_gradient_only_for_what_needs_one():
    x = mg.create_leaf(RNG.normal(size=(2, 3)), requires_grad=True, name="x")
    data = RNG.normal(size=(1, 3))
    forward = aot.capture(lambda x: (mg.concat([x, data]) ** 2).sum(), x)
    backward = aot.derive_backward_graph(forward)
    executor = aot.Executor(forward, backward, None, x.data)
    executor.run(x.data)
    assert list(executor.grads()) == ["d_x"]
    np.testing.assert_allclose(executor.grads()["d_x"], 2 * x.data, rtol=1e-12)


# -- getitem: ints and slices ahead of time; an index array refused (it would be frozen) ---------
@pytest.mark.parametrize("index", [1, -1, slice(None, None, -1), (0, slice(1, None)), (Ellipsis, 2),
                                   (slice(None), None, 0)], ids=repr)
def test_getitem_in_aot_equals_eager_and_central_differences(index):
    arrays = [RNG.normal(size=(3, 4))]
    w = RNG.normal(size=arrays[0][index].shape)
    fn = lambda x: (x[index] * w).sum() + (x[index] ** 2).sum()   # noqa: E731  (read twice)
    loss, got, forward, backward = aot_grads(fn, arrays)
    assert "getitem_backward" in [op.type for op in backward.operations]
    eager_loss, expected = eager_grads(fn, arrays)
    assert loss == pytest.approx(eager_loss, rel=1e-12)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-12)
    np.testing.assert_allclose(got[0], central_differences(fn, arrays)[0], rtol=1e-6, atol=1e-8)


def test_a_plan_with_getitem_reads_new_values_on_every_run():
    x = RNG.normal(size=(3, 4))
    forward = aot.capture(lambda x: (x[1:] ** 2).sum(), mg.create_leaf(x, requires_grad=True, name="x"))
    executor = aot.Executor(forward, aot.derive_backward_graph(forward), None, x)
    for _ in range(2):
        x = RNG.normal(size=(3, 4))
        assert float(executor.run(x)) == pytest.approx(float((x[1:] ** 2).sum()), rel=1e-12)
        np.testing.assert_allclose(executor.grads()["d_x"], np.vstack([np.zeros((1, 4)), 2 * x[1:]]),
                                   rtol=1e-12)


def test_capture_refuses_getitem_with_an_index_array():
    x = mg.create_leaf(RNG.normal(size=(3, 4)), requires_grad=True, name="x")
    with pytest.raises(aot.CaptureError, match=r"getitem of shape \(3, 4\) with the index "
                                               r"array\(\[0, 2\]\).*ints and slices.*frozen.*"
                                               r"Fix: .*embedding"):
        aot.capture(lambda x: x[np.array([0, 2])].sum(), x)


def test_abs_is_reached_as_the_other_ops_are():
    """mg.abs(x), x.abs() and Python's abs(x) are the same op, with the same gradient."""
    values = np.array([-2.0, 0.0, 3.0])
    for call in (mg.abs, lambda v: v.abs(), abs):
        x = mg.create_leaf(values, requires_grad=True)
        out = call(x)
        assert out.grad_fn is not None and type(out.grad_fn).__name__ == type(mg.abs(x).grad_fn).__name__
        out.sum().backward()
        np.testing.assert_allclose(out.data, np.abs(values))
        np.testing.assert_allclose(x.grad, [-1.0, 0.0, 1.0])
