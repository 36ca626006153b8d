"""How every exercise check talks to the student: one PASS or FAIL line, then the first failing
case and a hint. A check never raises for a wrong or missing solution, so the rest of the
lesson still runs; it returns True or False for code that wants to know."""
from __future__ import annotations

import sys
import traceback


def passed(check: str, what: str) -> bool:
    print(f"PASS {check}: {what}")
    SOLVED.add(check)
    return True


def failed(check: str, case: str, detail: str, hint=()) -> bool:
    """hint: one text, or graded hints (a tuple, the idea first): each failing run of the same
    check shows the next one, so the first attempt gets the idea, not the answer."""
    print(f"FAIL {check}: {case}")
    for line in detail.splitlines():
        print(f"    {line}")
    levels = (hint,) if isinstance(hint, str) else tuple(hint)
    attempt = not detail.startswith(NOT_WRITTEN)   # a stub is no attempt: it gets the idea only
    runs = FAILED_RUNS.get(check, 0) if attempt else 0
    FAILED_RUNS[check] = runs + attempt
    if levels and levels[0]:
        print(f"  hint: {levels[min(runs, len(levels) - 1)]}")
        if attempt and runs < len(levels) - 1:
            print("  (still stuck? run the check again for a closer hint)")
    return False


FAILED_RUNS: dict = {}   # check name -> failing attempts so far in this kernel
NOT_WRITTEN = "not written yet"


class StudentError(Exception):
    """The student's function raised; carries a short description for failed()."""

    def __init__(self, description: str):
        super().__init__(description)
        self.description = description


def call(fn, *args, **kwargs):
    """Call the student's function; turn its exceptions into StudentError with a short text."""
    try:
        return fn(*args, **kwargs)
    except NotImplementedError:
        raise StudentError(f"{NOT_WRITTEN}: replace `raise NotImplementedError()` with your "
                           "code and run the cell again") from None
    except Exception as exc:   # any mistake in student code is reported, not raised
        where = traceback.extract_tb(exc.__traceback__)[-1]
        raise StudentError(f"your function raised {type(exc).__name__}: {exc} "
                           f"(line {where.lineno}: {where.line})") from None


# -- the student's own code --------------------------------------------------------------------
def call_own(fn, library: tuple, *args):
    """call(fn, *args), but a function that hands the exercise to the library's solution (by
    calling it under any name, directly or through a helper) fails: a check grades the
    student's code. `library` lists the functions that would give the answer away."""
    names = {f.__code__: f"{f.__module__}.{f.__qualname__}" for f in library}
    used: list[str] = []

    def watch(frame, event, arg):
        if event == "call" and frame.f_code in names:
            used.append(names[frame.f_code])

    previous = sys.getprofile()
    sys.setprofile(watch)
    try:
        return call(fn, *args)
    finally:
        sys.setprofile(previous)
        if used:    # said even when the function raised afterwards: this is the first problem
            raise StudentError(f"your function calls the library's {used[0]}, which is the "
                               f"answer this exercise asks you to write. The check grades your "
                               f"own code: write the steps yourself (numpy and the lesson's "
                               f"helpers are fine)")


# -- what a lesson shows after its exercise ----------------------------------------------------------
SOLVED: set = set()


def solved(check) -> bool:
    """Whether `check` (a check function or its name) has passed in this kernel. A lesson shows
    what would give the exercise away (the library's own solution, a drawing of the answer)
    only then; until then this prints what unlocks the cell, so Run All in a student copy
    gives nothing away."""
    name = getattr(check, "__name__", check)
    if name in SOLVED:
        return True
    print(f"(this cell would give the exercise away, so it shows its output once {name} "
          f"passes: finish the exercise, run its check, then run this cell again)")
    return False
