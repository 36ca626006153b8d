"""The ops under edge values and misuse (issue: no silent wrong gradient): negative transpose
axes, x ** 0 at 0, mse of two shapes, norm weights changed between forward and backward,
float16 rmsnorm, 1-D and empty inputs, and the clear errors. Each test is named after its rule;
gradients are checked against central differences in float64, in eager and aot where the op
exists in both."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import aot, kernels
from minigrad.aot.ir import Graph, Operation, TensorInfo
from minigrad.check import gradcheck
from minigrad.errors import DtypeError, InplaceError, MinigradError, ShapeError
from minigrad.nn import Attention, MoE, TinyTransformer

from aot_helpers import aot_grads, central_differences, eager_grads

RNG = np.random.default_rng(2411)


def normal(*shape):
    return RNG.standard_normal(shape)


# -- 1. transpose: negative axes mean the same axes in eager and aot ---------------------------
TRANSPOSES = [((3, 3, 3), (1, 0, -1)), ((2, 3, 4), (-1, 0, 1)), ((2, 3, 4), (0, -1, -2)),
              ((2, 3, 4), (-3, 2, 1)), ((3, 4), (-1, -2))]


@pytest.mark.parametrize("shape, axes", TRANSPOSES, ids=[str(a) for _, a in TRANSPOSES])
def test_transpose_negative_axes_count_from_the_end_in_eager_and_aot(shape, axes):
    x = normal(*shape)
    weights = normal(*np.transpose(x, axes).shape)   # every output element weighted differently

    def fn(v):
        return (v.transpose(axes) * weights).sum()

    want = central_differences(fn, [x])[0]
    np.testing.assert_allclose(want, np.transpose(weights, np.argsort(
        [a % len(shape) for a in axes])), atol=1e-6)   # (the weights, moved back)
    np.testing.assert_allclose(eager_grads(fn, [x])[1][0], want, atol=1e-6)
    np.testing.assert_allclose(eager_grads(lambda v: (mg.transpose(v, axes) * weights).sum(),
                                           [x])[1][0], want, atol=1e-6)
    np.testing.assert_allclose(aot_grads(fn, [x])[1][0], want, atol=1e-6)
    assert gradcheck(lambda v: v.transpose(axes), x)


def test_transpose_rule_of_a_graph_written_with_negative_axes_inverts_the_resolved_axes():
    g = Graph(inputs=["a"], params=[])
    g.shape_env.update({"a": TensorInfo((3, 3, 3), np.dtype(np.float64)),
                        "t": TensorInfo((3, 3, 3), np.dtype(np.float64)),
                        "loss": TensorInfo((), np.dtype(np.float64))})
    g.operations = [Operation("op_0", "transpose", ("a",), ("t",), {"axes": (1, 0, -1)}),
                    Operation("op_1", "sum", ("t",), ("loss",), {"axis": None, "keepdims": False})]
    g.outputs = ["loss"]
    backward = aot.derive_backward_graph(g)
    (op,) = [o for o in backward.operations if o.type == "transpose"]
    assert tuple(op.attrs["axes"]) == (1, 0, 2)   # argsort of (1, 0, -1) as written is (2, 1, 0)


def test_transpose_axes_that_are_not_a_permutation_are_a_shape_error():
    x = mg.create_leaf(normal(2, 3, 4), requires_grad=True)
    for axes in [(0, 1), (0, 0, 1), (0, 2, -1), (0, 1, 3), (-4, 1, 2)]:
        with pytest.raises(ShapeError, match=r"transpose: .*permutation of range\(a.ndim\).*Fix"):
            x.transpose(axes)


# -- 5. x ** 0 has gradient 0 everywhere, also at 0 -------------------------------------------
def test_pow_zero_exponent_has_zero_gradient_at_zero_in_eager_and_aot():
    x = np.array([0.0, -1.5, 2.0, 0.0])
    fn = lambda v: (v ** 0 * np.arange(1.0, 5.0)).sum()   # noqa: E731
    for grads in (eager_grads(fn, [x])[1][0], aot_grads(fn, [x])[1][0],
                  central_differences(fn, [x])[0]):
        np.testing.assert_array_equal(grads, np.zeros(4))
    assert gradcheck(lambda v: v ** 0, x)
    assert gradcheck(lambda v: v ** 0.0, x)


def test_pow_zero_exponent_gradient_is_zero_on_an_arena_in_float32():
    with mg.Arena("graph", 1 << 16).scope():
        x = mg.create_leaf(np.array([0.0, 1.0], np.float32), requires_grad=True)
        (x ** 0).sum().backward()
        np.testing.assert_array_equal(x.grad, [0.0, 0.0])
        assert x.grad.dtype == np.float32


def test_pow_kernel_shared_by_eager_and_aot_gives_zero_not_nan():
    g = kernels.pow_backward(np.array([0.0, 3.0]), 0, np.array([2.0, 5.0]))
    np.testing.assert_array_equal(g, [0.0, 0.0])
    np.testing.assert_allclose(kernels.pow_backward(np.array([0.0, 3.0]), 2, np.ones(2)), [0.0, 6.0])


# -- 9. mse refuses two shapes (no silent broadcasting) ----------------------------------------
MSE_PAIRS = [((4, 1), (4,)), ((4,), (4, 1)), ((3, 4), (4,)), ((3, 4), ()), ((2, 3), (3, 2))]


@pytest.mark.parametrize("pred_shape, target_shape", MSE_PAIRS, ids=[str(p) for p in MSE_PAIRS])
def test_mse_refuses_prediction_and_target_of_different_shapes(pred_shape, target_shape):
    pred = mg.create_leaf(normal(*pred_shape), requires_grad=True)
    want = (rf"mse: prediction of shape {pred_shape} and target of shape {target_shape}\. Rule: "
            .replace("(", r"\(").replace(")", r"\)") + r".*same shape.*Fix: reshape")
    with pytest.raises(ShapeError, match=want):
        mg.mse(pred, normal(*target_shape))
    with pytest.raises(ShapeError, match=want):   # capture runs the eager op: refused the same way
        aot.capture(lambda p: mg.mse(p, normal(*target_shape)), pred)


def test_mse_of_a_hand_written_graph_with_two_shapes_is_refused_by_the_aot_compiler():
    g = Graph(inputs=["p", "t"], params=[])
    g.shape_env.update({"p": TensorInfo((4, 1), np.dtype(np.float64)),
                        "t": TensorInfo((4,), np.dtype(np.float64)),
                        "loss": TensorInfo((), np.dtype(np.float64))})
    g.operations = [Operation("op_0", "mse", ("p", "t"), ("loss",), {})]
    g.outputs = ["loss"]
    with pytest.raises(ShapeError, match=r"mse: prediction of shape \(4, 1\) and target of shape "
                                         r"\(4,\).*Fix: reshape"):
        aot.Executor(g, None, None, normal(4, 1), normal(4))


def test_mse_of_equal_shapes_keeps_its_gradient_in_eager_and_aot():
    p, t = normal(4, 1), normal(4, 1)
    want = central_differences(lambda a, b: mg.mse(a, b), [p, t])
    for got in (eager_grads(lambda a, b: mg.mse(a, b), [p, t])[1],
                aot_grads(lambda a, b: mg.mse(a, b), [p, t])[1]):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, atol=1e-6)


# -- 13. the norm weights backward reads are saved, so a change in between is refused ----------
def _rmsnorm(x, w):
    return mg.rmsnorm(x, w)


RESIDUAL = normal(3, 4)


def _fused(x, w):
    return mg.fused_residual_rmsnorm(x, RESIDUAL, w)[1]


NORMS = [pytest.param(_rmsnorm, id="rmsnorm"), pytest.param(_fused, id="fused_residual_rmsnorm")]


@pytest.mark.parametrize("norm", NORMS)
def test_norm_weight_changed_between_forward_and_backward_is_refused(norm):
    x = mg.create_leaf(normal(3, 4), requires_grad=True)
    w = mg.create_leaf(normal(4), requires_grad=True)
    y = norm(x, w)
    with pytest.raises(ValueError, match="read-only"):
        w.data *= 2
    opt = mg.optim.SGD([w], lr=0.1)
    w.grad = np.ones(4)
    with pytest.raises(InplaceError, match="saved by a graph that is still alive"):
        opt.step()
    w.grad = None
    w0 = w.data.copy()
    (y * np.arange(12.0).reshape(3, 4)).sum().backward()
    want = central_differences(lambda a, b: (norm(a, b) * np.arange(12.0).reshape(3, 4)).sum(),
                               [x.data.copy(), w0])
    np.testing.assert_allclose(x.grad, want[0], atol=1e-6)   # dx of the weight forward saw
    np.testing.assert_allclose(w.grad, want[1], atol=1e-6)
    w.data *= 2   # backward consumed the graph: the optimiser's turn again


def test_qk_norm_weights_changed_between_forward_and_backward_are_refused():
    qkv = mg.create_leaf(normal(1, 2, 3, 1, 4), requires_grad=True)
    wq = mg.create_leaf(1.0 + 0.1 * normal(4), requires_grad=True)
    wk = mg.create_leaf(1.0 + 0.1 * normal(4), requires_grad=True)
    pos = np.arange(2)
    out = mg.qkv_qk_norm_rope(qkv, wq, wk, mg.rope_freqs(4), pos)
    for array in (wq.data, wk.data, pos):
        with pytest.raises(ValueError, match="read-only"):
            array *= 2
    out.sum().backward()
    wk.data *= 2


# -- 14. float16 rmsnorm: mean of squares in float32; one output dtype rule --------------------
def test_rmsnorm_of_large_float16_values_normalises_them_to_unit_size():
    x = np.array([[300.0, -300.0, 300.0, 300.0], [1000.0, 2.0, -3.0, 0.5]], np.float16)
    w = np.ones(4, np.float16)
    want = (x.astype(np.float64) / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True)))
    y = mg.rmsnorm(x, w).data
    assert y.dtype == np.float16
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(y[0], [1.0, -1.0, 1.0, 1.0], rtol=1e-3)
    r, y2 = mg.fused_residual_rmsnorm(x / 2, x / 2, w)
    np.testing.assert_allclose(y2.data.astype(np.float64), want, rtol=2e-3, atol=2e-3)


ALLOCATORS = [pytest.param(lambda: None, id="heap"),
              pytest.param(lambda: mg.Arena("t", 1 << 16), id="arena"),
              pytest.param(lambda: mg.Pool("p"), id="pool")]


@pytest.mark.parametrize("make", ALLOCATORS)
@pytest.mark.parametrize("x_dtype, w_dtype", [(np.float16, np.float32), (np.float32, np.float16),
                                              (np.float32, np.float64), (np.float16, np.float16)])
def test_rmsnorm_output_dtype_is_numpys_promotion_of_x_and_weight_everywhere(make, x_dtype, w_dtype):
    allocator = make()
    x = mg.create_leaf(normal(2, 4).astype(x_dtype), requires_grad=True)
    w = mg.create_leaf(normal(4).astype(w_dtype), requires_grad=True)
    want = np.result_type(x_dtype, w_dtype)
    if allocator is None:
        assert mg.rmsnorm(x, w).dtype == want
        assert mg.fused_residual_rmsnorm(x, x.data, w)[1].dtype == want
        return
    with allocator.scope():
        y = mg.rmsnorm(x, w)
        assert y.dtype == want
        y.sum().backward()
    assert x.grad.shape == (2, 4) and w.grad.shape == (4,)


def test_rmsnorm_of_float16_in_aot_has_the_eager_dtype_and_values():
    x = np.array([[300.0, -300.0, 300.0, 300.0]], np.float16)
    w = np.ones(4, np.float32)
    forward = aot.capture(lambda a: mg.rmsnorm(a, w).sum(), mg.create_leaf(x, requires_grad=True))
    run = aot.Executor(forward, None, None, x)
    np.testing.assert_allclose(float(run.run(x)), 2.0, rtol=1e-3)


# -- crashes: 1-D operands, empty batches, sequences of length 0 -------------------------------
def test_matmul_of_two_vectors_has_a_gradient():
    a, b = normal(3), normal(3)
    assert gradcheck(lambda u, v: u @ v, a, b)
    assert gradcheck(lambda u, v: mg.matmul(u, v), a, b)
    assert gradcheck(lambda u, v: u @ v, normal(2, 3), b)     # the other 1-D cases still hold
    assert gradcheck(lambda u, v: u @ v, a, normal(3, 2))
    assert gradcheck(lambda u, v: u @ v, normal(3), normal(2, 3, 4))


def test_rmsnorm_of_a_vector_normalises_its_one_row():
    x, w, r = normal(5), normal(5), normal(5)
    y = mg.rmsnorm(x, w).data
    np.testing.assert_allclose(y, x / np.sqrt(np.mean(x * x) + 1e-6) * w, rtol=1e-12)
    assert gradcheck(lambda a, b: mg.rmsnorm(a, b), x, w)
    assert gradcheck(lambda a, b, c: mg.fused_residual_rmsnorm(a, b, c)[1], x, r, w)
    weights = normal(5)
    for fn, arrays in ((lambda a, b: (mg.rmsnorm(a, b) * weights).sum(), [x, w]),
                       (lambda a, b, c: (mg.fused_residual_rmsnorm(a, b, c)[1] * weights).sum(),
                        [x, r, w])):
        for got, want in zip(aot_grads(fn, arrays)[1], central_differences(fn, arrays)):
            np.testing.assert_allclose(got, want, atol=1e-6)


def test_moe_layer_on_an_empty_batch_gives_empty_rows_and_zero_gradients():
    moe = MoE(8, 16, 4, 2, seed=0, dtype=np.float64)
    x = mg.create_leaf(np.zeros((0, 8)), requires_grad=True)
    y = moe(x)
    assert y.shape == (0, 8)
    y.sum().backward()
    assert x.grad.shape == (0, 8)
    for p in moe.parameters():
        if p.grad is not None:
            np.testing.assert_array_equal(p.grad, np.zeros(p.shape))


def test_attention_over_sequences_of_length_zero_is_empty_and_supported():
    q, k, v = (mg.create_leaf(np.zeros((2, 0, 2, 4)), requires_grad=True) for _ in range(3))
    out = mg.attention(q, k, v)
    assert out.shape == (2, 0, 2, 4)
    out.sum().backward()
    assert q.grad.shape == k.grad.shape == v.grad.shape == (2, 0, 2, 4)
    assert mg.attention(q, k, v, causal=False).shape == (2, 0, 2, 4)


def test_attention_layer_and_model_refuse_a_sequence_length_of_zero():
    with pytest.raises(ShapeError, match=r"Attention\(x, seq_len\): seq_len must be an integer "
                                          r">= 1, got 0.*Fix"):
        Attention(8, 2, seed=0)(mg.create_leaf(np.zeros((0, 8), np.float32)), 0)
    model = TinyTransformer(10, 8, 1, 2, 16, seed=0)
    with pytest.raises(ShapeError, match=r"TinyTransformer: ids of shape \(2, 0\) hold sequences "
                                         r"of length 0.*Fix"):
        model(np.zeros((2, 0), np.int64), np.zeros(0, np.int64))


# -- unclear errors made clear -----------------------------------------------------------------
def _leaf(values, requires_grad=False):
    return mg.create_leaf(np.array(values), requires_grad=requires_grad)


ERRORS = [
    ("constant_base_of_pow_must_be_positive_zero", lambda: 0 ** _leaf([1.0, 2.0], True),
     ValueError, r"pow: base \*\* .*shape \(2,\).*values \[0\.\].*only for base > 0.*Fix"),
    ("constant_base_of_pow_must_be_positive_negative", lambda: (-2) ** _leaf([1.0], True),
     ValueError, r"pow: base \*\* .*shape \(1,\).*values \[-2\.\].*only for base > 0.*Fix"),
    ("integer_array_takes_no_negative_integer_power", lambda: _leaf([1, 2]) ** -1,
     TypeError, r"pow: an integer array of dtype int64 \(shape \(2,\)\) \*\* -1\. Rule: integers "
                r"have no negative integer powers.*Fix: x.astype\(np.float64\) \*\* -1"),
    ("moe_topk_k_is_an_int_not_a_bool", lambda: mg.moe_topk(np.full((2, 3), 1 / 3), True),
     ValueError, r"moe_topk: k=True .*Rule: 1 <= k <= E = 3, an int, not a bool.*Fix"),
    ("reshape_size_must_be_an_integer", lambda: _leaf([1.0, 2.0]).reshape(2.0),
     ValueError, r"reshape: 2.0 is not a shape\. Rule: .*integers.*Fix"),
    # a mask array for causal was numpy's "truth value of an array is ambiguous"
    ("attention_causal_is_a_flag", lambda: mg.attention(*[np.ones((1, 2, 1, 2))] * 3,
                                                        causal=np.tril(np.ones((2, 2)))),
     TypeError, r"attention: causal is an array of shape \(2, 2\)\. Rule: causal is True .* or "
                r"False .*no mask array.*Fix"),
    ("flash_attention_causal_is_not_a_string", lambda: mg.flash_attention(
        np.ones((1, 2, 3, 1, 2)), causal="False"),
     TypeError, r"flash_attention: causal is 'False' \(str\)\. Rule: causal is True"),
    # a Python int target was reported as "got dtype float64" (it took the logits' dtype)
    ("cross_entropy_target_is_one_index_per_row", lambda: mg.cross_entropy(_leaf([[1.0, 2.0]]), 1),
     ValueError, r"cross_entropy: targets is a single number, for logits \(1, 2\)\. Rule: one "
                 r"class index per row, shape \(1,\)\. Fix: np.array\(\[t\]\)"),
]


@pytest.mark.parametrize("call, error, pattern", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_misuse_of_an_op_is_a_clear_minigrad_error(call, error, pattern):
    with pytest.raises(error, match=pattern) as info:
        call()
    assert isinstance(info.value, MinigradError)


AXIS_TAKERS = [
    ("sum", lambda x, axis: x.sum(axis)), ("mean", lambda x, axis: x.mean(axis)),
    ("max", lambda x, axis: x.max(axis)), ("softmax", lambda x, axis: x.softmax(axis)),
    ("log_softmax", lambda x, axis: x.log_softmax(axis)),
    ("concat", lambda x, axis: mg.concat([x, x], axis)),
    ("stack", lambda x, axis: mg.stack([x, x], axis)),
]


BAD_AXES = [(op, call, axis) for op, call in AXIS_TAKERS
            for axis in [True, np.True_, 1.0] + ([] if op in ("concat", "stack") else [(0, True)])]


@pytest.mark.parametrize("op, call, axis", BAD_AXES,
                         ids=[f"{op}-{axis!r}" for op, _, axis in BAD_AXES])
def test_an_axis_that_is_a_bool_or_a_float_is_refused_not_read_as_axis_1(op, call, axis):
    # x.sum(True) means keepdims to its writer; numpy refuses a bool axis, and minigrad summed
    # axis 1 without a word (stack too). Tuples only where the op takes a tuple of axes.
    x = _leaf(np.arange(6.0).reshape(2, 3), True)
    what = ("a float, not an integer" if isinstance(axis, float)
            else "a bool, not an axis.*keepdims is passed by name")
    with pytest.raises(ShapeError, match=rf"{op}: inputs of shapes \(2, 3\).*axis .*{what}.*Rule: .*Fix: "):
        call(x, axis)


def test_numpy_integer_axes_are_still_axes():
    x = _leaf(np.arange(6.0).reshape(2, 3), True)
    np.testing.assert_allclose(x.sum(np.int64(1)).data, [3.0, 12.0])
    np.testing.assert_allclose(x.max(axis=(np.int32(0), -1)).data, 5.0)
    assert mg.stack([x, x], np.int64(-1)).shape == (2, 3, 2)
    assert x.softmax((0, np.int64(1))).shape == (2, 3)


def test_a_positive_constant_base_keeps_its_gradient():
    assert gradcheck(lambda v: 2.5 ** v, normal(3))


def test_integer_exponent_of_an_integer_array_is_still_integer_and_float_exponent_float():
    assert (_leaf([1, 2]) ** 2).dtype == np.int64
    np.testing.assert_allclose((_leaf([1, 2]) ** -1.0).data, [1.0, 0.5])


def test_reshape_and_transpose_take_numpy_integers():
    x = _leaf(np.arange(6.0), True)
    assert x.reshape(np.int64(6)).shape == (6,)
    assert x.reshape(np.int64(2), np.int32(3)).shape == (2, 3)
    assert mg.reshape(x, np.int64(6)).shape == (6,)
    assert mg.broadcast_to(_leaf(1.0), np.int64(3)).shape == (3,)
    y = x.reshape((np.int64(2), 3)).transpose(np.int64(1), np.int64(0))
    assert y.shape == (3, 2)
    assert gradcheck(lambda v: v.reshape(np.int64(2), 3).transpose(np.int64(-1), 0), np.arange(6.0))


def test_softmax_of_integers_is_supported_as_numpy_exp_is_in_float64():
    logits = _leaf([[1, 2, 3], [0, 0, 5]])
    for op in (mg.softmax, mg.log_softmax):
        y = op(logits)
        assert y.dtype == np.float64
        np.testing.assert_allclose(y.data, op(logits.data.astype(np.float64)).data, rtol=1e-12)
    with mg.Arena("t", 1 << 14).scope():
        np.testing.assert_allclose(mg.softmax(logits).data.sum(axis=1), [1.0, 1.0], rtol=1e-12)


@pytest.mark.parametrize("make", ALLOCATORS)
@pytest.mark.parametrize("dtypes", [(np.float32, np.float32, np.float64),
                                    (np.float32, np.float64, np.float32),
                                    (np.float32, np.float32, np.float32),
                                    (np.float64, np.float32, np.float32)])
def test_linear_has_the_dtype_of_x_at_w_plus_b(make, dtypes):
    allocator = make()
    x, w, b = (mg.create_leaf(normal(*s).astype(d), requires_grad=True)
               for s, d in zip(((2, 3), (3, 4), (4,)), dtypes))
    want = (x.data @ w.data + b.data).dtype
    if allocator is None:
        y = mg.linear(x, w, b)
        assert y.dtype == want == (x @ w + b).dtype
        np.testing.assert_allclose(y.data, x.data @ w.data + b.data, rtol=1e-6)
        return
    with allocator.scope():
        y = mg.linear(x, w, b)
        assert y.dtype == want
        y.sum().backward()
    assert b.grad.dtype == b.dtype and b.grad.shape == (4,)


def test_linear_in_aot_has_the_dtype_and_values_of_eager_linear():
    x = normal(2, 3).astype(np.float32)
    w = mg.create_leaf(normal(3, 4).astype(np.float32), requires_grad=True, name="W")
    b = mg.create_leaf(normal(4), requires_grad=True, name="b")
    eager = mg.linear(x, w, b).sum()
    forward = aot.capture(lambda a: mg.linear(a, w, b).sum(), mg.create_leaf(x, name="x"),
                          params=[w, b])
    out = aot.Executor(forward, None, [w, b], x).run(x)
    assert out.dtype == eager.dtype == np.float64
    np.testing.assert_allclose(out, eager.data, rtol=1e-6)
