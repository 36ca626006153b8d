"""TapeView: a slot tape's table and instruction list, stepping backward one instruction at a time.

Python sends the tape's document once (minigrad/tape/document.py). A live step runs the real
tape's `backward_steps` generator for one more instruction and sends only that step's delta; the
browser folds the deltas, so back, first, the slider and play run there without the kernel.
"""
from __future__ import annotations

import anywidget
import traitlets

from ..tape.document import output_slot, seed_frame, step_frame, tape_document
from ._base import bundle


class TapeView(anywidget.AnyWidget):
    """The slot table (slot, kind, value, grad, requires_grad, remaining uses) beside the
    instruction list. `view.step()` (or the step button) runs the tape's backward for one more
    instruction, so `tape.grads` in the next cell is exactly what backward has written so far;
    stepping back replays what was recorded. `view.finish()` runs backward to the end."""

    trace = traitlets.Dict().tag(sync=True)
    options = traitlets.Dict().tag(sync=True)
    message = traitlets.Unicode("").tag(sync=True)
    frame = traitlets.Int(0).tag(sync=True)
    live = traitlets.Bool(True).tag(sync=True)
    # How many times the view moved `frame`; its requests carry it so that a move the page held
    # back until after the kernel answered is undone (as in BackwardStepper).
    frame_seq = traitlets.Int(0).tag(sync=True)
    dot = ""   # no graph to lay out (save_html reads it)

    def __init__(self, tape, out=None, *, retain: bool = False, title: str | None = None) -> None:
        out = output_slot(tape) if out is None else tape.index(out, "TapeView")
        self._tape, self._out, self._retain = tape, out, retain
        self._doc = tape_document(tape, out, title=title)
        self._remaining = list(self._doc["slots"]["uses"])
        self._steps = None   # the backward_steps generator, started by the first step
        # (the trait gets its own copy: traitlets syncs a new value only if it differs from the
        # old one, and self._doc grows in place)
        super().__init__(trace={**self._doc, "frames": []}, options={"title": title or ""},
                         _esm=bundle("tape.js").read_text(encoding="utf-8"))
        self._answered_seq = -1
        self._published = None
        self.on_msg(self._on_message)

    @classmethod
    def from_document(cls, doc: dict) -> "TapeView":
        """A replay of a saved document (`view.current_trace`); no tape behind it."""
        view = cls.__new__(cls)
        view._tape, view._steps, view._doc = None, None, doc
        anywidget.AnyWidget.__init__(view, trace=doc, options={"title": doc.get("title") or ""},
                                     _esm=bundle("tape.js").read_text(encoding="utf-8"))
        view.live, view._answered_seq, view._published = False, -1, None
        return view

    @property
    def current_trace(self) -> dict:
        """The whole document recorded so far (what save_html writes)."""
        return self._doc

    def step(self, steps: int = 1) -> None:
        """Run backward for `steps` more instructions (the first step also seeds the output)."""
        new, advanced = [], 0
        while advanced < steps and self._advance(new):
            advanced += 1
        self._publish(new)

    def finish(self) -> None:
        """Run backward to the end."""
        new = []
        while self._advance(new):
            pass
        self._publish(new)

    def _advance(self, new: list) -> bool:
        """Run one instruction's backward; append its frame (and the seed's, the first time)
        to `new`. False when backward is over."""
        if not self.live or self._tape is None:
            return False
        if self._steps is None:
            self._steps = self._tape.backward_steps(self._out, retain=self._retain)
            started = True
        else:
            started = False
        had_grad = [g is not None for g in self._tape.grads] if started else ()
        step = next(self._steps, None)   # (the first one seeds, then runs an instruction)
        if started:
            new.append(seed_frame(self._tape, self._out, had_grad))
        if step is None:
            self._end()
            return bool(started)
        new.append(step_frame(step, self._remaining))
        if step.position == 0:
            # The instruction at position 0 is the last one backward runs: let the generator
            # finish its own bookkeeping now, so that the tape is done when the view says so.
            if next(self._steps, None) is not None:
                raise RuntimeError("TapeView: backward_steps yielded a step after position 0; "
                                   "the tape must run its instructions in reverse order.")
            self._end()
        return True

    def _end(self) -> None:
        self.live = False
        self._doc["done"] = True

    def _publish(self, new: list) -> None:
        if not new:
            return
        self._doc["frames"].extend(new)
        # Only the new frames travel; a view drawn later says how many it has ("hello").
        self.send({"kind": "append", "frames": new, "done": self._doc["done"]})
        self._published = len(self._doc["frames"])
        with self.hold_sync():
            if self._doc["done"]:
                # The whole document once backward is over: a view drawn after the message
                # (Run All draws views late) starts from it, as BackwardStepper's does.
                self.trace = {**self._doc, "frames": list(self._doc["frames"])}
            self.frame = self._published

    @traitlets.observe("frame_seq")
    def _stale_move(self, change) -> None:
        if change["new"] <= self._answered_seq and self._published is not None \
                and self.frame != self._published:
            self.frame = self._published

    def _on_message(self, _widget, content, _buffers) -> None:
        kind = content.get("kind")
        if kind == "hello" and content.get("frames") != len(self._doc["frames"]):
            # (a new dict, so that traitlets sees a change and syncs it)
            self.trace = {**self._doc, "frames": list(self._doc["frames"])}
        if kind not in ("advance", "finish"):
            return
        self._answered_seq = max(self._answered_seq, int(content.get("seq", -1)))
        try:
            if kind == "advance":
                self.step(int(content.get("steps", 1)))
            else:
                self.finish()
        except Exception as error:   # (a tape's misuse error): shown in the view, then raised
            self.send({"kind": "error", "text": f"{type(error).__name__}: {error}"})
            raise
