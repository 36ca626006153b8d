"""tools/set_repo.py on a copy of the repository: every launch link names the fork (and the tag),
and nothing else in any file changes."""
from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).parent.parent
SCRIPT = ROOT / "tools" / "set_repo.py"
OURS, FORK = "minigrad-lab/minigrad", "a-university/minigrad-fork"


def links_to(repo: str, text: str) -> list[str]:
    """The launch links and GitHub addresses in text that name repo."""
    return re.findall(rf"(?:mybinder\.org/v2/gh|github\.com)/{re.escape(repo)}(?![\w.-])", text)


def tracked_texts(root: pathlib.Path) -> dict[str, str]:
    names = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True,
                           check=True).stdout.split()
    texts = {}
    for name in names:
        try:
            texts[name] = (root / name).read_bytes().decode("utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            pass
    return texts


@pytest.fixture()
def clone(tmp_path) -> pathlib.Path:
    """The tracked files in a fresh git repository (what a fork's clone holds)."""
    repo = tmp_path / "repo"
    for name in tracked_texts(ROOT):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, repo / name)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    return repo


def set_repo(repo: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-I", "-S", str(SCRIPT), *args, "--root", str(repo)],
                          capture_output=True, text=True)


def test_every_link_names_the_fork_and_the_tag_and_nothing_else_changes(clone):
    before = tracked_texts(clone)
    with_links = {name for name, text in before.items() if links_to(OURS, text)}
    assert "README.md" in with_links and len(with_links) >= 27   # README, 13 lessons x 2

    run = set_repo(clone, FORK, "--ref", "v2027.1")
    assert run.returncode == 0, run.stderr
    after = tracked_texts(clone)
    changed = {name for name in before if after[name] != before[name]}
    assert changed == with_links
    for name in changed:
        assert links_to(OURS, after[name]) == [], name
        assert len(links_to(FORK, after[name])) == len(links_to(OURS, before[name])), name
        # the only difference: the links (undo them by hand and the file is as it was)
        undone = after[name].replace(f"{FORK}/v2027.1?", f"{OURS}/HEAD?").replace(FORK, OURS)
        assert undone == before[name], name
    binder = re.findall(r"mybinder\.org/v2/gh/[^)\s\"]*", "".join(after[n] for n in changed))
    assert len(binder) >= 27
    assert all(link.startswith(f"mybinder.org/v2/gh/{FORK}/v2027.1?urlpath=") for link in binder)
    assert 'name = "minigrad-lab"' in after["pyproject.toml"]   # the package's name is no link


def test_a_fork_of_the_fork_and_back_and_keeping_the_ref(clone):
    before = tracked_texts(clone)
    assert set_repo(clone, FORK, "--ref", "v1").returncode == 0
    run = set_repo(clone, "someone/other")           # no --ref: the links keep v1
    assert run.returncode == 0 and f"{FORK} -> someone/other" in run.stdout
    readme = tracked_texts(clone)["README.md"]
    lessons = len(list((clone / "lessons").glob("[0-9][0-9]_*.md")))
    assert len(links_to("someone/other", readme)) == lessons + 1   # the table's, and the top one
    assert "someone/other/v1?urlpath=" in readme
    assert set_repo(clone, OURS, "--ref", "HEAD").returncode == 0
    assert tracked_texts(clone) == before


def test_misuse_is_refused_with_the_rule(clone, tmp_path):
    before = tracked_texts(clone)
    run = set_repo(clone, "just-a-name")
    assert run.returncode != 0 and "is not OWNER/NAME" in run.stderr
    run = set_repo(clone, FORK, "--ref", "v1 final")
    assert run.returncode != 0 and "cannot go into a URL" in run.stderr
    assert tracked_texts(clone) == before
    (tmp_path / "plain").mkdir()
    run = set_repo(tmp_path / "plain", FORK)
    assert run.returncode != 0 and "is not a git clone" in run.stderr
