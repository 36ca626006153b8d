"""Lesson sentences tied to the code without running a lesson: quoted messages, and the length
of the functions the lessons print. (Claims about a lesson's own outputs and widgets are checked
on the notebook tests/test_lessons.py executes: tests/lesson_claims.py.)"""
from __future__ import annotations

import inspect
import pathlib
import re

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.tape import RULES, Tape

LESSONS = pathlib.Path(__file__).parent.parent / "lessons"


def lesson_text(stem: str) -> str:
    return " ".join((LESSONS / f"{stem}.md").read_text(encoding="utf-8").split())


def numpy_message(write) -> str:
    array = np.array([1.0, 2.0])
    array.flags.writeable = False
    with pytest.raises(ValueError) as error:
        write(array)
    return f"ValueError: {error.value}"


def test_lesson02_quotes_the_messages_numpy_gives_for_a_saved_array():
    """Lesson 02: `w.data -= 0.1` says `ValueError: output array is read-only`, and
    `w.data[0] = 5.0` says `ValueError: assignment destination is read-only`."""
    text = lesson_text("02_building_the_graph")

    def subtract(a):
        a -= 0.1

    def assign(a):
        a[0] = 5.0

    for code, write in (("w.data -= 0.1", subtract), ("w.data[0] = 5.0", assign)):
        quoted = re.search(rf"`{re.escape(code)}` says `([^`]*)`", text)
        assert quoted, f"lesson 02 no longer quotes what {code} says"
        assert quoted.group(1) == numpy_message(write)


def printed_functions() -> dict[str, object]:
    """Every `inspect.getsource(...)` a lesson prints, evaluated."""
    w = mg.create_leaf([1.0], requires_grad=True)
    y = w * mg.create_leaf([2.0])                    # lesson 02's y = w * x
    names = {"mg": mg, "nn": nn, "RULES": RULES, "Tape": Tape, "y": y}
    found = {}
    for path in sorted(LESSONS.glob("[0-9][0-9]_*.md")):
        text = path.read_text(encoding="utf-8")
        for call in re.finditer(r"inspect\.getsource\(", text):
            depth, end = 1, call.end()
            while depth:                      # to the parenthesis that closes the call
                depth += {"(": 1, ")": -1}.get(text[end], 0)
                end += 1
            expression = text[call.end():end - 1]
            found[f"{path.stem}: {expression}"] = eval(expression, names)  # noqa: S307 (our text)
    return found


def test_the_functions_the_lessons_print_stay_on_one_screen():
    """The project's rule: a function a lesson prints with inspect.getsource is at most 40 lines,
    the idea first."""
    printed = printed_functions()
    assert len(printed) >= 15, sorted(printed)
    lengths = {name: len(inspect.getsource(obj).rstrip().splitlines())
               for name, obj in printed.items()}
    assert {name: n for name, n in lengths.items() if n > 40} == {}


def says(stem: str, sentence: str) -> None:
    assert " ".join(sentence.split()) in lesson_text(stem), \
        f"{stem} no longer says {sentence!r}: update this test with the text"


def test_lesson01_a_consumed_graph_cannot_be_drawn():
    says("01_variables_and_leaves", "After backward has consumed it there is nothing left to draw "
         "(minigrad says so with a `ValueError`)")
    pytest.importorskip("anywidget")   # (absent only in the oldest-numpy pass, which has no widgets)
    from minigrad.widgets import GraphView
    w = mg.create_leaf([1.0, 2.0], requires_grad=True, name="w")
    loss = (w * w).sum()
    loss.backward()
    with pytest.raises(ValueError, match="consumed by backward"):
        GraphView(loss)


def test_lesson05_an_unreducible_gradient_is_refused_naming_the_variable():
    says("05_accumulate_and_broadcast", "has no undo: `sum_to_shape` returns `None`, and "
         "`accumulate_grad` raises a `ShapeError` that names the variable and tells you to fix "
         "the backward that produced it")
    from minigrad.kernels import sum_to_shape
    assert sum_to_shape(np.ones((4, 3)), (2,)) is None
    v = mg.create_leaf(np.zeros(2), requires_grad=True, name="v")
    with pytest.raises(mg.errors.ShapeError) as error:
        mg.accumulate_grad(v, np.ones((4, 3)))
    assert "'v'" in str(error.value) and "Fix the backward" in str(error.value)


ROOT = LESSONS.parent


def defined_in(path: pathlib.Path) -> set[str]:
    """The functions and classes a file defines (Class.method for methods)."""
    import ast
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            names |= {f"{node.name}.{item.name}" for item in node.body
                      if isinstance(item, ast.FunctionDef)}
    return names


def named_files() -> list[tuple[str, str, list[str]]]:
    """(lesson, path, names) for every `path` a lesson names, with the names it places in the
    file: "`path` (`a`, `b`)" or "`a` and `b` in `path`"."""
    found = []
    for lesson in sorted(LESSONS.glob("[0-9][0-9]_*.md")):
        text = " ".join(lesson.read_text(encoding="utf-8").split())
        for m in re.finditer(r"`((?:minigrad|benchmarks|docs)/[\w/.]*)`(?: \(([^)]*)\))?", text):
            found.append((lesson.stem, m.group(1), re.findall(r"`([\w.]+)`", m.group(2) or "")))
        for m in re.finditer(r"((?:`\w+`(?:, | and ))*`\w+`) in `(minigrad/[\w/]+\.py)`", text):
            found.append((lesson.stem, m.group(2), re.findall(r"`(\w+)`", m.group(1))))
    return found


def test_the_files_and_functions_the_lessons_name_exist():
    """"The code is `minigrad/eager/variable.py` (`Variable`, `create_leaf`)", "`topo_order` in
    `minigrad/eager/engine.py`": a student opens that file and finds those names."""
    named = named_files()
    assert len(named) >= 25 and any(names for _, _, names in named)
    missing = [(lesson, path) for lesson, path, _ in named if not (ROOT / path).exists()]
    assert missing == []
    absent = [(lesson, path, name) for lesson, path, names in named for name in names
              if path.endswith(".py") and name not in defined_in(ROOT / path)]
    assert absent == []
