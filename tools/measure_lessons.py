"""Run every lesson headless, one fresh kernel each, and print what it cost the kernel: the time
to run all its cells and the kernel process's peak memory (RSS). These are the figures in
docs/syllabus.md (time per lesson) and docs/teaching.md (sizing a JupyterHub).

    python tools/measure_lessons.py [lessons_dir]        (needs the `test` extra: nbclient)

The full lessons are run (solutions in), as a student's finished copy would be. The peak RSS is
read by the kernel itself at the end (VmHWM in /proc/self/status, the high-water mark of its
resident memory: Linux only); the browser's side of the widgets is not in it. Times depend on the machine: run it on the
hub's kind of machine, once, with nothing else busy.
"""
from __future__ import annotations

import json
import pathlib
import resource
import sys
import time

import nbformat
from nbclient import NotebookClient

# The kernel's own view of itself, printed as one JSON line by a cell added at the end.
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over an exec, so a kernel started by a big
# process would report its parent's peak.
PROBE = """import json as _json, resource as _resource, re as _re
_usage = _resource.getrusage(_resource.RUSAGE_SELF)
_status = open("/proc/self/status").read()
print(_json.dumps({"peak_rss_kib": int(_re.search(r"VmHWM:\\s*(\\d+)", _status).group(1)),
                   "cpu_s": _usage.ru_utime + _usage.ru_stime}))"""


def measure(path: pathlib.Path) -> dict:
    notebook = nbformat.read(path, as_version=4)
    notebook.cells.insert(0, nbformat.v4.new_code_cell(PROBE))   # the kernel before the lesson
    notebook.cells.append(nbformat.v4.new_code_cell(PROBE))
    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()
    wall = time.perf_counter() - start
    before, after = (json.loads(notebook.cells[i].outputs[-1]["text"]) for i in (0, -1))
    # cell timings: from the first lesson cell's start to the last one's end (no kernel start)
    timing = [c.metadata.get("execution", {}) for c in notebook.cells[1:-1] if c.cell_type == "code"]
    return {"lesson": path.stem, "cells": len(notebook.cells) - 2,
            "start_rss_mib": before["peak_rss_kib"] / 1024,
            "peak_rss_mib": after["peak_rss_kib"] / 1024,
            "cpu_s": after["cpu_s"] - before["cpu_s"],
            "wall_s": wall, "run_s": _span(timing)}


def _span(timings: list[dict]) -> float:
    from datetime import datetime
    starts = [t["iopub.execute_input"] for t in timings if "iopub.execute_input" in t]
    ends = [t["shell.execute_reply"] for t in timings if "shell.execute_reply" in t]
    if not starts or not ends:
        return float("nan")
    parse = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))  # noqa: E731
    return (parse(max(ends)) - parse(min(starts))).total_seconds()


def main(argv: list[str]) -> None:
    lessons = pathlib.Path(argv[0] if argv else "lessons")
    rows = [measure(path) for path in sorted(lessons.glob("[0-9][0-9]_*.ipynb"))]
    print("| lesson | cells | kernel time (s) | kernel CPU (s) | RSS at start (MiB) | peak RSS (MiB) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['lesson']} | {r['cells']} | {r['run_s']:.1f} | {r['cpu_s']:.1f} "
              f"| {r['start_rss_mib']:.0f} | {r['peak_rss_mib']:.0f} |")
    print(json.dumps(rows), file=sys.stderr)
    this = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\n(this measuring process: {this:.0f} MiB; python {sys.version.split()[0]})")


if __name__ == "__main__":
    main(sys.argv[1:])
