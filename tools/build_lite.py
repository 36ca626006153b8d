"""Build a JupyterLite site (the Pyodide kernel: Python in the browser) with the lessons and the
minigrad wheel, without any download.

    python tools/build_lite.py [out_dir]          (default: build/lite; `make lite` runs this)

The site is static files: serve them from any web server (or a course page) and students run
the lessons with no install and no Jupyter server. What this build cannot include, and so what
could not be tested here without the network: the Pyodide distribution itself (Python and numpy
compiled to WebAssembly), which the page loads at run time from its usual location, and
minigrad's own dependencies for the widgets (anywidget, graphviz), which `%pip install` fetches
from PyPI in the browser. Each lesson in the site starts with a cell that installs minigrad
from the wheel the site carries.
"""
from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import tempfile

import nbformat

ROOT = pathlib.Path(__file__).resolve().parent.parent
INSTALL = "%pip install -q minigrad-lab   # from this site's own wheel (JupyterLite only)"


def build(out: pathlib.Path) -> pathlib.Path:
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        (work / "pypi").mkdir()
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                        str(work / "pypi"), str(ROOT)], check=True)
        content = work / "content" / "lessons"
        content.mkdir(parents=True)
        for path in sorted((ROOT / "lessons").glob("[0-9][0-9]_*.ipynb")):
            notebook = nbformat.read(path, as_version=4)
            notebook.cells.insert(1, nbformat.v4.new_code_cell(INSTALL))
            notebook.metadata["kernelspec"] = {"name": "python", "display_name": "Python (Pyodide)",
                                               "language": "python"}
            nbformat.write(notebook, content / path.name)
        if out.exists():
            shutil.rmtree(out)
        subprocess.run([sys.executable, "-m", "jupyter", "lite", "build", "--contents",
                        str(work / "content"), "--output-dir", str(out.resolve())],
                       cwd=work, check=True)
    return out


if __name__ == "__main__":
    site = build(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "build/lite"))
    print(f"JupyterLite site in {site}/ (serve it, e.g. python -m http.server -d {site})")
