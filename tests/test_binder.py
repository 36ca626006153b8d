"""What Binder (repo2docker) does with binder/, as far as this machine allows: a fresh
environment from binder/requirements.txt only, then binder/postBuild, then lesson 00 executed
headless in that environment. (No container here: a venv stands in for the image.)"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import nbformat

ROOT = pathlib.Path(__file__).parent.parent


def tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return out.stdout.split()


def copy_repository(target: pathlib.Path) -> None:
    """The repository as Binder sees it (tracked files), plus the widget bundle built here, so
    the image build does not need the npm registry a second time."""
    for name in tracked_files():
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    shutil.copytree(ROOT / "minigrad" / "widgets" / "static",
                    target / "minigrad" / "widgets" / "static", dirs_exist_ok=True)


def test_binder_requirements_postbuild_and_lesson_00(tmp_path):
    repo, prefix = tmp_path / "repo", tmp_path / "image"
    copy_repository(repo)
    subprocess.run([sys.executable, "-m", "venv", str(prefix)], check=True)
    bin_dir = prefix / "bin"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "NB_PYTHON_PREFIX": str(prefix), "VIRTUAL_ENV": str(prefix)}
    env.pop("PYTHONPATH", None)
    pip = [str(bin_dir / "python"), "-m", "pip", "install", "-q"]
    subprocess.run(pip + ["-r", "binder/requirements.txt"], cwd=repo, env=env, check=True)
    subprocess.run(["bash", "binder/postBuild"], cwd=repo, env=env, check=True)

    # minigrad is installed in the image, with its widget bundle
    probe = ("import minigrad, minigrad.widgets, pathlib; "
             "print(pathlib.Path(minigrad.widgets.__file__).parent.joinpath('static', 'viz.js')"
             ".exists())")
    out = subprocess.run([str(bin_dir / "python"), "-c", probe], cwd=tmp_path, env=env,
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
    # student copies were written (what every Binder link opens), and the server setting that
    # hides the lessons' paired .md files from the file browser is installed
    assert sorted(p.name for p in (repo / "student").glob("*.ipynb")) == \
           sorted(p.name for p in (repo / "lessons").glob("*.ipynb"))
    assert not any("### BEGIN SOLUTION" in p.read_text() for p in (repo / "student").iterdir())
    config = prefix / "etc" / "jupyter" / "jupyter_server_config.json"
    assert "[0-9][0-9]_*.md" in json.loads(config.read_text())["ContentsManager"]["hide_globs"]

    # lesson 00 runs headless in the image's own Python
    executed = tmp_path / "00_welcome.out.ipynb"
    subprocess.run([str(bin_dir / "jupyter"), "nbconvert", "--to", "notebook", "--execute",
                    "--ExecutePreprocessor.timeout=180", "--output", str(executed),
                    "lessons/00_welcome.ipynb"], cwd=repo, env=env, check=True)
    notebook = nbformat.read(executed, as_version=4)
    assert not [o for c in notebook.cells for o in c.get("outputs", [])
                if o.output_type == "error"]
