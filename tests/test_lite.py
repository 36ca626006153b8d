"""`make lite`: the JupyterLite site builds offline and carries the lessons and the wheel.
(Running its in-browser kernel needs the Pyodide distribution from the network: not tested.)"""
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).parent.parent


def test_lite_site_holds_the_lessons_and_the_minigrad_wheel(tmp_path):
    # In its own venv, as `make lite` does (the Pyodide kernel's lab extension must not reach the
    # JupyterLab the other tests use).
    venv, site = tmp_path / "venv", tmp_path / "site"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "-q", "jupyterlite-core>=0.6",
                    "jupyterlite-pyodide-kernel>=0.6", "jupyter-server>=2.10", "nbformat>=5.9"],
                   check=True)
    subprocess.run([python, str(ROOT / "tools" / "build_lite.py"), str(site)], check=True,
                   cwd=tmp_path)
    lessons = sorted(p.name for p in (ROOT / "lessons").glob("[0-9][0-9]_*.ipynb"))
    assert sorted(p.name for p in (site / "files" / "lessons").glob("*.ipynb")) == lessons
    wheels = list((site / "pypi").glob("minigrad_lab-*.whl"))
    assert len(wheels) == 1
    listing = subprocess.run([sys.executable, "-m", "zipfile", "-l", str(wheels[0])],
                             capture_output=True, text=True, check=True).stdout
    assert "minigrad/widgets/static/viz.js" in listing and "minigrad/datasets/digits.npz" in listing
    index = json.loads((site / "pypi" / "all.json").read_text())
    assert "minigrad-lab" in index
    assert (site / "extensions" / "@jupyterlite" / "pyodide-kernel-extension").is_dir()
    first = json.loads((site / "files" / "lessons" / lessons[0]).read_text())["cells"][1]
    assert "%pip install" in "".join(first["source"])
