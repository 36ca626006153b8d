"""The licence and credit a course needs before adopting minigrad: who holds the code, under
which terms the lessons may be reused, how to cite it, and the data set's authors credited
where their data is used."""
import pathlib
import re

ROOT = pathlib.Path(__file__).parent.parent
PYPROJECT = (ROOT / "pyproject.toml").read_text(encoding="utf-8")   # (no tomllib on Python 3.10)


def test_licence_names_a_holder_and_the_terms_of_code_and_lessons():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License")
    assert re.search(r"Copyright \(c\) \d{4} The minigrad authors", text)
    assert "lessons/" in text and "CC BY 4.0" in text
    assert 'license = { text = "MIT" }' in PYPROJECT


def test_citation_file_has_the_fields_citation_tools_read():
    text = (ROOT / "CITATION.cff").read_text(encoding="utf-8")
    for field in ("cff-version: 1.2.0", "message:", "title:", "authors:", "version:", "license: MIT"):
        assert field in text, field
    version = re.search(r'^version = "([^"]+)"', PYPROJECT, re.M).group(1)
    assert f"version: {version}" in text


def test_the_digits_are_credited_where_they_are_used():
    doi = "10.24432/C50P49"
    for path in ("lessons/07_arenas_and_batches.md", "lessons/07_arenas_and_batches.ipynb",
                 "minigrad/datasets/README.md", "CITATION.cff", "README.md"):
        text = (ROOT / path).read_text(encoding="utf-8")
        assert "Alpaydin" in text and ("CC BY 4.0" in text or "CC-BY-4.0" in text), path
        assert doi in text or path == "README.md", path
