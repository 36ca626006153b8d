"""Checks for the lessons' exercises.

`check_<name>(your_function)` runs your function on many cases and prints one PASS line, or a
FAIL line with the first failing case and a hint; it never raises for a wrong or unfinished
solution, so the rest of the lesson still runs. These re-exports return nothing (a notebook
would print True/False under the PASS line); each lesson's module (lessonNN.py) has the
version that returns the result as a bool.
"""
from __future__ import annotations

import functools

from . import lesson01, lesson02, lesson03, lesson04, lesson05, lesson06, lesson07
from . import lesson08
from . import lesson10, lesson11, lesson13
from ._report import solved


def _quiet(check):
    @functools.wraps(check)
    def run(*args, **kwargs) -> None:
        check(*args, **kwargs)
    return run


check_kind_of = _quiet(lesson01.check_kind_of)
check_saved_by = _quiet(lesson02.check_saved_by)
check_topo_sort = _quiet(lesson03.check_topo_sort)
check_pending_backward = _quiet(lesson04.check_pending_backward)
check_sum_to_shape = _quiet(lesson05.check_sum_to_shape)
check_softplus = _quiet(lesson06.check_softplus)
check_evaluate = _quiet(lesson07.check_evaluate)
check_reverse_loop = _quiet(lesson08.check_reverse_loop)
check_multiply_rule = _quiet(lesson10.check_multiply_rule)
check_save_list = _quiet(lesson11.check_save_list)
check_choose_recompute = _quiet(lesson11.check_choose_recompute)
check_tangent_rules = _quiet(lesson13.check_tangent_rules)
check_hvp = _quiet(lesson13.check_hvp)

__all__ = ["check_kind_of", "check_saved_by", "check_topo_sort", "check_pending_backward",
           "check_sum_to_shape", "check_softplus", "check_evaluate"]
__all__ += ["check_reverse_loop"]
__all__ += ["check_multiply_rule", "check_save_list", "check_tangent_rules", "check_hvp"]
__all__ += ["check_choose_recompute"]

from . import lesson09  # noqa: E402  (lesson 09: memory)
check_fit_budget = _quiet(lesson09.check_fit_budget)
__all__ += ["check_fit_budget"]

from . import lesson12  # noqa: E402  (lesson 12: the capstone)
check_rmsnorm_backward = _quiet(lesson12.check_rmsnorm_backward)
__all__ += ["check_rmsnorm_backward"]
__all__ += ["solved"]
