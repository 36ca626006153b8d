"""Mixture-of-experts ops in the eager engine: values against plain loops, gradcheck in float64,
the tensors each node saves (design D's table), deterministic top-k ties, and misuse messages."""
import numpy as np
import pytest

import minigrad as mg
from minigrad.check import gradcheck
from minigrad.errors import DtypeError, ShapeError

RNG = np.random.default_rng(1212)
N, E, K, D, F = 6, 4, 2, 3, 5


def spaced_probs(n, e, rng=RNG):
    """Rows of distinct probabilities at least 0.01 apart: top-k cannot flip under gradcheck's eps."""
    raw = np.stack([rng.permutation(e) for _ in range(n)]).astype(np.float64)
    probs = (raw + 1.0) / (raw + 1.0).sum(axis=1, keepdims=True)
    return probs + rng.uniform(0, 1e-3, (n, e))


def routing(n=N, e=E, k=K, rng=RNG):
    """indices (n, k) with one expert deliberately left without tokens (expert e-1)."""
    return np.stack([rng.choice(e - 1, size=k, replace=False) for _ in range(n)]).astype(np.int64)


def offsets_for(indices, e=E):
    counts = np.bincount(indices.reshape(-1), minlength=e)
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


# -- forward values against plain Python loops -------------------------------------------------
def test_topk_values_and_order_match_a_loop():
    probs = spaced_probs(N, E)
    weights, indices = mg.moe_topk(probs, K)
    for n in range(N):
        order = sorted(range(E), key=lambda e: -probs[n, e])[:K]
        assert indices.data[n].tolist() == order
        assert np.array_equal(weights.data[n], probs[n, order])
    assert indices.dtype == np.int64 and not indices.requires_grad


def test_topk_ties_go_to_the_lower_expert_index():
    probs = np.array([[0.3, 0.3, 0.2, 0.2], [0.1, 0.4, 0.1, 0.4], [0.25, 0.25, 0.25, 0.25]])
    _, indices = mg.moe_topk(probs, 3)
    assert indices.data.tolist() == [[0, 1, 2], [1, 3, 0], [0, 1, 2]]


def test_permute_groups_rows_by_expert_in_token_order():
    x = RNG.standard_normal((N, D))
    indices = routing()
    x_perm, scatter, offsets = mg.moe_permute(x, indices, E)
    expected_rows = [(e, n) for e in range(E) for n in range(N) for j in range(K) if indices[n, j] == e]
    assert np.array_equal(x_perm.data, np.stack([x[n] for _, n in expected_rows]))
    assert offsets.data.tolist() == offsets_for(indices).tolist()
    for n in range(N):
        for j in range(K):
            row = scatter.data[n * K + j]
            assert expected_rows[row] == (indices[n, j], n)
    assert scatter.dtype == np.int64 and offsets.dtype == np.int64


def test_grouped_gemm_matches_a_loop_and_an_empty_expert_gets_zero_grad():
    indices = routing()
    offsets = offsets_for(indices)
    x = RNG.standard_normal((N * K, D))
    w = mg.create_leaf(RNG.standard_normal((E, D, 2 * F)), requires_grad=True)
    out = mg.moe_grouped_gemm_gate_up(x, w, offsets)
    rows_expert = np.repeat(np.arange(E), np.diff(offsets))
    expected = np.stack([x[r] @ w.data[rows_expert[r]] for r in range(N * K)])
    assert np.allclose(out.data, expected)
    out.sum().backward()
    assert np.diff(offsets)[E - 1] == 0 and np.all(w.grad[E - 1] == 0)


def test_unpermute_matches_a_loop():
    expert_out = RNG.standard_normal((N * K, D))
    weights = RNG.uniform(0.1, 1, (N, K))
    scatter = RNG.permutation(N * K).astype(np.int64)
    out = mg.moe_unpermute(expert_out, weights, scatter)
    expected = np.stack([sum(weights[n, j] * expert_out[scatter[n * K + j]] for j in range(K))
                         for n in range(N)])
    assert np.allclose(out.data, expected)


def test_softmax_and_sigmoid_match_numpy():
    logits = RNG.standard_normal((N, E))
    assert np.allclose(mg.moe_softmax(logits).data, np.exp(logits) / np.exp(logits).sum(1, keepdims=True))
    assert np.allclose(mg.moe_sigmoid(logits).data, 1 / (1 + np.exp(-logits)))


# -- gradcheck in float64 ---------------------------------------------------------------------
def test_gradcheck_router_activations():
    logits = RNG.standard_normal((N, E))
    assert gradcheck(mg.moe_softmax, logits)
    assert gradcheck(mg.moe_sigmoid, logits)


def test_gradcheck_topk_weights():
    assert gradcheck(lambda p: mg.moe_topk(p, K)[0], spaced_probs(N, E))
    assert gradcheck(lambda p: mg.moe_topk(p, E)[0], spaced_probs(N, E))   # k = E: a permutation


def test_gradcheck_permute():
    indices = routing()
    assert gradcheck(lambda x: mg.moe_permute(x, indices, E)[0], RNG.standard_normal((N, D)))


def test_gradcheck_unpermute():
    scatter = RNG.permutation(N * K).astype(np.int64)
    assert gradcheck(lambda rows, w: mg.moe_unpermute(rows, w, scatter),
                     RNG.standard_normal((N * K, D)), RNG.uniform(0.1, 1, (N, K)))


@pytest.mark.parametrize("op, d_out", [(mg.moe_grouped_gemm_gate_up, 2 * F),
                                       (mg.moe_grouped_gemm_down, D)])
def test_gradcheck_grouped_gemms(op, d_out):
    offsets = offsets_for(routing())
    assert gradcheck(lambda x, w: op(x, w, offsets),
                     RNG.standard_normal((N * K, F)), RNG.standard_normal((E, F, d_out)))


def moe_layer(x, router, w_gate_up, w_down):
    """A whole MoE layer from the ops (silu(gate) * up between the two grouped matmuls)."""
    probs = mg.moe_softmax(x @ router)
    weights, indices = mg.moe_topk(probs, K)
    x_perm, scatter, offsets = mg.moe_permute(x, indices, E)
    gate_up = mg.moe_grouped_gemm_gate_up(x_perm, w_gate_up, offsets)
    h = mg.silu(gate_up[:, :F]) * gate_up[:, F:]
    return mg.moe_unpermute(mg.moe_grouped_gemm_down(h, w_down, offsets), weights, scatter)


def test_gradcheck_whole_moe_layer():
    rng = np.random.default_rng(7)
    x, router = rng.standard_normal((N, D)), rng.standard_normal((D, E))
    top = np.sort(mg.moe_softmax(x @ router).data, axis=1)
    assert np.min(top[:, -K] - top[:, -K - 1]) > 1e-4   # no near-tie: the selection is stable
    assert gradcheck(moe_layer, x, router, rng.standard_normal((E, D, 2 * F)),
                     rng.standard_normal((E, F, D)))


def test_float32_stays_float32():
    x = RNG.standard_normal((N, D)).astype(np.float32)
    router = RNG.standard_normal((D, E)).astype(np.float32)
    w1 = RNG.standard_normal((E, D, 2 * F)).astype(np.float32)
    w2 = RNG.standard_normal((E, F, D)).astype(np.float32)
    assert moe_layer(x, router, w1, w2).dtype == np.float32


def test_moe_layer_under_an_arena_a_pool_and_checkpoint_gives_the_same_gradients():
    rng = np.random.default_rng(7)
    arrays = [rng.standard_normal((N, D)), rng.standard_normal((D, E)),
              rng.standard_normal((E, D, 2 * F)), rng.standard_normal((E, F, D))]

    def grads(run=lambda *v: moe_layer(*v).sum()):
        leaves = [mg.create_leaf(a.copy(), requires_grad=True) for a in arrays]
        run(*leaves).backward()
        return [v.grad.copy() for v in leaves]
    plain = grads()
    for allocator in (mg.Arena("moe", 1 << 20), mg.Pool("moe")):
        with allocator.scope():
            placed = grads()
        assert all(np.array_equal(a, b) for a, b in zip(plain, placed))
    recomputed = grads(lambda *v: mg.checkpoint(lambda *u: moe_layer(*u).sum(), *v))
    assert all(np.allclose(a, b, rtol=1e-12) for a, b in zip(plain, recomputed))


# -- saved tensors: design D's table ----------------------------------------------------------
def leaf(a):
    return mg.create_leaf(a, requires_grad=True)


def same(saved, variable):
    """The node kept the Variable's own array (not a copy): same memory, same shape."""
    return saved.shape == variable.shape and np.shares_memory(saved, variable.data)


def test_saves_of_router_activations_are_probs():
    for op in (mg.moe_softmax, mg.moe_sigmoid):
        probs = op(leaf(RNG.standard_normal((N, E))))
        (saved,) = probs.saved_tensors
        assert same(saved, probs)


def test_saves_of_topk_are_probs_and_indices():
    probs = leaf(spaced_probs(N, E))
    weights, indices = mg.moe_topk(probs, K)
    saved_probs, saved_indices = weights.saved_tensors
    assert same(saved_probs, probs) and same(saved_indices, indices)


def test_saves_of_permute_are_the_scatter_indices():
    x_perm, scatter, offsets = mg.moe_permute(leaf(RNG.standard_normal((N, D))), routing(), E)
    (saved,) = x_perm.saved_tensors
    assert same(saved, scatter)


def test_saves_of_grouped_gemm_are_input_weights_and_offsets():
    offsets = offsets_for(routing())
    x, w = leaf(RNG.standard_normal((N * K, D))), leaf(RNG.standard_normal((E, D, 2 * F)))
    out = mg.moe_grouped_gemm_gate_up(x, w, offsets)
    saved = out.saved_tensors
    assert same(saved[0], x) and same(saved[1], w) and np.array_equal(saved[2], offsets)
    assert len(saved) == 3


def test_saves_of_unpermute_are_rows_weights_and_scatter_indices():
    rows, w = leaf(RNG.standard_normal((N * K, D))), leaf(RNG.uniform(0.1, 1, (N, K)))
    scatter = mg.create_leaf(RNG.permutation(N * K).astype(np.int64))
    out = mg.moe_unpermute(rows, w, scatter)
    saved = out.saved_tensors
    assert len(saved) == 3 and same(saved[0], rows) and same(saved[1], w) and same(saved[2], scatter)


# -- misuse: op, shapes, rule and fix in every message ------------------------------------------
def assert_message(exc_info, *parts):
    text = str(exc_info.value)
    for part in ("Rule", "Fix", *parts):
        assert part in text, f"{part!r} missing from: {text}"


def test_k_larger_than_the_number_of_experts():
    with pytest.raises(ShapeError) as e:
        mg.moe_topk(spaced_probs(N, E), E + 1)
    assert_message(e, "moe_topk", "k=5", f"({N}, {E})", "1 <= k <= E")


def test_k_zero_or_not_an_int():
    for k in (0, 1.5):
        with pytest.raises(ShapeError) as e:
            mg.moe_topk(spaced_probs(N, E), k)
        assert_message(e, "moe_topk")


def test_float_indices_to_permute():
    with pytest.raises(DtypeError) as e:
        mg.moe_permute(RNG.standard_normal((N, D)), routing().astype(np.float64), E)
    assert_message(e, "moe_permute", "indices", "float64", f"({N}, {K})", "astype(np.int64)")


def test_indices_outside_the_experts():
    with pytest.raises(ShapeError) as e:
        mg.moe_permute(RNG.standard_normal((N, D)), routing(), 2)
    assert_message(e, "moe_permute", "num_experts = 2")


def test_permute_with_indices_for_other_tokens():
    with pytest.raises(ShapeError) as e:
        mg.moe_permute(RNG.standard_normal((N + 1, D)), routing(), E)
    assert_message(e, "moe_permute", f"({N + 1}, {D})", f"({N}, {K})")


def test_integer_logits_and_3d_logits():
    with pytest.raises(DtypeError) as e:
        mg.moe_softmax(np.ones((N, E), dtype=np.int64))
    assert_message(e, "moe_softmax", "int64", "(N, E)")
    with pytest.raises(ShapeError) as e:
        mg.moe_sigmoid(RNG.standard_normal((2, N, E)))
    assert_message(e, "moe_sigmoid", f"(2, {N}, {E})", "reshape")


def test_float_scatter_indices_and_wrong_rows_to_unpermute():
    rows, w = RNG.standard_normal((N * K, D)), RNG.uniform(0.1, 1, (N, K))
    with pytest.raises(DtypeError) as e:
        mg.moe_unpermute(rows, w, np.arange(N * K, dtype=np.float64))
    assert_message(e, "moe_unpermute", "scatter_indices", "float64")
    with pytest.raises(ShapeError) as e:
        mg.moe_unpermute(rows[:-1], w, np.arange(N * K))
    assert_message(e, "moe_unpermute", f"({N * K - 1}, {D})", f"({N}, {K})", "N*K")


@pytest.mark.parametrize("scatter, shown", [
    ([0, 0, 1, 2], "row 0 2 times and row 3 never"),   # forward sums row 0 twice
    ([3, 1, 2, 4], "outside [0, 4)")])
def test_scatter_indices_that_are_not_a_permutation_are_refused(scatter, shown):
    """A repeated scatter row was summed twice in forward but got one gradient (backward assigns),
    and a row never named got uninitialised memory as its gradient."""
    rows = mg.create_leaf(np.arange(8.0).reshape(4, 2), requires_grad=True)
    weights = mg.create_leaf(np.ones((2, 2)), requires_grad=True)
    with pytest.raises(ShapeError) as e:
        mg.moe_unpermute(rows, weights, np.array(scatter))
    assert_message(e, "moe_unpermute", "scatter_indices", "(4,)", shown, "permutation",
                   "moe_permute")


def test_grouped_gemm_misuse():
    offsets = offsets_for(routing())
    x = RNG.standard_normal((N * K, D))
    with pytest.raises(ShapeError) as e:
        mg.moe_grouped_gemm_gate_up(x, RNG.standard_normal((E, D + 1, F)), offsets)
    assert_message(e, "moe_grouped_gemm_gate_up", f"({N * K}, {D})", f"({E}, {D + 1}, {F})")
    with pytest.raises(ShapeError) as e:
        mg.moe_grouped_gemm_down(x, RNG.standard_normal((E, D, F)), offsets[:-1])
    assert_message(e, "moe_grouped_gemm_down", "expert_offsets", "(E+1,)")
    with pytest.raises(ShapeError) as e:
        mg.moe_grouped_gemm_down(x, RNG.standard_normal((E, D, F)), offsets - 1)
    assert_message(e, "moe_grouped_gemm_down", "start at 0", "moe_permute")
    with pytest.raises(DtypeError) as e:
        mg.moe_grouped_gemm_down(x, RNG.standard_normal((E, D, F)), offsets.astype(np.float64))
    assert_message(e, "moe_grouped_gemm_down", "expert_offsets", "float64")
    with pytest.raises(ShapeError) as e:
        mg.moe_grouped_gemm_down(x, RNG.standard_normal((D, F)), offsets)
    assert_message(e, "moe_grouped_gemm_down", "weight", "(E, D_in, D_out)")


# -- properties of the routing, on random sizes (hypothesis) ------------------------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def routed_tokens(draw):
    n, e = draw(st.integers(1, 7)), draw(st.integers(1, 6))
    k = draw(st.integers(1, e))
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    probs = rng.integers(0, 3, (n, e)).astype(np.float64)    # few values: many ties
    return probs, k, rng.standard_normal((n, draw(st.integers(1, 4))))


@settings(max_examples=150, deadline=None)
@given(routed_tokens())
def test_routing_properties(case):
    probs, k, x = case
    n, e = probs.shape
    weights, indices = mg.moe_topk(probs, k)
    idx = indices.data
    # top-k: distinct experts, values non-increasing, and a tie goes to the lower index
    assert all(len(set(row)) == k for row in idx.tolist())
    assert np.all(np.diff(weights.data, axis=1) <= 0)
    for row, picked in zip(probs, idx.tolist()):
        left_out = [c for c in range(e) if c not in picked]
        assert all(row[c] <= row[picked[-1]] for c in left_out)            # the k largest
        tied = [c for c in picked if row[c] == row[picked[-1]]]
        assert all(c > max(tied) for c in left_out if row[c] == row[picked[-1]])   # lower index wins
    # permute: a permutation that groups by expert; unpermute with weights 1 gives K copies back
    x_perm, scatter, offsets = mg.moe_permute(x, idx, e)
    assert sorted(scatter.data.tolist()) == list(range(n * k))
    expert_of_row = np.repeat(np.arange(e), np.diff(offsets.data))
    assert np.array_equal(expert_of_row[scatter.data], idx.reshape(-1))
    assert np.allclose(mg.moe_unpermute(x_perm, np.ones((n, k)), scatter).data, k * x)
