"""Write an nbgrader course folder from the lessons; needs only Python 3.

    python tools/make_class.py [lessons_dir] [course_dir]   (default: lessons class)

Each lesson becomes the source of one assignment, `<course_dir>/source/NN_name/NN_name.ipynb`,
with the nbgrader cell metadata that the lessons do not carry (jupytext.toml strips cell
metadata from the .md pairs, so the lessons stay readable in diffs). The metadata is generated
here from what the lessons already say, so it cannot drift from them:

* a code cell with a `### BEGIN SOLUTION` region is an autograded answer cell (nbgrader
  replaces the region with `raise NotImplementedError()` in the students' version);
* the exercise's check cell (`from minigrad.exercises import check_...`, then the call) is a
  locked autograded test cell worth POINTS, importing the graded form of the check instead
  (minigrad.exercises.graded: a wrong answer raises, so the cell fails and scores zero, and the
  student's feedback shows the check's FAIL text and hint).

Every other cell is copied as it is. The sources are rewritten on each run (edit the lessons,
not the copies); a `nbgrader_config.py` is written only when the course folder has none.
Then, in the course folder: `nbgrader generate_assignment NN_name` (docs/grading.md).
"""
from __future__ import annotations

import json
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from make_student import BEGIN, student_copy, text, write_notebook  # noqa: E402

POINTS = 1   # each lesson has one exercise and one check
CHECK_IMPORT = re.compile(r"^from minigrad\.exercises import (check_\w+)\s*$", re.MULTILINE)
DEFINES = re.compile(r"^(?:def|class) (\w+)", re.MULTILINE)

CONFIG = '''\
# nbgrader's settings for this course folder (written by tools/make_class.py when missing).
c = get_config()  # noqa: F821  (nbgrader defines it)
c.CourseDirectory.course_id = "minigrad"
# Seconds per cell: lesson 12 trains a small transformer in one cell (the default is 30).
c.Execute.timeout = 600
'''


def nbgrader_metadata(grade_id: str, *, answer: bool) -> dict:
    """The cell metadata nbgrader reads (schema 3): an answer cell or a locked test cell."""
    meta = {"grade": not answer, "grade_id": grade_id, "locked": not answer,
            "schema_version": 3, "solution": answer, "task": False}
    if not answer:
        meta["points"] = POINTS
    return meta


def graded_source(source: str) -> str:
    """A check cell's source importing the check from minigrad.exercises.graded."""
    return CHECK_IMPORT.sub(r"from minigrad.exercises.graded import \1", source)


def class_copy(lesson: dict, name: str) -> tuple[dict, int]:
    """lesson (an .ipynb as a dict) as an nbgrader source notebook; and its points."""
    copy, _ = student_copy(lesson, solutions=True)     # outputs cleared, kernel set
    answers, points = set(), 0
    for cell in copy["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = text(cell["source"])
        if any(BEGIN.match(line) for line in source.splitlines()):
            defined = DEFINES.search(source)
            grade_id = defined.group(1) if defined else f"answer_{len(answers) + 1}"
            if grade_id in answers:
                raise ValueError(f"{name}: two answer cells define {grade_id}")
            answers.add(grade_id)
            cell["metadata"]["nbgrader"] = nbgrader_metadata(grade_id, answer=True)
        elif CHECK_IMPORT.search(source):
            cell["source"] = graded_source(source)
            grade_id = CHECK_IMPORT.search(source).group(1)
            cell["metadata"]["nbgrader"] = nbgrader_metadata(grade_id, answer=False)
            points += POINTS
    if bool(answers) != bool(points):
        raise ValueError(f"{name}: {len(answers)} answer cell(s) but {points} point(s) of "
                         f"checks; an exercise needs both (a `### BEGIN SOLUTION` region and a "
                         f"cell `from minigrad.exercises import check_...` that calls its check)")
    return copy, points


def main(argv: list[str]) -> None:
    lessons, course = (argv + ["lessons", "class"][len(argv):])[:2]
    course = pathlib.Path(course)
    for path in sorted(pathlib.Path(lessons).glob("[0-9][0-9]_*.ipynb")):
        copy, points = class_copy(json.loads(path.read_text(encoding="utf-8")), path.name)
        target = course / "source" / path.stem / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        write_notebook(copy, target)
        print(f"{target}: {points} point(s)" + ("" if points else " (no exercise: ungraded)"))
    config = course / "nbgrader_config.py"
    if not config.exists():
        config.write_text(CONFIG, encoding="utf-8")
        print(f"{config}: written")


if __name__ == "__main__":
    main(sys.argv[1:])
