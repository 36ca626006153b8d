"""The numpy that `make test-oldest` installs: the oldest one pyproject.toml accepts that has
wheels for this Python (pip would otherwise try to compile numpy from source).

    python tools/oldest_numpy.py        prints e.g. 1.26.4

pyproject.toml says numpy>=1.26; 1.26.4 is that series' last bug-fix release. numpy 1.26 has
wheels for Python 3.9 to 3.12 only: on a newer Python the oldest numpy that installs is the first
release with wheels for it.
"""
from __future__ import annotations

import sys

AT_THE_BOUND = "1.26.4"
FIRST_WITH_WHEELS = {(3, 13): "2.1.0", (3, 14): "2.3.2"}   # (Python minor: numpy release)


def oldest_numpy(python: tuple = sys.version_info[:2]) -> str:
    if python <= (3, 12):
        return AT_THE_BOUND
    known = [v for p, v in sorted(FIRST_WITH_WHEELS.items()) if p <= python]
    return known[-1]   # (a Python newer than the table: the newest entry, which pip may refuse)


if __name__ == "__main__":
    print(oldest_numpy())
