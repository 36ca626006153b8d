"""`make lab` starts JupyterLab on the student copies (student/), `make teacher` on the copies
with solutions (solutions/), also as root (a new user in a container), where Jupyter refuses to
start without --allow-root: the Makefile adds the flag and says why.

The real recipes run (their install steps are marked done with `make -o`, since the venv
running these tests has everything), with LAB_ARGS for a free port and no browser; the tests
ask the server's contents API what the file browser lists and what saving a copy writes, then
stop it. The Binder set-up (the repository's root served, binder/'s server config) is tested
the same way.
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import json
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
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


def api(port: int, token: str, path: str, method: str = "GET", body=None):
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/contents/{path}", method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read()
    return json.loads(text) if text else None


@contextmanager
def running(command: list, tmp_path: Path, token: str, port: int, **env):
    """Start command (a server on port); yield its terminal log once it answers; stop it."""
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, cwd=ROOT, env={**isolated_env(tmp_path, token), **env},
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline, up = time.monotonic() + 120, False
        while time.monotonic() < deadline and proc.poll() is None and not up:
            up = answers(port, token)
            time.sleep(0.2)
        terminal = log.read_text(errors="replace")
        assert up, f"{command} did not serve JupyterLab (exit {proc.poll()}):\n{terminal[-3000:]}"
        yield terminal
    finally:
        stop(proc)


def make(target: str, port: int) -> list:
    return ["make", "-o", f"{VENV}/.lab-installed", "-o", "minigrad/widgets/static/stepper.js",
            target, f"VENV={VENV}", f"LAB_ARGS={server_args(port)}"]


def lesson_names() -> list[str]:
    return sorted(p.name for p in (ROOT / "lessons").glob("[0-9][0-9]_*.ipynb"))


def git_status() -> str:
    return subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout


def saving_writes_one_file(port: int, token: str, folder: str, name: str) -> list[str]:
    """Save a copy of folder/name under a new name, as JupyterLab does; return the names the
    save added to the folder (jupytext would add a paired .md), then delete them."""
    def inside(file: str) -> str:
        return f"{folder}/{file}" if folder else file

    before = {item["name"] for item in api(port, token, folder)["content"]}
    model = api(port, token, inside(name))
    scratch = inside("zz_saved_by_test.ipynb")
    api(port, token, scratch, "PUT", {"type": "notebook", "format": "json",
                                      "content": model["content"]})
    added = sorted({item["name"] for item in api(port, token, folder)["content"]} - before)
    for file in added:
        api(port, token, inside(file), "DELETE")
    return added


def test_make_lab_serves_the_student_copies_and_says_why_it_adds_allow_root(tmp_path):
    port, token = free_port(), secrets.token_hex(16)
    status = git_status()
    with running(make("lab", port), tmp_path, token, port) as terminal:
        listed = api(port, token, "")["content"]
        names = sorted(item["name"] for item in listed if not item["name"].startswith("zz_"))
        assert names == lesson_names(), "one entry per lesson, nothing else"
        for name in names:
            content = api(port, token, name)["content"]
            assert content["metadata"]["kernelspec"]["name"] == "python3"
            assert not any("### BEGIN SOLUTION" in cell["source"] for cell in content["cells"])
        assert "NotImplementedError()" in json.dumps(api(port, token, names[3])["content"])
        assert saving_writes_one_file(port, token, "", names[5]) == ["zz_saved_by_test.ipynb"]
    assert git_status() == status, "serving and saving the copies changed tracked files"
    assert (EXPLANATION in terminal) == IS_ROOT, terminal[-3000:]
    assert ("--allow-root" in terminal.split("jupyter lab", 1)[-1]) == IS_ROOT
    assert terminal.split("jupyter lab", 1)[-1].split("\n", 1)[0].rstrip().endswith("student/")


def test_make_teacher_serves_the_lessons_with_their_solutions(tmp_path):
    port, token = free_port(), secrets.token_hex(16)
    with running(make("teacher", port), tmp_path, token, port):
        names = sorted(item["name"] for item in api(port, token, "")["content"])
        assert names == lesson_names()
        content = json.dumps(api(port, token, names[3])["content"])
        assert "### BEGIN SOLUTION" in content


def test_binder_root_lists_one_entry_per_lesson_and_copies_stay_unpaired(tmp_path):
    """On Binder the repository's root is served, after binder/postBuild ran (here with pip
    stubbed out: installing minigrad is test_binder's part). The lessons' .md files are hidden
    from the file browser, the Binder links' student/ copies are there, and saving a copy does
    not pair it with a new .md (the root's jupytext.toml pairs the lessons)."""
    repo, prefix, stubs = tmp_path / "repo", tmp_path / "image", tmp_path / "stubs"
    for name in subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                               check=True).stdout.split():
        if (ROOT / name).is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, repo / name)
    stubs.mkdir()
    (stubs / "pip").write_text("#!/bin/sh\necho pip stubbed out: \"$@\"\n")
    (stubs / "pip").chmod(0o755)
    (stubs / "python").symlink_to(sys.executable)
    subprocess.run(["bash", "binder/postBuild"], cwd=repo, check=True, capture_output=True,
                   env={**os.environ, "PATH": f"{stubs}{os.pathsep}{os.environ['PATH']}",
                        "NB_PYTHON_PREFIX": str(prefix)})
    port, token = free_port(), secrets.token_hex(16)
    command = [str(VENV / "bin" / "jupyter"), "server", *server_args(port).split()[:4],
               f"--ServerApp.root_dir={repo}"]
    if IS_ROOT:
        command.append("--allow-root")
    with running(command, tmp_path, token, port,
                 JUPYTER_CONFIG_PATH=str(prefix / "etc" / "jupyter")):
        lessons = sorted(item["name"] for item in api(port, token, "lessons")["content"])
        assert lessons == lesson_names(), "one entry per lesson: the .md files are hidden"
        assert sorted(item["name"] for item in api(port, token, "student")["content"]) == \
               lesson_names()
        name = lesson_names()[5]
        assert saving_writes_one_file(port, token, "student", name) == ["zz_saved_by_test.ipynb"]
        # the control: the same save beside the paired lessons does write a .md too (hidden)
        api(port, token, "lessons/zz_paired.ipynb", "PUT", {
            "type": "notebook", "format": "json",
            "content": api(port, token, f"lessons/{name}")["content"]})
        assert (repo / "lessons" / "zz_paired.md").exists()


@pytest.mark.skipif(not IS_ROOT, reason="Jupyter refuses only root; these tests do not run as root")
def test_without_the_flag_jupyter_refuses_root(tmp_path):
    """Why the Makefile adds the flag: the same command without it exits at once as root."""
    port = free_port()
    result = subprocess.run([str(VENV / "bin" / "jupyter"), "lab", *server_args(port).split()],
                            cwd=ROOT, env=isolated_env(tmp_path, secrets.token_hex(16)),
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "--allow-root" in result.stderr + result.stdout
