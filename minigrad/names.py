"""Names: the one check every name a user gives passes (leaves, scopes, modules, allocators,
trace titles), wherever it enters; and the one way a shape is written beside a name.

A name travels far: into a trace (a JSON string), a DOT label, an HTML page written as UTF-8.
So it must be a string, and a string all of those can carry: no lone surrogate (no UTF-8 for
it: writing the page fails) and no control character (a NUL ends a C string inside Graphviz;
a newline or a tab would be drawn as layout, not as text). Everything else is the user's own
text, drawn as written: `&`, `<`, quotes and backslashes are escaped where the text is drawn
(widgets/dot.py), never refused.
"""
from __future__ import annotations

import reprlib
import unicodedata

from .errors import MinigradError


class NameTypeError(MinigradError, TypeError):
    """A name that is not a string."""


class NameValueError(MinigradError, ValueError):
    """A name with a character a trace, a drawing or a page cannot carry."""


def check_name(name, where: str, *, required: bool = False,
               example: str = "name=str(...)") -> str | None:
    """name as a plain str (None stays None: no name, unless a name is required), or a clear
    error that names `where` and shows `example` as the fix."""
    if name is None and not required:
        return None
    if not isinstance(name, str) or (required and not name):
        what = "a non-empty string" if required else "a string"
        raise NameTypeError(
            f"{where}: a name must be {what}, got {type(name).__name__} {reprlib.repr(name)}. "
            f"Rule: names are text in traces and drawings, and minigrad does not guess how to "
            f"print other objects. Fix: pass a string, e.g. {example}.")
    if not name.isprintable():   # (the fast path: most names are plain printable text)
        for i, c in enumerate(name):
            if unicodedata.category(c) in ("Cc", "Cs"):
                raise _unprintable(name, where, i, c)
    return str(name)   # (a str subclass, such as numpy's str_, becomes a plain str)


def _unprintable(name: str, where: str, i: int, c: str) -> NameValueError:
    kind = "a lone surrogate" if unicodedata.category(c) == "Cs" else "a control character"
    return NameValueError(
        f"{where}: the name {name!r} has {kind} (U+{ord(c):04X}) at position {i}. Rule: a "
        f"name must be text that a trace (JSON), a drawing (Graphviz) and a page written as "
        f"UTF-8 can all carry: no control characters (NUL, newline, tab, ...) and no unpaired "
        f"surrogates. Fix: remove that character from the name.")


def shape_text(shape) -> str:
    """A shape as traces and drawings write it beside a name: "3x2", "(5,)" for a vector (its
    length alone, "5", reads as a value; numpy writes it so), or "scalar" for ()."""
    if len(shape) == 1:
        return f"({shape[0]},)"
    return "x".join(str(n) for n in shape) or "scalar"


def shape_in_parens(shape) -> str:
    """shape_text in parentheses, as a sentence puts it after a name: "W (3x2)", "b (5,)"."""
    text = shape_text(shape)
    return text if len(shape) == 1 else f"({text})"


__all__ = ["check_name", "shape_text", "shape_in_parens", "NameTypeError", "NameValueError"]
