"""Property test: a transformer block of random sizes (batch, sequence, heads, head dim, hidden,
vocabulary, causal or not, batched positions or not) gives the same loss and gradients in the
eager engine and through aot (capture, derive, compiled plan with shared buffers)."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import minigrad as mg
from minigrad import aot


@st.composite
def blocks(draw):
    sizes = dict(b=draw(st.integers(1, 3)), t=draw(st.integers(1, 6)), h=draw(st.integers(1, 3)),
                 dh=draw(st.sampled_from([2, 4, 6])), f=draw(st.integers(1, 5)), v=draw(st.integers(2, 6)))
    return sizes, draw(st.booleans()), draw(st.booleans()), draw(st.integers(0, 2**31 - 1))


def _block(s, causal, batched_positions, rng):
    b, t, h, dh, f, v = s["b"], s["t"], s["h"], s["dh"], s["f"], s["v"]
    d = h * dh
    shapes = {"emb": (v, d), "wq": (d, d), "wk": (d, d), "wv": (d, d), "ln1": (d,), "ln2": (d,),
              "gate_up": (d, 2 * f), "down": (f, d), "head": (d, v)}
    params = {n: mg.create_leaf(rng.standard_normal(shape), requires_grad=True, name=n)
              for n, shape in shapes.items()}
    freqs = mg.rope_freqs(dh)
    pos = rng.integers(0, 9, size=(b, t)) if batched_positions else np.arange(t)

    def fn(ids, targets):
        p = params
        x = mg.embedding(ids, p["emb"])
        flat = mg.rmsnorm(x, p["ln1"]).reshape(b * t, d)
        q, k, val = ((flat @ p[n]).reshape(b, t, h, dh) for n in ("wq", "wk", "wv"))
        o = mg.attention(mg.rope(q, freqs, pos), mg.rope(k, freqs, pos), val, causal=causal)
        r, y = mg.fused_residual_rmsnorm(o.reshape(b, t, d), x, p["ln2"])
        m = mg.swiglu(y.reshape(b * t, d) @ p["gate_up"]) @ p["down"]
        return mg.fused_lm_head_loss((m + r.reshape(b * t, d)), p["head"], targets)
    return fn, params


@settings(max_examples=25, deadline=None)
@given(blocks())
def test_random_blocks_agree_in_both_engines(case):
    sizes, causal, batched_positions, seed = case
    rng = np.random.default_rng(seed)
    fn, params = _block(sizes, causal, batched_positions, rng)
    ids = rng.integers(0, sizes["v"], size=(sizes["b"], sizes["t"]))
    targets = rng.integers(0, sizes["v"], size=sizes["b"] * sizes["t"])
    forward = aot.capture(fn, mg.create_leaf(ids, name="ids"), mg.create_leaf(targets, name="targets"),
                          params=params)
    run = aot.Executor(forward, aot.derive_backward_graph(forward), params, ids, targets)
    aot_loss = float(run.run(ids, targets))
    loss = fn(ids, targets)
    loss.backward()
    assert np.isclose(aot_loss, loss.item(), rtol=1e-12)
    for name, p in params.items():
        np.testing.assert_allclose(run.grads()[f"d_{name}"], p.grad, rtol=1e-9, atol=1e-12)
