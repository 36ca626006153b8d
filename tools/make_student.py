"""Write the copies of the lessons that students (and teachers) open; needs only Python 3.

    python tools/make_student.py [--solutions] [lessons_dir] [out_dir]   (default: lessons student)

A student copy replaces every solution region with `raise NotImplementedError()`. A solution
region is the lines from `### BEGIN SOLUTION` to `### END SOLUTION` (nbgrader's markers) inside
a code cell; the lines before and after it (a def line, a docstring) stay, and the replacement
keeps the BEGIN marker's indentation. `--solutions` keeps the solutions (the teacher's copies).

Every copy has its outputs cleared and the python3 kernel set, so opening it never asks for a
kernel, and is not paired with a .md file (one file per lesson in the file browser). The copies live in git-ignored folders: running them never changes a tracked file.
A copy that already exists is kept (it holds the student's work); when its lesson has changed
since, the script says so. Delete the copy to get the new version.

The notebooks are read and written as plain JSON (the .ipynb format is JSON), so writing the
copies needs no package at all.
"""
from __future__ import annotations

import hashlib
import json
import pathlib
import re
import sys

BEGIN = re.compile(r"^(\s*)### BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*### END SOLUTION\s*$")
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


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


def text(source) -> str:
    """A cell's source: a string, or the list of lines the .ipynb file stores."""
    return source if isinstance(source, str) else "".join(source)


def lesson_digest(notebook: dict) -> str:
    """Identifies a lesson's version: the cells' types and sources."""
    cells = [(cell["cell_type"], text(cell["source"])) for cell in notebook["cells"]]
    return hashlib.sha256(json.dumps(cells).encode()).hexdigest()[:16]


def student_copy(notebook: dict, solutions: bool = False) -> tuple[dict, int]:
    """A copy of notebook (a dict, e.g. nbformat's) to run: solutions stripped unless
    `solutions`, outputs cleared, the kernel set; and how many solution regions it had."""
    copy, total = json.loads(json.dumps(notebook)), 0
    for cell in copy["cells"]:
        if cell["cell_type"] == "code":
            source, regions = strip_solutions(text(cell["source"]))
            total += regions
            if not solutions:    # in the form it came in: one string, or a list of lines
                lines = isinstance(cell["source"], list)
                cell["source"] = source.splitlines(keepends=True) if lines else source
            cell["outputs"], cell["execution_count"] = [], None
    copy["metadata"]["kernelspec"] = dict(KERNELSPEC)
    # a copy is one file: not paired with a .md (the repository's jupytext.toml pairs the
    # lessons, and would pair a copy too where the server's root holds that file, as on Binder)
    copy["metadata"]["jupytext"] = {**copy["metadata"].get("jupytext", {}), "formats": "ipynb"}
    copy["metadata"]["minigrad"] = {"lesson_version": lesson_digest(notebook)}
    return copy, total


def write_notebook(notebook: dict, path: pathlib.Path) -> None:
    """The layout Jupyter itself writes (one-space indent, unicode as is)."""
    path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def is_stale(copy_path: pathlib.Path, lesson: dict) -> bool:
    kept = json.loads(copy_path.read_text(encoding="utf-8"))
    return kept["metadata"].get("minigrad", {}).get("lesson_version") != lesson_digest(lesson)


def main(argv: list[str]) -> None:
    solutions = "--solutions" in argv
    folders = [a for a in argv if a != "--solutions"]
    lessons, out = (folders + ["lessons", "student"][len(folders):])[:2]
    if pathlib.Path(out).resolve() == pathlib.Path(lessons).resolve():
        raise SystemExit("make_student: the copies need a folder of their own, not the lessons'")
    target = pathlib.Path(out)
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(pathlib.Path(lessons).glob("[0-9][0-9]_*.ipynb")):
        lesson = json.loads(path.read_text(encoding="utf-8"))
        copy_path = target / path.name
        if copy_path.exists():
            note = (" (the lesson changed since: delete the copy for the new version)"
                    if is_stale(copy_path, lesson) else "")
            print(f"{copy_path}: kept, it may hold your work{note}")
            continue
        copy, regions = student_copy(lesson, solutions)
        write_notebook(copy, copy_path)
        kept = "kept" if solutions else "replaced"
        print(f"{copy_path}: written, {regions} solution region(s) {kept}")


if __name__ == "__main__":
    main(sys.argv[1:])
