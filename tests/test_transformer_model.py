"""The transformer blocks of minigrad.nn and the tiny model: shapes, names, eager = aot at every
training step, the sort task learns, and every misuse of a block raises a clear error."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import aot, data, nn, optim

SMALL = dict(vocab=11, dim=16, n_layers=2, n_heads=2, hidden=24)


def _ids(batch=3, seq=6, vocab=11, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, size=(batch, seq))
    return ids, rng.integers(0, vocab, size=batch * seq)


# -- shapes and names ------------------------------------------------------------------------------
def test_block_shapes():
    rng = np.random.default_rng(0)
    x = mg.create_leaf(rng.normal(size=(12, 16)).astype(np.float32), requires_grad=True)
    ids = rng.integers(0, 11, size=(3, 4))
    assert nn.Embedding(11, 16, seed=0)(ids).shape == (3, 4, 16)
    assert nn.RMSNorm(16)(x).shape == (12, 16)
    residual, h = nn.RMSNorm(16)(x, x * 2.0)
    assert residual.shape == h.shape == (12, 16)
    assert nn.Attention(16, 2, seed=0)(x, 4).shape == (12, 16)
    assert nn.SwiGLU(16, 24, seed=0)(x).shape == (12, 16)
    out, residual = nn.TransformerBlock(16, 2, 24, seed=0)(x, seq_len=4)
    assert out.shape == residual.shape == (12, 16)


def test_model_loss_logits_and_parameter_names():
    model = nn.TinyTransformer(**SMALL, seed=0)
    ids, targets = _ids()
    loss = model(ids, targets)
    assert loss.shape == () and np.isfinite(loss.item())
    assert model.logits(ids).shape == (18, 11)
    names = [p.name for p in model.parameters()]
    assert len(names) == len(set(names)) == 2 + 2 * 8 + 1   # embed, head; 8 per block; norm
    assert names[0] == "embed.weight" and names[-1] == "lm_head"
    assert "blocks.1.attn.q.weight" in names and "blocks.0.mlp.gate_up.weight" in names
    assert "norm.weight" in names and "blocks.0.attn_norm.weight" in names


def test_untrained_loss_is_about_uniform_and_logits_agree_with_the_loss():
    model = nn.TinyTransformer(**SMALL, seed=1, dtype=np.float64)
    ids, targets = _ids(seed=1)
    logits = model.logits(ids)
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    by_hand = -log_probs[np.arange(len(targets)), targets].mean()
    assert model(ids, targets).item() == pytest.approx(by_hand, rel=1e-10)
    assert abs(by_hand - np.log(11)) < 1.5   # small random logits: near a uniform guess


def test_scopes_name_the_blocks():
    model = nn.TinyTransformer(**SMALL, seed=0)
    loss = model(*_ids())
    scopes = {tuple(v.scope) for v in _graph_variables(loss)}
    assert ("blocks.0", "attn") in scopes and ("blocks.1", "mlp") in scopes
    assert ("embed",) in scopes


def _graph_variables(loss):
    seen, stack, found = set(), [loss], []
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        found.append(v)
        stack.extend(v.parents)
    return found


def test_capture_keeps_ids_and_targets_as_inputs_not_constants():
    model = nn.TinyTransformer(**SMALL, seed=0)
    ids, targets = _ids()
    forward = aot.capture(model, ids, targets, params=model, input_names=["ids", "targets"])
    assert forward.inputs == ["ids", "targets"]
    assert set(forward.constants) == {"rope_freqs", "position_ids"}
    assert set(forward.params) == {p.name for p in model.parameters()}


# -- eager and aot train alike ---------------------------------------------------------------
def _train_both(sizes, steps, seed=0):
    """Two copies of one model, float64, Adam; eager and aot gradients compared at every step."""
    eager = nn.TinyTransformer(**sizes, seed=seed, dtype=np.float64)
    ahead = nn.TinyTransformer(**sizes, seed=seed, dtype=np.float64)
    rng = np.random.default_rng(seed)
    ids, targets = data.sort_digits(4, 3, seed=rng)
    forward = aot.capture(ahead, ids, targets, params=ahead, input_names=["ids", "targets"])
    executor = aot.Executor(forward, aot.derive_backward_graph(forward), ahead, ids, targets)
    opt_eager = optim.Adam(eager.parameters(), lr=1e-2)
    opt_ahead = optim.Adam(ahead.parameters(), lr=1e-2)
    worst = 0.0
    for step in range(steps):
        ids, targets = data.sort_digits(4, 3, seed=rng)
        loss = eager(ids, targets)
        opt_eager.zero_grad()
        loss.backward()
        aot_loss = float(executor.run(ids, targets))
        grads = executor.grads()
        assert aot_loss == pytest.approx(loss.item(), rel=1e-10), step
        for p, q in zip(eager.parameters(), ahead.parameters()):
            assert p.name == q.name
            g = grads[f"d_{q.name}"]
            np.testing.assert_allclose(g, p.grad, rtol=1e-8, atol=1e-11,
                                       err_msg=f"{p.name} step {step}")
            worst = max(worst, float(np.abs(g - p.grad).max()))
            q.grad = g.copy()
        opt_eager.step()
        opt_ahead.step()
    for p, q in zip(eager.parameters(), ahead.parameters()):
        np.testing.assert_allclose(q.data, p.data, rtol=1e-8, atol=1e-10)
    return worst


def test_eager_and_aot_gradients_equal_at_every_training_step():
    worst = _train_both(dict(vocab=11, dim=8, n_layers=2, n_heads=2, hidden=12), steps=4)
    assert worst < 1e-9


def test_eager_and_aot_gradients_equal_with_moe_blocks():
    _train_both(dict(vocab=11, dim=8, n_layers=1, n_heads=2, hidden=6, n_experts=3, k=2), steps=3)


def test_recomputing_the_cheap_ops_keeps_the_gradients_and_halves_the_saves():
    model = nn.TinyTransformer(**SMALL, seed=2, dtype=np.float64)
    ids, targets = data.sort_digits(4, 3, seed=2)
    forward = aot.capture(model, ids, targets, params=model, input_names=["ids", "targets"])
    backward = aot.derive_backward_graph(forward)
    cheap = [t for t in backward.save if forward.producer_of(t) is not None and
             forward.producer_of(t).type in ("rmsnorm", "fused_residual_rmsnorm", "rope", "swiglu")]
    assert len(cheap) >= 4 * SMALL["n_layers"]
    save_all = aot.plan_memory(forward, backward)
    again = aot.plan_memory(forward, backward, policy="recompute", recompute=cheap)
    assert again.saved_bytes < 0.7 * save_all.saved_bytes
    assert again.peak_bytes <= save_all.peak_bytes
    default = aot.plan_memory(forward, backward, policy="recompute")   # the same choice, unasked
    assert sorted(default.recomputed) == sorted(cheap)
    runs = [aot.Executor(forward, b, model, ids, targets) for b in (backward, again.backward)]
    for run in runs:
        run.run(ids, targets)
    for name in backward.outputs:
        np.testing.assert_allclose(runs[1].grads()[name], runs[0].grads()[name], rtol=1e-12,
                                   atol=1e-14, err_msg=name)


def test_loss_decreases_on_the_sort_task():
    model = nn.TinyTransformer(vocab=11, dim=16, n_layers=1, n_heads=2, hidden=32, seed=0)
    opt = optim.Adam(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    eval_ids, eval_targets = data.sort_digits(64, 4, seed=123)
    with mg.no_grad():
        before = model(eval_ids, eval_targets).item()
    for _ in range(60):
        loss = model(*data.sort_digits(16, 4, seed=rng))
        opt.zero_grad()
        loss.backward()
        opt.step()
    with mg.no_grad():
        after = model(eval_ids, eval_targets).item()
    assert after < before - 0.3, (before, after)


# -- the task ------------------------------------------------------------------------------------
def test_sort_digits_rows_are_digits_separator_then_sorted():
    ids, targets = data.sort_digits(5, 4, seed=3)
    assert ids.shape == (5, 8) and targets.shape == (40,) and ids.dtype == np.int64
    full = np.concatenate([ids, targets.reshape(5, 8)[:, -1:]], axis=1)
    assert (full[:, 4] == data.SORT_SEP).all()
    assert (np.sort(full[:, :4], axis=1) == full[:, 5:]).all()
    assert (targets.reshape(5, 8)[:, :-1] == ids[:, 1:]).all()      # shifted by one
    mask = data.sort_answer_rows(5, 4).reshape(5, 8)
    assert (targets.reshape(5, 8)[mask].reshape(5, 4) == full[:, 5:]).all()
    again, _ = data.sort_digits(5, 4, seed=3)
    assert (again == ids).all()


def test_sort_digits_misuse():
    with pytest.raises(ValueError, match="n_digits"):
        data.sort_digits(4, 1)
    with pytest.raises(ValueError, match="batch"):
        data.sort_digits(0, 4)


# -- misuse ----------------------------------------------------------------------------------------
def test_embedding_refuses_float_ids_and_ids_out_of_range():
    emb = nn.Embedding(5, 4, seed=0)
    with pytest.raises(TypeError, match=r"Embedding.*float64.*integers.*astype"):
        emb(np.zeros((2, 3)))
    with pytest.raises(IndexError, match=r"Embedding.*\[0, 7\].*5 rows.*Fix"):
        emb(np.array([[0, 7]]))


def test_rmsnorm_misuse():
    norm = nn.RMSNorm(4)
    with pytest.raises(ValueError, match=r"RMSNorm\(4\).*\(3, 5\).*last axis.*Fix"):
        norm(mg.create_leaf(np.ones((3, 5))))
    with pytest.raises(ValueError, match=r"residual of shape \(2, 4\).*\(3, 4\).*Fix"):
        norm(mg.create_leaf(np.ones((3, 4))), mg.create_leaf(np.ones((2, 4))))
    with pytest.raises(ValueError, match="eps must be positive"):
        nn.RMSNorm(4, eps=0.0)


def test_attention_misuse():
    with pytest.raises(ValueError, match=r"dim=12, n_heads=4.*even.*Fix"):
        nn.Attention(12, 4)        # 3 features per head: rope needs pairs
    with pytest.raises(ValueError, match=r"dim=10, n_heads=4"):
        nn.Attention(10, 4)
    attn = nn.Attention(8, 2, seed=0)
    with pytest.raises(ValueError, match=r"Attention: input of shape \(2, 3, 8\).*rows.*reshape"):
        attn(mg.create_leaf(np.ones((2, 3, 8), np.float32)), 3)
    with pytest.raises(ValueError, match=r"10 rows.*seq_len=4.*batch \* seq_len"):
        attn(mg.create_leaf(np.ones((10, 8), np.float32)), 4)


def test_model_misuse():
    model = nn.TinyTransformer(**SMALL, seed=0)
    ids, targets = _ids()
    with pytest.raises(ValueError, match=r"targets of shape \(3, 6\).*\(18,\).*reshape\(-1\)"):
        model(ids, targets.reshape(3, 6))
    with pytest.raises(ValueError, match=r"ids of shape \(6,\).*\(B, T\).*ids\[None\]"):
        model(ids[0], targets[:6])
    with pytest.raises(ValueError, match=r"n_layers must be an integer >= 1, got 0"):
        nn.TinyTransformer(11, 16, 0, 2, 24)
    with pytest.raises(ValueError, match=r"k=3.*n_experts=2.*k <= n_experts"):
        nn.MoE(8, 8, 2, k=3)
    with pytest.raises(ValueError, match=r"SwiGLU: input of shape \(2, 3, 8\)"):
        nn.SwiGLU(8, 4, seed=0)(mg.create_leaf(np.ones((2, 3, 8), np.float32)))


# -- benchmarks/transformer.py ---------------------------------------------------------------
def test_transformer_benchmark_runs_and_prints_its_lines(capsys):
    import importlib.util
    import pathlib
    import re
    path = pathlib.Path(__file__).parent.parent / "benchmarks" / "transformer.py"
    spec = importlib.util.spec_from_file_location("transformer_benchmark", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.main(["--steps", "2"])     # stops when eager and aot (or torch) disagree on the loss
    out = capsys.readouterr().out
    number = r"\d+\.\d+"
    assert re.search(rf"^transformer step ms: eager={number} aot={number} ratio_eager_aot={number}",
                     out, re.M), out
    assert re.search(r"^torch: skipped|ratio_aot_torch=", out, re.M), out
    peaks = re.search(r"peak bytes: save_all=([\d,]+) recompute=([\d,]+)", out)
    assert peaks and all(int(p.replace(",", "")) > 0 for p in peaks.groups()), out
