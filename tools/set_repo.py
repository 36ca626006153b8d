"""Point every launch link at another copy of the repository (a fork), and optionally at a tag.

    python tools/set_repo.py OWNER/NAME [--ref TAG]      (needs only Python 3 and git)

The README, the lessons (.md and .ipynb alike) and the docs name the repository in their Binder
links (`mybinder.org/v2/gh/OWNER/NAME/REF?urlpath=...`) and in `github.com/OWNER/NAME`. This
rewrites those, in every file git tracks, from the repository the README's links name now to
OWNER/NAME; nothing else in any file changes. `--ref` also sets the REF of the Binder links: a tag (`v1.0`)
pins a class to one version, so a push during the term does not change the lessons under the
students (and Binder builds the image once, not after every push). Without `--ref` the links
keep the REF they have (`HEAD`: the default branch, rebuilt after each push).

Run it from a clone, commit the result, and the student copies (tools/make_student.py) carry
the new links too.
"""
from __future__ import annotations

import argparse
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
OWNER, NAME = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?", r"[A-Za-z0-9._-]+"
REF = r"[^\s?#)\"'<>\\]+"
BINDER = re.compile(rf"(mybinder\.org/v2/gh/)({OWNER})/({NAME})/({REF})")


def tracked_text_files(root: pathlib.Path) -> dict[pathlib.Path, str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"set_repo: {root} is not a git clone ({out.stderr.strip()}); run it "
                         "in a clone of the repository, where git knows which files are tracked")
    texts = {}
    for name in filter(None, out.stdout.split("\0")):
        path = root / name
        try:
            with open(path, encoding="utf-8", newline="") as file:   # line ends kept as they are
                texts[path] = file.read()
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue    # binary files (images, the digits) hold no links
    return texts


def current_repo(root: pathlib.Path) -> str:
    """The OWNER/NAME the README's Binder links name today (they must all name one). Links
    elsewhere that name another repository (an example in the docs) are left alone."""
    readme = root / "README.md"
    found = {f"{m.group(2)}/{m.group(3)}" for m in BINDER.finditer(readme.read_text(encoding="utf-8"))}
    if len(found) != 1:
        raise SystemExit(f"set_repo: expected the Binder links of {readme} to name one repository, "
                         f"found {sorted(found) or 'none'}; edit the odd ones by hand first")
    return found.pop()


def rewrite(text: str, old: str, new: str, ref: str | None) -> str:
    def binder(m: re.Match) -> str:
        if f"{m.group(2)}/{m.group(3)}" != old:
            return m.group(0)
        return f"{m.group(1)}{new}/{ref or m.group(4)}"
    text = BINDER.sub(binder, text)
    # github.com/OWNER/NAME, not followed by more of a name (minigrad-lab/minigrad-extra stays)
    return re.sub(rf"(github\.com/){re.escape(old)}(?![A-Za-z0-9._-])", rf"\g<1>{new}", text)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", help="OWNER/NAME of the fork on GitHub")
    parser.add_argument("--ref", help="branch or tag the Binder links open (e.g. v1.0)")
    parser.add_argument("--root", type=pathlib.Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not re.fullmatch(rf"{OWNER}/{NAME}", args.repo):
        parser.error(f"{args.repo!r} is not OWNER/NAME as GitHub spells a repository "
                     "(e.g. my-university/minigrad)")
    if args.ref is not None and not re.fullmatch(REF, args.ref):
        parser.error(f"--ref {args.ref!r} cannot go into a URL as it is (no spaces, ?, #, quotes)")
    texts = tracked_text_files(args.root)
    old = current_repo(args.root)
    changed = 0
    for path, text in sorted(texts.items()):
        new_text = rewrite(text, old, args.repo, args.ref)
        if new_text != text:
            with open(path, "w", encoding="utf-8", newline="") as file:
                file.write(new_text)
            changed += 1
    ref = f", Binder links at {args.ref}" if args.ref else ""
    print(f"set_repo: {old} -> {args.repo}{ref}: {changed} file(s) rewritten")


if __name__ == "__main__":
    main(sys.argv[1:])
