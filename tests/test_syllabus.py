"""docs/syllabus.md keeps up with the lessons: six weeks covering each lesson once, and per lesson
a list of objectives, its prerequisites, a row of times and one answer per open question."""
from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).parent.parent
LESSONS = sorted((ROOT / "lessons").glob("[0-9][0-9]_*.md"))
SYLLABUS = (ROOT / "docs" / "syllabus.md").read_text(encoding="utf-8")


def numbered_items(text: str) -> list[str]:
    return re.findall(r"^\d+\. ", text, re.M)


def open_questions(lesson: pathlib.Path) -> list[str]:
    text = lesson.read_text(encoding="utf-8")
    section = text.split("### Open questions", 1)[1]
    return numbered_items(re.split(r"^#{1,3} |^\+\+\+", section, flags=re.M)[0])


def sections() -> dict[str, str]:
    parts = re.split(r"^### (\d\d) · .*$", SYLLABUS.split("## Lessons", 1)[1], flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_six_weeks_cover_every_lesson_once():
    weeks = re.findall(r"^\| (\d) \| ([\d, ]+) \|", SYLLABUS, re.M)
    assert [w for w, _ in weeks] == ["1", "2", "3", "4", "5", "6"]
    taught = [n for _, lessons in weeks for n in lessons.replace(" ", "").split(",")]
    assert taught == [p.stem[:2] for p in LESSONS] and len(taught) == len(LESSONS) >= 13


def test_each_lesson_has_objectives_prerequisites_times_and_its_answers():
    found = sections()
    assert sorted(found) == [p.stem[:2] for p in LESSONS]
    for lesson in LESSONS:
        number, body = lesson.stem[:2], found[lesson.stem[:2]]
        objectives = body.split("Objectives:", 1)[1].split("Prerequisites:", 1)[0]
        assert len(re.findall(r"^- ", objectives, re.M)) >= 3, number
        assert re.search(r"^Prerequisites: \S", body, re.M), number
        answers = body.split("<details>", 1)[1].split("</details>", 1)[0]
        assert len(numbered_items(answers)) == len(open_questions(lesson)) >= 3, number
        assert re.search(rf"^\| {number} [a-z]", SYLLABUS, re.M), f"no row of times for {number}"
