"""What backward says when it is asked for something minigrad does not do: retain_graph, a second
loss through a consumed shared graph, a backward while a stepped one is half way. Each message
names what was done, the rule and the fix."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import errors


def graph():
    w = mg.create_leaf(np.array([0.5, -1.0]), requires_grad=True, name="w")
    h = (w * 3.0).tanh()
    return w, h


def expected_grad_of_h_squared(w):
    """d/dw sum(tanh(3w)^2) = 2 tanh(3w) (1 - tanh(3w)^2) 3, by hand."""
    t = np.tanh(3.0 * w)
    return 6.0 * t * (1.0 - t * t)


BACKWARDS = {"method": lambda loss, **kw: loss.backward(**kw),
             "function": lambda loss, **kw: mg.backward(loss, **kw)}
STEPPED = {"backward_steps": lambda loss, **kw: list(mg.backward_steps(loss, **kw))}


@pytest.mark.parametrize("call", [*BACKWARDS.values(), *STEPPED.values()],
                         ids=[*BACKWARDS, *STEPPED])
def test_retain_graph_is_refused_with_what_to_do_instead(call):
    w, h = graph()
    loss = (h * h).sum()
    with pytest.raises(errors.BackwardError) as excinfo:
        call(loss, retain_graph=True)
    assert isinstance(excinfo.value, RuntimeError)
    msg = str(excinfo.value)
    for words in ("retain_graph=True", "no retain_graph", "consumes the graph", "Fix",
                  "(loss1 + loss2).backward()", "run forward again", "retain=True"):
        assert words in msg, words
    assert w.grad is None and not loss.grad_fn.released   # refused before anything ran
    call(loss)                                             # the graph is still whole
    np.testing.assert_allclose(w.grad, expected_grad_of_h_squared(w.data))


def test_retain_graph_false_is_what_backward_does_and_is_accepted():
    w, h = graph()
    (h * h).sum().backward(retain_graph=False)
    np.testing.assert_allclose(w.grad, expected_grad_of_h_squared(w.data))


@pytest.mark.parametrize("order", ["pending", "topo"])
def test_a_second_loss_through_a_consumed_shared_graph_says_to_sum_the_losses(order):
    w, h = graph()
    l1, l2 = h.sum(), (h * h).sum()
    l1.backward(order=order)
    with pytest.raises(errors.BackwardError) as excinfo:
        l2.backward(order=order)
    msg = str(excinfo.value)
    assert "tanh" in msg and "(l1 + l2).backward()" in msg and "forward again" in msg
    assert msg.index("(l1 + l2).backward()") < msg.index("forward again")   # the better fix first


def test_summing_two_losses_of_a_shared_graph_gives_both_gradients():
    """The fix the message names works: one backward of l1 + l2."""
    w, h = graph()
    (h.sum() + (h * h).sum()).backward()
    t = np.tanh(3.0 * w.data)
    np.testing.assert_allclose(w.grad, 3.0 * (1.0 - t * t) + expected_grad_of_h_squared(w.data))


def test_the_same_loss_twice_still_says_run_forward_again():
    w, h = graph()
    loss = (h * h).sum()
    loss.backward()
    with pytest.raises(errors.BackwardError) as excinfo:
        loss.backward()
    msg = str(excinfo.value)
    assert "already consumed" in msg and "Run forward again" in msg and "l1 + l2" not in msg


@pytest.mark.parametrize("call", [*BACKWARDS.values(), *STEPPED.values(),
                                  lambda loss: mg.backward(loss, order="topo")],
                         ids=[*BACKWARDS, *STEPPED, "topo"])
def test_backward_while_a_stepped_backward_is_half_way_says_finish_or_close_it(call):
    w, h = graph()
    loss = (h * h).sum()
    steps = mg.backward_steps(loss)
    next(steps)                      # the seed only: nothing is consumed yet
    with pytest.raises(errors.BackwardError) as excinfo:
        call(loss)
    msg = str(excinfo.value)
    assert "stepped backward of this graph is in progress" in msg and "consumed by" not in msg
    assert "stepper.finish()" in msg and "steps.close()" in msg
    for _ in steps:                  # finishing the stepped backward gives the whole gradient
        pass
    np.testing.assert_allclose(w.grad, expected_grad_of_h_squared(w.data))
    with pytest.raises(errors.BackwardError, match="already consumed"):
        call(loss)                   # finished: now it is an ordinary consumed graph


def test_backward_while_a_stepper_widget_is_half_way_says_finish_it():
    pytest.importorskip("anywidget")   # (absent only in the oldest-numpy pass, which has no widgets)
    from minigrad.widgets import BackwardStepper
    w, h = graph()
    loss = (h * h).sum()
    stepper = BackwardStepper(loss)
    stepper.step(2)
    with pytest.raises(errors.BackwardError, match=r"in progress.*stepper\.finish\(\)"):
        loss.backward()
    stepper.finish()
    np.testing.assert_allclose(w.grad, expected_grad_of_h_squared(w.data))


@pytest.mark.parametrize("stop", ["close", "break"])
def test_backward_after_a_stepped_backward_was_closed_half_way_is_refused(stop):
    """Closed after the seed: a backward now would seed the loss a second time (gradients x2)."""
    w, h = graph()
    loss = (h * h).sum()
    if stop == "close":
        steps = mg.backward_steps(loss)
        next(steps)
        steps.close()
    else:
        for _ in mg.backward_steps(loss):
            break
    with pytest.raises(errors.BackwardError) as excinfo:
        loss.backward()
    assert "closed half way" in str(excinfo.value) and "run forward again" in str(excinfo.value)
    assert w.grad is None


@pytest.mark.parametrize("call", [
    lambda losses: mg.backward(losses),
    lambda losses: list(mg.backward_steps(losses)),
    lambda losses: mg.backward(tuple(losses)),
])
def test_backward_of_a_list_of_losses_says_to_sum_them(call):
    # was: AttributeError: 'list' object has no attribute 'requires_grad'
    x = mg.create_leaf(np.array([1.0, 2.0]), requires_grad=True)
    h = x * 2.0
    with pytest.raises(errors.BackwardError, match=r"backward\(\) takes one loss Variable, got (list|tuple)\. "
                       r"Fix: .*sum them and call backward once, mg.backward\(l1 \+ l2\)"):
        call([h.sum(), (h * h).sum()])
