"""The lessons as an nbgrader course, graded by real nbgrader end to end.

tools/make_class.py writes the course's sources (nbgrader's cell metadata generated from the
lessons' solution regions and check cells); nbgrader itself then runs `generate_assignment` on
every lesson, `autograde` on three submissions per lesson -- the solution (full points), the
untouched student copy (zero), a plausible wrong answer (zero) -- and `generate_feedback`.

nbgrader comes from the `grading` extra, installed in a venv of its own (.venv-grading; the
Makefile says why). `make test` makes it and names it in MINIGRAD_NBGRADER; without that
variable the test looks for .venv-grading and is skipped (saying so) when there is none.
One course, one autograde call per student: nbgrader then executes 37 notebooks (13 + 12 + 12;
lesson 00 has no exercise, so it is submitted once), which is most of this file's time (the
summary prints each call's seconds).
"""
from __future__ import annotations

import csv
import json
import os
import pathlib
import re
import resource
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).parent.parent
LESSONS = sorted((ROOT / "lessons").glob("[0-9][0-9]_*.ipynb"))
sys.path.insert(0, str(ROOT / "tools"))
import make_class  # noqa: E402

EXERCISES = [p.stem for p in LESSONS if "### BEGIN SOLUTION" in p.read_text(encoding="utf-8")]
# points per lesson: one per graded check (lesson 11 has two exercises)
POINTS = {p.stem: make_class.class_copy(json.loads(p.read_text(encoding="utf-8")), p.stem)[1]
          for p in LESSONS}
# nbgrader call -> (wall seconds, CPU seconds of nbgrader and its kernels); tests/conftest.py
# prints them (on a busy machine the wall time is several times the CPU time)
NBGRADER_TIMES: dict[str, tuple[float, float]] = {}


def cpu_seconds() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime

# A plausible mistake per lesson: (text of the solution, what the wrong answer has instead).
WRONG = {
    "01_variables_and_leaves": ('"parameter" if v.requires_grad else "data"',
                                '"data" if v.requires_grad else "parameter"'),
    "02_building_the_graph": ('"exp": {"output"}', '"exp": {"input 0"}'),
    "03_backward_topological": ("    return order\n", "    return order[::-1]\n"),
    "04_dependency_counting": ("fn.pending_count -= 1\n", "pass   # (forgot to count down)\n"),
    "05_accumulate_and_broadcast": ("keepdims=True", "keepdims=False"),
    "06_your_own_op": ("np.logaddexp(0.0, -a)", "np.logaddexp(0.0, a)"),
    "07_arenas_and_batches": (".item() * len(yb)", ".item()"),
    "08_the_tape": ("reversed(tape.instrs)", "tape.instrs"),
    "09_memory": ("range(n_layers, -1, -1)", "range(0, n_layers + 1)"),
    "10_ahead_of_time": ('"mul", [ctx.d_output, ctx.read(b)]',
                         '"mul", [ctx.d_output, ctx.read(a)]'),
    "11_saves_and_memory_plans": ('"x"]', '"x", "W"]'),
    "12_capstone_transformer": ("(g - x_hat *", "(g + x_hat *"),
    "13_forward_mode": ("return t[0] * v[1] + v[0] * t[1]", "return t[0] * v[1]"),
}
MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)


def test_every_exercise_has_a_wrong_answer():
    assert sorted(WRONG) == EXERCISES


# -- the course sources, without nbgrader -------------------------------------------------------
def class_cells(stem: str) -> list[dict]:
    lesson = json.loads((ROOT / "lessons" / f"{stem}.ipynb").read_text(encoding="utf-8"))
    copy, _ = make_class.class_copy(lesson, stem)
    return [c for c in copy["cells"] if "nbgrader" in c["metadata"]]


@pytest.mark.parametrize("stem", EXERCISES)
def test_class_copy_marks_the_answer_and_a_locked_graded_check(stem):
    cells = class_cells(stem)
    answers = [c["metadata"]["nbgrader"] for c in cells if c["metadata"]["nbgrader"]["solution"]]
    checks = [c for c in cells if c["metadata"]["nbgrader"]["grade"]]
    assert len(answers) == len(checks) == POINTS[stem] >= 1
    assert all(not a["grade"] and not a["locked"] for a in answers)
    for check in checks:
        meta, source = check["metadata"]["nbgrader"], "".join(check["source"])
        assert meta["locked"] and meta["points"] == 1 and meta["grade_id"].startswith("check_")
        assert f"from minigrad.exercises.graded import {meta['grade_id']}\n" in source
        assert "from minigrad.exercises import check_" not in source


def test_a_lesson_without_exercise_is_ungraded_and_an_exercise_without_check_refused():
    assert class_cells("00_welcome") == []
    lesson = json.loads(LESSONS[1].read_text(encoding="utf-8"))
    lesson["cells"] = [c for c in lesson["cells"] if "check_" not in "".join(c["source"])]
    with pytest.raises(ValueError, match="1 answer cell.* but 0 point"):
        make_class.class_copy(lesson, LESSONS[1].name)


def test_make_class_needs_only_python_and_keeps_the_instructors_config(tmp_path):
    script = ROOT / "tools" / "make_class.py"
    run = [sys.executable, "-I", "-S", str(script), str(ROOT / "lessons"), str(tmp_path)]
    subprocess.run(run, check=True, capture_output=True)   # -I -S: a bare Python, no packages
    assert sorted(p.name for p in (tmp_path / "source").iterdir()) == [p.stem for p in LESSONS]
    config = tmp_path / "nbgrader_config.py"
    assert "c.Execute.timeout" in config.read_text()
    config.write_text(config.read_text() + "c.Execute.timeout = 900\n")
    subprocess.run(run, check=True, capture_output=True)
    assert config.read_text().endswith("c.Execute.timeout = 900\n")


# -- real nbgrader ------------------------------------------------------------------------------
def nbgrader_bin() -> pathlib.Path:
    named = os.environ.get("MINIGRAD_NBGRADER")
    path = pathlib.Path(named or ROOT / ".venv-grading" / "bin" / "nbgrader")
    if not path.exists():
        if named:
            pytest.fail(f"MINIGRAD_NBGRADER={named} does not exist", pytrace=False)
        pytest.skip("nbgrader is not installed: `make test` makes .venv-grading (the `grading` "
                    "extra) and runs this test")
    return path


def solution_of(answer_cell: dict, source_cells: dict) -> str:
    """What a student who solved it submits: the solution, without nbgrader's markers."""
    return MARKER.sub("", "".join(source_cells[answer_cell["metadata"]["nbgrader"]["grade_id"]]))


def submission(release: dict, source: dict, student: str, stem: str) -> dict:
    notebook = json.loads(json.dumps(release))
    source_cells = {c["metadata"]["nbgrader"]["grade_id"]: c["source"]
                    for c in source["cells"] if "nbgrader" in c["metadata"]}
    wronged = False
    for cell in notebook["cells"]:
        if student == "untouched" or not cell["metadata"].get("nbgrader", {}).get("solution"):
            continue
        answer = solution_of(cell, source_cells)
        if student == "wrong" and not wronged:   # (one exercise wrong; a second stays solved)
            right, wrong = WRONG[stem]
            assert right in answer, f"{stem}: the wrong answer's text is gone from the solution"
            answer, wronged = answer.replace(right, wrong, 1), True
        cell["source"] = answer
    return notebook


STUDENTS = ("solution", "untouched", "wrong")


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    nbgrader = nbgrader_bin()
    root = tmp_path_factory.mktemp("course")
    # nbgrader runs `alembic` by name (its venv's bin on PATH, as when it is activated); the
    # kernel imports minigrad from this checkout
    env = {**os.environ, "PATH": f"{nbgrader.parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(ROOT)}

    def run(*args: str) -> str:
        start, cpu = time.perf_counter(), cpu_seconds()
        done = subprocess.run([str(nbgrader), *args], cwd=root, env=env, text=True,
                              capture_output=True, timeout=1800)
        NBGRADER_TIMES[" ".join(args)] = (time.perf_counter() - start, cpu_seconds() - cpu)
        errors = [line for line in done.stderr.splitlines() if "| ERROR]" in line]
        assert done.returncode == 0 and not errors, f"nbgrader {' '.join(args)}:\n{done.stderr}"
        return done.stderr

    make_class.main([str(ROOT / "lessons"), str(root)])
    run("generate_assignment", "*")
    for stem in (p.stem for p in LESSONS):
        release = json.loads((root / "release" / stem / f"{stem}.ipynb").read_text())
        source = json.loads((root / "source" / stem / f"{stem}.ipynb").read_text())
        # lesson 00 has no exercise: its one submission is the lesson as released (0 of 0)
        for student in STUDENTS if stem in EXERCISES else STUDENTS[:1]:
            path = root / "submitted" / student / stem / f"{stem}.ipynb"
            path.parent.mkdir(parents=True)
            path.write_text(json.dumps(submission(release, source, student, stem)))
    for student in STUDENTS:
        run("autograde", "*", "--student", student)
    run("generate_feedback", "*")
    run("export", "--to", "grades.csv")
    with open(root / "grades.csv", newline="") as table:
        grades = {(row["student_id"], row["assignment"]): (float(row["score"]),
                                                           float(row["max_score"]))
                  for row in csv.DictReader(table)}
    return root, grades


def test_generate_assignment_releases_every_lesson_without_its_solutions(course):
    root, _ = course
    for lesson in LESSONS:
        released = json.loads((root / "release" / lesson.stem / lesson.name).read_text())
        answers = ["".join(c["source"]) for c in released["cells"]
                   if c["metadata"].get("nbgrader", {}).get("solution")]
        assert len(answers) == POINTS[lesson.stem]   # one answer cell per graded check
        for answer in answers:
            assert "raise NotImplementedError()" in answer and "SOLUTION" not in answer
            assert not set(solution_lines(lesson)) & {line.strip() for line in answer.splitlines()}


def solution_lines(lesson: pathlib.Path) -> list[str]:
    text = "".join("".join(c["source"]) + "\n" for c in
                   json.loads(lesson.read_text(encoding="utf-8"))["cells"])
    regions = re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", text, re.DOTALL)
    return [line.strip() for region in regions for line in region.splitlines() if line.strip()]


@pytest.mark.parametrize("stem", [p.stem for p in LESSONS])
def test_autograde_gives_the_solution_full_points_and_the_others_zero(course, stem):
    _, grades = course
    points = float(POINTS[stem])
    assert grades[("solution", stem)] == (points, points)
    assert grades[("untouched", stem)] == (0.0, points)
    if stem in EXERCISES:   # the wrong answer is wrong in one exercise: that one scores nothing
        assert grades[("wrong", stem)] == (points - 1, points)


def check_cell(root: pathlib.Path, student: str, stem: str) -> tuple[str, str]:
    """The graded check cell of an autograded submission: its check's name, and the error it
    shows (IPython's traceback, as the student reads it)."""
    graded = json.loads((root / "autograded" / student / stem / f"{stem}.ipynb").read_text())
    # (the first graded cell: the exercise WRONG gets wrong, where a lesson has two)
    cell = [c for c in graded["cells"] if c["metadata"].get("nbgrader", {}).get("grade")][0]
    return cell["metadata"]["nbgrader"]["grade_id"], "".join(
        "\n".join(o["traceback"]) for o in cell["outputs"] if o["output_type"] == "error")


@pytest.mark.parametrize("stem", EXERCISES)
def test_a_failed_check_explains_itself_in_the_feedback(course, stem):
    root, _ = course
    check, untouched = check_cell(root, "untouched", stem)
    assert untouched.startswith(f"CheckFailed: FAIL {check}") and "not written yet" in untouched
    _, wrong = check_cell(root, "wrong", stem)
    assert wrong.startswith(f"CheckFailed: FAIL {check}"), wrong
    assert "graded.py" not in wrong and "Traceback" not in wrong, "the message, not the frames"
    assert "not written yet" not in wrong and "hint: " in wrong
    assert check_cell(root, "solution", stem)[1] == ""
    for student in STUDENTS:
        assert (root / "feedback" / student / stem / f"{stem}.html").exists()
    html = (root / "feedback" / "wrong" / stem / f"{stem}.html").read_text()
    assert "CheckFailed" in html and f"FAIL {check}" in html
