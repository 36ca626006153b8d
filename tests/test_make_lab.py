"""`make lab` starts JupyterLab on the lessons, also as root (a new user in a container), where
Jupyter refuses to start without --allow-root: the Makefile adds the flag and says why.

The real `make lab` recipe runs (its install steps are marked done with `make -o`, since the
venv running these tests has everything), with LAB_ARGS for a free port and no browser; the
test waits until the server answers, then stops it.
"""
from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
VENV = Path(sys.prefix)
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
EXPLANATION = "Jupyter refuses to run as root without --allow-root, so it is added"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def isolated_env(tmp: Path, token: str) -> dict:
    """The user's Jupyter config, data and runtime dirs play no part."""
    env = {**os.environ, "JUPYTER_TOKEN": token, "PYTHONUNBUFFERED": "1"}
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR",
                 "JUPYTERLAB_SETTINGS_DIR", "JUPYTERLAB_WORKSPACES_DIR"):
        env[name] = str(tmp / name.lower())
    return env


def server_args(port: int) -> str:
    return (f"--no-browser --ServerApp.ip=127.0.0.1 --ServerApp.port={port} "
            "--ServerApp.port_retries=0 --LabApp.news_url=None "
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate")


def answers(port: int, token: str) -> bool:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/status",
                                     headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_make_lab_starts_jupyterlab_and_says_why_it_adds_allow_root(tmp_path):
    port, token = free_port(), secrets.token_hex(16)
    log = tmp_path / "make-lab.log"
    command = ["make", "-o", f"{VENV}/.lab-installed", "-o", "minigrad/widgets/static/stepper.js",
               "lab", f"VENV={VENV}", f"LAB_ARGS={server_args(port)}"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, cwd=ROOT, env=isolated_env(tmp_path, token),
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline, up = time.monotonic() + 120, False
        while time.monotonic() < deadline and proc.poll() is None and not up:
            up = answers(port, token)
            time.sleep(0.2)
    finally:
        stop(proc)
    terminal = log.read_text(errors="replace")
    assert up, f"`make lab` did not serve JupyterLab (exit {proc.returncode}):\n{terminal[-3000:]}"
    assert (EXPLANATION in terminal) == IS_ROOT, terminal[-3000:]
    assert ("--allow-root" in terminal.split("jupyter lab", 1)[-1]) == IS_ROOT


@pytest.mark.skipif(not IS_ROOT, reason="Jupyter refuses only root; these tests do not run as root")
def test_without_the_flag_jupyter_refuses_root(tmp_path):
    """Why the Makefile adds the flag: the same command without it exits at once as root."""
    port = free_port()
    result = subprocess.run([str(VENV / "bin" / "jupyter"), "lab", *server_args(port).split()],
                            cwd=ROOT, env=isolated_env(tmp_path, secrets.token_hex(16)),
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "--allow-root" in result.stderr + result.stdout
