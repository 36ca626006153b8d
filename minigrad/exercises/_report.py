"""How every exercise check talks to the student: one PASS or FAIL line, then the first failing
case and a hint. A check never raises for a wrong or missing solution, so the rest of the
lesson still runs; it returns True or False for code that wants to know."""
from __future__ import annotations

import traceback


def passed(check: str, what: str) -> bool:
    print(f"PASS {check}: {what}")
    return True


def failed(check: str, case: str, detail: str, hint: str = "") -> bool:
    print(f"FAIL {check}: {case}")
    for line in detail.splitlines():
        print(f"    {line}")
    if hint:
        print(f"  hint: {hint}")
    return False


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
        raise StudentError("not written yet: replace `raise NotImplementedError()` with your "
                           "code and run the cell again") from None
    except Exception as exc:   # any mistake in student code is reported, not raised
        where = traceback.extract_tb(exc.__traceback__)[-1]
        raise StudentError(f"your function raised {type(exc).__name__}: {exc} "
                           f"(line {where.lineno}: {where.line})") from None
