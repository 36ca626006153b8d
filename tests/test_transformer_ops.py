"""Transformer ops in the eager engine: values against plain numpy written here, gradcheck in
float64, the tensors each node saves (design D's table), float32 kept, and misuse messages."""
import numpy as np
import pytest

import minigrad as mg
from minigrad.check import gradcheck
from minigrad.errors import DtypeError, ShapeError

RNG = np.random.default_rng(1203)
B, T, H, DH = 2, 5, 2, 4
D = H * DH


def normal(*shape):
    return RNG.standard_normal(shape)


def ref_rmsnorm(x, w, eps=1e-6):
    rstd = 1.0 / np.sqrt(np.mean(x * x, axis=-1) + eps)
    return x * rstd[..., None] * w, rstd


def ref_rope(x, freqs, pos):
    """Turn pairs (i, i + Dh/2) one position, head and pair at a time (plain loops)."""
    y = np.empty_like(x)
    half = x.shape[-1] // 2
    pos = np.broadcast_to(pos, x.shape[:2])
    for b, t, h, i in np.ndindex(x.shape[0], x.shape[1], x.shape[2], half):
        a = pos[b, t] * freqs[i]
        x1, x2 = x[b, t, h, i], x[b, t, h, i + half]
        y[b, t, h, i] = x1 * np.cos(a) - x2 * np.sin(a)
        y[b, t, h, i + half] = x1 * np.sin(a) + x2 * np.cos(a)
    return y


def ref_attention(q, k, v, causal=True):
    """Loop over batch, head and query: scores, mask, softmax, weighted sum; and each row's lse."""
    out, lse = np.zeros_like(q), np.zeros((q.shape[0], q.shape[2], q.shape[1]))
    for b, h, t in np.ndindex(q.shape[0], q.shape[2], q.shape[1]):
        keys = range(t + 1) if causal else range(q.shape[1])
        s = np.array([q[b, t, h] @ k[b, j, h] / np.sqrt(q.shape[-1]) for j in keys])
        lse[b, h, t] = np.log(np.sum(np.exp(s)))
        p = np.exp(s - lse[b, h, t])
        out[b, t, h] = sum(p[j] * v[b, j, h] for j in keys)
    return out, lse


# -- forward values ---------------------------------------------------------------------------
def test_forward_values_match_plain_numpy():
    x, w = normal(B, T, D), normal(D)
    y, rstd = ref_rmsnorm(x, w)
    np.testing.assert_allclose(mg.rmsnorm(x, w).data, y, rtol=1e-12)
    r, yy = mg.fused_residual_rmsnorm(x, 2 * x, w)
    np.testing.assert_allclose(r.data, 3 * x, rtol=1e-12)
    np.testing.assert_allclose(yy.data, ref_rmsnorm(3 * x, w)[0], rtol=1e-12)
    ids, table = np.array([[3, 0, 3], [1, 1, 2]]), normal(4, D)
    np.testing.assert_array_equal(mg.embedding(ids, table).data,
                                  np.stack([[table[i] for i in row] for row in ids]))
    gu = normal(3, 6)
    gate, up = gu[:, :3], gu[:, 3:]
    np.testing.assert_allclose(mg.swiglu(gu).data, gate / (1 + np.exp(-gate)) * up, rtol=1e-12)
    freqs = mg.rope_freqs(DH, base=100.0)
    np.testing.assert_allclose(freqs.data, [1.0, 0.1], rtol=1e-12)
    xr = normal(B, T, H, DH)
    np.testing.assert_allclose(mg.rope(xr, freqs, np.arange(T)).data,
                               ref_rope(xr, freqs.data, np.arange(T)), rtol=1e-12)
    pos2 = np.array([[0, 3, 1, 4, 2], [5, 5, 0, 1, 2]])
    np.testing.assert_allclose(mg.rope(xr, freqs, pos2).data, ref_rope(xr, freqs.data, pos2), rtol=1e-12)
    q, k, v = normal(B, T, H, DH), normal(B, T, H, DH), normal(B, T, H, DH)
    for causal in (True, False):
        np.testing.assert_allclose(mg.attention(q, k, v, causal=causal).data,
                                   ref_attention(q, k, v, causal)[0], rtol=1e-10)
    xs, head, t = normal(6, D), normal(D, 5), np.array([0, 4, 2, 2, 1, 3])
    logits = xs @ head
    want = -np.mean(logits[np.arange(6), t] - np.log(np.exp(logits).sum(1)))
    assert mg.fused_lm_head_loss(xs, head, t).item() == pytest.approx(want, rel=1e-12)


def test_rope_preserves_norms_and_position_zero_is_identity():
    x = normal(B, T, H, DH)
    y = mg.rope(x, mg.rope_freqs(DH), np.arange(T)).data
    pairs = lambda a: a[..., :DH // 2] ** 2 + a[..., DH // 2:] ** 2   # noqa: E731
    np.testing.assert_allclose(pairs(y), pairs(x), rtol=1e-12)
    np.testing.assert_array_equal(y[:, 0], x[:, 0])


# -- gradcheck in float64 ---------------------------------------------------------------------
FREQS = mg.rope_freqs(DH)
IDS = np.array([[0, 2, 2, 5], [1, 0, 3, 3]])
TARGETS = np.array([0, 3, 1, 4, 4, 2])


def _fused_both(x, res, w):
    r, y = mg.fused_residual_rmsnorm(x, res, w)
    return r * y


GRADCHECK = [
    ("embedding", lambda w: mg.embedding(IDS, w), [normal(6, 3)]),
    ("rmsnorm", lambda x, w: mg.rmsnorm(x, w), [normal(2, 3, 5), normal(5)]),
    ("rmsnorm-2d-eps", lambda x, w: mg.rmsnorm(x, w, eps=0.1), [normal(4, 5), normal(5)]),
    ("fused_residual_rmsnorm-both", _fused_both, [normal(2, 3, 5), normal(2, 3, 5), normal(5)]),
    ("fused_residual_rmsnorm-y", lambda x, r, w: mg.fused_residual_rmsnorm(x, r, w)[1],
     [normal(3, 5), normal(3, 5), normal(5)]),
    ("fused_residual_rmsnorm-residual", lambda x, r, w: mg.fused_residual_rmsnorm(x, r, w)[0] * 1.0 + w,
     [normal(3, 5), normal(3, 5), normal(5)]),
    ("swiglu", mg.swiglu, [normal(2, 3, 8)]),
    ("rope", lambda x: mg.rope(x, FREQS, np.arange(3)), [normal(2, 3, 2, DH)]),
    ("rope-batched-positions", lambda x: mg.rope(x, FREQS, np.array([[2, 0, 7], [1, 1, 4]])),
     [normal(2, 3, 2, DH)]),
    ("attention-causal", lambda q, k, v: mg.attention(q, k, v), [normal(2, 4, 2, 3) for _ in range(3)]),
    ("attention-full", lambda q, k, v: mg.attention(q, k, v, causal=False),
     [normal(1, 4, 2, 3) for _ in range(3)]),
    ("fused_lm_head_loss", lambda x, w: mg.fused_lm_head_loss(x, w, TARGETS), [normal(6, 3), normal(3, 5)]),
]


@pytest.mark.parametrize("fn, arrays", [g[1:] for g in GRADCHECK], ids=[g[0] for g in GRADCHECK])
def test_gradcheck_float64(fn, arrays):
    assert gradcheck(fn, *arrays)


def test_only_the_differentiable_inputs_get_gradients():
    w = mg.create_leaf(normal(6, 3), requires_grad=True)
    ids = mg.create_leaf(IDS)
    mg.embedding(ids, w).sum().backward()
    assert ids.grad is None
    np.testing.assert_array_equal(w.grad, np.bincount(IDS.ravel(), minlength=6)[:, None] * np.ones(3))


# -- saved tensors: design D's table ----------------------------------------------------------
def _leaves(*arrays):
    return [mg.create_leaf(a, requires_grad=a.dtype.kind == "f") for a in arrays]


def test_saves_match_design_d():
    x, w = _leaves(normal(B, T, D), normal(D))
    # x, rstd (design D) + the weight: eager saves a reference to it so the saved-array guard
    # covers it (a change between forward and backward must raise, not give a wrong dx)
    node = mg.rmsnorm(x, w).grad_fn
    assert len(node.saved_tensors) == 3 and node.saved_tensors[0] is x.data
    assert node.saved_tensors[2] is w.data
    np.testing.assert_allclose(node.saved_tensors[1], ref_rmsnorm(x.data, w.data)[1], rtol=1e-12)

    xa, res = _leaves(normal(B, T, D), normal(B, T, D))
    r, y = mg.fused_residual_rmsnorm(xa, res, w)                              # residual_out, rstd
    saved = y.grad_fn.saved_tensors                                           # + the weight
    assert len(saved) == 3 and np.shares_memory(saved[0], r.data) and saved[2] is w.data
    np.testing.assert_allclose(saved[1], ref_rmsnorm(xa.data + res.data, w.data)[1], rtol=1e-12)
    assert r.grad_fn.saved_tensors == ()                                      # the add saves nothing

    ids, table = _leaves(IDS, normal(6, 3))
    assert mg.embedding(ids, table).grad_fn.saved_tensors == (ids.data,)     # ids

    (gu,) = _leaves(normal(3, 8))
    assert mg.swiglu(gu).grad_fn.saved_tensors == (gu.data,)                 # gate_up

    xr, pos = _leaves(normal(B, T, H, DH), np.arange(T))
    saved = mg.rope(xr, FREQS, pos).grad_fn.saved_tensors                    # freqs, position_ids
    assert len(saved) == 2 and saved[0] is FREQS.data and saved[1] is pos.data

    q, k, v = _leaves(normal(B, T, H, DH), normal(B, T, H, DH), normal(B, T, H, DH))
    out = mg.attention(q, k, v)
    saved = out.grad_fn.saved_tensors                                         # q, k, v, out, lse
    assert len(saved) == 5 and all(s is a.data for s, a in zip(saved[:3], (q, k, v)))
    assert np.shares_memory(saved[3], out.data)
    assert saved[4].shape == (B, H, T)                                        # no (T, T) array
    np.testing.assert_allclose(saved[4], ref_attention(q.data, k.data, v.data)[1], rtol=1e-10)
    assert all(s.shape[-1] != T or s.shape[-2] != T for s in saved)

    xs, head, t = _leaves(normal(6, 3), normal(3, 5), TARGETS)
    saved = mg.fused_lm_head_loss(xs, head, t).grad_fn.saved_tensors          # x, weight (+ targets)
    assert saved[:2] == (xs.data, head.data) and saved[2] is t.data and saved[2].dtype.kind == "i"


def test_saves_of_the_existing_ops_match_design_d():
    (a,) = _leaves(normal(3, 4))
    z = mg.softmax(a)
    assert len(z.grad_fn.saved_tensors) == 1 and np.shares_memory(z.grad_fn.saved_tensors[0], z.data)  # y
    assert mg.silu(a).grad_fn.saved_tensors == (a.data,)                     # x
    assert mg.gelu(a).grad_fn.saved_tensors == (a.data,)                     # x
    logits, t = _leaves(normal(3, 5), np.array([0, 4, 1]))
    saved = mg.cross_entropy(logits, t).grad_fn.saved_tensors
    # design D saves the logits; the eager op saves softmax(logits) instead (same shape and bytes,
    # and backward needs no second exp), plus the integer targets
    e = np.exp(logits.data - logits.data.max(1, keepdims=True))
    assert len(saved) == 2 and saved[0].shape == logits.shape and saved[1] is t.data
    np.testing.assert_allclose(saved[0], e / e.sum(1, keepdims=True), rtol=1e-12)


# -- float32 stays float32 --------------------------------------------------------------------
def test_float32_in_float32_out_and_in_backward():
    f32 = lambda *s: normal(*s).astype(np.float32)   # noqa: E731
    q, k, v, w, x, head = _leaves(f32(B, T, H, DH), f32(B, T, H, DH), f32(B, T, H, DH), f32(D),
                                  f32(B * T, D), f32(D, 5))
    o = mg.attention(mg.rope(q, mg.rope_freqs(DH, dtype=np.float32), np.arange(T)), k, v)
    y = mg.rmsnorm(o.reshape(B * T, D) + x, w)
    table = mg.create_leaf(f32(3, 2 * D))
    h = mg.swiglu(mg.embedding(np.arange(B * T) % 3, table) * 1.0) * y
    loss = mg.fused_lm_head_loss(h, head, np.arange(B * T) % 5)
    assert o.dtype == y.dtype == loss.dtype == np.float32
    loss.backward()
    assert all(a.grad.dtype == np.float32 for a in (q, k, v, w, x, head))


# -- misuse: each message names the op, the shapes, the rule and the fix ----------------------
MISUSE = [
    (lambda: mg.embedding(np.array([0.0, 1.0]), normal(3, 2)), DtypeError,
     r"embedding: ids.*float64.*integer.*astype\(np.int64\)"),
    (lambda: mg.embedding(np.array([0, 3]), normal(3, 2)), ShapeError,
     r"embedding: ids in \[0, 3\].*\(3, 2\).*0 <= id < V = 3.*Fix"),
    (lambda: mg.embedding(np.array([0]), normal(3)), ShapeError,
     r"embedding: weight of shape \(3,\).*\(V, D\).*Fix"),
    (lambda: mg.rmsnorm(normal(2, 4), normal(3)), ShapeError,
     r"rmsnorm: x of shape \(2, 4\) and weight of shape \(3,\).*last axis.*Fix"),
    (lambda: mg.rmsnorm(np.ones((2, 4), np.int64), normal(4)), DtypeError,
     r"rmsnorm: x has dtype int64.*float.*Fix"),
    (lambda: mg.fused_residual_rmsnorm(normal(2, 4), normal(2, 4), normal(5)), ShapeError,
     r"fused_residual_rmsnorm: x and residual of shapes \(2, 4\) and \(2, 4\) and weight of shape \(5,\).*Fix"),
    (lambda: mg.swiglu(normal(2, 5)), ShapeError, r"swiglu: gate_up of shape \(2, 5\).*odd.*2F.*Fix"),
    (lambda: mg.rope(normal(2, 3, 4), FREQS, np.arange(3)), ShapeError,
     r"rope: x \(2, 3, 4\).*\(B, T, H, Dh\).*Fix"),
    (lambda: mg.rope(normal(2, 3, 2, 4), mg.rope_freqs(6), np.arange(3)), ShapeError,
     r"rope: x \(2, 3, 2, 4\), freqs \(3,\).*Fix"),
    (lambda: mg.rope(normal(2, 3, 2, 4), FREQS, np.arange(4)), ShapeError,
     r"rope:.*position_ids \(4,\).*\(T,\) or.*Fix"),
    (lambda: mg.rope(normal(2, 3, 2, 4), FREQS, np.arange(3.0)), DtypeError,
     r"rope: position_ids has dtype float64.*integer"),
    (lambda: mg.rope(normal(2, 3, 2, 4), mg.create_leaf(FREQS.data, requires_grad=True), np.arange(3)),
     DtypeError, r"rope: freqs \(2,\) requires grad.*fixed constants.*Fix: pass mg.rope_freqs"),
    (lambda: mg.rope_freqs(5), ShapeError, r"rope_freqs: head_dim=5.*even.*Fix"),
    (lambda: mg.attention(normal(2, 3, 2, 4), normal(2, 3, 2, 4), normal(2, 4, 2, 4)), ShapeError,
     r"attention: q \(2, 3, 2, 4\), k \(2, 3, 2, 4\), v \(2, 4, 2, 4\).*same shape.*Fix"),
    (lambda: mg.attention(normal(6, 8), normal(6, 8), normal(6, 8)), ShapeError,
     r"attention: q \(6, 8\).*\(B, T, H, Dh\)"),
    (lambda: mg.fused_lm_head_loss(normal(4, 3), normal(4, 5), np.arange(4)), ShapeError,
     r"fused_lm_head_loss: x \(4, 3\), weight \(4, 5\), targets \(4,\).*x \(N, D\), weight \(D, V\).*Fix"),
    (lambda: mg.fused_lm_head_loss(normal(4, 3), normal(3, 5), np.array([0, 1, 2, 5])), ShapeError,
     r"fused_lm_head_loss: targets in \[0, 5\] for V = 5.*Fix"),
    (lambda: mg.fused_lm_head_loss(normal(4, 3), normal(3, 5), np.zeros(4)), DtypeError,
     r"fused_lm_head_loss: targets has dtype float64.*integer"),
]


@pytest.mark.parametrize("call, error, pattern", MISUSE, ids=[f"misuse{i}" for i in range(len(MISUSE))])
def test_misuse_is_a_clear_error(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


# -- inside an arena or a pool ----------------------------------------------------------------
ALLOCATORS = [pytest.param(lambda: mg.Arena("t", 1 << 18), id="arena"),
              pytest.param(lambda: mg.Pool("p"), id="pool")]


def _grads(fn, arrays):
    leaves = [mg.create_leaf(a.copy(), requires_grad=True) for a in arrays]
    out = fn(*leaves)
    values = out.numpy()   # before backward: a pool takes the memory back as backward runs
    (out * np.linspace(-1.0, 2.0, out.size).reshape(out.shape)).sum().backward()
    return values, [np.array(v.grad) for v in leaves]


@pytest.mark.parametrize("make", ALLOCATORS)
@pytest.mark.parametrize("fn, arrays", [g[1:] for g in GRADCHECK], ids=[g[0] for g in GRADCHECK])
def test_inside_a_scope_same_values_and_gradients(make, fn, arrays):
    want, want_grads = _grads(fn, arrays)
    allocator = make()
    with allocator.scope():
        got, grads = _grads(fn, arrays)
        assert any(b.kind == "activation" for b in allocator.blocks)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    for g, w in zip(grads, want_grads):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
    assert allocator.used == 0


def test_a_block_trains_on_an_arena_with_flat_memory():
    """Params (and their grad buffers) on a permanent arena, each step on a graph arena: the
    graph arena's high-water mark and the permanent arena do not grow after the first step,
    and every step's gradients equal heap mode's."""
    rng = np.random.default_rng(9)
    shapes = {"emb": (6, D), "wq": (D, D), "ln": (D,), "gu": (D, 6), "head": (D, 6)}
    init = {n: rng.standard_normal(s) * 0.5 for n, s in shapes.items()}
    perm, graph = mg.Arena("perm", 1 << 16), mg.Arena("graph", 1 << 18)
    on_arena = {n: mg.create_leaf(a, requires_grad=True, arena=perm) for n, a in init.items()}
    on_heap = {n: mg.create_leaf(a, requires_grad=True) for n, a in init.items()}
    ids = rng.integers(0, 6, size=(B, T))

    def loss_of(p):
        h = mg.embedding(ids, p["emb"])
        q = (mg.rmsnorm(h, p["ln"]).reshape(B * T, D) @ p["wq"]).reshape(B, T, H, DH)
        o = mg.attention(mg.rope(q, FREQS, np.arange(T)), q, q).reshape(B, T, D)
        r, y = mg.fused_residual_rmsnorm(o, h, p["ln"])
        m = mg.swiglu(y.reshape(B * T, D) @ p["gu"])
        return mg.fused_lm_head_loss(r.reshape(B * T, D) * 0.5 + m.sum() * 0.01, p["head"],
                                     np.arange(B * T) % 6)
    marks = []
    for step in range(4):
        with graph.scope():
            loss_of(on_arena).backward()
        loss_of(on_heap).backward()
        for n in init:
            np.testing.assert_allclose(on_arena[n].grad, on_heap[n].grad, rtol=1e-12, atol=1e-14)
            for p in (on_arena[n], on_heap[n]):
                p.data -= 0.05 * p.grad
                p.zero_grad()
        marks.append((graph.high_water, perm.used))
    assert marks[1:] == marks[:1] * 3, marks


# -- long causal sequences: attention in blocks of query rows ---------------------------------
def test_blocked_causal_attention_matches_the_loop_and_the_full_matrices():
    """T >= 64 runs in 4 blocks of query rows (the masked corner is skipped): same out and lse
    as the loop, same gradients as the full-matrix formulas written out here."""
    b, t, h, dh = 1, 70, 2, 3
    q, k, v, g = (normal(b, t, h, dh) for _ in range(4))
    want_out, want_lse = ref_attention(q, k, v)
    leaves = [mg.create_leaf(a, requires_grad=True) for a in (q, k, v)]
    out = mg.attention(*leaves)
    np.testing.assert_allclose(out.data, want_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out.grad_fn.saved_tensors[4], want_lse, rtol=1e-10)
    (out * g).sum().backward()
    qh, kh, vh, gh = (a.transpose(0, 2, 1, 3) for a in (q, k, v, g))
    s = qh @ kh.transpose(0, 1, 3, 2) / np.sqrt(dh) + np.triu(np.full((t, t), -np.inf), 1)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    dp = gh @ vh.transpose(0, 1, 3, 2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    want = [ds @ kh / np.sqrt(dh), ds.transpose(0, 1, 3, 2) @ qh / np.sqrt(dh), p.transpose(0, 1, 3, 2) @ gh]
    for leaf, w in zip(leaves, want):
        np.testing.assert_allclose(leaf.grad, w.transpose(0, 2, 1, 3), rtol=1e-9, atol=1e-12)


def test_blocked_causal_attention_gradcheck():
    assert gradcheck(lambda q, k, v: mg.attention(q, k, v), *(normal(1, 64, 1, 2) for _ in range(3)))
