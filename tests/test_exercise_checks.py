"""The exercise checks grade the student's code, not the library's; their hints go from the
idea to the answer; a lesson's cell that shows the library's solution waits for the check."""
from __future__ import annotations

import numpy as np
import pytest

import minigrad as mg
from minigrad import kernels
from minigrad.exercises import _report, lesson03, lesson05, lesson06, lesson08, lesson12


@pytest.fixture(autouse=True)
def fresh_kernel():
    """Each test starts as a fresh notebook kernel: no check passed or failed yet."""
    _report.SOLVED.clear()
    _report.FAILED_RUNS.clear()
    yield
    _report.SOLVED.clear()
    _report.FAILED_RUNS.clear()


def own_topo_sort(loss):
    order, seen = [], set()
    stack = [(loss.grad_fn, False)]
    while stack:                          # iterative post-order: the check has a long chain
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if node in seen:
            continue
        seen.add(node)
        stack.append((node, True))
        stack += [(v.grad_fn, False) for v in node.inputs
                  if v.grad_fn is not None and v.grad_fn not in seen]
    return order


def own_sum_to_shape(grad, shape):
    grad = grad.sum(axis=tuple(range(grad.ndim - len(shape)))) if grad.ndim > len(shape) else grad
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    return grad.sum(axis=axes, keepdims=True) if axes else grad


def test_lesson03_refuses_the_librarys_topo_order_under_any_name(capsys):
    assert lesson03.check_topo_sort(own_topo_sort)
    assert "PASS check_topo_sort" in capsys.readouterr().out
    delegations = [lambda loss: mg.topo_order(loss.grad_fn),
                   lambda loss: list(mg.eager.engine.topo_order(loss.grad_fn))]
    for topo_sort in delegations:
        assert not lesson03.check_topo_sort(topo_sort)
        out = capsys.readouterr().out
        assert "FAIL check_topo_sort" in out and "minigrad.eager.engine.topo_order" in out


def test_lesson05_refuses_the_librarys_sum_to_shape_imported_under_the_exercise_name(capsys):
    assert lesson05.check_sum_to_shape(own_sum_to_shape)
    from minigrad.kernels import sum_to_shape       # the loophole: same name as the exercise
    assert not lesson05.check_sum_to_shape(sum_to_shape)
    out = capsys.readouterr().out
    assert "FAIL check_sum_to_shape" in out and "minigrad.kernels.sum_to_shape" in out

    def through_accumulate_grad(grad, shape):      # a library path that calls it inside
        leaf = mg.create_leaf(np.zeros(shape), requires_grad=True)
        mg.accumulate_grad(leaf, grad)
        return leaf.grad
    assert not lesson05.check_sum_to_shape(through_accumulate_grad)
    assert "minigrad.kernels.sum_to_shape" in capsys.readouterr().out


def test_lesson12_refuses_the_librarys_rmsnorm_backward(capsys):
    def delegated(d_y, x, rstd, weight):
        return kernels.rmsnorm_backward(x, weight, rstd[..., 0], d_y)[:2]
    assert not lesson12.check_rmsnorm_backward(delegated, steps=2)
    out = capsys.readouterr().out
    assert "FAIL check_rmsnorm_backward" in out and "minigrad.kernels.rmsnorm_backward" in out


def hints_of(out: str) -> list[str]:
    return [line.split("hint: ", 1)[1] for line in out.splitlines() if "hint: " in line]


def overflowing_softplus():
    class Softplus(mg.Function):
        """z = log(1 + e^a)."""
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return np.logaddexp(0.0, a)

        @staticmethod
        def backward(ctx, grad_output):
            (a,) = ctx.saved_tensors
            return grad_output * np.exp(a) / (1 + np.exp(a))     # inf / inf at a = 800
    return Softplus


def test_lesson06_hints_go_from_the_idea_to_the_formula(capsys):
    shown = []
    for _ in range(4):
        assert not lesson06.check_softplus(overflowing_softplus())
        shown += hints_of(capsys.readouterr().out)
    assert shown == [*lesson06.EDGE_HINTS, lesson06.EDGE_HINTS[-1]]
    assert "np.exp(-a)" not in shown[0] and "np.exp(-a)" in shown[-1]


def test_lesson12_first_hint_is_the_idea_not_the_formula(capsys):
    def stub(d_y, x, rstd, weight):
        raise NotImplementedError()
    for _ in range(2):          # an unwritten stub is no attempt: it keeps getting the idea
        assert not lesson12.check_rmsnorm_backward(stub, steps=2)
        assert hints_of(capsys.readouterr().out) == [lesson12.HINT[0]]
    assert "mean(g * x_hat)" not in lesson12.HINT[0]

    def wrong(d_y, x, rstd, weight):
        return d_y * weight * rstd, (d_y * x * rstd).reshape(-1, x.shape[-1]).sum(axis=0)
    seen = []
    for _ in range(3):
        assert not lesson12.check_rmsnorm_backward(wrong, steps=2)
        seen += hints_of(capsys.readouterr().out)
    assert seen == list(lesson12.HINT)


def test_lesson08_a_forward_order_loop_is_told_so(capsys):
    from minigrad.tape import RULES

    def forward_loop(tape, out):
        tape.grads[out] = 1.0
        for instr in tape.instrs:                         # recording order: wrong
            g = tape.grads[instr.output]
            if g is None:
                continue
            inputs = [tape.values[i] for i in instr.inputs]
            pieces = RULES[instr.op].backward(g, inputs, tape.values[instr.output], **instr.attrs)
            for i, piece in zip(instr.inputs, pieces):
                if tape.requires_grad[i]:
                    tape.grads[i] = piece if tape.grads[i] is None else tape.grads[i] + piece
    assert not lesson08.check_reverse_loop(forward_loop)
    assert hints_of(capsys.readouterr().out) == [lesson08.FORWARD_HINT]

    def stub(tape, out):
        raise NotImplementedError()
    assert not lesson08.check_reverse_loop(stub)
    first = hints_of(capsys.readouterr().out)
    assert first == [lesson08.START_HINTS[0]] and "reversed(" not in first[0]


def test_solved_waits_for_the_check_to_pass(capsys):
    from minigrad.exercises import check_sum_to_shape, solved
    assert solved(check_sum_to_shape) is False
    assert "once check_sum_to_shape passes" in capsys.readouterr().out
    check_sum_to_shape(own_sum_to_shape)
    capsys.readouterr()
    assert solved(check_sum_to_shape) is True and capsys.readouterr().out == ""


# -- the graded form (nbgrader's test cells, tools/make_class.py) --------------------------------
def test_every_check_has_a_graded_form_that_raises_where_the_lesson_prints_fail(capsys):
    from minigrad import exercises
    from minigrad.exercises import graded
    checks = [name for name in exercises.__all__ if name.startswith("check_")]
    assert checks and all(getattr(graded, name).__wrapped__ is getattr(exercises, name).__wrapped__
                          for name in checks)
    assert issubclass(graded.CheckFailed, AssertionError)
    with pytest.raises(graded.CheckFailed) as failure:
        graded.check_sum_to_shape(lambda grad, shape: grad)      # forgets to sum
    message = str(failure.value)
    assert message.startswith("FAIL check_sum_to_shape: ") and "hint: " in message
    # IPython (nbgrader's feedback too) shows the message in place of the check's frames
    assert failure.value._render_traceback_() == [f"CheckFailed: {message}"]
    assert capsys.readouterr().out == "", "a graded check says it all in its exception"
    assert graded.check_sum_to_shape(own_sum_to_shape) is None
    assert capsys.readouterr().out.startswith("PASS check_sum_to_shape: ")
    assert _report.SOLVED == {"check_sum_to_shape"}


def test_a_graded_check_of_an_unwritten_answer_says_so():
    from minigrad.exercises import graded

    def stub(grad, shape):
        raise NotImplementedError()
    with pytest.raises(graded.CheckFailed, match="not written yet"):
        graded.check_sum_to_shape(stub)


def test_lesson02_fail_names_the_formula_not_the_answer(capsys):
    from minigrad.exercises import lesson02
    assert not lesson02.check_saved_by(lambda op: set())   # add, sub right; mul saves both
    out = capsys.readouterr().out
    assert "saved_by('mul')" in out and "you said set()" in out
    assert "{'input 0', 'input 1'}" not in out, "the FAIL text must not say what mul saves"
    assert "grad_output * b" in out, "it shows the formula to read the answer from"
    assert "both are saved" not in out, "nor the op's docstring, which says it"


def test_lesson11_fail_counts_the_missing_saves_without_naming_them(capsys):
    from minigrad.exercises import lesson11
    assert not lesson11.check_save_list(lambda: ["x", "W"])
    out = capsys.readouterr().out
    assert "missing 6 tensors" in out and "extra W: a parameter" in out
    for name in ("logits", "saved.", "'s'", "'e'", "'r'", "'h'"):
        assert name not in out.split("hint:")[0].replace("through saved.:", ""), name


def fewest_recomputes(forward, backward, budget_bytes):
    """Lesson 11's budget exercise, solved: every choice of the cheap saves, fewest first."""
    import itertools
    from minigrad import aot
    candidates = aot.plan_memory(forward, backward, policy="recompute").recomputed
    peaks = []
    for k in range(len(candidates) + 1):
        for chosen in itertools.combinations(candidates, k):
            peaks.append(aot.plan_memory(forward, backward, policy="recompute",
                                         recompute=list(chosen)).peak_bytes)
            if peaks[-1] <= budget_bytes:
                return list(chosen)
    raise ValueError(f"budget {budget_bytes:,} bytes cannot be met: the lowest peak is {min(peaks):,}")


def biggest_first(forward, backward, budget_bytes):
    """A plausible wrong answer: drop the biggest saves first until the peak fits."""
    from minigrad import aot
    plan = aot.plan_memory(forward, backward, policy="recompute")
    ranked = sorted(plan.recomputed, key=lambda t: -forward.shape_env[t].nbytes)
    for k in range(len(ranked) + 1):
        if aot.plan_memory(forward, backward, policy="recompute",
                           recompute=ranked[:k]).peak_bytes <= budget_bytes:
            return ranked[:k]
    raise ValueError(f"budget {budget_bytes} unreachable; lowest {plan.peak_bytes}")


def test_lesson11_budget_solution_passes_and_greedy_by_bytes_fails_with_the_idea(capsys):
    from minigrad.exercises import lesson11
    assert lesson11.check_choose_recompute(fewest_recomputes)
    assert "PASS check_choose_recompute" in capsys.readouterr().out
    assert not lesson11.check_choose_recompute(biggest_first)
    out = capsys.readouterr().out
    assert "FAIL check_choose_recompute" in out and "fits too and recomputes 1 tensor(s), not 3" in out
    assert hints_of(out) == [lesson11.BUDGET_HINTS[0]]
    assert not lesson11.check_choose_recompute(biggest_first)
    assert hints_of(capsys.readouterr().out) == [lesson11.BUDGET_HINTS[1]]


def test_lesson11_budget_stub_delegation_and_a_silent_refusal_fail(capsys):
    from minigrad.exercises import lesson11

    def stub(forward, backward, budget_bytes):
        raise NotImplementedError()
    assert not lesson11.check_choose_recompute(stub)
    out = capsys.readouterr().out
    assert "not written yet" in out and hints_of(out) == [lesson11.BUDGET_HINTS[0]]

    def delegated(forward, backward, budget_bytes):     # the check's own search, borrowed
        peaks = lesson11._every_choice(forward, backward)
        return list(min((c for c, p in peaks.items() if p <= budget_bytes), key=len))
    assert not lesson11.check_choose_recompute(delegated)
    assert "minigrad.exercises.lesson11._every_choice" in capsys.readouterr().out

    def vague(forward, backward, budget_bytes):          # right choices, an unhelpful refusal
        try:
            return fewest_recomputes(forward, backward, budget_bytes)
        except ValueError:
            raise ValueError("does not fit") from None
    assert not lesson11.check_choose_recompute(vague)
    out = capsys.readouterr().out
    assert "does not name the budget and the lowest peak" in out
    assert hints_of(out) == [lesson11.IMPOSSIBLE_HINT]

    def returns_everything(forward, backward, budget_bytes):   # never refuses
        from minigrad import aot
        return aot.plan_memory(forward, backward, policy="recompute").recomputed
    assert not lesson11.check_choose_recompute(returns_everything)
    assert "FAIL check_choose_recompute" in capsys.readouterr().out
