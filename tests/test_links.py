"""Every relative link in the README, the docs and the lessons' markdown points at a file that
exists (a renamed or missing doc shows up here, not as a 404 in front of a class)."""
from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
         *sorted((ROOT / "lessons").glob("*.md"))]
CODE = re.compile(r"^(```|~~~).*?^\1\s*$|`[^`\n]*`", re.S | re.M)   # fenced blocks, inline code
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)"   # [text](target)
                  r"|^\s*\[[^\]]+\]:\s*<?(\S+?)>?\s*$", re.M)                  # [label]: target
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:|^//|^#", re.I)   # http:, mailto:, //host, #anchor


def relative_links(page: pathlib.Path) -> list[str]:
    text = CODE.sub("", page.read_text(encoding="utf-8"))
    targets = [m.group(1) or m.group(2) for m in LINK.finditer(text)]
    return [t for t in targets if not EXTERNAL.match(t)]


def test_every_relative_link_points_at_a_file_in_the_repository():
    broken, checked = [], 0
    for page in PAGES:
        for target in relative_links(page):
            path = (page.parent / re.split(r"[#?]", target)[0]).resolve()
            checked += 1
            if not path.exists() or ROOT.resolve() not in path.parents:
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []
    assert checked >= 30     # the README alone links every lesson and several docs


def test_the_link_finder_sees_links_and_skips_code_and_urls(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[a](docs/a.md#part) ![b](img.png) [c](https://x.org/y.md) [d](#top)\n"
                    "`[e](in/code.md)`\n```python\nprint('[f](in/block.md)')\n```\n"
                    "[g]: <ref/target.md>\n", encoding="utf-8")
    assert relative_links(page) == ["docs/a.md#part", "img.png", "ref/target.md"]
