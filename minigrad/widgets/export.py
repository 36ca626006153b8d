"""save_html: one self-contained HTML file that replays a widget's trace, with no network."""
from __future__ import annotations

import html
import json
import pathlib

from ..names import check_name
from ._base import bundle
from .aotview import AotView
from .tapeview import TapeView
from .views import BackwardStepper, GraphView, MemoryView

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval' blob: data:; style-src 'unsafe-inline'; img-src data: blob:; connect-src data: blob:; worker-src blob: data:">
<style>body {{ font-family: system-ui, sans-serif; margin: 1.5rem; }}</style>
</head>
<body>
<h1 style="font-size:1.2rem">{title}</h1>
<div id="minigrad-root"></div>
<script type="application/json" id="minigrad-data">{data}</script>
<script>{script}</script>
<script>
window.minigrad.mount(document.getElementById("minigrad-root"),
                      JSON.parse(document.getElementById("minigrad-data").textContent));
</script>
</body>
</html>
"""


def save_html(widget, path, *, finish: bool = True) -> pathlib.Path:
    """Write widget's trace and drawing into one HTML file that works offline (slides, a course
    page, an LMS). A live BackwardStepper or TapeView runs backward to the end first unless
    finish=False."""
    if isinstance(widget, (BackwardStepper, TapeView)) and finish:
        widget.finish()
    # isinstance, not type(): traitlets' add_traits gives each widget instance a subclass.
    kind = next((name for cls, name in ((GraphView, "graph"), (BackwardStepper, "stepper"),
                                        (MemoryView, "memory"), (TapeView, "tape"),
                                        (AotView, "aot"))
                 if isinstance(widget, cls)), None)
    if kind is None:
        raise TypeError(f"save_html: expected a GraphView, BackwardStepper, MemoryView, TapeView "
                        f"or AotView, got {type(widget).__name__}.")
    trace = widget.current_trace
    data = {"widget": kind, "trace": trace, "dot": widget.dot, "options": widget.options,
            "message": widget.message, "folding": getattr(widget, "folding", {}),
            "expanded": getattr(widget, "expanded", []),
            "scope_table": getattr(widget, "scope_table", {})}
    # JSON inside <script>: "</" would end the element early, so escape every "<".
    text = json.dumps(data).replace("<", "\\u003c")
    # (a tape page needs no Graphviz: its own script is ~5% of the size)
    script = bundle("standalone-tape.js" if kind == "tape" else "standalone.js")
    script = script.read_text(encoding="utf-8").replace("</script", "<\\/script")
    # (a trace read back from a JSON file has not met the name check where titles are given)
    title = check_name(trace.get("title"), "save_html: the trace's title") or f"minigrad {kind}"
    path = pathlib.Path(path)
    path.write_text(_PAGE.format(title=html.escape(title), data=text, script=script),
                    encoding="utf-8")
    return path
