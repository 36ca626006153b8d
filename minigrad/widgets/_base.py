"""What every minigrad widget shares: the bundle files, the one layout engine, the trace traits."""
from __future__ import annotations

import pathlib

import anywidget
import traitlets
from ipywidgets import widget_serialization

STATIC = pathlib.Path(__file__).parent / "static"
MAX_NODES = 400   # beyond this a drawing is slow to lay out and unreadable anyway


def bundle(name: str) -> pathlib.Path:
    """Path of a built JS/CSS file; a clear error when the bundle was never built."""
    path = STATIC / name
    if not path.exists():
        raise FileNotFoundError(
            f"minigrad's widget bundle {path} is missing. It is built from widgets/ with Node "
            f"when the package is installed: run `pip install -e .` (or `make lab`) with Node.js "
            f"and npm available.")
    return path


class LayoutEngine(anywidget.AnyWidget):
    """Graphviz compiled to WebAssembly, loaded once per page and shared by every view.

    Each view refers to the one instance of this kernel, so its large ESM crosses the wire once
    instead of once per widget.
    """

    def __init__(self) -> None:
        super().__init__(_esm=bundle("viz.js").read_text(encoding="utf-8"))


_ENGINE: LayoutEngine | None = None


def layout_engine() -> LayoutEngine:
    global _ENGINE
    if _ENGINE is None:
        _ENGINE = LayoutEngine()
    return _ENGINE


class TraceWidget(anywidget.AnyWidget):
    """A view of a trace document (docs/trace.md) drawn from DOT built here."""

    trace = traitlets.Dict().tag(sync=True)
    dot = traitlets.Unicode("").tag(sync=True)
    options = traitlets.Dict().tag(sync=True)
    message = traitlets.Unicode("").tag(sync=True)
    layout_engine = traitlets.Instance(LayoutEngine).tag(sync=True, **widget_serialization)

    _bundle_name = ""

    @property
    def current_trace(self) -> dict:
        """The trace as it stands now (what save_html writes)."""
        return self.trace

    def __init__(self, trace: dict, *, dot: str = "", message: str = "", traits: dict | None = None,
                 **options) -> None:
        super().__init__(trace=trace, dot=dot, message=message, options=options, **(traits or {}),
                         layout_engine=layout_engine(),
                         _esm=bundle(self._bundle_name).read_text(encoding="utf-8"))


def too_big_message(trace: dict, max_nodes: int) -> str:
    count = len(trace["nodes"])
    if count <= max_nodes:
        return ""
    ops = sum(1 for n in trace["nodes"] if n["type"] == "op")
    return (f"This graph has {count:,} nodes ({ops:,} ops): more than max_nodes={max_nodes}, "
            f"too many to lay out readably, so it is not drawn. Draw a smaller piece (a view of "
            f"an intermediate Variable, or fewer steps of the loop), or pass max_nodes= to try.")
