"""The checks in their graded form, for nbgrader's autograded test cells.

A lesson imports its check from `minigrad.exercises`: it prints PASS or FAIL and never raises,
so Run All reads on past an unfinished exercise. A graded cell must fail instead, because
nbgrader gives a test cell its points exactly when it runs without an error. So
`tools/make_class.py` writes `from minigrad.exercises.graded import check_...` into the class
copies' test cells: the same check, which prints the same PASS line, but a wrong or unfinished
answer raises CheckFailed, whose message is the FAIL text (the case, what went wrong, the hint)
that the student then reads in the feedback.
"""
from __future__ import annotations

import contextlib
import functools
import io

from . import lesson01, lesson02, lesson03, lesson04, lesson05, lesson06, lesson07
from . import lesson08, lesson09, lesson10, lesson11, lesson12


class CheckFailed(AssertionError):
    """A graded check failed; the message is the check's FAIL text with its hint."""


def graded(check):
    """check (it prints PASS or FAIL and returns True or False), raising CheckFailed where it
    would print FAIL."""
    @functools.wraps(check)
    def run(*args, **kwargs) -> None:
        shown = io.StringIO()   # the check talks by printing: keep its words for the message
        with contextlib.redirect_stdout(shown):
            ok = check(*args, **kwargs)
        if not ok:
            raise CheckFailed("\n" + shown.getvalue().rstrip())
        print(shown.getvalue(), end="")
    return run


check_kind_of = graded(lesson01.check_kind_of)
check_saved_by = graded(lesson02.check_saved_by)
check_topo_sort = graded(lesson03.check_topo_sort)
check_pending_backward = graded(lesson04.check_pending_backward)
check_sum_to_shape = graded(lesson05.check_sum_to_shape)
check_softplus = graded(lesson06.check_softplus)
check_evaluate = graded(lesson07.check_evaluate)
check_reverse_loop = graded(lesson08.check_reverse_loop)
check_fit_budget = graded(lesson09.check_fit_budget)
check_multiply_rule = graded(lesson10.check_multiply_rule)
check_save_list = graded(lesson11.check_save_list)
check_rmsnorm_backward = graded(lesson12.check_rmsnorm_backward)
