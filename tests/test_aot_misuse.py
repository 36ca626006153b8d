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
