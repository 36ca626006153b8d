"""Write student copies of the lessons: every solution region becomes `raise NotImplementedError()`.

    python tools/make_student.py [lessons_dir] [out_dir]      (default: lessons student)

A solution region is the lines from `### BEGIN SOLUTION` to `### END SOLUTION` (nbgrader's
markers) inside a code cell; the lines before and after it (a def line, a docstring) stay, and
the replacement keeps the BEGIN marker's indentation. Outputs are cleared. The copies are not
committed (student/ is git-ignored); Binder's postBuild writes them too.
"""
from __future__ import annotations

import pathlib
import re
import sys

import nbformat

BEGIN = re.compile(r"^(\s*)### BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*### END SOLUTION\s*$")


def strip_solutions(source: str) -> tuple[str, int]:
    """source with each solution region replaced; and how many regions there were."""
    out, inside, regions = [], False, 0
    for line in source.splitlines():
        begin = BEGIN.match(line)
        if begin and not inside:
            inside, regions = True, regions + 1
            out.append(f"{begin.group(1)}raise NotImplementedError()")
        elif inside and END.match(line):
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError("a `### BEGIN SOLUTION` has no matching `### END SOLUTION`")
    return "\n".join(out), regions


def student_copy(notebook: nbformat.NotebookNode) -> tuple[nbformat.NotebookNode, int]:
    copy, total = nbformat.from_dict(notebook), 0
    for cell in copy.cells:
        if cell.cell_type == "code":
            cell.source, regions = strip_solutions(cell.source)
            total += regions
            cell.outputs, cell.execution_count = [], None
    return copy, total


def main(lessons: str = "lessons", out: str = "student") -> None:
    target = pathlib.Path(out)
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(pathlib.Path(lessons).glob("[0-9][0-9]_*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        copy, regions = student_copy(notebook)
        nbformat.write(copy, target / path.name)
        print(f"{path.name}: {regions} solution region(s) replaced")


if __name__ == "__main__":
    main(*sys.argv[1:])
