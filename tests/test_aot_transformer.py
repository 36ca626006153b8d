"""The transformer ops ahead of time: executor gradients = eager gradients on random inputs (float64
and float32), the IR each capture makes (one operation with its outputs), the backward graphs' save
lists against design D's table, rope_freqs and index names without gradients, and a small
transformer block end to end under both memory plans."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import aot

RNG = np.random.default_rng(4242)
B, T, H, DH = 2, 5, 2, 4
D, F, V = H * DH, 6, 7
FREQS = mg.rope_freqs(DH)
POS = np.arange(T)
IDS = RNG.integers(0, V, size=(B, T))
TARGETS = RNG.integers(0, V, size=B * T)


def normal(*shape):
    return RNG.standard_normal(shape)


def proj(y, weights):
    """A scalar that weighs every element of y (the constant in y's dtype: float32 stays float32)."""
    return (y * weights.astype(y.dtype)).sum()


def _fused_both(x, r, w):
    out, y = mg.fused_residual_rmsnorm(x, r, w)
    return proj(out, W_BTD) + proj(y, W_BTD * W_BTD)


W_BTD = normal(B, T, D)
W_ATT = normal(B, T, H, DH)
W_F = normal(B * T, F)

# (IR op type, fn of the float inputs, float input arrays, integer inputs passed as graph inputs)
CASES = {
    "embedding": ("embedding", lambda w, ids: proj(mg.embedding(ids, w), W_BTD), [normal(V, D)], [IDS]),
    "rmsnorm": ("rmsnorm", lambda x, w: proj(mg.rmsnorm(x, w), W_BTD), [normal(B, T, D), normal(D)], []),
    "fused_residual_rmsnorm": ("fused_residual_rmsnorm", _fused_both,
                               [normal(B, T, D), normal(B, T, D), normal(D)], []),
    "fused_residual_rmsnorm-y-only": ("fused_residual_rmsnorm",
                                      lambda x, r, w: proj(mg.fused_residual_rmsnorm(x, r, w)[1], W_BTD),
                                      [normal(B, T, D), normal(B, T, D), normal(D)], []),
    "fused_residual_rmsnorm-residual-only": ("fused_residual_rmsnorm",
                                             lambda x, r, w: proj(mg.fused_residual_rmsnorm(x, r, w)[0], W_BTD),
                                             [normal(B, T, D), normal(B, T, D), normal(D)], []),
    "swiglu": ("swiglu", lambda gu: proj(mg.swiglu(gu), W_F), [normal(B * T, 2 * F)], []),
    "rope": ("rope", lambda x, pos: proj(mg.rope(x, FREQS, pos), W_ATT), [normal(B, T, H, DH)], [POS]),
    "attention": ("attention", lambda q, k, v: proj(mg.attention(q, k, v), W_ATT),
                  [normal(B, T, H, DH) for _ in range(3)], []),
    "attention-full": ("attention", lambda q, k, v: proj(mg.attention(q, k, v, causal=False), W_ATT),
                       [normal(B, T, H, DH) for _ in range(3)], []),
    "fused_lm_head_loss": ("fused_lm_head_loss", lambda x, w, t: mg.fused_lm_head_loss(x, w, t),
                           [normal(B * T, D), normal(D, V)], [TARGETS]),
}


def _eager(fn, floats, ints, dtype):
    leaves = [mg.create_leaf(a.astype(dtype), requires_grad=True) for a in floats]
    loss = fn(*leaves, *[mg.create_leaf(i) for i in ints])
    loss.backward()
    return loss.item(), [np.zeros_like(v.data) if v.grad is None else v.grad for v in leaves]


def _aot(fn, floats, ints, dtype, names=None):
    floats = [a.astype(dtype) for a in floats]
    inputs = [mg.create_leaf(a, requires_grad=True) for a in floats] + [mg.create_leaf(i) for i in ints]
    forward = aot.capture(fn, *inputs, input_names=names)
    backward = aot.derive_backward_graph(forward)
    run = aot.Executor(forward, backward, None, *floats, *ints)
    loss = float(run.run(*floats, *ints))
    grads = run.grads()
    return loss, [grads[f"d_{n}"].copy() for n in forward.inputs[:len(floats)]], forward, backward


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-10), (np.float32, 2e-4)], ids=["f64", "f32"])
@pytest.mark.parametrize("case", list(CASES))
def test_aot_equals_eager(case, dtype, tol):
    op_type, fn, floats, ints = CASES[case]
    want_loss, want = _eager(fn, floats, ints, dtype)
    loss, got, forward, backward = _aot(fn, floats, ints, dtype)
    assert [op.type for op in forward.operations].count(op_type) == 1, forward.text()
    assert loss == pytest.approx(want_loss, rel=tol)
    for g, w in zip(got, want):
        assert g.dtype == dtype
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
    again = [normal(*a.shape) for a in floats]   # a second run, new values, same compiled plan
    want_loss, want = _eager(fn, again, ints, dtype)
    run = aot.Executor(forward, backward, None, *[a.astype(dtype) for a in floats], *ints)
    assert float(run.run(*[a.astype(dtype) for a in again], *ints)) == pytest.approx(want_loss, rel=tol)
    for name, w in zip(forward.inputs, want):
        np.testing.assert_allclose(run.grads()[f"d_{name}"], w, rtol=tol, atol=tol)


def _graphs(fn, floats, ints, names):
    inputs = [mg.create_leaf(a, requires_grad=True) for a in floats] + [mg.create_leaf(i) for i in ints]
    forward = aot.capture(fn, *inputs, input_names=names)
    return forward, aot.derive_backward_graph(forward)


def _op(forward, op_type):
    (op,) = [o for o in forward.operations if o.type == op_type]
    return op


def test_ir_outputs_and_save_lists_match_design_d():
    """Every input is an activation here (a graph input, read through saved.), so the save list
    shows all the rule reads; parameters would be read directly and not listed."""
    forward, backward = _graphs(lambda x, w: proj(mg.rmsnorm(x, w), W_BTD), [normal(B, T, D), normal(D)], [],
                                ["x", "weight"])
    op = _op(forward, "rmsnorm")
    assert op.outputs[1] == f"{op.outputs[0]}.rstd" and forward.shape_env[op.outputs[1]].shape == (B, T)
    assert sorted(backward.save) == sorted(["x", op.outputs[1], "weight"])   # x, rstd (+ weight, an input)

    x, w = normal(B, T, D), mg.create_leaf(normal(D), requires_grad=True, name="ln.weight")
    forward = aot.capture(lambda x: proj(mg.rmsnorm(x, w), W_BTD),
                          mg.create_leaf(x, requires_grad=True, name="x"), params=[w])
    backward = aot.derive_backward_graph(forward)
    assert backward.save == ["x", f"{_op(forward, 'rmsnorm').outputs[0]}.rstd"]   # exactly x, rstd

    forward, backward = _fused_graphs()                                       # weight a parameter
    op = _op(forward, "fused_residual_rmsnorm")
    assert op.inputs == ("x", "residual", "ln.weight") and len(op.outputs) == 3
    assert set(backward.save) == {op.outputs[0], op.outputs[2]}               # residual_out, rstd

    forward, backward = _graphs(lambda w, ids: proj(mg.embedding(ids, w), W_BTD), [normal(V, D)], [IDS],
                                ["weight", "ids"])
    assert backward.save == ["ids"]                                           # ids

    forward, backward = _graphs(lambda gu: proj(mg.swiglu(gu), W_F), [normal(B * T, 2 * F)], [], ["gate_up"])
    assert backward.save == ["gate_up"]                                       # gate_up

    forward, backward = _graphs(lambda x, freqs, pos: (mg.rope(x, freqs, pos) * W_ATT).sum(),
                                [normal(B, T, H, DH), FREQS.data], [POS], ["x", "rope_freqs", "position_ids"])
    assert set(backward.save) == {"rope_freqs", "position_ids"} and backward.outputs == ["d_x"]

    forward, backward = _graphs(lambda q, k, v: (mg.attention(q, k, v) * W_ATT).sum(),
                                [normal(B, T, H, DH) for _ in range(3)], [], ["q", "k", "v"])
    op = _op(forward, "attention")
    assert op.outputs[1] == f"{op.outputs[0]}.lse" and forward.shape_env[op.outputs[1]].shape == (B, H, T)
    assert set(backward.save) == {"q", "k", "v", op.outputs[0], op.outputs[1]}  # q, k, v, out, lse
    assert all(forward.shape_env[n].shape[-2:] != (T, T) for n in backward.save)

    forward, backward = _graphs(lambda x, w, t: mg.fused_lm_head_loss(x, w, t),
                                [normal(B * T, D), normal(D, V)],
                                [TARGETS], ["x", "weight", "targets"])
    assert set(backward.save) == {"x", "weight", "targets"}                   # x, weight (+ targets)
    assert [op.type for op in backward.operations] == ["fused_lm_head_loss_backward"]   # one rule


def _fused_graphs():
    w = mg.create_leaf(normal(D), requires_grad=True, name="ln.weight")
    inputs = [mg.create_leaf(normal(B, T, D), requires_grad=True, name=n) for n in ("x", "residual")]
    forward = aot.capture(lambda x, r: _fused_both(x, r, w), *inputs, params=[w])
    return forward, aot.derive_backward_graph(forward)


def test_saves_of_existing_ops_match_design_d():
    cases = [(lambda a: (mg.softmax(a) * normal(3, 4)).sum(), "softmax", lambda op: [op.outputs[0]]),   # y
             (lambda a: (mg.silu(a) * normal(3, 4)).sum(), "silu", lambda op: ["a"]),                    # x
             (lambda a: (mg.gelu(a) * normal(3, 4)).sum(), "gelu", lambda op: ["a"])]                    # x
    for fn, op_type, want in cases:
        forward, backward = _graphs(fn, [normal(3, 4)], [], ["a"])
        op = _op(forward, op_type)
        assert backward.save == want(op), (op_type, backward.save)
    forward, backward = _graphs(lambda a, t: mg.cross_entropy(a, t), [normal(3, 5)], [np.array([0, 4, 2])],
                                ["logits", "t"])
    assert backward.save == ["logits", "t"]                                   # logits (+ targets)


def test_rope_freqs_and_index_names_get_no_gradient():
    """Float tensors named like design D's index tensors are non-differentiable by name."""
    x = normal(B, T, H, DH)
    forward, backward = _graphs(lambda x, freqs, pos: (mg.rope(x, freqs, pos) * W_ATT).sum(),
                                [x, FREQS.data], [POS], ["x", "layer0.rope_freqs", "position_ids"])
    assert backward.outputs == ["d_x"]
    assert "layer0.rope_freqs" in forward.inputs
    for name in ("scatter_indices", "routing_indices", "gather_indices", "expert_offsets", "moe.rope_freqs"):
        forward = aot.capture(lambda a, b: (a * b).sum(),
                              mg.create_leaf(normal(4), requires_grad=True, name="a"),
                              mg.create_leaf(np.arange(4.0), requires_grad=True, name=name))
        backward = aot.derive_backward_graph(forward)
        assert backward.outputs == ["d_a"], name
    forward = aot.capture(lambda a, b: (a * b).sum(), mg.create_leaf(normal(4), requires_grad=True, name="a"),
                          mg.create_leaf(np.arange(4.0), requires_grad=True, name="offsets"))
    assert aot.derive_backward_graph(forward).outputs == ["d_a", "d_offsets"]   # a control: no pattern


class Block:
    """One pre-norm transformer block and an LM head, written with minigrad ops."""

    def __init__(self, rng):
        shapes = {"emb": (V, D), "wq": (D, D), "wk": (D, D), "wv": (D, D), "wo": (D, D), "ln1": (D,),
                  "ln2": (D,), "ln3": (D,), "gate_up": (D, 2 * F), "down": (F, D), "head": (D, V)}
        self.params = {n: mg.create_leaf(rng.standard_normal(s) * 0.5 + (1.0 if n.startswith("ln") else 0.0),
                                         requires_grad=True, name=n) for n, s in shapes.items()}

    def __call__(self, ids, targets):
        p = self.params
        h = mg.embedding(ids, p["emb"])
        x = mg.rmsnorm(h, p["ln1"]).reshape(B * T, D)
        q, k, v = ((x @ p[n]).reshape(B, T, H, DH) for n in ("wq", "wk", "wv"))
        o = mg.attention(mg.rope(q, FREQS, POS), mg.rope(k, FREQS, POS), v).reshape(B * T, D) @ p["wo"]
        r, y = mg.fused_residual_rmsnorm(o.reshape(B, T, D), h, p["ln2"])
        m = mg.swiglu(y.reshape(B * T, D) @ p["gate_up"]) @ p["down"]
        _, y2 = mg.fused_residual_rmsnorm(m.reshape(B, T, D), r, p["ln3"])
        return mg.fused_lm_head_loss(y2.reshape(B * T, D), p["head"], targets)


@pytest.mark.parametrize("policy", ["save_all", "recompute"])
def test_a_block_trains_the_same_in_both_engines(policy):
    block = Block(np.random.default_rng(1))
    forward = aot.capture(block, mg.create_leaf(IDS, name="ids"), mg.create_leaf(TARGETS, name="targets"),
                          params=block.params)
    backward = aot.derive_backward_graph(forward)
    norms = [t for t in backward.save if t.endswith(".rstd")]
    plan = aot.plan_memory(forward, backward, policy=policy,
                           recompute=norms if policy == "recompute" else None)
    if policy == "recompute":   # the norms (one- and three-output ops) re-run in backward
        assert len(plan.recomputed) == 3
        assert sum(op.id.startswith("recompute_") for op in plan.backward.operations) == 3
        assert not any(t.endswith(".rstd") for t in plan.backward.save)
    run = aot.Executor(forward, plan.backward, block.params, IDS, TARGETS)
    types = {op.type for op in forward.operations}
    assert types >= {"embedding", "rmsnorm", "rope", "attention", "fused_residual_rmsnorm", "swiglu",
                     "fused_lm_head_loss"}
    for step in range(3):
        ids = np.random.default_rng(step).integers(0, V, size=(B, T))
        loss = block(ids, TARGETS)
        loss.backward()
        aot_loss = float(run.run(ids, TARGETS))
        assert aot_loss == pytest.approx(loss.item(), rel=1e-12)
        grads = run.grads()
        for name, p in block.params.items():
            np.testing.assert_allclose(grads[f"d_{name}"], p.grad, rtol=1e-9, atol=1e-12)
            p.data -= 0.1 * p.grad   # the executor reads the same arrays: both engines train on
            p.zero_grad()


PARTIAL = [   # (fn, float inputs, which of them are data: the rules write temps for those)
    (lambda x, w: proj(mg.rmsnorm(x, w), W_BTD), [normal(B, T, D), normal(D)], [0]),
    (lambda x, w: proj(mg.rmsnorm(x, w), W_BTD), [normal(B, T, D), normal(D)], [1]),
    (lambda x, r, w: proj(mg.fused_residual_rmsnorm(x, r, w)[1], W_BTD),
     [normal(B, T, D)] * 2 + [normal(D)], [1, 2]),
    (lambda x, r, w: proj(mg.fused_residual_rmsnorm(x, r, w)[1], W_BTD),
     [normal(B, T, D)] * 2 + [normal(D)], [0]),
    (_fused_both, [normal(B, T, D), normal(B, T, D), normal(D)], [0, 2]),
    (lambda q, k, v: proj(mg.attention(q, k, v), W_ATT), [normal(B, T, H, DH) for _ in range(3)], [1, 2]),
    (lambda q, k, v: proj(mg.attention(q, k, v), W_ATT), [normal(B, T, H, DH) for _ in range(3)], [0]),
    (lambda x, w: mg.fused_lm_head_loss(x, w, TARGETS), [normal(B * T, D), normal(D, V)], [0]),
    (lambda x, w: mg.fused_lm_head_loss(x, w, TARGETS), [normal(B * T, D), normal(D, V)], [1]),
]


@pytest.mark.parametrize("fn, floats, data", PARTIAL, ids=[f"partial{i}" for i in range(len(PARTIAL))])
def test_inputs_that_need_no_gradient(fn, floats, data):
    """Plain data among the inputs: aot derives only the wanted gradients, equal to eager's."""
    leaves = [mg.create_leaf(a, requires_grad=i not in data, name=f"in{i}") for i, a in enumerate(floats)]
    fn(*leaves).backward()
    forward = aot.capture(fn, *leaves)
    backward = aot.derive_backward_graph(forward)
    assert backward.outputs == [f"d_in{i}" for i in range(len(floats)) if i not in data]
    run = aot.Executor(forward, backward, None, *floats)
    run.run(*floats)
    for i, leaf in enumerate(leaves):
        if i not in data:
            np.testing.assert_allclose(run.grads()[f"d_in{i}"], leaf.grad, rtol=1e-10, atol=1e-12)


def test_a_frozen_norm_weight_gets_no_gradient():
    block = Block(np.random.default_rng(3))
    frozen = ("ln1", "ln2", "emb")
    forward = aot.capture(block, mg.create_leaf(IDS, name="ids"), mg.create_leaf(TARGETS, name="targets"),
                          params=block.params)
    backward = aot.derive_backward_graph(forward, aot.DeriveBackwardOptions(stop_gradients=frozen))
    assert not {f"d_{n}" for n in frozen} & set(backward.outputs)
    run = aot.Executor(forward, backward, block.params, IDS, TARGETS)
    run.run(IDS, TARGETS)
    block(IDS, TARGETS).backward()
    for name, p in block.params.items():
        if name not in frozen:
            np.testing.assert_allclose(run.grads()[f"d_{name}"], p.grad, rtol=1e-9, atol=1e-12)


def test_the_default_recompute_plan_recomputes_swiglu_and_the_row_ops():
    """swiglu's output (saved for the down projection) is rebuilt from gate_up, which its own
    backward keeps anyway: the save disappears. (The peak stays: it comes when backward starts,
    where the down projection's backward needs the rebuilt output right away.) The default
    recompute policy picks it, and the outputs of the other cheap row-wise ops (norms, rope)."""
    block = Block(np.random.default_rng(5))
    forward = aot.capture(block, mg.create_leaf(IDS, name="ids"), mg.create_leaf(TARGETS, name="targets"),
                          params=block.params)
    backward = aot.derive_backward_graph(forward)
    save_all = aot.plan_memory(forward, backward)
    (swiglu,) = [op.outputs[0] for op in forward.operations if op.type == "swiglu"]
    only_swiglu = aot.plan_memory(forward, backward, policy="recompute", recompute=[swiglu])
    assert swiglu in backward.save and swiglu not in only_swiglu.backward.save
    assert save_all.saved_bytes - only_swiglu.saved_bytes == forward.shape_env[swiglu].nbytes
    recompute = aot.plan_memory(forward, backward, policy="recompute")
    row_ops = {"swiglu", "rmsnorm", "fused_residual_rmsnorm", "rope"}
    expected = [t for t in backward.save
                if forward.producer_of(t) is not None and forward.producer_of(t).type in row_ops]
    assert swiglu in expected and len(expected) > 1
    assert sorted(recompute.recomputed) == sorted(expected)
    assert recompute.saved_bytes < only_swiglu.saved_bytes
    assert recompute.peak_bytes <= save_all.peak_bytes
    run = aot.Executor(forward, recompute.backward, block.params, IDS, TARGETS)
    run.run(IDS, TARGETS)
    block(IDS, TARGETS).backward()
    for name, p in block.params.items():
        np.testing.assert_allclose(run.grads()[f"d_{name}"], p.grad, rtol=1e-9, atol=1e-12)


def test_a_plan_checks_ids_and_targets_on_every_run():
    block = Block(np.random.default_rng(6))
    forward = aot.capture(block, mg.create_leaf(IDS, name="ids"), mg.create_leaf(TARGETS, name="targets"),
                          params=block.params)
    run = aot.Executor(forward, aot.derive_backward_graph(forward), block.params, IDS, TARGETS)
    run.run(IDS, TARGETS)
    bad_ids = IDS.copy()
    bad_ids[1, 2] = V
    with pytest.raises(mg.errors.ShapeError, match=rf"embedding: ids in \[\d+, {V}\].*0 <= id < V = {V}.*Fix"):
        run.run(bad_ids, TARGETS)
    bad_targets = TARGETS.copy()
    bad_targets[0] = -1
    with pytest.raises(mg.errors.ShapeError,
                       match=rf"fused_lm_head_loss: targets in \[-1, \d+\].*V = {V}.*Fix"):
        run.run(IDS, bad_targets)


def test_capture_with_frequencies_as_an_input_names_the_fix():
    x = mg.create_leaf(normal(B, T, H, DH), requires_grad=True, name="x")
    with pytest.raises(mg.errors.DtypeError, match=r"rope: freqs.*requires grad.*name it 'rope_freqs'"):
        aot.capture(lambda x, f: proj(mg.rope(x, f, POS), W_ATT), x, FREQS.data, input_names=["x", "freqs"])
    forward = aot.capture(lambda x, f: proj(mg.rope(x, f, POS), W_ATT), x, FREQS.data,
                          input_names=["x", "rope_freqs"])
    assert aot.derive_backward_graph(forward).outputs == ["d_x"]


def test_two_frequency_tables_of_different_sizes_keep_apart():
    """Each Attention may make its own mg.rope_freqs (all named "rope_freqs"): capture keeps
    each table under a name of its own, still ending in rope_freqs (no gradient by name)."""
    small, large = mg.rope_freqs(2), mg.rope_freqs(4)

    def fn(a, b):
        return proj(mg.rope(a, small, np.arange(3)), W_ATT[:, :3, :, :2]) + \
            proj(mg.rope(b, large, np.arange(3)), W_ATT[:, :3])
    a, b = normal(B, 3, H, 2), normal(B, 3, H, 4)
    forward = aot.capture(fn, mg.create_leaf(a, requires_grad=True, name="a"),
                          mg.create_leaf(b, requires_grad=True, name="b"))
    tables = [n for n in forward.constants if n.endswith("rope_freqs")]
    assert len(tables) == 2 and sorted(forward.constants[n].shape for n in tables) == [(1,), (2,)]
    backward = aot.derive_backward_graph(forward)
    run = aot.Executor(forward, backward, None, a, b)
    run.run(a, b)
    leaves = [mg.create_leaf(v, requires_grad=True) for v in (a, b)]
    fn(*leaves).backward()
    for name, leaf in zip("ab", leaves):
        np.testing.assert_allclose(run.grads()[f"d_{name}"], leaf.grad, rtol=1e-10)


def test_blocked_attention_through_a_plan():
    """T = 64: attention runs in blocks, in the plan's shared scratch buffers too."""
    q, k, v = (normal(2, 64, 2, 4) for _ in range(3))
    weights = normal(2, 64, 2, 4)
    want_loss, want = _eager(lambda q, k, v: proj(mg.attention(q, k, v), weights), [q, k, v], [], np.float64)
    for share in (True, False):
        inputs = [mg.create_leaf(a, requires_grad=True, name=n) for n, a in zip("qkv", (q, k, v))]
        forward = aot.capture(lambda q, k, v: proj(mg.attention(q, k, v), weights), *inputs)
        run = aot.Executor(forward, aot.derive_backward_graph(forward), None, q, k, v, share_buffers=share)
        for _ in range(2):
            assert float(run.run(q, k, v)) == pytest.approx(want_loss, rel=1e-12)
            for n, w in zip("qkv", want):
                np.testing.assert_allclose(run.grads()[f"d_{n}"], w, rtol=1e-10, atol=1e-12)


def test_no_activation_of_the_plan_lives_into_backward():
    # The embedding and v are read in backward through a reshape that backward saves: their
    # rows were coloured "activation (freed in forward)" while their bars ran into backward.
    model = mg.nn.TinyTransformer(vocab=11, dim=32, n_layers=1, n_heads=4, hidden=64, seed=0)
    ids, targets = mg.data.sort_digits(2, 8, seed=0)
    forward = aot.capture(model, ids, targets, params=model, input_names=["ids", "targets"])
    plan = aot.plan.plan_memory(forward, aot.derive_backward_graph(forward))
    kinds = {r.name: r.kind for r in plan.ranges}
    assert kinds["embed"] == kinds["blocks.0.attn.v"] == "saved"
    late = [r.name for r in plan.ranges if r.kind == "activation" and r.end >= plan.n_forward]
    assert late == []
    saved_inputs = [r for r in plan.ranges if r.kind == "input" and r.name in plan.backward.save]
    assert plan.saved_bytes == sum(r.nbytes for r in plan.ranges if r.kind == "saved") \
        + sum(r.nbytes for r in saved_inputs)
