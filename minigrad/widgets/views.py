"""The widgets: GraphView, BackwardStepper, MemoryView. Python builds the trace and the DOT once;
the browser lays the graph out and replays the trace (play, step, scrub and hover run there)."""
from __future__ import annotations

import traitlets

from ..arena import Arena, Pool
from ..eager.engine import compact_groups
from ..modes import modes
from ..names import check_name
from ..trace import Recorder
from ..eager.variable import Variable
from ._base import TraceWidget
from .collapse import (FRAME, NODE_BUDGET as MAX_NODES, close_with_children, folding,
                       open_with_parents, scope_table, without_orphans)
from .dot import dot_style, to_dot


class Folding(TraceWidget):
    """What a graph view shares about scopes: which are open (`expanded`, synced: a click on a
    box or a frame in the page changes it), and the DOT and box table drawn from that.

    `scope_table` (sent once) lets the page draw any choice of open scopes itself, so a click
    redraws without waiting for the kernel; the kernel still follows `expanded` and keeps `dot`
    and `folding` equal to what the page draws (widgets/src/trace/open-scopes-dot.js writes the same text)."""

    expanded = traitlets.List(traitlets.Unicode()).tag(sync=True)
    folding = traitlets.Dict().tag(sync=True)
    scope_table = traitlets.Dict().tag(sync=True)

    def _fold(self, trace: dict, show_saved: bool, max_nodes: int, expand=()) -> dict:
        """The DOT and box table for the default opening (small graphs open fully, big ones
        down to the deepest scope level within max_nodes) plus the scopes in expand."""
        if isinstance(expand, str):
            expand = [expand]
        self._fold_trace, self._fold_saved, self._fold_budget = trace, show_saved, max_nodes
        fold = folding(trace, max_nodes, expand)
        self._fold_paths, self._fold_opened = fold["paths"], fold["opened"]
        self._drawn_for = None   # (the traits below hold the drawing of fold["opened"])
        table = scope_table(trace, fold["paths"])
        if table:
            table["style"] = dot_style(show_saved)
        return {"dot": to_dot(trace, show_saved=show_saved, fold=fold), "message": "",
                "traits": {"expanded": sorted(fold["opened"]), "folding": _folding_trait(fold),
                           "scope_table": table}}

    def expand(self, scope: str) -> None:
        """Draw the nodes of `scope` (e.g. "layer2", "blocks.3") instead of its box."""
        self.expanded = sorted(open_with_parents(self._fold_paths, set(self.expanded), scope))

    def collapse(self, scope: str) -> None:
        """Draw `scope` (and every scope inside it) as one box again."""
        self.expanded = sorted(close_with_children(self._fold_paths, set(self.expanded), scope))

    @traitlets.observe("expanded")
    def _refold(self, change) -> None:
        if not hasattr(self, "_fold_paths") or set(change["new"]) == self._fold_opened:
            return
        self._fold_opened = set(change["new"])
        # The page draws any choice of open scopes itself (scope_table), so `dot` and `folding`
        # are for Python readers only (save_html, a test): forget them here and make them when
        # read (the defaults below). A box click then costs the kernel nothing; rebuilding
        # them on every click took ~100 ms on a lesson's big graph.
        self._trait_values.pop("dot", None)
        self._trait_values.pop("folding", None)

    @traitlets.default("dot")
    def _dot_now(self) -> str:
        return self._drawing()["dot"]

    @traitlets.default("folding")
    def _folding_now(self) -> dict:
        return self._drawing()["folding"]

    def _drawing(self) -> dict:
        """The DOT and box table for the scopes open now, made once per choice of open scopes."""
        if self._drawn_for != self._fold_opened:
            opened = without_orphans(self._fold_paths, self._fold_opened)
            fold = folding(self._fold_trace, self._fold_budget, opened=opened,
                           paths=self._fold_paths)
            self._drawn = {"dot": to_dot(self._fold_trace, show_saved=self._fold_saved, fold=fold),
                           "folding": _folding_trait(fold)}
            self._drawn_for = set(self._fold_opened)
        return self._drawn


def _folding_trait(fold: dict) -> dict:
    frames = sorted({FRAME + s for s in fold["opened"]})
    return {"boxes": fold["boxes"], "frames": frames, "visible": fold["visible"]}


class GraphView(Folding):
    """The graph of a Variable: data, parameters, ops and outputs styled apart, parent edges
    solid, saved-tensor edges dashed; hover a node for its values and its parents vs saved
    tensors. Scopes (Module calls, name_scope) bigger graphs are drawn as boxes: click one to
    open it, click its frame to close it; `expand=["blocks.3"]` opens some from the start."""

    _bundle_name = "graph.js"

    def __init__(self, variable: Variable, *, show_saved: bool = True, show_values: bool = False,
                 title: str | None = None, max_nodes: int = MAX_NODES, expand=()) -> None:
        trace = Recorder(title).add_graph(variable).final_trace()
        super().__init__(trace, **self._fold(trace, show_saved, max_nodes, expand),
                         show_saved=show_saved, show_values=show_values, title=title or "")


class BackwardStepper(Folding):
    """Backward, one step at a time, on the real engine.

    The widget starts where forward ended. Each step (the Step button, or `stepper.step()` from
    Python) runs the engine for one more node, so `W.grad` in the next cell shows exactly what
    backward has written so far. Stepping back replays what was recorded; it does not undo the
    engine. `stepper.finish()` runs backward to the end.
    """

    _bundle_name = "stepper.js"
    frame = traitlets.Int(0).tag(sync=True)
    live = traitlets.Bool(True).tag(sync=True)
    # How many times the view has moved `frame`; its "advance" and "finish" requests carry it.
    # The page holds back state updates while the kernel is busy, so a move made before a
    # request can arrive after the kernel has answered it: such a stale move is undone.
    frame_seq = traitlets.Int(0).tag(sync=True)

    def __init__(self, loss: Variable, order: str = "pending", *, show_saved: bool = True,
                 show_values: bool = False, title: str | None = None,
                 max_nodes: int = MAX_NODES, expand=()) -> None:
        self._recorder = Recorder(title).add_graph(loss)
        # The engine's steps reach a record() block around a step through _advance only: made
        # inside one, compact_groups would hand them to it as well (twice, and even after the
        # block has ended).
        previous, modes.recorder = modes.recorder, None
        try:
            self._groups = compact_groups(loss, order=order)
        finally:
            modes.recorder = previous
        trace = self._recorder.trace
        self._sent_events, self._sent_frames = len(trace["events"]), len(trace["frames"])
        self._sent_blocks = len(trace["blocks"])
        super().__init__(trace, **self._fold(trace, show_saved, max_nodes, expand),
                         show_saved=show_saved, show_values=show_values, order=order,
                         title=title or "")
        self.frame = trace["initial_frame"]
        self._answered_seq = -1     # frame_seq of the last request the kernel answered
        self._published = None      # the frame the kernel last moved to after a request
        self.on_msg(self._on_message)

    @classmethod
    def from_trace(cls, trace: dict, *, show_saved: bool = True, max_nodes: int = MAX_NODES,
                   expand=()) -> "BackwardStepper":
        """A replay of a recorded trace (minigrad.record()); no engine behind it."""
        stepper = cls.__new__(cls)
        stepper._recorder, stepper._groups = None, iter(())
        TraceWidget.__init__(stepper, trace, **stepper._fold(trace, show_saved, max_nodes, expand),
                             show_saved=show_saved, title=trace.get("title") or "")
        stepper.frame, stepper.live = trace["initial_frame"], False
        stepper._answered_seq, stepper._published = -1, None
        return stepper

    def step(self, steps: int = 1) -> None:
        """Run the real engine for `steps` more steps (seed, one node, or the end)."""
        advanced = 0
        while advanced < steps and self._advance():
            advanced += 1
        if advanced:
            # One engine step can make several frames (a checkpoint's recompute records its
            # ops one step each): show the first, and the page steps through the rest.
            self._publish(self._sent_frames if steps == 1 else None)

    def finish(self) -> None:
        """Run backward to the end."""
        advanced = 0
        while self._advance():
            advanced += 1
        if advanced:
            self._publish()

    def _advance(self) -> bool:
        """Run one engine step (the seed, one node, or done); False when backward is over."""
        if not self.live:
            return False
        recorder = self._recorder
        previous, modes.recorder = modes.recorder, recorder   # record allocations too
        if previous is not None:   # stepped inside record(): that trace gets the steps too
            recorder.nest = (recorder,) + previous.nest
        try:
            group = next(self._groups, None)
            # A "ready" group (the ready queue ran dry and a node off the loss's path was
            # released) makes no frame of its own: its events belong to the next node's step,
            # so that step runs now too and every step shows something new.
            while group is not None and group[0][0] == "ready":
                recorder.on_steps(group)
                group = next(self._groups, None)
            if group is not None:
                recorder.on_steps(group)
        finally:
            modes.recorder, recorder.nest = previous, (recorder,)
        if group is None:
            self.live = False
            return False
        if group[-1][0] == "done":   # (compact groups hold plain tuples laid out like Step)
            self.live = False
        return True

    @property
    def current_trace(self) -> dict:
        """The whole trace recorded so far (the synced `trace` is refreshed only when needed)."""
        return self._recorder.trace if self._recorder is not None else self.trace

    def _publish(self, show: int | None = None) -> None:
        # Only what the steps added travels (and is built): the events, frames and blocks since
        # the last message. The full `trace` is re-sent when backward ends or a view that
        # missed some asks for it (see _on_message "hello").
        delta = self._recorder.since(self._sent_events, self._sent_frames, self._sent_blocks)
        self.send({"kind": "append", **delta})
        self._sent_events += len(delta["events"])
        self._sent_frames += len(delta["frames"])
        self._sent_blocks += len(delta["new_blocks"])
        with self.hold_sync():
            if not self.live:
                self.trace = self._recorder.trace
            last = self._sent_frames - 1
            self._published = self.frame = last if show is None else min(show, last)

    @traitlets.observe("frame_seq")
    def _stale_move(self, change) -> None:
        # (frame and frame_seq arrive in one update; observers run after both are set)
        if change["new"] <= self._answered_seq and self._published is not None \
                and self.frame != self._published:
            self.frame = self._published

    def _on_message(self, _widget, content, _buffers) -> None:
        if content.get("kind") in ("advance", "finish"):
            self._answered_seq = max(self._answered_seq, int(content.get("seq", -1)))
        if content.get("kind") == "advance":
            self.step(int(content.get("steps", 1)))
        elif content.get("kind") == "finish":
            self.finish()
        elif content.get("kind") == "hello" and self._recorder is not None:
            trace = self._recorder.trace
            if content.get("frames") != len(trace["frames"]):
                self.trace = trace


class MemoryView(TraceWidget):
    """An arena or pool as a strip of blocks by kind, with bytes over time when given a trace."""

    _bundle_name = "memory.js"

    def __init__(self, source, *, title: str | None = None) -> None:
        if isinstance(source, (Arena, Pool)):
            trace = _ledger_trace(source, title)
        elif isinstance(source, dict):
            trace = source
        else:
            raise TypeError(f"MemoryView: expected an Arena, a Pool or a trace dict "
                            f"(minigrad.record().trace), got {type(source).__name__}.")
        super().__init__(trace, title=title or trace.get("title") or "")

    @classmethod
    def compare(cls, runs: dict, *, title: str | None = None) -> "MemoryView":
        """Several recorded runs on one bytes-over-time axis, e.g. save vs recompute vs
        checkpoint: `MemoryView.compare({"keep": rec1.trace, "sqrt(n)": rec2.trace})`.

        Each run is a trace (minigrad.record().trace) or a Recorder; its line is the bytes its
        arenas and pools use after each recorded event, and its peak is the highest of them.
        """
        if not isinstance(runs, dict) or not 2 <= len(runs) <= _RUN_COLOURS:
            got = f"{len(runs)} runs" if isinstance(runs, dict) else type(runs).__name__
            raise TypeError(f"MemoryView.compare: expected a dict of 2 to {_RUN_COLOURS} "
                            f"runs, {{name: trace}}, got {got}. Record each run with "
                            f"`with minigrad.record() as rec:` and pass rec.trace.")
        # (a run's name may be any key, drawn as str(key); the text must still be drawable)
        series = [_bytes_over_time(check_name(str(name), "MemoryView.compare(runs)"), run)
                  for name, run in runs.items()]
        view = cls(Recorder(title).trace, title=title)
        view.options = {**view.options, "compare": series}
        return view


_RUN_COLOURS = 6   # (widgets/src/ui/memory-charts.js draws up to six distinct line colours)


def _bytes_over_time(name: str, run) -> dict:
    """A run's line: [event index, bytes used by all its arenas and pools] at each change."""
    trace = run.trace if isinstance(run, Recorder) else run
    if not isinstance(trace, dict) or "events" not in trace:
        raise TypeError(f"MemoryView.compare: run {name!r} is a {type(run).__name__}, not a "
                        f"trace. Pass minigrad.record().trace (or the Recorder itself).")
    used: dict = {}
    points = []
    for i, event in enumerate(trace["events"]):
        if event.get("arena") is not None and isinstance(event.get("used"), int):
            used[event["arena"]] = event["used"]
            points.append([i, sum(used.values())])
    peak = max((p[1] for p in points), default=0)
    # Where backward begins (the chart marks it), None for a run that never ran backward.
    backward_at = next((i for i, event in enumerate(trace["events"])
                        if event.get("phase") == "backward"), None)
    return {"name": name, "points": points, "events": len(trace["events"]), "peak": peak,
            "backward_at": backward_at}


def _ledger_trace(allocator, title) -> dict:
    recorder = Recorder(title or f"{allocator.name}: the ledger now")
    recorder._arena(allocator)   # meeting an allocator writes down what is on it
    return recorder.trace
