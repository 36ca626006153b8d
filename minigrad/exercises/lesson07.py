"""Lesson 07 (arenas and batches): check_evaluate, and line_plot for the lesson's curves.

The student writes evaluate(model, X, y, graph, batch_size): the mean cross-entropy and the
accuracy of a model over a dataset, one batch at a time inside graph.scope(), under no_grad(),
keeping floats only. The check compares the numbers with a plain evaluation and watches the
memory: no graph recorded, nothing left on the arena, the same high-water mark for one batch as
for many, no graph node left alive.

line_plot draws a few series as an inline SVG (no plotting library needed), with a text
fallback for consoles.
"""
from __future__ import annotations

import html

import numpy as np

from ..arena import Arena
from ..data import digits_split
from ..eager.function import live_nodes
from ..modes import no_grad
from ..nn import MLP
from ..ops import cross_entropy
from ..trace import record
from ..eager.variable import Variable, create_leaf
from ._report import StudentError, call, failed, passed

CHECK = "check_evaluate"
COLORS = ("#1f6fb4", "#d9480f", "#2b8a3e", "#862e9c", "#495057")
SPARKS = "▁▂▃▄▅▆▇█"


# -- plots --------------------------------------------------------------------------------------
class Plot:
    """A small line plot: shown as SVG in a notebook, as sparklines in a console."""

    def __init__(self, svg: str, text: str):
        self.svg, self.text = svg, text

    def _repr_svg_(self) -> str:
        return self.svg

    def __repr__(self) -> str:
        return self.text


def _nice_ticks(low: float, high: float, count: int = 5) -> list:
    """Round values (1, 2, 2.5 or 5 times a power of ten) inside [low, high], about `count`."""
    if high <= low:
        return [low]
    raw = (high - low) / count
    power = 10.0 ** np.floor(np.log10(raw))
    step = min((m * power for m in (1, 2, 2.5, 5, 10)), key=lambda st: abs(np.log(st / raw)))
    first = np.ceil(low / step - 1e-9) * step
    return [float(t) for t in np.arange(first, high + step * 1e-9, step)]


def _number(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def line_plot(series: dict, *, title: str = "", xlabel: str = "step", ylabel: str = "",
              x=None, width: int = 600, height: int = 260) -> Plot:
    """Plot {label: list of numbers} against x (default 0, 1, 2, ...); NaN values are skipped."""
    items = [(str(label), np.asarray(values, float)) for label, values in series.items()]
    n = max(len(v) for _, v in items)
    xs = np.arange(n, dtype=float) if x is None else np.asarray(x, float)
    finite = np.concatenate([v[np.isfinite(v)] for _, v in items])
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if high == low:
        low, high = low - 0.5, high + 0.5
    pad = 0.04 * (high - low)
    low, high = low - pad, high + pad
    yticks = _nice_ticks(low, high)
    x0, x1 = float(xs.min()), float(xs.max())
    if x1 == x0:
        x1 = x0 + 1.0
    xticks = _nice_ticks(x0, x1)
    legend_rows = -(-len(items) // 2)
    left, right, top = 78, 16, 30 if title else 12
    bottom = 44 + 16 * legend_rows
    pw, ph = width - left - right, height - top - bottom

    def px(v):
        return left + (v - x0) / (x1 - x0) * pw

    def py(v):
        return top + (high - v) / (high - low) * ph

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#adb5bd"/>']
    if title:
        out.append(f'<text x="{left}" y="18" font-size="13">{html.escape(title)}</text>')
    for t in yticks:
        y = py(t)
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" '
                   f'stroke="#f1f3f5"/><text x="{left - 6}" y="{y + 4:.1f}" '
                   f'text-anchor="end">{_number(t)}</text>')
    for t in xticks:
        xx = px(t)
        out.append(f'<line x1="{xx:.1f}" x2="{xx:.1f}" y1="{top + ph}" y2="{top + ph + 4}" '
                   f'stroke="#868e96"/><text x="{xx:.1f}" y="{top + ph + 16}" '
                   f'text-anchor="middle">{_number(t)}</text>')
    out.append(f'<text x="{left + pw / 2}" y="{top + ph + 32}" text-anchor="middle">'
               f'{html.escape(xlabel)}</text>')
    if ylabel:
        out.append(f'<text x="26" y="{top + ph / 2}" text-anchor="middle" '
                   f'transform="rotate(-90 26 {top + ph / 2})">{html.escape(ylabel)}</text>')
    for k, (label, values) in enumerate(items):
        color = COLORS[k % len(COLORS)]
        points = " ".join(f"{px(a):.1f},{py(b):.1f}" for a, b in zip(xs, values)
                          if np.isfinite(b))
        out.append(f'<polyline points="{points}" fill="none" stroke="{color}" '
                   f'stroke-width="1.6"/>')
        lx, ly = left + (k % 2) * pw / 2, top + ph + 50 + 16 * (k // 2)
        out.append(f'<line x1="{lx}" x2="{lx + 18}" y1="{ly - 4}" y2="{ly - 4}" stroke="{color}" '
                   f'stroke-width="2"/><text x="{lx + 24}" y="{ly}">{html.escape(label)}</text>')
    out.append("</svg>")
    return Plot("".join(out), _sparklines(title, items, low, high))


def _sparklines(title: str, items: list, low: float, high: float) -> str:
    lines = [title] if title else []
    for label, values in items:
        step = max(1, -(-len(values) // 60))
        shown = [values[i:i + step].mean() for i in range(0, len(values), step)]
        marks = "".join(SPARKS[int((v - low) / (high - low) * (len(SPARKS) - 1))]
                        if np.isfinite(v) else " " for v in shown)
        ends = values[np.isfinite(values)]
        span = f"{_number(ends[0])} -> {_number(ends[-1])}" if ends.size else "no finite values"
        lines.append(f"{label:>24} {marks}  {span}")
    return "\n".join(lines)


# -- the exercise check -------------------------------------------------------------------------
def _reference(model, X, y) -> tuple:
    with no_grad():
        logits = model(create_leaf(X))
        loss = cross_entropy(logits, y).item()
        accuracy = float((logits.numpy().argmax(axis=1) == y).mean())
    return loss, accuracy


def _run(evaluate, model, X, y, graph, batch_size):
    """Call evaluate under a recorder; return (result, number of ops that built graph nodes)."""
    with record() as rec:
        result = call(evaluate, model, X, y, graph, batch_size)
    ops = sum(1 for e in rec.trace["events"] if e["type"] == "op")
    return result, ops


def _numbers(result):
    if not (isinstance(result, tuple) and len(result) == 2):
        raise TypeError(f"returned {type(result).__name__}, not a tuple (mean_loss, accuracy)")
    for value in result:
        if isinstance(value, Variable):
            raise TypeError("returned a Variable: keep numbers (.item()), not Variables; a "
                            "Variable keeps its graph alive, and goes stale with its scope")
        if not isinstance(value, (float, int, np.floating, np.integer)):
            raise TypeError(f"returned a {type(value).__name__}, not a number")
    return float(result[0]), float(result[1])


def check_evaluate(evaluate) -> bool:
    """evaluate(model, X, y, graph, batch_size) -> (mean_loss, accuracy), memory kept flat."""
    _, _, X, y = digits_split()                       # 449 rows: the last batch is short
    perm = Arena("check-perm", 1 << 16)
    model = MLP([64, 32, 10], seed=3, arena=perm)
    want_loss, want_acc = _reference(model, X, y)
    perm_used, nodes_before = perm.used, live_nodes()
    high_waters = {}
    for rows, batch_size in [(64, 64), (len(y), 64), (len(y), 100)]:
        graph = Arena("check-graph", 1 << 16)
        case = f"evaluate on {rows} digits with batch_size={batch_size}"
        try:
            result, ops = _run(evaluate, model, X[:rows], y[:rows], graph, batch_size)
            loss, accuracy = _numbers(result)
        except StudentError as err:
            return failed(CHECK, case, err.description)
        except TypeError as err:
            return failed(CHECK, case, str(err), "return (total_loss / len(y), correct / len(y)) "
                                                 "as Python floats")
        ref_loss, ref_acc = (want_loss, want_acc) if rows == len(y) else _reference(
            model, X[:rows], y[:rows])
        if not np.isclose(loss, ref_loss, rtol=1e-5):
            return failed(CHECK, case, f"mean loss {loss:.6f}, expected {ref_loss:.6f}.",
                          "cross_entropy gives each batch's mean; weight it by the batch's "
                          "length (the last batch is shorter), then divide by len(y)")
        if not np.isclose(accuracy, ref_acc, rtol=1e-9):
            return failed(CHECK, case, f"accuracy {accuracy:.4f}, expected {ref_acc:.4f}.",
                          "count the rows where logits.numpy().argmax(axis=1) == yb, sum over "
                          "batches, divide by len(y)")
        if ops:
            return failed(CHECK, case, f"{ops} ops built graph nodes.",
                          "run the forward under `with minigrad.no_grad():`. Without it each "
                          "op records a node, saves its inputs (the parameters become read-only "
                          "while the graph lives) and puts a node record on the arena")
        if graph.high_water == 0:
            return failed(CHECK, case, "nothing was allocated on the graph arena.",
                          "run each batch inside `with graph.scope():`")
        if graph.used != 0:
            return failed(CHECK, case, f"{graph.used} bytes are still in use on the graph arena "
                                       f"after evaluate returned.",
                          "allocate only inside `with graph.scope():`, which pops on exit")
        if perm.used != perm_used:
            return failed(CHECK, case, "the parameters' arena grew.",
                          "batch data belongs on the graph arena, inside the scope")
        left = live_nodes() - nodes_before
        if left:
            return failed(CHECK, case, f"{left} graph nodes are still alive.",
                          "keep floats (.item()), not Variables")
        high_waters[(rows, batch_size)] = graph.high_water
    one, many = high_waters[(64, 64)], high_waters[(len(y), 64)]
    if one != many:
        return failed(CHECK, f"evaluate on 64 rows vs {len(y)} rows, batch_size=64",
                      f"graph arena high-water mark {one} bytes for one batch, {many} bytes for "
                      f"{-(-len(y) // 64)} batches.",
                      "memory should not grow with the number of batches: one scope per batch, "
                      "and batches of batch_size rows, never the whole dataset at once")
    return passed(CHECK, f"loss and accuracy match on 449 digits; no graph built, arena empty "
                         f"after, high-water {many} bytes for 1 batch or 8, no live nodes")
