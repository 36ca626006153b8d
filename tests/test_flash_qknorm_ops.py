"""flash_attention (packed qkv) and qkv_qk_norm_rope in both engines: values against plain numpy
written here, gradcheck in float64, the tensors each saves (design D's rows) in eager and in the aot
backward's save list, aot == eager on random inputs, and misuse messages."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import aot
from minigrad.check import gradcheck
from minigrad.errors import DtypeError, ShapeError
from minigrad.ops.transformer import NormWeightError

RNG = np.random.default_rng(3003)
B, T, H, DH = 2, 5, 2, 4
FREQS = mg.rope_freqs(DH)
POS = np.arange(T)


def normal(*shape):
    return RNG.standard_normal(shape)


def weight():
    """A norm weight away from zero (backward divides by it), of both signs."""
    return RNG.uniform(0.5, 1.5, DH) * RNG.choice([-1.0, 1.0], DH)


W_OUT = normal(B, T, H, DH)
W_QKV = normal(B, T, 3, H, DH)


def proj(y, weights):
    """A scalar that weighs every element of y (the constant in y's dtype: float32 stays float32)."""
    return (y * weights.astype(y.dtype)).sum()


def ref_attention(q, k, v, causal=True):
    """softmax(q k^T / sqrt(Dh) + mask) v with einsum, and each row's log-sum-exp (B, H, T)."""
    s = np.einsum("bthd,bshd->bhts", q, k) / np.sqrt(q.shape[-1])
    if causal:
        s = s + np.triu(np.full((q.shape[1],) * 2, -np.inf), 1)
    lse = np.log(np.exp(s).sum(-1))
    return np.einsum("bhts,bshd->bthd", np.exp(s - lse[..., None]), v), lse


def ref_qk_norm_rope(qkv, wq, wk, freqs, pos, eps=1e-6):
    """Per head: x / rms(x) * w for q and k, then each pair (i, i + Dh/2) turned by pos * freqs[i]."""
    out, rstds = qkv.copy(), []
    half = qkv.shape[-1] // 2
    angle = np.broadcast_to(pos, qkv.shape[:2])[..., None, None] * freqs   # (B, T, 1, Dh/2)
    for j, w in ((0, wq), (1, wk)):
        x = qkv[:, :, j]
        rstd = 1.0 / np.sqrt(np.mean(x * x, -1) + eps)
        y = x * rstd[..., None] * w
        y1, y2 = y[..., :half], y[..., half:]
        out[:, :, j] = np.concatenate([y1 * np.cos(angle) - y2 * np.sin(angle),
                                       y1 * np.sin(angle) + y2 * np.cos(angle)], -1)
        rstds.append(rstd)
    return out, rstds[0], rstds[1]


# -- eager: values, gradients, saved tensors ----------------------------------------------------
@pytest.mark.parametrize("causal", [True, False])
def test_flash_attention_is_attention_on_the_views(causal):
    qkv = mg.create_leaf(normal(B, T, 3, H, DH), requires_grad=True)
    out = mg.flash_attention(qkv, causal=causal)
    want, _ = ref_attention(*(qkv.data[:, :, j] for j in range(3)), causal)
    np.testing.assert_allclose(out.data, want, rtol=1e-10)
    (out * W_OUT).sum().backward()
    q, k, v = (mg.create_leaf(qkv.data[:, :, j].copy(), requires_grad=True) for j in range(3))
    (mg.attention(q, k, v, causal=causal) * W_OUT).sum().backward()   # the same gradients, packed
    np.testing.assert_allclose(qkv.grad, np.stack([q.grad, k.grad, v.grad], 2), rtol=1e-12, atol=1e-14)


def test_qkv_qk_norm_rope_values():
    qkv, wq, wk = normal(B, T, 3, H, DH), weight(), weight()
    pos2 = np.array([[0, 3, 1, 4, 2], [5, 5, 0, 1, 2]])
    for pos in (POS, pos2):
        got = mg.qkv_qk_norm_rope(qkv, wq, wk, FREQS, pos).data
        np.testing.assert_allclose(got, ref_qk_norm_rope(qkv, wq, wk, FREQS.data, pos)[0], rtol=1e-12)
        np.testing.assert_array_equal(got[:, :, 2], qkv[:, :, 2])   # v passes unchanged


GRADCHECK = [
    ("flash-causal", lambda a: mg.flash_attention(a), [normal(2, 4, 3, 2, 3)]),
    ("flash-full", lambda a: mg.flash_attention(a, causal=False), [normal(1, 4, 3, 2, 3)]),
    ("flash-blocked-T64", lambda a: mg.flash_attention(a), [normal(1, 64, 3, 1, 2)]),
    ("qk_norm_rope", lambda a, wq, wk: mg.qkv_qk_norm_rope(a, wq, wk, FREQS, np.arange(3)),
     [normal(2, 3, 3, 2, DH), weight(), weight()]),
    ("qk_norm_rope-small-weights-eps", lambda a, wq, wk: mg.qkv_qk_norm_rope(
        a, wq, wk, FREQS, np.array([[2, 0, 7], [1, 1, 4]]), eps=0.1),
     [normal(2, 3, 3, 1, DH), weight() * 1e-2, weight()]),
]


@pytest.mark.parametrize("fn, arrays", [g[1:] for g in GRADCHECK], ids=[g[0] for g in GRADCHECK])
def test_gradcheck_float64(fn, arrays):
    assert gradcheck(fn, *arrays)


def test_saves_match_design_d():
    qkv = mg.create_leaf(normal(B, T, 3, H, DH), requires_grad=True)
    out = mg.flash_attention(qkv)
    saved = out.grad_fn.saved_tensors                                      # out, lse, qkv
    assert len(saved) == 3 and np.shares_memory(saved[0], out.data) and saved[2] is qkv.data
    want_lse = ref_attention(*(qkv.data[:, :, j] for j in range(3)))[1]
    assert saved[1].shape == (B, H, T)                                    # no (T, T) array kept
    np.testing.assert_allclose(saved[1], want_lse, rtol=1e-10)

    wq, wk = (mg.create_leaf(weight(), requires_grad=True) for _ in range(2))
    out = mg.qkv_qk_norm_rope(qkv, wq, wk, FREQS, POS)
    saved = out.grad_fn.saved_tensors                                      # qkv_out, q_rstd, k_rstd
    _, q_rstd, k_rstd = ref_qk_norm_rope(qkv.data, wq.data, wk.data, FREQS.data, POS)
    # + references to the weights, freqs and positions backward reads, so the saved-array guard
    # covers them (design D's row reads them directly; eager users can change them in between)
    assert len(saved) == 7 and np.shares_memory(saved[0], out.data)
    assert saved[3] is wq.data and saved[4] is wk.data and saved[5] is FREQS.data
    np.testing.assert_allclose(saved[1], q_rstd, rtol=1e-12)
    np.testing.assert_allclose(saved[2], k_rstd, rtol=1e-12)
    assert not any(np.shares_memory(s, qkv.data) for s in saved[:3])      # the input is not kept


def test_float32_stays_float32():
    qkv = mg.create_leaf(normal(B, T, 3, H, DH).astype(np.float32), requires_grad=True)
    wq, wk = (mg.create_leaf(weight().astype(np.float32), requires_grad=True) for _ in range(2))
    f32 = mg.rope_freqs(DH, dtype=np.float32)
    out = mg.flash_attention(mg.qkv_qk_norm_rope(qkv, wq, wk, f32, POS))
    assert out.dtype == np.float32
    (out * W_OUT.astype(np.float32)).sum().backward()
    assert all(a.grad.dtype == np.float32 for a in (qkv, wq, wk))


def test_a_small_weight_costs_float32_precision_within_bounds():
    """Backward divides by the weight: a weight 100x smaller than its neighbours still gives float32
    gradients within 2e-5 of float64 (docs/transformer_ops.md gives the measured growth)."""
    wq = np.ones(DH)
    wq[0] = 1e-2
    grads = {}
    for dtype in (np.float64, np.float32):
        qkv = mg.create_leaf(W_QKV.astype(dtype), requires_grad=True)
        w = mg.create_leaf(wq.astype(dtype), requires_grad=True)
        out = mg.qkv_qk_norm_rope(qkv, w, np.ones(DH, dtype), mg.rope_freqs(DH, dtype=dtype), POS)
        (out * np.cos(W_QKV).astype(dtype)).sum().backward()
        grads[dtype] = (qkv.grad.astype(np.float64), w.grad.astype(np.float64))
    for g32, g64 in zip(grads[np.float32], grads[np.float64]):
        assert np.max(np.abs(g32 - g64)) < 2e-5 * np.max(np.abs(g64))


@pytest.mark.parametrize("make", [lambda: mg.Arena("t", 1 << 18), lambda: mg.Pool("p")], ids=["arena", "pool"])
def test_inside_a_scope_same_values_and_gradients(make):
    def run(arrays):
        leaves = [mg.create_leaf(a.copy(), requires_grad=True) for a in arrays]
        out = mg.flash_attention(mg.qkv_qk_norm_rope(leaves[0], leaves[1], leaves[2], FREQS, POS))
        values = out.numpy()
        (out * W_OUT).sum().backward()
        return values, [np.array(v.grad) for v in leaves]

    arrays = [normal(B, T, 3, H, DH), weight(), weight()]
    want, want_grads = run(arrays)
    allocator = make()
    with allocator.scope():
        got, grads = run(arrays)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    for g, w in zip(grads, want_grads):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
    assert allocator.used == 0


# -- aot: the same gradients, the same saves ----------------------------------------------------
def _qk_then_flash(qkv, wq, wk):
    return proj(mg.flash_attention(mg.qkv_qk_norm_rope(qkv, wq, wk, FREQS, POS)), W_OUT)


CASES = {   # (IR op types, fn, float inputs)
    "flash_attention": (["flash_attention"], lambda a: proj(mg.flash_attention(a), W_OUT),
                        [normal(B, T, 3, H, DH)]),
    "flash_attention-full": (["flash_attention"],
                             lambda a: proj(mg.flash_attention(a, causal=False), W_OUT),
                             [normal(B, T, 3, H, DH)]),
    "qkv_qk_norm_rope": (["qkv_qk_norm_rope"],
                         lambda a, wq, wk: proj(mg.qkv_qk_norm_rope(a, wq, wk, FREQS, POS), W_QKV),
                         [normal(B, T, 3, H, DH), weight(), weight()]),
    "both": (["qkv_qk_norm_rope", "flash_attention"], _qk_then_flash,
             [normal(B, T, 3, H, DH), weight(), weight()]),
}


def _eager(fn, floats, dtype):
    leaves = [mg.create_leaf(a.astype(dtype), requires_grad=True) for a in floats]
    loss = fn(*leaves)
    loss.backward()
    return loss.item(), [v.grad for v in leaves]


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-10), (np.float32, 2e-4)], ids=["f64", "f32"])
@pytest.mark.parametrize("case", list(CASES))
def test_aot_equals_eager(case, dtype, tol):
    op_types, fn, floats = CASES[case]
    floats = [a.astype(dtype) for a in floats]
    forward = aot.capture(fn, *[mg.create_leaf(a, requires_grad=True) for a in floats])
    backward = aot.derive_backward_graph(forward)
    assert [op.type for op in forward.operations if op.type in op_types] == op_types, forward.text()
    run = aot.Executor(forward, backward, None, *floats)
    for values in (floats, [normal(*a.shape).astype(dtype) for a in floats]):   # new values, same plan
        if len(values) == 3:
            values[1:] = [weight().astype(dtype) for _ in range(2)]
        want_loss, want = _eager(fn, values, dtype)
        assert float(run.run(*values)) == pytest.approx(want_loss, rel=tol)
        for name, w in zip(forward.inputs, want):
            got = run.grads()[f"d_{name}"]
            assert got.dtype == dtype
            np.testing.assert_allclose(got, w, rtol=tol, atol=tol)


def _op(forward, op_type):
    (op,) = [o for o in forward.operations if o.type == op_type]
    return op


def test_save_lists_match_design_d():
    qkv = mg.create_leaf(normal(B, T, 3, H, DH), requires_grad=True, name="qkv")
    forward = aot.capture(lambda a: proj(mg.flash_attention(a), W_OUT), qkv)
    backward = aot.derive_backward_graph(forward)
    op = _op(forward, "flash_attention")
    assert op.outputs[1] == f"{op.outputs[0]}.lse" and forward.shape_env[op.outputs[1]].shape == (B, H, T)
    assert sorted(backward.save) == sorted([op.outputs[0], op.outputs[1], "qkv"])   # out, lse, qkv
    assert [o.type for o in backward.operations][-1] == "flash_attention_backward"

    wq, wk = (mg.create_leaf(weight(), requires_grad=True, name=n) for n in ("q_norm.weight", "k_norm.weight"))
    forward = aot.capture(lambda a: proj(mg.qkv_qk_norm_rope(a, wq, wk, FREQS, POS), W_QKV), qkv,
                          params=[wq, wk])
    backward = aot.derive_backward_graph(forward)
    op = _op(forward, "qkv_qk_norm_rope")
    out = op.outputs[0]
    assert op.outputs[1:] == (f"{out}.q_rstd", f"{out}.k_rstd")
    assert all(forward.shape_env[n].shape == (B, T, H) for n in op.outputs[1:])
    assert backward.save == [out, f"{out}.q_rstd", f"{out}.k_rstd"]       # qkv_out, q_rstd, k_rstd
    assert sorted(backward.outputs) == ["d_k_norm.weight", "d_q_norm.weight", "d_qkv"]


def test_frozen_norm_weights_get_no_gradient_in_aot():
    qkv = normal(B, T, 3, H, DH)
    wq, wk = weight(), weight()
    forward = aot.capture(lambda a: proj(mg.qkv_qk_norm_rope(a, wq, wk, FREQS, POS), W_QKV),
                          mg.create_leaf(qkv, requires_grad=True, name="qkv"))
    backward = aot.derive_backward_graph(forward)
    assert backward.outputs == ["d_qkv"]
    run = aot.Executor(forward, backward, None, qkv)
    run.run(qkv)
    want = _eager(lambda a: proj(mg.qkv_qk_norm_rope(a, wq, wk, FREQS, POS), W_QKV), [qkv], np.float64)[1]
    np.testing.assert_allclose(run.grads()["d_qkv"], want[0], rtol=1e-10, atol=1e-12)


# -- misuse: each message names the op, the shapes, the rule and the fix ------------------------
def _norm_rope(qkv=None, wq=None, wk=None, freqs=FREQS, pos=POS):
    return mg.qkv_qk_norm_rope(normal(B, T, 3, H, DH) if qkv is None else qkv,
                               weight() if wq is None else wq, weight() if wk is None else wk, freqs, pos)


MISUSE = [
    (lambda: mg.flash_attention(normal(B, T, H, DH)), ShapeError,
     r"flash_attention: qkv of shape \(2, 5, 2, 4\).*\(B, T, 3, H, Dh\).*Fix: reshape"),
    (lambda: mg.flash_attention(normal(B, T, 2, H, DH)), ShapeError,
     r"flash_attention: qkv of shape \(2, 5, 2, 2, 4\).*packs q, k and v"),
    (lambda: mg.flash_attention(np.ones((B, T, 3, H, DH), np.int64)), DtypeError,
     r"flash_attention: qkv has dtype int64.*float.*Fix"),
    (lambda: _norm_rope(qkv=normal(B, T, 3 * H * DH)), ShapeError,
     r"qkv_qk_norm_rope: qkv of shape \(2, 5, 24\).*\(B, T, 3, H, Dh\).*Fix"),
    (lambda: _norm_rope(wq=normal(H * DH)), ShapeError,
     r"qkv_qk_norm_rope: q_norm_weight of shape \(8,\) for qkv \(2, 5, 3, 2, 4\).*per head.*\(4,\).*Fix"),
    (lambda: _norm_rope(wk=np.array([1.0, 0.0, 2.0, 0.0])), NormWeightError,
     r"qkv_qk_norm_rope: k_norm_weight of shape \(4,\) has zeros at \[1, 3\].*dividing by the weight.*Fix"),
    (lambda: _norm_rope(freqs=mg.rope_freqs(6)), ShapeError,
     r"qkv_qk_norm_rope: x \(2, 5, 2, 4\), freqs \(3,\).*Dh/2.*Fix"),
    (lambda: _norm_rope(pos=np.arange(T + 1)), ShapeError,
     r"qkv_qk_norm_rope:.*position_ids \(6,\).*\(T,\) or"),
    (lambda: _norm_rope(pos=np.arange(T) * 1.0), DtypeError,
     r"qkv_qk_norm_rope: position_ids has dtype float64.*integer"),
    (lambda: _norm_rope(freqs=mg.create_leaf(FREQS.data, requires_grad=True)), DtypeError,
     r"qkv_qk_norm_rope: freqs \(2,\) requires grad.*Fix: pass mg.rope_freqs"),
]


@pytest.mark.parametrize("call, error, pattern", MISUSE, ids=[f"misuse{i}" for i in range(len(MISUSE))])
def test_misuse_is_a_clear_error(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


def test_a_weight_set_to_zero_after_the_forward_is_refused():
    """Eager: the saved weight is read-only until backward. aot: the check runs on every run."""
    wq = mg.create_leaf(weight(), requires_grad=True)
    out = mg.qkv_qk_norm_rope(mg.create_leaf(normal(B, T, 3, H, DH), requires_grad=True), wq, weight(),
                              FREQS, POS)
    # (an optimizer step between forward and backward would do this): the node saved the weight,
    # so the write is refused while the graph lives, before it can reach backward
    with pytest.raises(ValueError, match="read-only"):
        wq.data[2] = 0.0
    (out * W_QKV).sum().backward()
    assert np.all(wq.data)

    qkv = normal(B, T, 3, H, DH)
    wq = mg.create_leaf(weight(), requires_grad=True, name="wq")
    wk = mg.create_leaf(weight(), requires_grad=True, name="wk")
    forward = aot.capture(lambda a: (mg.qkv_qk_norm_rope(a, wq, wk, FREQS, POS) * W_QKV).sum(),
                          mg.create_leaf(qkv, requires_grad=True, name="qkv"), params=[wq, wk])
    run = aot.Executor(forward, aot.derive_backward_graph(forward), [wq, wk], qkv)
    wk.data[0] = 0.0   # the plan reads its parameters again on every run (constants are copied
    #                    at capture, so a parameter is where a weight changes between runs)
    with pytest.raises(NormWeightError, match=r"k_norm_weight .* has zeros at \[0\]"):
        run.run(qkv)
