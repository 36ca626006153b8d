"""Ahead of time under misuse: every result right (against eager) or a clear error.

Each test is named after the rule it checks; the error tests check the class and that the message
names the tensor or op, the shapes or dtypes, the rule and the fix.
"""
import numpy as np
import pytest

import minigrad as mg
from minigrad import aot
from minigrad.errors import DtypeError, MinigradError, ShapeError

RNG = np.random.default_rng(7)


def param(shape, name):
    return mg.create_leaf(RNG.normal(size=shape), requires_grad=True, name=name)


def plan(fn, params, *examples, backward=True):
    forward = aot.capture(fn, *examples, params=params)
    return aot.Executor(forward, aot.derive_backward_graph(forward) if backward else None,
                        params, *examples)


def eager_grads(fn, params, *inputs):
    for p in params:
        p.zero_grad() if hasattr(p, "zero_grad") else setattr(p, "grad", None)
    loss = fn(*[mg.create_leaf(np.array(x)) for x in inputs])
    loss.backward()
    return loss.item(), {f"d_{p.name}": p.grad.copy() for p in params}


def assert_same_as_eager(fn, params, executor, *inputs):
    loss = float(executor.run(*inputs))
    grads = {k: v.copy() for k, v in executor.grads().items()}
    want_loss, want = eager_grads(fn, params, *inputs)
    assert loss == pytest.approx(want_loss, rel=1e-10)
    assert sorted(grads) == sorted(want)
    for name, g in want.items():
        assert grads[name].shape == g.shape, name
        np.testing.assert_allclose(grads[name], g, rtol=1e-10, atol=1e-12, err_msg=name)


# -- 15: a broadcast operand's gradient is summed back to its shape, in every broadcasting rule --

BROADCASTING = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (b * b + 1.0), "mse": lambda a, b: mg.mse(a, b),
}


@pytest.mark.parametrize("op", sorted(set(BROADCASTING) - {"mse"}))   # mse: below
@pytest.mark.parametrize("p_shape, x_shape", [((3, 1), (3, 4)), ((1, 4), (3, 1)), ((4,), (3, 4)),
                                              ((2, 1, 4), (3, 1))])
def test_a_broadcast_parameter_gets_a_gradient_of_its_own_shape(op, p_shape, x_shape):
    p, q = param(p_shape, "p"), param(x_shape, "q")
    f = BROADCASTING[op]
    def fn(x):
        y = f(p, x * q) if op == "mse" else f(p, x * q).tanh()
        return y if op == "mse" else y.sum()
    x = RNG.normal(size=x_shape)
    executor = plan(fn, [p, q], x)
    assert_same_as_eager(fn, [p, q], executor, x)
    assert executor.grads()["d_p"].shape == p_shape


def test_mse_with_a_broadcasting_target_is_refused_in_eager_and_in_capture():
    """The reported case: pred (3, 1) parameter, target (3, 4). mse takes operands of one shape
    (a broadcast would silently average 12 terms), in both engines, with the same check."""
    p = param((3, 1), "p")
    target = RNG.normal(size=(3, 4))
    with pytest.raises(ShapeError, match=r"\(3, 1\).*\(3, 4\)"):
        eager_grads(lambda t: mg.mse(p, t), [p], target)
    with pytest.raises(ShapeError, match=r"\(3, 1\).*\(3, 4\)"):
        plan(lambda t: mg.mse(p, t), [p], target)


def test_mse_of_one_shape_gives_the_parameter_its_gradient_in_aot():
    p = param((3, 4), "p")
    target = RNG.normal(size=(3, 4))
    executor = plan(lambda t: mg.mse(p, t), [p], target)
    assert_same_as_eager(lambda t: mg.mse(p, t), [p], executor, target)


@pytest.mark.parametrize("r_shape, x_shape", [((1, 4), (3, 4)), ((3, 4), (1, 4))])
@pytest.mark.parametrize("reads_y", [True, False], ids=["y_read", "only_residual_out"])
def test_fused_residual_rmsnorm_sums_a_broadcast_operand_gradient_back(r_shape, x_shape, reads_y):
    r, q, w = param(r_shape, "r"), param(x_shape, "q"), param((4,), "w")
    w.requires_grad = reads_y   # (w reaches the loss only through y: else a constant here)

    def fn(x):
        residual_out, y = mg.fused_residual_rmsnorm(x * q, r, w)
        return (y.tanh().sum() + residual_out.sum()) if reads_y else residual_out.tanh().sum()
    params = [r, q, w] if reads_y else [r, q]
    x = RNG.normal(size=x_shape)
    executor = plan(fn, params, x)
    assert_same_as_eager(fn, params, executor, x)


def test_a_rule_that_forgets_to_sum_a_broadcast_gradient_is_refused_by_the_executor():
    """The executor checks each tensor against the shape the graph declares: a rule that hands
    back a broadcast gradient raises instead of returning a (3, 4) gradient for a (3, 1) param."""
    p = param((3, 1), "p")
    forward = aot.capture(lambda x: (p * x).sum(), np.ones((3, 4)), params=[p])
    mine = aot.registry.copy()
    mine.register_rule("mul", lambda ctx: [ctx.op("mul", [ctx.d_output, ctx.read(t)], [d])
                                                for d, t in zip(ctx.d_inputs, ctx.fwd_op.inputs[::-1])
                                                if d is not None])
    backward = aot.derive_backward_graph(forward, registry=mine)
    with pytest.raises(aot.ExecuteError, match=r"op mul_\d+ \(mul\) makes 'd_p' of shape "
                       r"\(3, 4\), but the graph declares \(3, 1\).*Rule: a gradient has its "
                       r"tensor's shape.*Fix: .*to_input_shape"):
        aot.Executor(forward, backward, [p], np.ones((3, 4)))


# -- 18: parameters are read again on every run ---------------------------------------------------

def test_a_parameter_given_new_data_is_used_by_the_next_run():
    W = param((3, 2), "W")
    fn = lambda x: (x @ W).tanh().sum()   # noqa: E731
    x = RNG.normal(size=(4, 3))
    executor = plan(fn, [W], x)
    executor.run(x)
    W.data = RNG.normal(size=(3, 2))        # a new array, not an in-place update
    assert_same_as_eager(fn, [W], executor, x)
    W.data[...] = 0.5                       # an in-place update (an optimiser step)
    assert_same_as_eager(fn, [W], executor, x)


def test_a_model_parameter_replaced_by_another_variable_is_refused_at_run():
    """layer.weight = create_leaf(...) after the Executor was made: the plan kept reading (and
    the caller kept training) the old Variable, and the model's new one was never used."""
    model = mg.nn.MLP([3, 4, 2], seed=0, dtype=np.float64)
    x, y = RNG.normal(size=(5, 3)), np.array([0, 1, 1, 0, 1])
    fn = lambda x, y: mg.cross_entropy(model(x), y)   # noqa: E731
    forward = aot.capture(fn, x, y, params=model)
    executor = aot.Executor(forward, aot.derive_backward_graph(forward), model, x, y)
    model.layers[2].bias.data = np.ones(2)             # new values, same Variable: supported
    assert float(executor.run(x, y)) == pytest.approx(fn(mg.create_leaf(x), y).item())
    model.layers[2].bias = mg.create_leaf(np.zeros(2), requires_grad=True, name="layer1.bias")
    with pytest.raises(aot.ExecuteError, match=r"parameter 'layer1.bias' \(Linear, attribute "
                       r"'bias'\) is another Variable than when the Executor was made.*Fix: make "
                       r"the Executor again"):
        executor.run(x, y)


def test_an_intermediate_read_from_a_plan_with_shared_buffers_is_refused():
    """executor['relu_1'] after a run handed out a buffer later tensors had reused: another
    tensor's numbers, without a word (with share_buffers=True, the default)."""
    model = mg.nn.MLP([4, 16, 16, 3], seed=0, dtype=np.float64)
    x, y = RNG.normal(size=(8, 4)), np.array([0, 1, 2, 0, 1, 2, 0, 1])
    forward = aot.capture(lambda x, y: mg.cross_entropy(model(x), y), x, y, params=model)
    backward = aot.derive_backward_graph(forward)
    shared = aot.Executor(forward, backward, model, x, y)
    own = aot.Executor(forward, backward, model, x, y, share_buffers=False)
    shared.run(x, y)
    own.run(x, y)
    hidden = forward.operations[1].outputs[0]          # the first relu's output
    with pytest.raises(aot.ExecuteError, match=rf"Executor\['{hidden}'\]: with share_buffers=True.*"
                       r"Fix: Executor\(\.\.\., share_buffers=False\)"):
        shared[hidden]
    with mg.no_grad():
        want = model.layers[1](model.layers[0](mg.create_leaf(x))).data
    np.testing.assert_allclose(own[hidden], want)       # unshared: every tensor readable
    for name in (forward.inputs[0], "layer0.weight", "loss", "d_layer0.weight"):   # their own
        np.testing.assert_array_equal(shared[name], own[name])


def test_a_parameter_given_as_a_plain_array_is_read_on_every_run():
    W = param((3, 2), "W")
    fn = lambda x: (x @ W).sum()   # noqa: E731
    forward = aot.capture(fn, np.ones((4, 3)), params=[W])
    array = W.data.copy()
    executor = aot.Executor(forward, aot.derive_backward_graph(forward), {"W": array}, np.ones((4, 3)))
    array[...] = 2.0
    assert float(executor.run(np.ones((4, 3)))) == pytest.approx(4 * 3 * 2 * 2.0)
    np.testing.assert_allclose(executor.grads()["d_W"], np.full((3, 2), 4.0))


def test_a_parameter_of_another_shape_than_captured_is_refused():
    W = param((3, 2), "W")
    forward = aot.capture(lambda x: (x @ W).sum(), np.ones((4, 3)), params=[W])
    backward = aot.derive_backward_graph(forward)
    with pytest.raises(aot.ExecuteError, match=r"Executor: parameter 'W' has shape \(4, 2\), the "
                       r"plan was compiled for \(3, 2\).*static shapes.*Fix: capture"):
        aot.Executor(forward, backward, {"W": np.ones((4, 2))}, np.ones((4, 3)))
    executor = aot.Executor(forward, backward, [W], np.ones((4, 3)))
    W.data = np.ones((4, 2))
    with pytest.raises(aot.ExecuteError, match=r"Executor.run: parameter 'W' has shape \(4, 2\).*"
                       r"compiled for \(3, 2\)"):
        executor.run(np.ones((4, 3)))


def test_a_trainable_leaf_read_through_the_closure_but_not_in_params_is_refused():
    # It was copied into the plan as a constant: no d_W, and W's updates never seen.
    W, b = param((3, 2), "W"), param((2,), "b")
    with pytest.raises(aot.CaptureError, match=r"capture: fn reads the Variable 'W' of shape "
                       r"\(3, 2\) \(float64\), which requires grad but is neither an input nor "
                       r"one of params \(\['b'\]\).*no gradient.*Fix: pass it in params="):
        aot.capture(lambda x: (x @ W + b).sum(), np.ones((4, 3)), params=[b])
    with pytest.raises(aot.CaptureError, match=r"reads the Variable of shape \(2,\).*\(none given\)"):
        aot.capture(lambda x: (x * mg.create_leaf(np.ones(2), requires_grad=True)).sum(),
                    np.ones((4, 2)))


def test_a_constant_leaf_or_a_detached_parameter_in_the_closure_is_still_a_constant():
    W = param((3, 2), "W")
    frozen = mg.create_leaf(W.data.copy(), name="frozen")
    for constant in (frozen, W.detach()):
        forward = aot.capture(lambda x: (x @ constant).sum(), np.ones((4, 3)))
        executor = aot.Executor(forward, None, None, np.ones((4, 3)))
        assert float(executor.run(np.ones((4, 3)))) == pytest.approx(4 * W.data.sum())


def test_two_unnamed_parameters_in_a_list_are_refused_as_they_match_by_position():
    # Named param0, param1 by position: Executor(forward, backward, [B, A]) swapped two (3, 3)
    # matrices without a word.
    A, B = (mg.create_leaf(RNG.normal(size=(3, 3)), requires_grad=True) for _ in range(2))
    fn = lambda x: ((x @ A).tanh() @ B).sum()   # noqa: E731
    with pytest.raises(aot.CaptureError, match=r"parameters 0 and 1 of the list have no name.*"
                       r"by position \(param0, param1\).*swap.*Fix: name them.*or pass a dict"):
        aot.capture(fn, np.ones((2, 3)), params=[A, B])
    A.name, B.name = "A", "B"                      # named: matched by name, in any order
    forward = aot.capture(fn, np.ones((2, 3)), params=[A, B])
    executor = aot.Executor(forward, aot.derive_backward_graph(forward), [B, A], np.ones((2, 3)))
    assert float(executor.run(np.ones((2, 3)))) == pytest.approx(fn(mg.create_leaf(np.ones((2, 3)))).item())


def test_one_unnamed_parameter_or_a_module_is_still_captured():
    W = mg.create_leaf(RNG.normal(size=(3, 2)), requires_grad=True)
    forward = aot.capture(lambda x: (x @ W).sum(), np.ones((4, 3)), params=[W])
    assert forward.params == ["param0"]

    class Pair(mg.nn.Module):                       # unnamed, but listed by the module itself
        def __init__(self):
            self.a = mg.create_leaf(np.ones((3, 3)), requires_grad=True)
            self.b = mg.create_leaf(np.ones((3, 3)), requires_grad=True)

        def forward(self, x):
            return (x @ self.a @ self.b).sum()
    pair = Pair()
    assert len(aot.capture(pair, np.ones((2, 3)), params=pair).params) == 2


def test_a_parameter_that_is_neither_variable_nor_array_is_refused():
    W = param((3, 2), "W")
    forward = aot.capture(lambda x: (x @ W).sum(), np.ones((4, 3)), params=[W])
    with pytest.raises(aot.ExecuteError, match=r"parameter 'W' is a list.*Variables or numpy arrays.*Fix"):
        aot.Executor(forward, None, {"W": [[1.0, 2.0]] * 3}, np.ones((4, 3)))


# -- crashes that are now errors -------------------------------------------------------------------

def test_grads_of_a_forward_only_executor_is_refused():
    W = param((3, 2), "W")
    executor = plan(lambda x: (x @ W).sum(), [W], np.ones((4, 3)), backward=False)
    executor.run(np.ones((4, 3)))
    with pytest.raises(aot.ExecuteError, match=r"Executor.grads: this executor has no backward "
                       r"graph.*Fix: Executor\(forward, derive_backward_graph\(forward\)"):
        executor.grads()


def test_an_example_input_of_another_shape_than_captured_is_refused():
    W = param((3, 2), "W")
    forward = aot.capture(lambda x: (x @ W).sum(), np.ones((4, 3)), params=[W])
    with pytest.raises(aot.ExecuteError, match=r"Executor: input 'x' has shape \(4, 2\), the plan "
                       r"was compiled for \(4, 3\).*Fix: capture"):
        aot.Executor(forward, None, [W], np.ones((4, 2)))


# -- unclear errors that are now clear: a value must keep its kind ---------------------------------

def classifier():
    W = param((3, 4), "W")
    fn = lambda x, t: mg.cross_entropy(x @ W, t)   # noqa: E731
    x, t = RNG.normal(size=(2, 3)), np.array([0, 3])
    return W, fn, x, t, plan(fn, [W], x, t)


def test_run_refuses_float_class_targets():
    _, _, x, _, executor = classifier()
    with pytest.raises(DtypeError, match=r"Executor.run: input 'x1' has dtype float64, the plan was "
                       r"compiled for int64.*Rule: .*not kind.*Fix: .*astype\(np.int64\)"):
        executor.run(x, np.array([0.0, 1.0]))


def test_run_refuses_complex_inputs():
    _, _, x, t, executor = classifier()
    with pytest.raises(DtypeError, match=r"input 'x0' has dtype complex128, the plan was compiled "
                       r"for float64.*Fix"):
        executor.run(x + 0j, t)
    assert isinstance(DtypeError("x"), TypeError)


def test_run_accepts_another_precision_of_the_same_kind():
    W, fn, x, t, executor = classifier()
    loss = float(executor.run(x.astype(np.float32), t.astype(np.int32)))
    assert loss == pytest.approx(eager_grads(fn, [W], x.astype(np.float32).astype(np.float64), t)[0])


# -- 16: a plan checks class targets on every run, with the eager op's check ---------------------

@pytest.mark.parametrize("bad, shown", [(-1, "-1"), (4, "4"), (99, "99")])
def test_run_checks_class_targets_like_eager(bad, shown):
    W, fn, x, t, executor = classifier()
    targets = np.array([0, bad])
    with pytest.raises(mg.errors.TargetError, match=rf"cross_entropy: target {shown} \(row 1\) is "
                       r"outside \[0, 4\).*Fix: targets must be class indices 0..3"):
        eager_grads(fn, [W], x, targets)          # eager says so
    with pytest.raises(mg.errors.TargetError, match=rf"cross_entropy: target {shown} \(row 1\) is "
                       r"outside \[0, 4\).*Fix: targets must be class indices 0..3"):
        executor.run(x, targets)                  # and so does the plan, on every run
    assert_same_as_eager(fn, [W], executor, x, np.array([3, 0]))   # a good batch still runs


# -- 17: detach() is a stop gradient of the live value; no_grad() is refused ---------------------

def test_detach_inside_capture_is_a_stop_gradient_of_the_live_value():
    W = param((3,), "W")
    fn = lambda x: (x * W.detach() * W).sum()   # noqa: E731
    x = RNG.normal(size=3)
    executor = plan(fn, [W], x)
    assert "stop_gradient(W)" in str(executor.forward)
    assert_same_as_eager(fn, [W], executor, x)   # d/dW = x * W (the detached factor has none)
    W.data = RNG.normal(size=3)                  # the detached factor follows the parameter
    assert_same_as_eager(fn, [W], executor, x)


def test_detach_of_an_intermediate_follows_new_inputs():
    W = param((3, 2), "W")

    def fn(x):
        h = (x @ W).tanh()
        return (h * h.detach()).sum()
    x = RNG.normal(size=(4, 3))
    executor = plan(fn, [W], x)
    x2 = RNG.normal(size=(4, 3))
    assert_same_as_eager(fn, [W], executor, x2)


def test_the_data_of_a_traced_tensor_used_as_a_constant_is_its_live_value():
    W = param((3,), "W")
    fn = lambda x: (x * W.data * W).sum()   # noqa: E731  (W.data: numbers, no gradient)
    x = RNG.normal(size=3)
    executor = plan(fn, [W], x)
    W.data = RNG.normal(size=3)
    loss = float(executor.run(x))
    assert loss == pytest.approx(float((x * W.data * W.data).sum()))
    np.testing.assert_allclose(executor.grads()["d_W"], x * W.data)


def test_no_grad_inside_a_captured_function_is_refused():
    W = param((3,), "W")

    def fn(x):
        with mg.no_grad():
            scale = x.mean()
        return (x * W * scale).sum()
    with pytest.raises(aot.CaptureError, match=r"capture: fn entered no_grad\(\) at "
                       r"test_aot_no_silent_wrong.py:\d+\..*stale.*Rule: a captured function "
                       r"builds its whole graph. Fix: use x.detach\(\)"):
        aot.capture(fn, np.ones(3), params=[W])


def test_capture_inside_no_grad_is_refused():
    with mg.no_grad(), pytest.raises(aot.CaptureError, match=r"called inside no_grad\(\).*Fix"):
        aot.capture(lambda x: (x * 2.0).sum(), np.ones(3))


@pytest.mark.parametrize("prepare", [
    pytest.param(lambda t: t.reshape(-1), id="reshape"),
    pytest.param(lambda t: t[:, 0], id="getitem"),
    pytest.param(lambda t: (t + 0).reshape(-1), id="add_then_reshape"),
])
def test_an_op_on_integer_targets_inside_fn_follows_new_targets(prepare):
    """An op on an integer input alone built no node, so the plan kept the capture-time
    targets as a constant: a later run with other targets gave the first run's loss."""
    W = param((5, 3), "W")
    fn = lambda x, t: mg.cross_entropy(x @ W, prepare(t))   # noqa: E731
    x = RNG.normal(size=(4, 5))
    first, other = np.array([[0], [1], [2], [0]]), np.array([[2], [2], [1], [1]])
    executor = plan(fn, [W], x, first)
    assert_same_as_eager(fn, [W], executor, x, other)


@pytest.mark.parametrize("take_out, how", [
    (lambda x, h: (h * x.sum().item()).sum(), "item()"),
    (lambda x, h: (h * 2.0).sum() if h.sum() else h.sum(), "bool()"),
    (lambda x, h: (h * mg.create_leaf(h.numpy())).sum(), "numpy()"),
    (lambda x, h: (h * W_TAKEN.max().item()).sum(), "item()"),   # a parameter's value
])
def test_a_value_taken_out_of_the_graph_inside_fn_is_refused(take_out, how):
    """x.sum().item(), an if on a value, h.numpy(): the number, branch or copy was frozen into
    the plan and silently kept its capture-time value on every later run."""
    fn = lambda x: take_out(x, x * W_TAKEN)   # noqa: E731
    with pytest.raises(aot.CaptureError, match=rf"traced tensor .*of shape .* out of the graph "
                       rf"with {how.replace('(', '[(]').replace(')', '[)]')} at "
                       rf"test_aot_no_silent_wrong.py:\d+\..*Rule: a plan replays.*Fix"):
        aot.capture(fn, np.ones(3), params=[W_TAKEN])
    assert mg.modes.modes.capture is None   # the thread is left as before


W_TAKEN = param((3,), "W")


@pytest.mark.parametrize("numpy_work", [
    lambda x, h: (h * 2.0).sum() if h.data[0] > 0 else (h * 3.0).sum(),   # a branch on .data
    lambda x, h: ((x - x.data.mean()) * h).sum(),                          # a numpy mean
    lambda x, h: (h * mg.create_leaf(h)).sum(),                            # a copy of h
])
def test_values_read_through_data_and_not_given_to_an_op_are_warned_of(numpy_work):
    """numpy work on a traced tensor's .data is invisible to capture: the plan silently kept
    the capture-time result. capture cannot see what fn did with the numbers, so it warns
    when a .data read never reached the plan as an operand."""
    fn = lambda x: numpy_work(x, x * W_TAKEN)   # noqa: E731
    with pytest.warns(aot.CaptureWarning, match=r"fn read the values of the traced tensor .*"
                      r"through \.data at test_aot_no_silent_wrong.py:\d+, and the plan did not "
                      r"get them as an operand.*Fix: compute with minigrad ops"):
        aot.capture(fn, np.ones(3), params=[W_TAKEN])


def test_data_given_to_an_op_or_read_inside_minigrad_is_not_warned_of():
    import warnings
    from minigrad.nn.transformer import Embedding
    table = Embedding(5, 4, seed=0)
    table.weight.name = "table"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        aot.capture(lambda x: (x * W_TAKEN.data * W_TAKEN).sum(), np.ones(3), params=[W_TAKEN])
        aot.capture(lambda x: (x.detach() * W_TAKEN).sum(), np.ones(3), params=[W_TAKEN])
        aot.capture(lambda ids: table(ids).sum(), np.array([1, 2]), params=[table.weight])
        aot.capture(lambda p: mg.moe_topk(mg.moe_softmax(p), 2)[0].sum(), np.ones((2, 3)))


def test_constants_and_values_outside_capture_still_give_numbers():
    c = mg.create_leaf(np.array([2.0, 3.0]))   # a constant inside fn: its number is a constant
    fn = lambda x: (x * c.max().item()).sum() if c.sum() else x.sum()   # noqa: E731
    executor = plan(fn, [], np.ones(2))
    assert float(executor.run(np.array([1.0, 2.0]))) == pytest.approx(9.0)
    assert (W_TAKEN * 2.0).sum().item() == pytest.approx(2 * W_TAKEN.data.sum())


# -- 19: names that would collide are refused at capture (or derive), naming both ---------------

@pytest.mark.parametrize("name, message", [
    ("x", r"input 'x' and parameter 'x' share one name.*Fix: rename the parameter"),
    ("saved.w", r"parameter 'saved.w' starts with 'saved.'.*Fix: rename the parameter \(e.g. 'saved_w'\)"),
    ("recomputed.w", r"parameter 'recomputed.w' starts with 'recomputed.'"),
    ("loss", r"output name 'loss' is already the name of an input or parameter.*Fix"),
])
def test_a_parameter_named_like_an_input_or_a_reserved_name_is_refused(name, message):
    W = param((3,), name)
    with pytest.raises(aot.CaptureError, match=message):
        aot.capture(lambda x: (x * W).sum(), np.ones(3), params=[W])


@pytest.mark.parametrize("name, other", [("d_loss", "loss"), ("d_x", "x")])
def test_a_tensor_named_like_a_gradient_is_refused(name, other):
    W = param((3,), name)
    forward = aot.capture(lambda x: (x * W).sum(), np.ones(3), params=[W])
    with pytest.raises(aot.DeriveError, match=rf"a tensor '{other}' and a tensor '{name}', the name "
                       rf"of {other}'s gradient.*Fix: rename '{name}'"):
        aot.derive_backward_graph(forward)


def test_two_parameters_with_one_name_are_refused():
    a, b = mg.nn.Linear(3, 4, seed=0), mg.nn.Linear(4, 2, seed=1)
    with pytest.raises(aot.CaptureError, match=r"parameters 0 and 2 are both named 'linear.weight'.*"
                       r"Fix: name them"):
        aot.capture(lambda x: b(a(x)).sum(), np.ones((2, 3)), params=[*a.parameters(), *b.parameters()])


def test_a_parameter_named_like_an_op_id_keeps_the_right_gradient():
    """Names the capture makes up (op ids) step around the names already taken."""
    W = param((3,), "mul_0")
    fn = lambda x: (x * W).tanh().sum()   # noqa: E731
    x = RNG.normal(size=3)
    assert_same_as_eager(fn, [W], plan(fn, [W], x), x)


def test_an_intermediate_named_with_a_reserved_prefix_gets_a_name_of_its_own():
    W = param((3,), "W")

    def fn(x):
        h = x * W
        h.name = "saved.h"   # backward graphs read "saved.h" as forward tensor "h"
        return h.tanh().sum()
    x = RNG.normal(size=3)
    executor = plan(fn, [W], x)
    assert not any(t.startswith("saved.") for op in executor.forward.operations for t in op.outputs)
    assert_same_as_eager(fn, [W], executor, x)


def test_capture_with_too_few_input_names_is_refused():
    with pytest.raises(aot.CaptureError, match=r"input_names \['a'\] name 1 inputs, but 2 example "
                       r"inputs were given.*Fix: pass 2 names"):
        aot.capture(lambda a, b: (a * b).sum(), np.ones(2), np.ones(2), input_names=["a"])


# -- 20: numpy constants are copied at capture, read-only ------------------------------------------

def test_a_numpy_constant_changed_after_capture_does_not_change_the_plan():
    W = param((3,), "W")
    C = np.array([1.0, 2.0, 3.0])
    fn = lambda x: (x * W * C).sum()   # noqa: E731
    x = RNG.normal(size=3)
    forward = aot.capture(fn, x, params=[W])
    C_at_capture = C.copy()
    C[:] = 5.0
    executor = aot.Executor(forward, aot.derive_backward_graph(forward), [W], x)
    assert float(executor.run(x)) == pytest.approx(float((x * W.data * C_at_capture).sum()))
    np.testing.assert_allclose(executor.grads()["d_W"], x * C_at_capture)
    (constant,) = forward.constants.values()
    assert not constant.flags.writeable


# -- 21: the inputs keep their values after run() ---------------------------------------------------

def test_the_loss_returned_by_run_is_not_rewritten_by_the_next_run():
    # losses.append(executor.run(x)) held the loss buffer itself: every entry became the last loss.
    W = param((3, 2), "W")
    executor = plan(lambda x: (x @ W).sum(), [W], np.ones((4, 3)))
    losses = [executor.run(np.full((4, 3), float(k))) for k in (1, 2, 3)]
    want = [k * 4 * W.data.sum() for k in (1, 2, 3)]
    np.testing.assert_allclose([float(v) for v in losses], want, rtol=1e-12)


def test_inputs_keep_their_values_after_run():
    W = param((3, 2), "W")

    def fn(x):   # x is read only by the first op: its memory is free for the rest of the run
        return ((x * 2.0).tanh() * W.sum()).tanh().sum()
    x = RNG.normal(size=(4, 3))
    executor = plan(fn, [W], x)
    x2 = RNG.normal(size=(4, 3))
    executor.run(x2)
    np.testing.assert_array_equal(executor["x"], x2)


def _detach_reached_only_through_detach(W):
    """h is read only through h.detach(): the graph walk alone would never reach it."""
    def fn(x):
        h = (x @ W).tanh()
        return ((x @ W) * h.detach()).sum()
    return fn


def _no_grad_inside(W):
    def fn(x):
        with mg.no_grad():
            scale = x.mean()
        return (x * W * scale).sum()
    return fn


def test_capture_under_a_profiler_sees_detach_and_refuses_no_grad():
    """A running profiler changes nothing: the engine tells capture itself, with no hook."""
    import cProfile
    W = param((3, 2), "W")
    fn = _detach_reached_only_through_detach(W)

    def called_after_capture():
        return 1
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        executor = plan(fn, [W], RNG.normal(size=(4, 3)))
        with pytest.raises(aot.CaptureError, match=r"fn entered no_grad\(\) at "
                           r"test_aot_no_silent_wrong.py:\d+\..*Rule: a captured function"):
            aot.capture(_no_grad_inside(param((3,), "V")), np.ones(3), params=[])
        called_after_capture()
    finally:
        profiler.disable()
    assert "stop_gradient" in str(executor.forward)
    assert_same_as_eager(fn, [W], executor, RNG.normal(size=(4, 3)))   # h follows the new x
    seen = {getattr(stat.code, "co_name", stat.code) for stat in profiler.getstats()}
    assert "called_after_capture" in seen                              # the profiler kept running


def test_a_detached_value_reached_only_through_detach_follows_new_inputs():
    W = param((3, 2), "W")
    fn = _detach_reached_only_through_detach(W)
    executor = plan(fn, [W], RNG.normal(size=(4, 3)))
    assert "tanh" in str(executor.forward)   # h's own graph was captured, not its data
    assert_same_as_eager(fn, [W], executor, RNG.normal(size=(4, 3)))
    W.data = RNG.normal(size=(3, 2))
    assert_same_as_eager(fn, [W], executor, RNG.normal(size=(4, 3)))


def test_no_grad_caught_inside_the_captured_function_is_still_refused():
    W = param((3,), "W")

    def fn(x):
        try:
            with mg.no_grad():
                x = x * 2.0
        except aot.CaptureError:
            pass
        return (x * W).sum()
    with pytest.raises(aot.CaptureError, match=r"fn entered no_grad\(\) at "
                       r"test_aot_no_silent_wrong.py:\d+ \(fn caught the error raised there"):
        aot.capture(fn, np.ones(3), params=[W])


def test_capture_leaves_no_trace_on_the_thread_after_it_ends():
    from minigrad.modes import modes
    W = param((3,), "W")
    for fn in (_no_grad_inside(W), lambda x: (x * W).sum() + x.undefined):
        with pytest.raises((aot.CaptureError, AttributeError)):
            aot.capture(fn, np.ones(3), params=[W])
        assert modes.capture is None and mg.is_grad_enabled()
    aot.capture(lambda x: (x * W.detach()).sum(), np.ones(3), params=[W])
    assert modes.capture is None
    with mg.no_grad():                       # and no_grad() works again outside capture
        assert not mg.is_grad_enabled()


def test_no_grad_on_another_thread_during_a_capture_is_not_refused():
    """modes are per thread: another thread's evaluation under no_grad() is its own business."""
    import threading
    W = param((3,), "W")
    results = []

    def evaluate():
        with mg.no_grad():
            results.append((W * 2.0).requires_grad)

    def fn(x):
        worker = threading.Thread(target=evaluate)
        worker.start()
        worker.join()
        return (x * W).sum()
    executor = plan(fn, [W], np.ones(3))
    assert results == [False]
    assert_same_as_eager(fn, [W], executor, RNG.normal(size=3))

def test_a_frozen_parameter_used_with_constants_only_follows_new_data():
    """A parameter with requires_grad=False is read on every run (not frozen at capture), and gets
    no gradient, as in eager."""
    w = mg.create_leaf(np.ones(3), name="w")
    x0 = np.arange(3.0)

    def fn(x):
        return (w * 3.0).sum() + (x * 2.0).sum()
    forward = aot.capture(fn, mg.create_leaf(x0, name="x"), params=[w])
    executor = aot.Executor(forward, aot.derive_backward_graph(forward), [w], x0)
    assert float(executor.run(x0)) == pytest.approx(fn(mg.create_leaf(x0)).item())
    w.data = np.full(3, 4.0)
    assert float(executor.run(x0)) == pytest.approx(fn(mg.create_leaf(x0)).item()) == 42.0
    assert "d_w" not in executor.grads() and not w.requires_grad and w.grad is None
