"""Browser-test harness: a real JupyterLab server driven by a real Chromium.

The pieces, used by ``conftest.py`` and by the tests in this folder:

* :func:`find_chromium` -- which Chromium binary to drive (never a downloaded one).
* :class:`JupyterLabServer` -- ``python -m jupyter lab`` on 127.0.0.1, a random port and
  token, isolated config/settings/workspaces/runtime dirs, no network use, clean shutdown.
* :func:`write_notebook` / :func:`open_and_run_all` -- write an nbformat-v4 notebook into
  the server's root and run it through the JupyterLab UI (Run menu -> Run All Cells).
* :class:`Notebook` -- handles on the opened notebook: cell/output locators,
  :meth:`Notebook.wait_for_output_selector`, :meth:`Notebook.run_new_cell`.
* :func:`open_notebook` (open without running), :func:`collapse_left_sidebar`,
  :class:`WebSocketBytes` (bytes the page receives from the kernel) -- for the widget tests.
* :class:`BrowserLog` -- console errors, page errors and every request of one test, with
  :func:`assert_no_console_errors` and :func:`assert_all_requests_local`.

Everything here waits on what a person would see in the DOM (prompts, the status bar), not
on JupyterLab's JavaScript internals, so it needs no ``expose_app_in_browser``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence
from urllib.parse import quote, urlsplit

import nbformat

# --------------------------------------------------------------------------------------
# Chromium
# --------------------------------------------------------------------------------------

#: Extra Chromium switches. Playwright itself adds ``--headless`` (headless is its
#: default), ``--no-sandbox`` and a fresh temporary ``--user-data-dir`` per launch that it
#: deletes on close; passing ``--user-data-dir`` in ``args`` is refused by Playwright, so
#: the fresh profile comes from Playwright. The switches below are repeated/added so the
#: browser makes no connection of its own (updates, sync, field trials, QUIC probes).
#: (``--disable-crashpad-for-testing`` would keep Debian's crashpad handler from starting,
#: but then every navigation fails with ERR_ABORTED; conftest points HOME at a temporary
#: directory instead, which is where crashpad keeps its database.)
CHROMIUM_ARGS: tuple[str, ...] = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
)

_CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser")


def find_chromium() -> tuple[str | None, str]:
    """Return ``(path, description)``; ``path`` is None when no Chromium is usable.

    ``MINIGRAD_CHROMIUM`` wins when set (and must then point at an executable); otherwise
    ``/usr/bin/chromium``, then ``chromium`` and ``chromium-browser`` on PATH.
    """
    override = os.environ.get("MINIGRAD_CHROMIUM")
    if override:
        found = shutil.which(override)
        if found:
            return found, f"MINIGRAD_CHROMIUM={override}"
        return None, f"MINIGRAD_CHROMIUM={override!r} is not an executable"
    for candidate in _CHROMIUM_CANDIDATES:
        found = shutil.which(candidate)
        if found:
            return found, found
    return None, (
        "no Chromium found (looked for /usr/bin/chromium, chromium and chromium-browser "
        "on PATH; set MINIGRAD_CHROMIUM to use another binary; on Debian: "
        "apt-get install chromium)"
    )


# --------------------------------------------------------------------------------------
# JupyterLab server
# --------------------------------------------------------------------------------------

#: Settings forced on the test server through ``overrides.json`` (they become the
#: settings' defaults). ``fetchNews``/``checkForUpdates`` would make the *browser* ask
#: for the Jupyter news feed / a version check; the server-side switches in
#: ``JupyterLabServer.args`` turn the same features off in the server.
LAB_SETTING_OVERRIDES: dict[str, dict[str, Any]] = {
    "@jupyterlab/apputils-extension:notification": {
        "fetchNews": "false",
        "checkForUpdates": False,
        # No toasts covering the notebook while the tests click in it.
        "doNotDisturbMode": True,
    },
    # Even the read-only extension manager panel is of no use in tests.
    "@jupyterlab/extensionmanager-extension:plugin": {"enabled": False},
}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _descendants(pid: int) -> list[int]:
    """PIDs of all live descendants of ``pid`` (kernels run in sessions of their own,
    so they are not in the server's process group and need to be tracked this way)."""
    try:
        import psutil
    except ImportError:
        psutil = None
    if psutil is not None:
        try:
            return [p.pid for p in psutil.Process(pid).children(recursive=True)]
        except psutil.Error:
            return []
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    children: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ..." -- comm may contain spaces and parentheses.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie answers kill(0) too; treat it as gone.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except OSError:
        return True


def _wait_gone(pids: Iterable[int], timeout: float) -> list[int]:
    pids = list(pids)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = [p for p in pids if _alive(p)]
        if not pids:
            return []
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


class JupyterLabServer:
    """A ``jupyter lab`` process for the tests, in its own process group.

    ``workdir`` receives ``root/`` (the server's root dir: notebooks go there) and the
    isolated Jupyter dirs, so the developer's ``~/.jupyter`` settings, workspaces and
    user-installed extensions play no part.
    """

    def __init__(self, workdir: Path, *, startup_timeout: float = 120.0):
        self.workdir = Path(workdir)
        self.root = self.workdir / "root"
        self.startup_timeout = startup_timeout
        self.token = secrets.token_hex(24)
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None
        self.startup_seconds: float | None = None
        self.log_path = self.workdir / "jupyter-lab.log"
        self._log = None

    # -- URLs and REST ------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def lab_url(self, path: str, workspace: str | None = None) -> str:
        """URL opening ``path`` (relative to the root) in JupyterLab.

        A fresh workspace name per page means nothing a previous test left open (the
        default workspace is saved on the server) is restored next to this notebook.
        """
        workspace = workspace or f"t-{uuid.uuid4().hex[:12]}"
        return (
            f"{self.base_url}/lab/workspaces/{workspace}/tree/{quote(path)}"
            f"?token={self.token}"
        )

    def api(self, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            f"{self.base_url}{path}",
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return "(no log)"

    # -- lifecycle ----------------------------------------------------------------------

    def _prepare_dirs(self) -> dict[str, str]:
        dirs = {
            name: self.workdir / name
            for name in ("config", "data", "runtime", "user-settings", "workspaces",
                         "app-settings", "ipython")
        }
        for d in (self.root, *dirs.values()):
            d.mkdir(parents=True, exist_ok=True)
        # The app settings dir normally is <app_dir>/settings and may hold a project's
        # page_config.json / overrides.json: keep them, then add ours on top.
        try:
            from jupyterlab.commands import get_app_dir

            default_settings = Path(get_app_dir()) / "settings"
        except Exception:  # pragma: no cover - jupyterlab import trouble shows later
            default_settings = None
        overrides: dict[str, Any] = {}
        if default_settings is not None and default_settings.is_dir():
            shutil.copytree(default_settings, dirs["app-settings"], dirs_exist_ok=True)
            existing = dirs["app-settings"] / "overrides.json"
            if existing.is_file():
                overrides = json.loads(existing.read_text())
        for plugin, values in LAB_SETTING_OVERRIDES.items():
            overrides.setdefault(plugin, {}).update(values)
        (dirs["app-settings"] / "overrides.json").write_text(json.dumps(overrides, indent=2))
        return {k: str(v) for k, v in dirs.items()}

    def args(self, dirs: dict[str, str]) -> list[str]:
        args = [
            sys.executable, "-m", "jupyter", "lab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",  # fail rather than move to a port we don't know
            f"--ServerApp.root_dir={self.root}",
            # No network: no Jupyter news feed, no "is there a newer JupyterLab" check,
            # no PyPI listing for the extension manager.
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly",
            f"--LabApp.app_settings_dir={dirs['app-settings']}",
            # Safety net should pytest be killed before it can stop the server: idle
            # kernels are culled and then the server stops itself (15 min each).
            "--MappingKernelManager.cull_idle_timeout=900",
            "--MappingKernelManager.cull_interval=60",
            "--ServerApp.shutdown_no_activity_timeout=900",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.append("--allow-root")
        return args

    def start(self) -> "JupyterLabServer":
        dirs = self._prepare_dirs()
        env = os.environ.copy()
        env.update(
            JUPYTER_TOKEN=self.token,  # keeps the token out of `ps`
            JUPYTER_CONFIG_DIR=dirs["config"],
            JUPYTER_DATA_DIR=dirs["data"],
            JUPYTER_RUNTIME_DIR=dirs["runtime"],
            JUPYTERLAB_SETTINGS_DIR=dirs["user-settings"],
            JUPYTERLAB_WORKSPACES_DIR=dirs["workspaces"],
            IPYTHONDIR=dirs["ipython"],
            PYTHONUNBUFFERED="1",
        )
        env.pop("JUPYTER_TOKEN_FILE", None)
        last_error = ""
        for _attempt in range(3):  # the free port can be taken between probe and bind
            self.port = _free_port()
            self._log = open(self.log_path, "ab")
            t0 = time.monotonic()
            self.proc = subprocess.Popen(
                self.args(dirs),
                cwd=self.root,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own process group: stop() signals all of it
            )
            if self._wait_ready(t0):
                self.startup_seconds = time.monotonic() - t0
                return self
            last_error = self.log_tail()
            self._kill_group()
            self._log.close()
            if "address already in use" not in last_error.lower():
                break
        raise RuntimeError(f"JupyterLab did not start; server log:\n{last_error}")

    def _wait_ready(self, t0: float) -> bool:
        while time.monotonic() - t0 < self.startup_timeout:
            if self.proc.poll() is not None:
                return False
            try:
                status = self.api("GET", "/api/status", timeout=2)
                if isinstance(status, dict) and "started" in status:
                    return True
            except (urllib.error.URLError, ConnectionError, OSError, ValueError):
                pass
            time.sleep(0.1)
        return False

    def shutdown_all_sessions(self) -> None:
        """Shut down every kernel session (each test opens its own notebook/kernel)."""
        if not self.proc or self.proc.poll() is not None:
            return
        try:
            for session in self.api("GET", "/api/sessions") or []:
                self.api("DELETE", f"/api/sessions/{session['id']}", timeout=30)
        except (urllib.error.URLError, OSError) as exc:
            warnings.warn(f"could not shut down Jupyter sessions: {exc}")

    def _kill_group(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(grace)
                return
            except subprocess.TimeoutExpired:
                continue

    def stop(self) -> list[int]:
        """Stop the server and its kernels; return PIDs that had to be killed by force."""
        if self.proc is None:
            return []
        leftovers: list[int] = []
        if self.proc.poll() is None:
            kids = _descendants(self.proc.pid)
            try:  # the clean way: the server shuts down its kernels and terminals itself
                self.api("POST", "/api/shutdown", timeout=10)
            except (urllib.error.URLError, OSError):
                pass
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                leftovers.append(self.proc.pid)
                self._kill_group()
            # Kernels are session leaders of their own: kill any that outlived the server.
            for pid in _wait_gone(kids, 10.0):
                leftovers.append(pid)
                for sig in (signal.SIGTERM, signal.SIGKILL):
                    try:
                        os.killpg(pid, sig) if os.getpgid(pid) == pid else os.kill(pid, sig)
                    except (ProcessLookupError, PermissionError):
                        break
                    if not _wait_gone([pid], 5.0):
                        break
        if self._log and not self._log.closed:
            self._log.close()
        return leftovers


# --------------------------------------------------------------------------------------
# Notebooks
# --------------------------------------------------------------------------------------


def write_notebook(root: Path | str, name: str, cells: Sequence[str | Any]) -> Path:
    """Write an nbformat v4 notebook with the python3 kernel; return its path.

    Each item of ``cells`` is the source of a code cell, or an nbformat cell object (e.g.
    ``nbformat.v4.new_markdown_cell(...)``) used as is.
    """
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c) if isinstance(c, str) else c for c in cells]
    nbformat.validate(nb)
    path = Path(root) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


class NotebookRunError(AssertionError):
    """A cell raised, or the run stopped before every cell had an execution count."""


_NUMBERED = re.compile(r"^\[\d+\]:$")
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^\w*(Error|Exception)\b", re.M)

# One DOM read per poll. The kernel status is the status bar's kernel item (its title is
# "Change kernel for <file>"); the notebook toolbar's execution indicator is no use here
# as it says "idle" before any kernel is connected.
_STATE_JS = """
([title]) => {
  const panel = document.querySelector('.jp-NotebookPanel');
  const prompts = panel
    ? [...panel.querySelectorAll('.jp-CodeCell .jp-InputPrompt')].map(e => e.textContent.trim())
    : [];
  const status = [...document.querySelectorAll('#jp-main-statusbar span')]
    .find(e => e.getAttribute('title') === title);
  const dialog = document.querySelector('.jp-Dialog .jp-Dialog-header');
  return {
    panels: document.querySelectorAll('.jp-NotebookPanel').length,
    prompts,
    status: status ? status.textContent.trim() : null,
    dialog: dialog ? dialog.textContent.trim() : null,
  };
}
"""


@dataclass
class Notebook:
    """The one notebook open in ``page`` (see :func:`open_and_run_all`)."""

    page: Any
    lab: JupyterLabServer
    path: str
    #: seconds from navigation to the kernel being idle
    open_seconds: float = 0.0
    #: seconds from clicking "Run All Cells" to every cell having run
    run_seconds: float = 0.0
    timeout: float = 120.0
    _status_title: str = field(init=False)

    def __post_init__(self) -> None:
        self._status_title = f"Change kernel for {Path(self.path).name}"

    # -- locators -----------------------------------------------------------------------

    @property
    def panel(self):
        return self.page.locator(".jp-NotebookPanel")

    @property
    def cells(self):
        return self.panel.locator(".jp-Notebook .jp-Cell")

    def cell(self, index: int):
        return self.cells.nth(index)

    def outputs(self, index: int):
        return self.cell(index).locator(".jp-OutputArea-output")

    def output_text(self, index: int) -> str:
        return "".join(self.outputs(index).all_inner_texts())

    def wait_for_output_selector(self, index: int, selector: str, timeout: float = 30.0):
        """Wait until ``selector`` is visible inside the output area of cell ``index``."""
        loc = self.cell(index).locator(".jp-OutputArea").locator(selector).first
        try:
            loc.wait_for(state="visible", timeout=timeout * 1000)
        except Exception as exc:
            raise AssertionError(
                f"{selector!r} did not appear in the output of cell {index} within "
                f"{timeout}s; that output reads:\n{self.output_text(index)!r}"
            ) from exc
        return loc

    # -- state --------------------------------------------------------------------------

    def _state(self) -> dict:
        return self.page.evaluate(_STATE_JS, [self._status_title])

    def _kernel_idle(self, state: dict) -> bool:
        status = state["status"] or ""
        return status.endswith("| Idle") and not status.startswith("No Kernel")

    def wait_for_kernel_idle(self, timeout: float | None = None) -> None:
        """Wait for the notebook's kernel to be started, connected and idle."""
        deadline = time.monotonic() + (timeout or self.timeout)
        state: dict = {}
        while time.monotonic() < deadline:
            state = self._state()
            if state["panels"] > 1:
                raise AssertionError("more than one notebook is open in this page")
            if state["dialog"] == "Select Kernel":
                # A notebook without kernelspec metadata: take the proposed kernel.
                self.page.locator(".jp-Dialog .jp-mod-accept").click()
            elif state["panels"] == 1 and self._kernel_idle(state):
                return
            time.sleep(0.1)
        raise AssertionError(f"kernel of {self.path} not idle after the timeout: {state}")

    def _wait_for_run(self, indices: Sequence[int] | None, what: str, scope) -> None:
        """Wait for the cells at ``indices`` (code-cell positions; all when None) to run.

        Done means: every one shows ``[n]:``, none shows ``[*]:``, the kernel is idle, and
        this held for two polls 0.25 s apart (so an output still in flight after the reply
        has been rendered). Stopped means: the kernel is idle with no ``[*]`` left but some
        cell never got a number (run-all stops at the first error). Tracebacks are looked
        for in the outputs inside the locator ``scope``.
        """
        def pick(prompts: list[str]) -> list[str]:
            return prompts if indices is None else [prompts[i] for i in indices]

        deadline = time.monotonic() + self.timeout
        started = False
        previous = None
        while time.monotonic() < deadline:
            state = self._state()
            prompts = pick(state["prompts"])
            running = any(p == "[*]:" for p in prompts)
            numbered = [bool(_NUMBERED.match(p)) for p in prompts]
            started = started or running or any(numbered)
            settled = started and not running and self._kernel_idle(state)
            key = (tuple(prompts), state["status"])
            if settled and key == previous:
                if all(numbered):
                    self._raise_on_errors(what, scope)
                    return
                stuck = [i for i, ok in enumerate(numbered) if not ok]
                self._raise_on_errors(what, scope)
                raise NotebookRunError(
                    f"{what}: cells {stuck} did not run (prompts {prompts}); "
                    f"outputs:\n{self._all_output_text()}"
                )
            previous = key if settled else None
            time.sleep(0.25)
        # Not a NotebookRunError: `allow_errors` must not swallow a hang.
        raise AssertionError(f"{what}: not finished after {self.timeout}s: {self._state()}")

    def _all_output_text(self) -> str:
        chunks = []
        for i in range(self.cells.count()):
            text = self.output_text(i)
            if text.strip():
                chunks.append(f"--- cell {i} ---\n{text}")
        return "\n".join(chunks)

    def _raise_on_errors(self, what: str, scope) -> None:
        stderr = scope.locator(
            '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
        ).all_inner_texts()
        errors = [t for t in stderr if _TRACEBACK.search(t)]
        if errors:
            raise NotebookRunError(f"{what}: a cell raised:\n" + "\n".join(errors))

    # -- actions ------------------------------------------------------------------------

    def run_all(self) -> float:
        """Run menu -> "Run All Cells"; wait until every code cell has run."""
        state = self._state()
        if any(_NUMBERED.match(p) for p in state["prompts"]):
            # Stored execution counts would make "every cell numbered" true at once.
            self._menu("Edit", "editmenu:clear-all")  # "Clear Outputs of All Cells"
        t0 = time.monotonic()
        self._menu("Run", "runmenu:run-all")  # "Run All Cells"
        self._wait_for_run(None, f"Run All Cells in {self.path}", self.panel)
        self.run_seconds = time.monotonic() - t0
        return self.run_seconds

    def _menu(self, menu: str, command: str) -> None:
        self.page.locator("#jp-menu-panel .lm-MenuBar-itemLabel").filter(
            has_text=re.compile(f"^{re.escape(menu)}$")
        ).click()
        self.page.locator(f'.lm-Menu-item[data-command="{command}"]').click()

    def run_new_cell(self, code: str, *, allow_errors: bool = False) -> str:
        """Append a code cell holding ``code``, run it from the keyboard, return its output.

        Goes through the UI like a person: select the last cell, the toolbar's "Insert a
        cell below", type into the editor, Ctrl+Enter ("Run Selected Cell and Do not
        Advance"). Raises :class:`NotebookRunError` if it raised (unless allowed).
        """
        count = self.cells.count()
        code_cells_before = len(self._state()["prompts"])
        self.cell(count - 1).locator(".jp-InputPrompt").click()
        self.panel.locator(
            '.jp-NotebookPanel-toolbar [data-command="notebook:insert-cell-below"]'
        ).click()
        new = self.cell(count)
        new.locator(".cm-content").wait_for(timeout=10_000)
        # fill() inserts the text as one edit: no auto-indent or bracket closing.
        new.locator(".cm-content").fill(code)
        self.page.keyboard.press("ControlOrMeta+Enter")
        try:
            self._wait_for_run([code_cells_before], f"new cell {code!r}", new)
        except NotebookRunError:
            if not allow_errors:
                raise
        return self.output_text(count)


def open_and_run_all(page, lab: JupyterLabServer, path: Path | str, *,
                     timeout: float = 120.0) -> Notebook:
    """Open ``path`` (under ``lab.root``) in JupyterLab and run all its cells via the UI.

    Returns a :class:`Notebook` whose ``open_seconds``/``run_seconds`` hold the timings.
    """
    nb = open_notebook(page, lab, path, timeout=timeout)
    nb.run_all()
    return nb


def open_notebook(page, lab: JupyterLabServer, path: Path | str, *,
                  timeout: float = 120.0) -> Notebook:
    """Like :func:`open_and_run_all` but without running anything: the notebook is open and
    its kernel idle, so a test can arrange the page (say, collapse the side bar) and then
    call :meth:`Notebook.run_all` itself."""
    path = Path(path)
    rel = (path.relative_to(lab.root) if path.is_absolute() else path).as_posix()
    nb = Notebook(page, lab, rel, timeout=timeout)
    t0 = time.monotonic()
    page.goto(lab.lab_url(rel), timeout=timeout * 1000)
    nb.panel.wait_for(timeout=timeout * 1000)
    nb.wait_for_kernel_idle()
    nb.open_seconds = time.monotonic() - t0
    return nb


def collapse_left_sidebar(page) -> None:
    """Close JupyterLab's left side bar (the file browser a fresh workspace opens with), so
    that the notebook gets the page's whole width."""
    current = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")
    if current.count():
        current.first.click()
        page.locator("#jp-left-stack").wait_for(state="hidden", timeout=10_000)


class WebSocketBytes:
    """Bytes the page receives over the kernel's websockets (``/api/kernels/.../channels``),
    summed from Playwright's ``framereceived`` events. Attach before the page navigates;
    ``mark()`` / ``since(mark)`` measure a window (e.g. one cell's run)."""

    def __init__(self, page) -> None:
        self.total = 0
        self.frames = 0
        self.urls: list[str] = []
        page.on("websocket", self._on_websocket)

    def _on_websocket(self, ws) -> None:
        if "/api/kernels/" not in ws.url:
            return
        self.urls.append(ws.url)

        def on_frame(payload) -> None:
            self.total += len(payload.encode("utf-8") if isinstance(payload, str) else payload)
            self.frames += 1

        ws.on("framereceived", on_frame)

    def mark(self) -> tuple[int, int]:
        return self.total, self.frames

    def since(self, mark: tuple[int, int]) -> tuple[int, int]:
        """(bytes, frames) received since ``mark``."""
        return self.total - mark[0], self.frames - mark[1]


def wait_for_output_selector(page, cell_index: int, selector: str, timeout: float = 30.0):
    """Module-level form of :meth:`Notebook.wait_for_output_selector`."""
    return Notebook(page, None, "x").wait_for_output_selector(cell_index, selector, timeout)


# --------------------------------------------------------------------------------------
# Console and network
# --------------------------------------------------------------------------------------

#: Console errors JupyterLab itself logs in a clean session, each as (regex, why).
#: None with JupyterLab 4.6 + jupyterlab_widgets 3.0 + anywidget 0.11 under Chromium 156:
#: a fresh server, opening a notebook, running widget cells, clicking the widget and
#: running more cells logs only "debug"-level messages ("Starting application in
#: workspace", "Starting WebSocket: ..."). Add an entry only with the reason it is
#: harmless; tests may pass their own ``allow=`` for errors they provoke on purpose.
JUPYTERLAB_CONSOLE_NOISE: tuple[tuple[str, str], ...] = ()

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost"})


def is_local_url(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme in ("data", "blob"):
        return True
    if parts.scheme in ("http", "https", "ws", "wss"):
        return (parts.hostname or "") in LOCAL_HOSTS
    return False


@dataclass
class BrowserLog:
    """What one test's browser context did: console errors, page errors, requests."""

    console: list[str] = field(default_factory=list)  # every message, "type: text @loc"
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # "METHOD url"
    request_urls: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)

    def attach(self, context, page) -> "BrowserLog":
        def on_console(msg) -> None:
            loc = msg.location or {}
            where = f"{loc.get('url', '')}:{loc.get('lineNumber', '')}"
            line = f"{msg.type}: {msg.text} @ {where}"
            self.console.append(line)
            if msg.type == "error":
                self.console_errors.append(line)

        def on_request(req) -> None:
            self.requests.append(f"{req.method} {req.url}")
            self.request_urls.append(req.url)

        def on_websocket(ws) -> None:
            self.requests.append(f"WEBSOCKET {ws.url}")
            self.request_urls.append(ws.url)

        context.on("console", on_console)
        context.on("request", on_request)
        page.on("pageerror", lambda err: self.page_errors.append(f"{err.name}: {err.message}\n{err.stack}"))
        page.on("websocket", on_websocket)

        # Nothing leaves the machine even if some code tries: non-local requests are
        # recorded (above) and aborted here; the assertion below then reports them.
        def block(route) -> None:
            self.blocked.append(route.request.url)
            route.abort("blockedbyclient")

        context.route(lambda url: not is_local_url(url), block)
        return self

    def summary(self) -> str:
        return (
            f"{len(self.console)} console messages ({len(self.console_errors)} errors), "
            f"{len(self.page_errors)} page errors, {len(self.requests)} requests "
            f"({len(self.blocked)} blocked)"
        )

    def assert_no_console_errors(self, allow: Iterable[str] = ()) -> None:
        assert_no_console_errors(self, allow)

    def assert_all_requests_local(self) -> None:
        assert_all_requests_local(self)


def assert_no_console_errors(log: BrowserLog, allow: Iterable[str] = ()) -> None:
    """No console error and no uncaught page error, except those matching ``allow``
    (regexes searched in the message) or :data:`JUPYTERLAB_CONSOLE_NOISE`."""
    patterns = [re.compile(p) for p in allow] + [
        re.compile(p) for p, _why in JUPYTERLAB_CONSOLE_NOISE
    ]
    bad = [m for m in log.console_errors + log.page_errors
           if not any(p.search(m) for p in patterns)]
    assert not bad, "browser console errors / page errors:\n" + "\n".join(bad)


def assert_all_requests_local(log: BrowserLog) -> None:
    """Every request and websocket went to 127.0.0.1/localhost (or was data:/blob:)."""
    bad = [u for u in log.request_urls if not is_local_url(u)]
    assert not bad, "requests to non-local hosts:\n" + "\n".join(sorted(set(bad)))
