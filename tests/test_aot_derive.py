"""derive_backward_graph's options and steps, DCE, fan-out, clear errors, plans."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import aot, kernels
from minigrad.aot import DeriveBackwardOptions as Options

from aot_helpers import eager_grads, run_graphs

RNG = np.random.default_rng(1)
X = RNG.normal(size=(4, 3))
Y = np.array([0, 1, 1, 0])


def mlp_graph(**capture_kwargs):
    model = mg.nn.MLP([3, 5, 2], seed=0, dtype=np.float64)
    forward = aot.capture(lambda x, y: mg.cross_entropy(model(x), y), X, Y, params=model,
                          input_names=["x", "y"], **capture_kwargs)
    return model, forward


def test_mlp_gradients_equal_eager():
    model, forward = mlp_graph()
    backward = aot.derive_backward_graph(forward)
    executor = aot.Executor(forward, backward, model, X, Y)
    loss = float(executor.run(X, Y))
    eager = mg.cross_entropy(model(mg.create_leaf(X)), Y)
    eager.backward()
    assert loss == pytest.approx(eager.item(), rel=1e-12)
    for p in model.parameters():
        np.testing.assert_allclose(executor.grads()[f"d_{p.name}"], p.grad, rtol=1e-10, atol=1e-14)
    assert "d_x" not in backward.outputs and "d_y" not in backward.outputs   # data, integers


def test_text_form_has_one_line_per_operation():
    _, forward = mlp_graph()
    lines = forward.text().splitlines()
    for op in forward.operations:
        assert sum(op.text() in line for line in lines) == 1
    assert "relu_1 = relu(layer0)" in forward.text()
    assert "x:float64[4, 3] (data)" in forward.text()


def test_saves_follow_the_table_params_direct_activations_saved():
    _, forward = mlp_graph()
    backward = aot.derive_backward_graph(forward)
    reads = {t for op in backward.operations for t in op.inputs}
    assert "layer1.weight" in reads and "saved.layer1.weight" not in reads   # a param: direct
    assert "saved.relu_1" in reads                                           # an activation
    assert backward.save == aot.compute_required_saves(backward)
    assert set(backward.save) == {"layer1", "y", "relu_1", "layer0", "x"}


def test_stop_gradients_freezes_a_parameter():
    model, forward = mlp_graph()
    options = Options(stop_gradients=("layer0.weight", "layer0.bias"))
    backward, steps = aot.derive_backward_graph(forward, options, steps=True)
    written = {t for op in backward.operations for t in op.outputs}
    assert not written & {"d_layer0.weight", "d_layer0.bias", "d_layer0", "d_relu_1"}
    assert backward.outputs == ["d_layer1.weight", "d_layer1.bias"]
    full = aot.derive_backward_graph(forward)
    assert len(backward.operations) == len(full.operations) - 4   # d_relu_1, relu, dW0, db0 gone
    assert "layer0" not in backward.save   # relu's backward is gone, so is its save
    assert any(s.kind == "skip" and s.forward_op == "linear_0" for s in steps)
    executor = aot.Executor(forward, backward, model, X, Y)
    executor.run(X, Y)
    eager = mg.cross_entropy(model(mg.create_leaf(X)), Y)
    eager.backward()
    np.testing.assert_allclose(executor.grads()["d_layer1.weight"], model[2].weight.grad, rtol=1e-10)


def test_extra_saves_are_added_to_the_save_list():
    _, forward = mlp_graph()
    backward = aot.derive_backward_graph(forward, Options(extra_saves=("loss",)))
    assert backward.save[-1] == "loss"
    assert set(backward.save) - {"loss"} == set(aot.compute_required_saves(backward))


def test_auto_save_false_keeps_only_extra_saves_and_the_executor_refuses_what_is_missing():
    model, forward = mlp_graph()
    backward = aot.derive_backward_graph(forward, Options(auto_save=False))
    assert backward.save == []
    with pytest.raises(aot.ExecuteError, match=r"saved\.\w+.*not in the backward graph's save list.*extra_saves"):
        aot.Executor(forward, backward, model, X, Y)
    needed = aot.compute_required_saves(backward)
    complete = aot.derive_backward_graph(forward, Options(auto_save=False, extra_saves=tuple(needed)))
    assert complete.save == needed
    aot.Executor(forward, complete, model, X, Y).run(X, Y)


def test_dead_code_is_not_differentiated_and_can_be_removed():
    a, b = RNG.normal(size=(2, 3)), RNG.normal(size=(2, 3))
    forward = aot.capture(lambda a, b: ((a * b).exp(), (a * 2.0 + b).tanh().sum())[1],
                          mg.create_leaf(a, requires_grad=True, name="a"),
                          mg.create_leaf(b, requires_grad=True, name="b"))
    assert [op.type for op in forward.operations] == ["mul", "add", "tanh", "sum"]  # capture walks from the loss
    dead = aot.Graph(inputs=forward.inputs, params=[], shape_env=dict(forward.shape_env),
                     constants=dict(forward.constants), outputs=["loss"],
                     operations=[aot.Operation("exp_dead", "exp", ("a",), ("dead",))] + forward.operations)
    dead.shape_env["dead"] = forward.shape_env["a"]
    backward, steps = aot.derive_backward_graph(dead, steps=True)
    assert not any("d_dead" in op.inputs or "d_dead" in op.outputs for op in backward.operations)
    assert [s.forward_op for s in steps if s.kind == "skip"] == ["exp_dead"]
    pruned = aot.dead_code_elimination(dead)
    assert [op.id for op in pruned.operations] == [op.id for op in forward.operations]
    loss, grads, _, _ = run_graphs(pruned, backward, [a, b])
    _, want = eager_grads(lambda a, b: (a * 2.0 + b).tanh().sum(), [a, b])
    for g, w in zip(grads, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)


def test_fan_out_pieces_are_summed_into_one_gradient():
    a = RNG.normal(size=(3,))
    fn = lambda a: (a * a.tanh() + a.exp()).sum()   # noqa: E731  a read by three ops
    forward = aot.capture(fn, mg.create_leaf(a, requires_grad=True, name="a"))
    backward, steps = aot.derive_backward_graph(forward, steps=True)
    pieces = [t for op in backward.operations for t in op.outputs if t.startswith("d_a_from_")]
    assert len(pieces) == 3
    accumulations = [op for op in backward.operations if op.id.startswith("accumulate_")]
    assert len(accumulations) == 2 and accumulations[-1].outputs == ("d_a",)
    assert sum(s.kind == "accumulate" for s in steps) == 2
    _, got, _, _ = run_graphs(forward, backward, [a])
    np.testing.assert_allclose(got[0], eager_grads(fn, [a])[1][0], rtol=1e-12)
    unsummed = aot.derive_backward_graph(forward, Options(accumulate_grads=False))
    assert sorted(unsummed.outputs) == sorted(pieces)
    executor = aot.Executor(forward, unsummed, None, a)
    executor.run(a)
    np.testing.assert_allclose(sum(executor[p] for p in pieces), got[0], rtol=1e-12)


def test_accumulate_false_stops_where_a_sum_is_needed_to_continue():
    a = RNG.normal(size=(3,))
    def square_of_tanh(a):
        t = a.tanh()
        return (t * t).sum()   # t is read twice: two pieces, needed to go on through tanh
    forward = aot.capture(square_of_tanh, mg.create_leaf(a, requires_grad=True, name="a"))
    with pytest.raises(aot.DeriveError, match="accumulate_grads=False"):
        aot.derive_backward_graph(forward, Options(accumulate_grads=False))


def test_steps_replay_the_backward_graph():
    _, forward = mlp_graph()
    backward, steps = aot.derive_backward_graph(forward, steps=True)
    kinds = [s.kind for s in steps]
    assert kinds[:2] == ["producer_map", "needs_grad"] and kinds[-1] == "required_saves"
    assert [op for s in steps for op in s.emitted] == backward.operations
    rules = [s.rule for s in steps if s.kind == "apply_rule"]
    assert rules == ["cross_entropy_rule", "linear_rule", "relu_rule", "linear_rule"]


def test_integer_and_index_tensors_get_no_gradient():
    pos = np.arange(3.0)
    forward = aot.capture(lambda a, position_ids: (a * position_ids).sum(),
                          mg.create_leaf(RNG.normal(size=3), requires_grad=True, name="a"),
                          mg.create_leaf(pos, requires_grad=True, name="position_ids"))
    backward = aot.derive_backward_graph(forward)
    assert backward.outputs == ["d_a"]


def test_missing_rule_names_the_op_and_how_to_register():
    _, forward = mlp_graph()
    empty = aot.BackwardRuleRegistry()
    with pytest.raises(aot.MissingRuleError, match=r"'cross_entropy'.*register_rule\('cross_entropy'"):
        aot.derive_backward_graph(forward, registry=empty)


def test_a_rule_reading_an_unknown_or_unsaved_tensor_is_named():
    _, forward = mlp_graph()
    bad = aot.registry.copy()
    bad.register_rule("relu", lambda ctx: [ctx.op("mul", [ctx.d_output, "nonexistent"], [ctx.d_inputs[0]])])
    with pytest.raises(aot.DeriveError, match="unknown tensor 'nonexistent'"):
        aot.derive_backward_graph(forward, registry=bad)
    bad.register_rule("relu", lambda ctx: [ctx.op("relu_backward", [ctx.d_output, ctx.fwd_op.inputs[0]],
                                                  [ctx.d_inputs[0]])])
    with pytest.raises(aot.DeriveError, match=r"directly.*saved_ref\('layer0'\)"):
        aot.derive_backward_graph(forward, registry=bad)
    bad.register_rule("relu", lambda ctx: [])
    with pytest.raises(aot.DeriveError, match=r"did not write \['d_layer0'\]"):
        aot.derive_backward_graph(forward, registry=bad)


def test_bad_option_names_are_refused():
    _, forward = mlp_graph()
    with pytest.raises(aot.DeriveError, match="loss_name 'nope'"):
        aot.derive_backward_graph(forward, Options(loss_name="nope"))
    with pytest.raises(aot.DeriveError, match="'nope' .*stop_gradients"):
        aot.derive_backward_graph(forward, Options(stop_gradients=("nope",)))


def test_a_registered_rule_is_used(monkeypatch):
    """The lesson's exercise in small: a new op type, its rule registered, derived and run."""
    from minigrad import optable
    a = RNG.normal(size=(3,))
    forward = aot.capture(lambda a: a.tanh().sum(), mg.create_leaf(a, requires_grad=True, name="a"))
    forward.operations[0] = aot.Operation("square_0", "square", ("a",), ("tanh_0",))   # y = a^2
    monkeypatch.setitem(optable.TABLE, "square", optable.OpSpec("square", compilers={
        "square": lambda x, **attrs: kernels.plan_call(np.multiply, x, x, x * x)}))

    def square_backward(ctx):
        """y = x^2: dx = dy * x + dy * x."""
        half = ctx.temp("d_half", like=ctx.fwd_op.inputs[0])
        return [ctx.op("mul", [ctx.d_output, aot.saved_ref(ctx.fwd_op.inputs[0])], [half]),
                ctx.op("add", [half, half], [ctx.d_inputs[0]])]
    mine = aot.registry.copy()
    with pytest.raises(aot.MissingRuleError):
        aot.derive_backward_graph(forward, registry=mine)
    mine.register_rule("square", square_backward)
    assert mine.has_rule("square") and not aot.registry.has_rule("square")
    backward = aot.derive_backward_graph(forward, registry=mine)
    assert backward.save == ["a"]
    _, got, _, _ = run_graphs(forward, backward, [a])
    np.testing.assert_allclose(got[0], 2 * a, rtol=1e-12)


def test_capture_refuses_an_op_without_an_aot_form(monkeypatch):
    from minigrad import optable
    monkeypatch.setattr(optable.TABLE["relu"], "capture", None)   # (every eager op has one today)
    with pytest.raises(aot.CaptureError, match="'relu' has no ahead-of-time form"):
        aot.capture(lambda a: a.relu().sum(), mg.create_leaf(np.ones(3), requires_grad=True))


def test_recompute_plan_keeps_gradients_and_saves_less():
    model, forward = mlp_graph()
    backward = aot.derive_backward_graph(forward)
    keep = aot.plan_memory(forward, backward)
    again = aot.plan_memory(forward, backward, policy="recompute", recompute=["relu_1"])
    assert "relu_1" not in again.backward.save and "relu_1" in backward.save
    assert again.saved_bytes < keep.saved_bytes
    assert any(op.id.startswith("recompute_") for op in again.backward.operations)
    one, two = aot.Executor(forward, backward, model, X, Y), aot.Executor(forward, again.backward, model, X, Y)
    one.run(X, Y), two.run(X, Y)
    for name in backward.outputs:
        np.testing.assert_allclose(two.grads()[name], one.grads()[name], rtol=1e-12)
    table = keep.table()
    for r in keep.ranges:
        assert r.name in table
    assert f"peak {keep.peak_bytes} bytes" in table
    relu = next(r for r in keep.ranges if r.name == "relu_1")
    assert relu.kind == "saved" and relu.end >= keep.n_forward   # a save lives into backward
    with pytest.raises(aot.PlanError, match="'x' is not a saved tensor made by a forward op"):
        aot.plan_memory(forward, backward, policy="recompute", recompute=["x"])


def test_peak_bytes_counts_what_is_alive_at_each_step():
    _, forward = mlp_graph()
    backward = aot.derive_backward_graph(forward)
    plan = aot.plan_memory(forward, backward)
    live = [sum(r.nbytes for r in plan.ranges if r.start <= s <= r.end) for s in range(len(plan.steps))]
    assert plan.peak_bytes == max(live) and live[plan.peak_step] == plan.peak_bytes
    sizes = {r.name: r.nbytes for r in plan.ranges}
    assert sizes["relu_1"] == 4 * 5 * 8 and sizes["d_layer0.weight"] == 3 * 5 * 8


def test_shared_buffers_give_the_same_results_in_less_memory():
    model, forward = mlp_graph()
    backward = aot.derive_backward_graph(forward)
    shared = aot.Executor(forward, backward, model, X, Y)
    alone = aot.Executor(forward, backward, model, X, Y, share_buffers=False)
    assert shared.arena_bytes < shared.unshared_bytes and alone.arena_bytes is None
    for x in (X, -2 * X, X + 1):   # several runs: nothing stale carries over from the last one
        assert float(shared.run(x, Y)) == float(alone.run(x, Y))
        eager = mg.cross_entropy(model(mg.create_leaf(x)), Y)
        eager.backward()
        for p in model.parameters():
            np.testing.assert_array_equal(shared.grads()[f"d_{p.name}"], alone.grads()[f"d_{p.name}"])
            np.testing.assert_allclose(shared.grads()[f"d_{p.name}"], p.grad, rtol=1e-10, atol=1e-14)
            p.grad = None


def test_shared_buffers_on_a_long_chain():
    b = mg.create_leaf(np.full(4, 0.1), requires_grad=True, name="b")
    w = mg.create_leaf(np.full(4, 0.9), requires_grad=True, name="w")

    def chain(h):
        for _ in range(50):
            h = ((h + b) * w).tanh()
        return h.sum()
    x = np.linspace(-1.0, 1.0, 4)
    forward = aot.capture(chain, mg.create_leaf(x, requires_grad=True, name="x"), params={"b": b, "w": w})
    executor = aot.Executor(forward, aot.derive_backward_graph(forward), {"b": b, "w": w}, x)
    executor.run(x)
    leaf = mg.create_leaf(x, requires_grad=True)
    chain(leaf).backward()
    np.testing.assert_allclose(executor.grads()["d_x"], leaf.grad, rtol=1e-12)
    np.testing.assert_allclose(executor.grads()["d_b"], b.grad, rtol=1e-12)
    np.testing.assert_allclose(executor.grads()["d_w"], w.grad, rtol=1e-12)
    assert executor.arena_bytes < executor.unshared_bytes / 1.5
