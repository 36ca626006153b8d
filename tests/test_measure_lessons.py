"""tools/measure_lessons.py, which measured the times and memory in docs/syllabus.md and
docs/teaching.md, reads a real kernel: run on lesson 00, its figures are those of a process
that imported numpy and ran the lesson."""
from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from measure_lessons import measure  # noqa: E402


def test_lesson_00_measured_in_its_own_kernel():
    row = measure(ROOT / "lessons" / "00_welcome.ipynb")
    assert row["lesson"] == "00_welcome" and row["cells"] >= 30
    # a bare Python with ipykernel is tens of MiB; the lesson (numpy, minigrad, widgets) adds more
    assert 20 < row["start_rss_mib"] < row["peak_rss_mib"] < 1000
    assert 0 < row["cpu_s"] and 0 < row["run_s"] <= row["wall_s"]
