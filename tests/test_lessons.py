"""The lessons: each runs top to bottom, each student copy fails exactly at its checks, and the
files are committed the way the project keeps them (no outputs, paired with MyST markdown)."""
from __future__ import annotations

import pathlib
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
            and "import" not in cell.source.splitlines()[-1]]


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


@pytest.mark.parametrize("lesson", EXERCISES, ids=lambda p: p.stem)
def test_student_copy_fails_only_at_its_checks(lesson):
    copy, regions = student_copy(nbformat.read(lesson, as_version=4))
    assert regions >= 1
    execute(copy, lesson.parent)
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
    assert "mybinder.org" in first and f"lessons/{lesson.name}" in first
    assert 30 <= len(notebook.cells) <= 60, len(notebook.cells)
    sources = "\n".join(c.source for c in notebook.cells)
    if lesson.stem != "00_welcome":
        assert "### BEGIN SOLUTION" in sources and "### END SOLUTION" in sources
    assert "minigrad.widgets" in sources, "every lesson shows a widget"

