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

from minigrad import exercises


class CheckFailed(AssertionError):
    """A graded check failed; the message is the check's FAIL text with its hint."""

    def _render_traceback_(self) -> list[str]:
        """What IPython shows in place of the traceback: the message alone. The frames would be
        the check's own, and the FAIL text already names the case, the line of the student's
        code that raised (if one did) and the hint."""
        return [f"{type(self).__name__}: {self}"]


def graded(check):
    """check (it prints PASS or FAIL and returns True or False), raising CheckFailed where it
    would print FAIL."""
    @functools.wraps(check)
    def run(*args, **kwargs) -> None:
        shown = io.StringIO()   # the check talks by printing: keep its words for the message
        with contextlib.redirect_stdout(shown):
            ok = check(*args, **kwargs)
        if not ok:
            raise CheckFailed(shown.getvalue().rstrip())
        print(shown.getvalue(), end="")
    return run


# Every check of minigrad.exercises, under the same name. (Those return None so a notebook does
# not print True/False under the PASS line; __wrapped__ is the lesson module's, which returns it.)
CHECKS = [name for name in exercises.__all__ if name.startswith("check_")]
globals().update({name: graded(getattr(exercises, name).__wrapped__) for name in CHECKS})
__all__ = ["CheckFailed", "graded", *CHECKS]
