"""`make lite`: the JupyterLite site builds offline and carries the student copies (never a
solution), the minigrad wheel with the `widgets` extra, and the widgets' front-end extensions.
(Running its in-browser kernel needs the Pyodide distribution from the network: not tested.)"""
from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).parent.parent
LESSONS = sorted((ROOT / "lessons").glob("[0-9][0-9]_*.ipynb"))
sys.path.insert(0, str(ROOT / "tools"))
import build_lite  # noqa: E402


def lite_venv() -> pathlib.Path:
    """The venv `make lite` uses (.venv-lite), made here the same way when it is missing or
    older than the requirements: the Pyodide kernel's lab extension must not reach the
    JupyterLab the other tests use. Made once, it saves the next run a minute and a half."""
    venv = ROOT / ".venv-lite"
    requirements, marker = ROOT / "tools" / "lite-requirements.txt", venv / ".installed"
    if not marker.exists() or marker.stat().st_mtime < requirements.stat().st_mtime:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "-r",
                        str(requirements)], check=True)
        marker.touch()
    return venv


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> pathlib.Path:
    """Built once for this file, as `make lite` builds it."""
    tmp = tmp_path_factory.mktemp("lite")
    python = str(lite_venv() / "bin" / "python")
    subprocess.run([python, str(ROOT / "tools" / "build_lite.py"), str(tmp / "site")],
                   check=True, cwd=tmp)
    return tmp / "site"


def split_solutions(lesson: pathlib.Path) -> tuple[list[str], str]:
    """The lines between the solution markers long enough to be an answer, and the text of
    all the lines outside them."""
    inside_lines, outside, inside = [], [], False
    for cell in json.loads(lesson.read_text(encoding="utf-8"))["cells"]:
        for line in "".join(cell["source"]).splitlines():
            if "### BEGIN SOLUTION" in line or "### END SOLUTION" in line:
                inside = "BEGIN" in line
            elif inside:
                inside_lines += [line.strip()] if len(line.strip()) > 15 else []
            else:
                outside.append(line)
    return inside_lines, "\n".join(outside)


def test_the_site_holds_the_student_copies_and_no_solution(site):
    files = site / "files"
    notebooks = sorted(p.relative_to(files).as_posix() for p in files.rglob("*.ipynb"))
    assert notebooks == [f"student/{p.name}" for p in LESSONS]
    shipped = {p.name: p.read_text(encoding="utf-8") for p in (files / "student").iterdir()}
    assert not [name for name, text in shipped.items() if "### BEGIN SOLUTION" in text]
    exercises = [p for p in LESSONS if split_solutions(p)[0]]
    assert len(exercises) == len(LESSONS) - 1 >= 12   # every lesson but 00 has an exercise
    for lesson in exercises:
        answer, outside = split_solutions(lesson)
        copy = "\n".join("".join(c["source"]) for c in json.loads(shipped[lesson.name])["cells"])
        # a solution line that the lesson also shows outside its solution is no leak
        leaked = [line for line in answer if copy.count(line) > outside.count(line)]
        assert leaked == [], lesson.name
        assert "raise NotImplementedError()" in copy


def test_each_copy_installs_minigrad_with_its_widgets_matching_the_shipped_front_end(site):
    anywidget = json.loads((site / "extensions" / "anywidget" / "package.json").read_text())
    manager = json.loads((site / "extensions" / "@jupyter-widgets" / "jupyterlab-manager" /
                          "package.json").read_text())
    for path in sorted((site / "files" / "student").iterdir()):
        notebook = json.loads(path.read_text(encoding="utf-8"))
        install = "".join(notebook["cells"][1]["source"])
        assert install.startswith('%pip install -q "minigrad-lab[widgets]"'), path.name
        assert f"anywidget=={anywidget['version']}" in install
        ipywidgets = re.search(r"ipywidgets==(\d+)\.", install).group(1)
        # ipywidgets 8 talks to the lab manager 5 (ipywidgets 7 to manager 3)
        assert (ipywidgets, manager["version"].split(".")[0]) == ("8", "5")
        assert notebook["metadata"]["kernelspec"]["name"] == "python"    # the Pyodide kernel
        assert "mybinder.org" in "".join(notebook["cells"][0]["source"])  # the lesson's title cell


def test_the_widgets_front_ends_and_the_kernel_are_in_the_site(site):
    config = json.loads((site / "jupyter-lite.json").read_text())["jupyter-config-data"]
    federated = {extension["name"] for extension in config["federated_extensions"]}
    assert {"anywidget", "@jupyter-widgets/jupyterlab-manager",
            "@jupyterlite/pyodide-kernel-extension"} <= federated
    for name in federated:
        assert (site / "extensions" / name / "package.json").exists(), name


def extras_of(metadata: str) -> dict[str, set[str]]:
    """Each extra's requirements, as the wheel's METADATA lists them."""
    extras: dict[str, set[str]] = {}
    for requirement, extra in re.findall(r"""^Requires-Dist: (.+?); extra == ["'](\w+)["']$""",
                                         metadata, re.M):
        extras.setdefault(extra, set()).add(requirement.replace(" ", ""))
    return extras


def test_the_wheel_carries_the_widgets_and_says_what_they_need(site):
    wheels = list((site / "pypi").glob("minigrad_lab-*.whl"))
    assert len(wheels) == 1
    with zipfile.ZipFile(wheels[0]) as wheel:
        names = wheel.namelist()
        metadata = wheel.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "minigrad/widgets/static/viz.js" in names and "minigrad/datasets/digits.npz" in names
    assert "Provides-Extra: widgets" in metadata
    extras = extras_of(metadata)
    assert {re.match(r"[a-z-]+", r).group() for r in extras["widgets"]} == \
        {"anywidget", "ipywidgets", "graphviz"}
    assert extras["widgets"] <= extras["lab"]      # lab = widgets + JupyterLab + jupytext
    listed = {line for line in (ROOT / "tools" / "lite-requirements.txt").read_text().splitlines()
              if line and not line.startswith("#")}
    assert extras["lite"] == listed                # `make lite` installs what the extra says
    assert "minigrad-lab" in json.loads((site / "pypi" / "all.json").read_text())


def test_a_build_without_the_widget_front_ends_is_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    with pytest.raises(SystemExit, match=r"anywidget .*ipywidgets .*Install tools/lite-req"):
        build_lite.check_front_ends()
