"""Each restriction of minigrad.aot raises its clear error: what was done, the rule, the fix."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import aot


def leaf(*shape, name="a"):
    return mg.create_leaf(np.ones(shape), requires_grad=True, name=name)


def small():
    a = leaf(2, 3)
    forward = aot.capture(lambda a: a.tanh().sum(), a)
    return a, forward, aot.derive_backward_graph(forward)


def test_capture_refuses_batched_matmul():
    with pytest.raises(aot.CaptureError, match=r"\(2, 2, 3\) and \(3, 2\).*2-D.*Fix"):
        aot.capture(lambda a, b: (a @ b).sum(), leaf(2, 2, 3), leaf(3, 2, name="b"))


def test_capture_refuses_a_result_that_is_not_a_variable():
    with pytest.raises(aot.CaptureError, match="returned float.*Fix"):
        aot.capture(lambda a: 1.0, leaf(2))


def test_executor_wants_every_param():
    model = mg.nn.Linear(3, 2, seed=0, dtype=np.float64)
    forward = aot.capture(lambda x: model(x).sum(), np.ones((1, 3)), params=model)
    with pytest.raises(aot.ExecuteError, match=r"no array for params \['linear.weight', 'linear.bias'\]"):
        aot.Executor(forward, None, None, np.ones((1, 3)))


def test_executor_wants_one_example_per_input():
    _, forward, backward = small()
    with pytest.raises(aot.ExecuteError, match=r"inputs \['a'\], got 2 example arrays"):
        aot.Executor(forward, backward, None, np.ones((2, 3)), np.ones(3))


def test_run_refuses_a_new_shape():
    _, forward, backward = small()
    executor = aot.Executor(forward, backward, None, np.ones((2, 3)))
    with pytest.raises(aot.ExecuteError, match=r"'a' has shape \(4, 3\).*compiled for \(2, 3\).*capture"):
        executor.run(np.ones((4, 3)))
    with pytest.raises(aot.ExecuteError, match="got 0 values"):
        executor.run()


def test_run_on_the_last_smaller_batch_says_it_may_be_skipped():
    _, forward, backward = small()
    executor = aot.Executor(forward, backward, None, np.ones((2, 3)))
    with pytest.raises(aot.ExecuteError, match=r"'a' has shape \(1, 3\).*compiled for \(2, 3\).*"
                       r"last batch of batches\(\).*skip it \(if len\(yb\) < 2: continue\)"):
        executor.run(np.ones((1, 3)))
    with pytest.raises(aot.ExecuteError) as wider:   # another shape: no word about batches
        executor.run(np.ones((2, 4)))
    assert "batches()" not in str(wider.value)


def test_executor_names_an_op_it_has_no_kernel_for():
    _, forward, backward = small()
    forward.operations[0] = aot.Operation("mystery_0", "mystery", ("a",), ("tanh_0",))
    with pytest.raises(aot.ExecuteError, match="no kernel for op type 'mystery'"):
        aot.Executor(forward, None, None, np.ones((2, 3)))


def test_unknown_plan_policy():
    _, forward, backward = small()
    with pytest.raises(aot.PlanError, match="unknown policy 'fast'.*'save_all' or 'recompute'"):
        aot.plan_memory(forward, backward, policy="fast")


def test_a_name_written_twice_is_refused():
    _, forward, _ = small()
    forward.operations.append(aot.Operation("again", "tanh", ("a",), ("tanh_0",)))
    with pytest.raises(aot.DeriveError, match="'tanh_0' is written twice"):
        aot.derive_backward_graph(forward)


def test_a_loss_that_is_not_a_scalar_is_refused():
    forward = aot.capture(lambda a: a.tanh(), leaf(2, 3))
    with pytest.raises(aot.DeriveError, match=r"loss 'loss' has shape \(2, 3\).*scalar.*\.sum\(\)"):
        aot.derive_backward_graph(forward)


# -- rules that misuse their BackwardRuleContext, each registered in a private registry ----------

def data_times_param():
    """loss = sum(tanh(x * V)): x is data (no gradient wanted), V a parameter."""
    V = mg.create_leaf(np.full((2, 3), 0.5), requires_grad=True, name="V")
    forward = aot.capture(lambda x: (x * V).tanh().sum(), np.ones((2, 3)), params=[V])
    assert [op.type for op in forward.operations] == ["mul", "tanh", "sum"]
    return forward


def with_rule(op_type, rule):
    mine = aot.registry.copy()
    mine.register_rule(op_type, rule)
    return mine


def naive_multiply_backward(ctx):
    """Writes both input gradients without asking ctx.needs_grad(i)."""
    a, b = ctx.fwd_op.inputs
    return [ctx.op("mul", [ctx.d_output, ctx.read(b)], [ctx.d_inputs[0]]),
            ctx.op("mul", [ctx.d_output, ctx.read(a)], [ctx.d_inputs[1]])]


def test_a_rule_writing_the_gradient_of_an_input_that_needs_none_is_refused():
    forward = data_times_param()
    with pytest.raises(aot.DeriveError, match=r"rule naive_multiply_backward for mul_0 "
                       r"\(mul\).*writes a tensor named None.*input 0 \('x'\).*"
                       r"Fix: check ctx.needs_grad\(i\)"):
        aot.derive_backward_graph(forward, registry=with_rule("mul", naive_multiply_backward))
    assert aot.registry.rule_for(forward.operations[0]).__name__ == "mul_rule"
    # the same rule is right where both inputs need a gradient: the error is about None only
    forward.no_grad.clear()
    backward = aot.derive_backward_graph(forward, registry=with_rule("mul", naive_multiply_backward))
    assert sorted(backward.outputs) == ["d_V", "d_x"]
    assert "d_x = mul(d_mul_0, V)" in str(backward)


def test_a_rule_reading_the_gradient_of_an_input_that_needs_none_is_refused():
    def reads_none(ctx):
        return [ctx.op("neg", [ctx.d_inputs[0]], [ctx.d_inputs[1]])]
    with pytest.raises(aot.DeriveError, match=r"reads_none for mul_0 \(mul\).*reads a "
                       r"tensor named None.*input 0 \('x'\)"):
        aot.derive_backward_graph(data_times_param(), registry=with_rule("mul", reads_none))


def test_an_operation_with_a_none_name_still_prints():
    assert aot.Operation("neg_1", "neg", (None,), (None,)).text() == "None = neg(None)"


@pytest.mark.parametrize("misuse, message", [
    (lambda ctx: ctx.shape("nope"), r"tanh_1 \(tanh\) asked ctx.shape\('nope'\): 'nope' is not a "
                                    r"tensor of the forward graph.*Fix: .*\['mul_0'\]"),
    (lambda ctx: ctx.temp("d_t", like="nope"), r"ctx.temp\('d_t', like='nope'\).*not a tensor"),
    (lambda ctx: ctx.needs_grad(3), r"ctx.needs_grad\(3\), but the op has 1 inputs "
                                    r"\['mul_0'\].*Fix: i in 0..0"),
], ids=["shape", "temp", "needs_grad"])
def test_a_rule_asking_the_context_about_a_wrong_name_or_index(misuse, message):
    def asks(ctx):
        misuse(ctx)
        return [ctx.op("tanh_backward", [ctx.d_output, aot.saved_ref("tanh_1")], [ctx.d_inputs[0]])]
    with pytest.raises(aot.DeriveError, match=message):
        aot.derive_backward_graph(data_times_param(), registry=with_rule("tanh", asks))


def test_a_rule_reading_a_saved_tensor_that_does_not_exist_is_named():
    def reads_typo(ctx):
        return [ctx.op("tanh_backward", [ctx.d_output, ctx.read("tanh1")], [ctx.d_inputs[0]])]
    with pytest.raises(aot.DeriveError, match=r"tanh_1 \(tanh\).*unknown tensor 'saved.tanh1'"):
        aot.derive_backward_graph(data_times_param(), registry=with_rule("tanh", reads_typo))


@pytest.mark.parametrize("written", ["x", "V", "d_loss", "d_tanh_1"])
def test_a_rule_writing_a_name_already_taken_is_refused(written):
    def overwrites(ctx):
        return [ctx.op("tanh_backward", [ctx.d_output, aot.saved_ref("tanh_1")], [written]),
                ctx.op("identity", [written], [ctx.d_inputs[0]])]
    with pytest.raises(aot.DeriveError, match=rf"tanh_1 \(tanh\).*writes '{written}', which "
                       rf"already names.*ctx.temp"):
        aot.derive_backward_graph(data_times_param(), registry=with_rule("tanh", overwrites))


def test_a_compiler_returning_a_numpy_scalar_is_refused(monkeypatch):
    """A 0-d result held as a scalar would keep its first value on every later run."""
    from minigrad import optable
    _, forward, _ = small()
    monkeypatch.setitem(optable.TABLE["sum"].compilers, "sum", lambda x, **attrs: (np.add.reduce(x, None), []))
    with pytest.raises(aot.ExecuteError, match=r"compiler of 'sum' \(sum_1\) made a float64 for "
                       r"'loss', not an ndarray.*kernels.as_array"):
        aot.Executor(forward, None, None, np.ones((2, 3)))


def test_a_compiled_call_hiding_buffers_in_a_tuple_is_refused(monkeypatch):
    """Placement re-points array arguments; arrays inside a tuple would keep their old memory."""
    from minigrad import optable
    from minigrad.aot import placement

    def sum_via_tuple(x, **attrs):
        out = np.zeros(())
        def into(pair):
            np.sum(pair[0], out=pair[1])
        into((x, out))
        return out, [(into, ((x, out),))]
    _, forward, _ = small()
    monkeypatch.setitem(optable.TABLE["sum"].compilers, "sum", sum_via_tuple)
    with pytest.raises(placement.PlacementError, match=r"compiled call of into takes a tuple "
                       r"argument.*Fix: pass each array as its own argument"):
        aot.Executor(forward, None, None, np.ones((2, 3)))
    aot.Executor(forward, None, None, np.ones((2, 3)), share_buffers=False)   # nothing placed: fine
