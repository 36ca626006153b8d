"""The lessons: each runs top to bottom, each student copy fails exactly at its checks, and the
files are committed the way the project keeps them (no outputs, paired with MyST markdown)."""
from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys
import time

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient

ROOT = pathlib.Path(__file__).parent.parent
LESSONS = sorted((ROOT / "lessons").glob("[0-9][0-9]_*.ipynb"))
sys.path.insert(0, str(ROOT / "tools"))
from make_student import student_copy  # noqa: E402
from lesson_claims import broken_claims  # noqa: E402

EXERCISES = [p for p in LESSONS if "### BEGIN SOLUTION" in p.read_text()]
RUN_TIMES: dict[str, float] = {}


def execute(notebook: nbformat.NotebookNode, cwd: pathlib.Path) -> nbformat.NotebookNode:
    client = NotebookClient(notebook, timeout=180, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(cwd)}})
    client.execute()
    return notebook


def text_of(cell) -> str:
    parts = []
    for output in cell.get("outputs", []):
        if output.output_type == "stream":
            parts.append(output.text)
        elif output.output_type == "error":
            parts.append(f"{output.ename}: {output.evalue}")
        elif "text/plain" in output.get("data", {}):
            parts.append(output.data["text/plain"])
    return "".join(parts)


def errors(notebook) -> list[str]:
    return [f"cell {i}: {o.ename}: {o.evalue}" for i, cell in enumerate(notebook.cells)
            for o in cell.get("outputs", []) if o.output_type == "error"]


def check_cells(notebook) -> list:
    return [cell for cell in notebook.cells
            if cell.cell_type == "code" and "check_" in cell.source
            and "import" not in cell.source.splitlines()[-1] and "solved(" not in cell.source]


@pytest.fixture(params=LESSONS, ids=lambda p: p.stem)
def lesson(request) -> pathlib.Path:
    return request.param


def test_there_are_lessons():
    assert [p.stem[:2] for p in LESSONS] == [f"{i:02d}" for i in range(len(LESSONS))]
    assert len(LESSONS) >= 1


def test_lesson_runs_top_to_bottom_and_its_checks_pass(lesson):
    notebook = nbformat.read(lesson, as_version=4)
    start = time.perf_counter()
    execute(notebook, lesson.parent)
    RUN_TIMES[lesson.stem] = time.perf_counter() - start
    assert errors(notebook) == []
    for cell in check_cells(notebook):
        assert "PASS check_" in text_of(cell) and "FAIL" not in text_of(cell), cell.source
    # the sentences that state what a cell prints or a widget shows (tests/lesson_claims.py)
    assert broken_claims(lesson.stem, notebook) == []


def student_notebook(lesson: pathlib.Path) -> tuple[nbformat.NotebookNode, int]:
    copy, regions = student_copy(json.loads(lesson.read_text(encoding="utf-8")))
    return nbformat.reads(json.dumps(copy), as_version=4), regions


# Solution lines shorter than this (`return grad`, `continue`) occur in any code: seeing one in
# an output gives nothing away.
REVEALING_LENGTH = 16


def solution_lines(notebook) -> set[str]:
    """The lines of the solution regions that would give the answer away if shown."""
    lines, inside = set(), False
    for cell in notebook.cells:
        for line in cell.source.splitlines() if cell.cell_type == "code" else []:
            if "### BEGIN SOLUTION" in line or "### END SOLUTION" in line:
                inside = "BEGIN" in line
                continue
            code = line.split("#", 1)[0].strip()
            if inside and len(code) >= REVEALING_LENGTH:
                lines.add(code)
    return lines


def everything_shown(notebook) -> str:
    """All that a notebook shows after a run: every output (text, html, tracebacks) and the
    state of every widget it drew."""
    shown = [json.dumps(cell.get("outputs", []), ensure_ascii=False) for cell in notebook.cells]
    shown.append(json.dumps(notebook.metadata.get("widgets", {}), ensure_ascii=False))
    return "\n".join(shown).replace("\\n", "\n").replace('\\"', '"')


@pytest.mark.parametrize("lesson", EXERCISES, ids=lambda p: p.stem)
def test_student_copy_fails_only_at_its_checks_and_shows_no_solution(lesson):
    """Run All in a student copy (errors allowed): only the checks fail, and no output and no
    widget shows a line of a solution. A cell that would show the library's version of the
    answer waits until the check has passed (minigrad.exercises.solved)."""
    copy, regions = student_notebook(lesson)
    assert regions >= 1
    execute(copy, lesson.parent)
    shown = everything_shown(copy)
    leaked = sorted(line for line in solution_lines(nbformat.read(lesson, as_version=4))
                    if line in shown)
    assert leaked == [], f"a student copy's outputs show solution lines: {leaked}"
    # lesson 11's answer is a list of names, which its AotView of the exercise graph lists as
    # required saves: that view must not be drawn before the check passes
    assert "the exercise graph" not in shown
    assert errors(copy) == [], "in a student copy only the checks may fail, and quietly"
    checks = check_cells(copy)
    assert checks, "an exercise needs a visible check cell"
    for cell in checks:
        assert "FAIL check_" in text_of(cell), cell.source


def test_lesson_is_committed_without_outputs_and_paired_with_markdown(lesson):
    notebook = nbformat.read(lesson, as_version=4)
    assert all(not cell.get("outputs") and cell.get("execution_count") is None
               for cell in notebook.cells if cell.cell_type == "code")
    paired = jupytext.read(lesson.with_suffix(".md"))
    assert [(c.cell_type, c.source.strip()) for c in paired.cells] == \
           [(c.cell_type, c.source.strip()) for c in notebook.cells], \
        "run `jupytext --sync lessons/*.ipynb`: the .md and .ipynb differ"


def test_lesson_has_the_parts_every_lesson_has(lesson):
    notebook = nbformat.read(lesson, as_version=4)
    first = notebook.cells[0].source
    assert "mybinder.org" in first and f"lab/tree/student/{lesson.name}" in first
    assert 30 <= len(notebook.cells) <= 60, len(notebook.cells)
    sources = "\n".join(c.source for c in notebook.cells)
    if lesson.stem != "00_welcome":
        assert "### BEGIN SOLUTION" in sources and "### END SOLUTION" in sources
    assert "minigrad.widgets" in sources, "every lesson shows a widget"



def test_every_binder_link_opens_a_student_copy():
    """A student follows the README and the lessons' launch links: they must end in student/
    (solutions removed), never in lessons/."""
    texts = {p.name: p.read_text(encoding="utf-8")
             for p in [ROOT / "README.md", *(ROOT / "lessons").glob("*.md")]}
    links = {name: re.findall(r"mybinder\.org/v2/[^)\s]*", text) for name, text in texts.items()}
    assert all(links[p.with_suffix(".md").name] for p in LESSONS)
    wrong = {name: [u for u in urls if "urlpath=lab/tree/student/" not in u and "urlpath" in u]
             for name, urls in links.items()}
    assert {name: urls for name, urls in wrong.items() if urls} == {}


def test_every_lesson_and_copy_names_its_kernel(tmp_path):
    """Without a kernelspec JupyterLab asks "Select Kernel" and writes the choice into the file."""
    for lesson in LESSONS:
        kernel = json.loads(lesson.read_text(encoding="utf-8"))["metadata"].get("kernelspec", {})
        assert kernel.get("name") == "python3", lesson.name
        copy, _ = student_notebook(lesson)
        assert copy.metadata.kernelspec.name == "python3"
        assert copy.metadata.jupytext.formats == "ipynb", "a copy is never paired with a .md"
        nbformat.validate(copy)


def test_make_student_keeps_a_students_work_and_writes_what_is_missing(tmp_path):
    script = ROOT / "tools" / "make_student.py"
    # -I -S: no site-packages, so the script runs on a bare Python (no nbformat, no venv)
    run = [sys.executable, "-I", "-S", str(script), str(ROOT / "lessons"), str(tmp_path)]
    subprocess.run(run, check=True, capture_output=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [p.name for p in LESSONS]
    work = tmp_path / LESSONS[3].name
    work.write_text(work.read_text(encoding="utf-8").replace("NotImplementedError()", "1 + 1"))
    mine = work.read_text(encoding="utf-8")
    (tmp_path / LESSONS[0].name).unlink()
    out = subprocess.run(run, check=True, capture_output=True, text=True).stdout
    assert work.read_text(encoding="utf-8") == mine
    assert (tmp_path / LESSONS[0].name).exists()
    assert f"{work}: kept" in out
    for path in tmp_path.iterdir():
        assert "### BEGIN SOLUTION" not in path.read_text(encoding="utf-8")
    copy = json.loads((tmp_path / LESSONS[0].name).read_text(encoding="utf-8"))
    assert json.loads(LESSONS[0].read_text(encoding="utf-8"))["cells"] == copy["cells"]
    # a copy of an older version of its lesson is kept too, with a note saying so
    copy["metadata"]["minigrad"]["lesson_version"] = "an older lesson"
    (tmp_path / LESSONS[0].name).write_text(json.dumps(copy), encoding="utf-8")
    out = subprocess.run(run, check=True, capture_output=True, text=True).stdout
    assert "the lesson changed since" in out.splitlines()[0]
    assert "the lesson changed since" not in out.splitlines()[3]
