"""Every ```python block of README.md runs, in order, in one namespace, as a reader pasting them
into one notebook would; the widget blocks show what the text around them says."""
import ast
import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.S | re.M)


def run_block(source: str, namespace: dict, label: str):
    """exec the block; like a notebook cell, its last bare expression is its value."""
    tree = ast.parse(source, label)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, label, "exec"), namespace)
    return eval(compile(ast.Expression(last.value), label, "eval"), namespace) if last else None


@pytest.fixture(scope="module")
def readme_run():
    namespace, values = {"__name__": "readme"}, []
    for i, source in enumerate(python_blocks()):
        values.append(run_block(source, namespace, f"README.md python block {i + 1}"))
    return namespace, values


def test_the_readme_has_the_blocks_this_file_reads():
    blocks = python_blocks()
    assert len(blocks) == 5, [b.splitlines()[0] for b in blocks]
    assert "backward_steps" in blocks[0] and "BackwardStepper" in blocks[1]
    assert "GraphView" in blocks[2] and "Arena" in blocks[3] and "TinyTransformer" in blocks[4]


def test_every_block_runs_in_order(readme_run):
    namespace, _ = readme_run
    for name in ("W", "stepper", "total", "model", "accuracy", "forward"):
        assert name in namespace


def test_ten_lines_leave_a_gradient_and_the_stepper_gets_a_fresh_graph(readme_run):
    from minigrad.widgets import BackwardStepper
    namespace, values = readme_run
    assert isinstance(values[1], BackwardStepper)
    assert namespace["W"].grad is not None and namespace["W"].grad.shape == (3, 2)


def test_the_big_graph_is_drawn_as_eight_boxes_of_one_kind_the_last_opened(readme_run):
    from minigrad.widgets import GraphView
    _, values = readme_run
    view = values[2]
    assert isinstance(view, GraphView)
    boxes = view.folding["boxes"]
    assert sorted(b["scope"] for b in boxes.values()) == [f"step {i}" for i in range(7)]
    assert len({b["kind"] for b in boxes.values()}) == 1
    assert view.folding["frames"] == ["c:step 7"]
