"""Build a JupyterLite site (the Pyodide kernel: Python in the browser) with the students'
copies of the lessons, the minigrad wheel and the widgets' front-end, without any download.

    python tools/build_lite.py [out_dir]          (default: build/lite; `make lite` runs this)

Run it where tools/lite-requirements.txt is installed (`make lite` makes .venv-lite for it):
the site ships the JupyterLab extensions installed there, and the widgets need two of them,
ipywidgets' and anywidget's. The site is static files: serve them from any web server (or a
course page) and students run the lessons with no install and no Jupyter server.

What it holds: `student/NN_*.ipynb`, the copies tools/make_student.py writes (solutions
removed), each with a first cell that installs minigrad from the wheel the site carries, with
the `widgets` extra (anywidget, ipywidgets, graphviz: the kernel side of the `lab` extra; the
rest of `lab`, JupyterLab itself, cannot run in Pyodide and is the site itself here), and
anywidget and ipywidgets pinned to the versions of the front-ends the site ships.
What it cannot include, and so what was not tested: the Pyodide distribution (Python and numpy
compiled to WebAssembly), which the page loads at run time from its usual CDN, and the
widgets' Python packages, which that first cell fetches from PyPI in the browser.
"""
from __future__ import annotations

import importlib.metadata
import pathlib
import shutil
import subprocess
import sys
import tempfile

import nbformat

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from make_student import student_copy  # noqa: E402

# The Python package of each front-end the widgets need, and where it installs its extension.
FRONT_ENDS = {"anywidget": "anywidget", "ipywidgets": "@jupyter-widgets/jupyterlab-manager"}
KERNELSPEC = {"name": "python", "display_name": "Python (Pyodide)", "language": "python"}


def install_cell() -> str:
    pins = " ".join(f"{name}=={importlib.metadata.version(name)}" for name in FRONT_ENDS)
    return (f'%pip install -q "minigrad-lab[widgets]" {pins}\n'
            "# JupyterLite only: minigrad from this site's own wheel; the widgets' Python side\n"
            "# at the versions of the front-end this site ships")


def check_front_ends() -> None:
    labextensions = pathlib.Path(sys.prefix) / "share" / "jupyter" / "labextensions"
    missing = [f"{package} ({labextensions / folder})" for package, folder in FRONT_ENDS.items()
               if not (labextensions / folder / "package.json").exists()]
    if missing:
        raise SystemExit("build_lite: the widgets' JupyterLab extensions are not installed here: "
                         f"{', '.join(missing)}. Without them every widget in the site shows "
                         "as text. Install tools/lite-requirements.txt (make lite does).")


def student_notebooks(content: pathlib.Path) -> None:
    content.mkdir(parents=True)
    for path in sorted((ROOT / "lessons").glob("[0-9][0-9]_*.ipynb")):
        copy, _ = student_copy(nbformat.read(path, as_version=4))
        notebook = nbformat.from_dict(copy)
        notebook.cells.insert(1, nbformat.v4.new_code_cell(install_cell()))
        notebook.metadata["kernelspec"] = dict(KERNELSPEC)
        nbformat.write(notebook, content / path.name)


def build(out: pathlib.Path) -> pathlib.Path:
    check_front_ends()
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        (work / "pypi").mkdir()    # jupyter lite serves the wheels found here to %pip install
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                        str(work / "pypi"), str(ROOT)], check=True)
        student_notebooks(work / "content" / "student")
        if out.exists():
            shutil.rmtree(out)
        subprocess.run([sys.executable, "-m", "jupyter", "lite", "build", "--contents",
                        str(work / "content"), "--output-dir", str(out.resolve())],
                       cwd=work, check=True)
    return out


if __name__ == "__main__":
    site = build(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "build/lite"))
    print(f"JupyterLite site in {site}/ (serve it, e.g. python -m http.server -d {site}); "
          f"the lessons are in student/")
