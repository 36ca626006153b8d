"""Mixture-of-experts ops ahead of time: aot == eager on random inputs (and again after new values
are fed to the same compiled plan), the backward graph's save list against design D's table, and
index tensors without gradient by dtype and by name."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import aot

N, E, K, D, F = 6, 4, 2, 3, 5


def rng_for(seed):
    return np.random.default_rng(seed)


def routing(rng):
    """indices (N, K), distinct per token; expert E-1 gets no token (an empty group)."""
    return np.stack([rng.choice(E - 1, size=K, replace=False) for _ in range(N)]).astype(np.int64)


def offsets_of(indices):
    return np.concatenate([[0], np.cumsum(np.bincount(indices.reshape(-1), minlength=E))]).astype(np.int64)


def as_inputs(arrays):
    """Float arrays become differentiable inputs; integer arrays stay data."""
    return [mg.create_leaf(a.copy(), requires_grad=a.dtype.kind == "f") for a in arrays]


def eager(fn, arrays):
    leaves = as_inputs(arrays)
    loss = fn(*leaves)
    loss.backward()
    return loss.item(), [v.grad for v in leaves if v.requires_grad]


def compiled(fn, arrays, names):
    forward = aot.capture(fn, *as_inputs(arrays), input_names=names)
    backward = aot.derive_backward_graph(forward)
    return forward, backward, aot.Executor(forward, backward, None, *arrays)


def assert_aot_matches_eager(fn, names, make_arrays):
    """Compile on one draw of the inputs, then run the plan on a second draw: both equal eager."""
    forward, backward, run = compiled(fn, make_arrays(rng_for(0)), names)
    for seed in (0, 1):
        arrays = make_arrays(rng_for(seed))
        loss = float(run.run(*arrays))
        grads = run.grads()
        eager_loss, eager_grads = eager(fn, arrays)
        assert np.isclose(loss, eager_loss, rtol=1e-12)
        float_names = [n for n, a in zip(names, arrays) if a.dtype.kind == "f"]
        assert sorted(backward.outputs) == sorted(f"d_{n}" for n in float_names)
        for name, g in zip(float_names, eager_grads):
            assert np.allclose(grads[f"d_{name}"], g, rtol=1e-10, atol=1e-12), name
    return forward, backward


def projected(out, seed=3):
    """A scalar loss that weights every output element differently."""
    return (out * rng_for(seed).standard_normal(out.shape).astype(out.dtype)).sum()


# -- aot == eager, and design D's saves ------------------------------------------------------
@pytest.mark.parametrize("op", ["moe_softmax", "moe_sigmoid"])
def test_router_activations(op):
    fn = lambda logits: projected(getattr(mg, op)(logits))   # noqa: E731
    forward, backward = assert_aot_matches_eager(fn, ["logits"],
                                                 lambda r: [r.standard_normal((N, E))])
    (routed,) = [o for o in forward.operations if o.type == op]
    assert backward.save == [routed.outputs[0]]          # probs, nothing else


@pytest.mark.parametrize("op, d_in, d_out", [("moe_grouped_gemm_gate_up", D, 2 * F),
                                             ("moe_grouped_gemm_down", F, D)])
def test_grouped_gemms(op, d_in, d_out):
    def make(r):
        offsets = offsets_of(routing(r))
        return [r.standard_normal((N * K, d_in)), r.standard_normal((E, d_in, d_out)), offsets]
    fn = lambda x, w, offsets: projected(getattr(mg, op)(x, w, offsets))   # noqa: E731
    _, backward = assert_aot_matches_eager(fn, ["inp", "weights", "expert_offsets"], make)
    assert sorted(backward.save) == ["expert_offsets", "inp", "weights"]


def test_grouped_gemm_reads_its_weight_as_a_parameter():
    r = rng_for(0)
    w = mg.create_leaf(r.standard_normal((E, D, 2 * F)), requires_grad=True, name="experts.w")
    x, offsets = r.standard_normal((N * K, D)), offsets_of(routing(r))
    forward = aot.capture(lambda x, o: projected(mg.moe_grouped_gemm_gate_up(x, w, o)), x, offsets,
                          params=[w], input_names=["inp", "expert_offsets"])
    backward = aot.derive_backward_graph(forward)
    assert sorted(backward.save) == ["expert_offsets", "inp"]   # a parameter lives all run
    run = aot.Executor(forward, backward, [w], x, offsets)
    run.run(x, offsets)
    loss = projected(mg.moe_grouped_gemm_gate_up(x, w, offsets))
    loss.backward()
    assert np.allclose(run.grads()["d_experts.w"], w.grad)


def test_unpermute():
    def make(r):
        return [r.standard_normal((N * K, D)), r.uniform(0.1, 1, (N, K)),
                r.permutation(N * K).astype(np.int64)]
    fn = lambda rows, w, s: projected(mg.moe_unpermute(rows, w, s))   # noqa: E731
    _, backward = assert_aot_matches_eager(
        fn, ["expert_out", "routing_weights", "scatter_indices"], make)
    assert sorted(backward.save) == ["expert_out", "routing_weights", "scatter_indices"]


def test_a_plan_checks_the_scatter_indices_fed_to_it_on_every_run():
    r = rng_for(0)
    arrays = [r.standard_normal((N * K, D)), r.uniform(0.1, 1, (N, K)),
              r.permutation(N * K).astype(np.int64)]
    forward = aot.capture(lambda rows, w, s: mg.moe_unpermute(rows, w, s).sum(),
                          *as_inputs(arrays), input_names=["rows", "weights", "scatter_indices"])
    run = aot.Executor(forward, aot.derive_backward_graph(forward), None, *arrays)
    repeated = np.zeros(N * K, np.int64)   # every (token, slot) reads row 0
    with pytest.raises(mg.errors.ShapeError, match="permutation"):
        run.run(arrays[0], arrays[1], repeated)


def test_grouped_gemms_between_fixed_permutation_data():
    """gate_up, silu * up, down and unpermute in one graph, offsets and scatter fed as data."""
    def make(r):
        indices = routing(r)
        _, scatter, offsets = mg.moe_permute(np.zeros((N, 1)), indices, E)
        return [r.standard_normal((N * K, D)), r.standard_normal((E, D, 2 * F)),
                r.standard_normal((E, F, D)), r.uniform(0.1, 1, (N, K)), offsets.data, scatter.data]

    def fn(x_perm, w1, w2, weights, offsets, scatter):
        gate_up = mg.moe_grouped_gemm_gate_up(x_perm, w1, offsets)
        down_in = mg.silu(gate_up).reshape(N * K, 2, F).sum(axis=1)   # (2F -> F, aot-capturable ops)
        return projected(mg.moe_unpermute(mg.moe_grouped_gemm_down(down_in, w2, offsets),
                                          weights, scatter))
    assert_aot_matches_eager(fn, ["x_perm", "w1", "w2", "routing_weights", "expert_offsets",
                                  "scatter_indices"], make)


# -- index tensors: no gradient by name, even when stored as floats ----------------------------
@pytest.mark.parametrize("name", ["scatter_indices", "routing_indices", "gather_indices",
                                  "expert_offsets", "rope_freqs", "blocks.0.moe.scatter_indices"])
def test_index_names_get_no_gradient(name):
    r = rng_for(0)
    x = mg.create_leaf(r.standard_normal((N, D)), requires_grad=True)
    index = mg.create_leaf(r.standard_normal((N, D)), requires_grad=True)   # float, yet an index
    forward = aot.capture(lambda x, i: (x * i).sum(), x, index, input_names=["x", name])
    backward, steps = aot.derive_backward_graph(forward, steps=True)
    assert backward.outputs == ["d_x"]
    needs = next(s for s in steps if s.kind == "needs_grad")
    assert name not in needs.tensors and name in needs.text
    # the same graph with an ordinary name: both inputs get a gradient (the name is the cause)
    forward = aot.capture(lambda x, i: (x * i).sum(), x, index, input_names=["x", "scale"])
    assert sorted(aot.derive_backward_graph(forward).outputs) == ["d_scale", "d_x"]


def test_integer_index_inputs_get_no_gradient_by_dtype():
    r = rng_for(0)
    forward = aot.capture(lambda rows, w, s: mg.moe_unpermute(rows, w, s).sum(),
                          *as_inputs([r.standard_normal((N * K, D)), r.uniform(0.1, 1, (N, K)),
                                      r.permutation(N * K).astype(np.int64)]),
                          input_names=["rows", "weights", "order"])   # no index-like name
    assert sorted(aot.derive_backward_graph(forward).outputs) == ["d_rows", "d_weights"]


# -- the several-output ops' rules on hand-written IR (derivation only) --------------------------
def ir(operations, inputs, shapes):
    from minigrad.aot.ir import Graph, Operation, TensorInfo
    return Graph(inputs=inputs, outputs=["loss"],
                 operations=[Operation(*o) for o in operations],
                 shape_env={n: TensorInfo(s, np.dtype(d)) for n, (s, d) in shapes.items()})


def test_topk_rule_scatters_into_probs_and_saves_probs_and_indices():
    forward = ir([("moe_topk_0", "moe_topk", ("probs",), ("weights", "indices"), {"k": K}),
                  ("sum_1", "sum", ("weights",), ("loss",), {"axis": None, "keepdims": False})],
                 ["probs"], {"probs": ((N, E), "f8"), "weights": ((N, K), "f8"),
                             "indices": ((N, K), "i8"), "loss": ((), "f8")})
    backward = aot.derive_backward_graph(forward)
    topk = [o for o in backward.operations if o.type == "moe_topk_backward"]
    assert [o.inputs for o in topk] == [("d_weights", "saved.probs", "saved.indices")]
    assert backward.save == ["probs", "indices"] and backward.outputs == ["d_probs"]


def test_permute_rule_reads_only_the_scatter_indices():
    forward = ir([("moe_permute_0", "moe_permute", ("x", "indices"),
                   ("x_perm", "scatter_indices", "expert_offsets"), {"num_experts": E}),
                  ("sum_1", "sum", ("x_perm",), ("loss",), {"axis": None, "keepdims": False})],
                 ["x", "indices"], {"x": ((N, D), "f8"), "indices": ((N, K), "i8"),
                                    "x_perm": ((N * K, D), "f8"), "scatter_indices": ((N * K,), "i8"),
                                    "expert_offsets": ((E + 1,), "i8"), "loss": ((), "f8")})
    backward = aot.derive_backward_graph(forward)
    (perm,) = [o for o in backward.operations if o.type == "moe_permute_backward"]
    assert perm.inputs == ("d_x_perm", "saved.scatter_indices") and perm.attrs == {"n_tokens": N}
    assert backward.save == ["scatter_indices"] and backward.outputs == ["d_x"]


# -- the several-output ops, captured from eager code (one IR operation each) --------------------
def test_topk_is_one_operation_with_two_outputs_and_matches_eager():
    fn = lambda probs: projected(mg.moe_topk(probs, K)[0])   # noqa: E731
    forward, backward = assert_aot_matches_eager(fn, ["probs"],
                                                 lambda r: [r.dirichlet(np.ones(E), size=N)])
    (topk,) = [o for o in forward.operations if o.type == "moe_topk"]
    assert topk.inputs == ("probs",) and topk.attrs == {"k": K}
    weights, indices = topk.outputs
    assert forward.shape_env[indices].dtype == np.int64 and forward.shape_env[indices].shape == (N, K)
    assert backward.save == ["probs", indices]                # design D: probs, indices


def test_permute_is_one_operation_with_three_outputs_and_matches_eager():
    fn = lambda x, indices: projected(mg.moe_permute(x, indices, E)[0])   # noqa: E731
    forward, backward = assert_aot_matches_eager(
        fn, ["x", "indices"], lambda r: [r.standard_normal((N, D)), routing(r)])
    (permute,) = [o for o in forward.operations if o.type == "moe_permute"]
    assert permute.inputs == ("x", "indices") and permute.attrs == {"num_experts": E}
    x_perm, scatter, offsets = permute.outputs
    assert scatter.endswith("scatter_indices") and offsets.endswith("expert_offsets")
    assert backward.save == [scatter]                           # design D: scatter_indices


def moe_layer(x, router, w_gate_up, w_down):
    """Router, top-k, permute, the two grouped matmuls (silu between, 2F summed to F with
    capturable ops), unpermute: every MoE op in one graph."""
    weights, indices = mg.moe_topk(mg.moe_softmax(x @ router), K)
    x_perm, scatter, offsets = mg.moe_permute(x, indices, E)
    h = mg.silu(mg.moe_grouped_gemm_gate_up(x_perm, w_gate_up, offsets))
    h = h.reshape(h.shape[0], 2, F).sum(axis=1)
    return projected(mg.moe_unpermute(mg.moe_grouped_gemm_down(h, w_down, offsets), weights, scatter))


def layer_inputs(r):
    return [r.standard_normal((N, D)), r.standard_normal((D, E)),
            r.standard_normal((E, D, 2 * F)), r.standard_normal((E, F, D))]


def test_whole_moe_layer_matches_eager_when_the_routing_changes_between_runs():
    names = ["x", "router", "w_gate_up", "w_down"]
    forward, backward = assert_aot_matches_eager(moe_layer, names, layer_inputs)
    first, second = (mg.moe_topk(mg.moe_softmax(a[0] @ a[1]), K)[1].data
                     for a in (layer_inputs(rng_for(0)), layer_inputs(rng_for(1))))
    assert not np.array_equal(first, second)   # the second run really routed differently
    types = [o.type for o in forward.operations]
    for op in ("moe_softmax", "moe_topk", "moe_permute", "moe_grouped_gemm_gate_up",
               "moe_grouped_gemm_down", "moe_unpermute"):
        assert types.count(op) == 1


def test_index_outputs_need_no_gradient_in_the_derivation():
    forward = aot.capture(moe_layer, *as_inputs(layer_inputs(rng_for(0))),
                          input_names=["x", "router", "w_gate_up", "w_down"])
    _, steps = aot.derive_backward_graph(forward, steps=True)
    needs = next(s for s in steps if s.kind == "needs_grad").tensors
    topk, permute = (next(o for o in forward.operations if o.type == t)
                     for t in ("moe_topk", "moe_permute"))
    for index in (topk.outputs[1], *permute.outputs[1:], *permute.inputs[1:]):
        assert index not in needs
    assert topk.outputs[0] in needs and permute.outputs[0] in needs


def test_recomputing_topk_and_permute_in_backward_gives_the_same_gradients():
    arrays = layer_inputs(rng_for(0))
    forward, backward, saving = compiled(moe_layer, arrays, ["x", "router", "w_gate_up", "w_down"])
    topk, permute = (next(o for o in forward.operations if o.type == t)
                     for t in ("moe_topk", "moe_permute"))
    plan = aot.plan_memory(forward, backward, policy="recompute",
                           recompute=[topk.outputs[0], permute.outputs[1]])
    assert {topk.outputs[0], permute.outputs[1]} <= set(plan.recomputed)
    assert permute.outputs[1] not in plan.backward.save   # scatter_indices: rebuilt, not kept
    recomputing = aot.Executor(forward, plan.backward, None, *arrays)
    for arrays in (layer_inputs(rng_for(0)), layer_inputs(rng_for(1))):
        saving.run(*arrays)
        recomputing.run(*arrays)
        for name, g in saving.grads().items():
            assert np.allclose(recomputing.grads()[name], g, rtol=1e-12, atol=1e-14), name


# -- misuse: data fed to a compiled plan is checked on every run ---------------------------------
def test_a_plan_fed_expert_indices_out_of_range_says_so():
    from minigrad.errors import ShapeError
    fn = lambda x, indices: projected(mg.moe_permute(x, indices, E)[0])   # noqa: E731
    r = rng_for(0)
    arrays = [r.standard_normal((N, D)), routing(r)]
    _, _, run = compiled(fn, arrays, ["x", "indices"])
    with pytest.raises(ShapeError) as e:
        run.run(arrays[0], np.full((N, K), E, dtype=np.int64))
    for part in ("moe_permute", f"({N}, {K})", "Rule", f"num_experts = {E}", "Fix"):
        assert part in str(e.value)


def test_a_plan_fed_broken_offsets_says_so():
    from minigrad.errors import ShapeError
    fn = lambda x, w, offsets: projected(mg.moe_grouped_gemm_down(x, w, offsets))   # noqa: E731
    r = rng_for(0)
    arrays = [r.standard_normal((N * K, F)), r.standard_normal((E, F, D)), offsets_of(routing(r))]
    _, _, run = compiled(fn, arrays, ["inp", "weights", "expert_offsets"])
    with pytest.raises(ShapeError) as e:
        run.run(arrays[0], arrays[1], arrays[2][::-1].copy())
    for part in ("moe_grouped_gemm_down", f"({N * K}, {F})", "Rule", "never decrease", "Fix"):
        assert part in str(e.value)


def test_capturing_topk_with_k_above_the_experts_fails_at_capture():
    from minigrad.errors import ShapeError
    with pytest.raises(ShapeError, match=r"moe_topk: k=5 .*Rule: 1 <= k <= E = 4.*Fix"):
        aot.capture(lambda p: mg.moe_topk(p, E + 1)[0].sum(), rng_for(0).dirichlet(np.ones(E), size=N))


def test_float32_layer_stays_float32_and_matches_eager():
    arrays = [a.astype(np.float32) for a in layer_inputs(rng_for(0))]
    forward, _, run = compiled(moe_layer, arrays, ["x", "router", "w_gate_up", "w_down"])
    run.run(*arrays)
    _, eager_grads = eager(moe_layer, arrays)
    for (name, g), expected in zip(run.grads().items(), eager_grads):
        assert g.dtype == np.float32, name
        assert np.allclose(g, expected, rtol=1e-4, atol=1e-5), name
    # the buffers' dtypes (env: run[t] refuses intermediates, whose values later tensors reuse)
    assert all(run.env[t].dtype == (np.int64 if "indices" in t or "offsets" in t else np.float32)
               for o in forward.operations if o.type.startswith("moe") for t in o.outputs)


@pytest.mark.parametrize("name", ["scatter_indices", "routing_indices", "gather_indices",
                                  "expert_offsets", "rope_freqs", "blocks.0.moe.expert_offsets"])
def test_derive_alone_skips_float_tensors_named_like_indices(name):
    """No capture involved: a float graph input, not listed as data, is skipped for its name."""
    def graph(index_name):
        return ir([("mul_0", "mul", ("x", index_name), ("prod",), {}),
                   ("sum_1", "sum", ("prod",), ("loss",), {"axis": None, "keepdims": False})],
                  ["x", index_name], {"x": ((N, D), "f8"), index_name: ((N, D), "f8"),
                                      "prod": ((N, D), "f8"), "loss": ((), "f8")})
    assert aot.derive_backward_graph(graph(name)).outputs == ["d_x"]
    assert sorted(aot.derive_backward_graph(graph("scale")).outputs) == ["d_scale", "d_x"]
