"""BackwardEvents: backward's steps, noted cheaply as they run and made into events when read."""
from __future__ import annotations

import re

from ..eager.steps import Step, expand, preview
from .events import EventLog, values
from .forward import ForwardEvents
from .tables import GraphTables, sentence_name


class BackwardEvents:
    """The "start", "apply", "accumulate", "pending", "ready", "done" and "consume" events (and
    the frame break of a checkpoint's "recompute")."""

    def __init__(self, tables: GraphTables, forward: ForwardEvents, log: EventLog):
        self.tables, self.forward, self.log = tables, forward, log
        self._slot_seen: dict = {}
        self._last_total: dict = {}          # variable id -> preview of its gradient so far
        self._ready_opened = False           # a "ready" group opened the next apply's step

    def on_steps(self, group: list) -> None:
        """Note one engine step (a list of Steps: the seed, one node's apply with all it caused,
        or done; compact or expanded, see steps.expand). Kept raw, with a copy of the values
        that may change later, and turned into event dicts only when the trace is read:
        recording backward stays cheap."""
        log = self.log
        kind = group[0][0]   # compact groups hold plain tuples laid out like Step
        if kind == "apply":
            if not self._ready_opened:   # (a "ready" just before opened this node's step)
                log.close_frame()
            self._ready_opened = False
            held, log.held = log.held, []
            # A leaf's gradient grows in place, so its total is copied (a preview) now. A node's
            # grad_output is never written again once made (a later sum makes a new array), so
            # it is kept as is and previewed later: before the memory under it can be reused
            # (an arena pop, a pool free, the end of record()) or when the trace is read.
            # (The apply event's grad_output is the last total written into its output.)
            totals, count = [], len(group) + len(held)
            if group[0][1].arena is not None:   # its grads may live on an arena or a pool
                log.lazy_on_allocator = True
            for step in group:   # (kind, node, variable, grad, pending_count, first, total)
                if step[0] == "accumulate":
                    if step[4] is None:              # into a leaf (or already expanded)
                        totals.append(preview(step[6]))
                    else:                            # compact: pending (and ready) follow
                        totals.append(step[6])
                        count += 2 if step[4] == 0 else 1
            log.events.append(("group", log.phase, group, None, held, totals))
            log.count += count
        elif kind == "start":
            loss = group[0].variable
            forward = self.forward
            if loss.grad_fn is not None and (forward.incomplete
                                             or self.tables.ids.known(loss.grad_fn) is None):
                forward.add_graph(loss)   # (some of) its forward ran before recording: read it now
                forward.incomplete = False
            log.close_frame()
            log.phase = "backward"
            self.tables.variable(group[0].variable)
            log.events.append(("group", log.phase, group[:1], preview(group[0].grad), [], []))
            log.count += 1
            log.close_frame()
            if len(group) > 1:   # a leaf loss: backward is done at once
                self.on_steps(group[1:])
        elif kind == "recompute":   # a checkpoint's segment was recorded again (one frame)
            log.close_frame()
            self._ready_opened = False   # (its ops' steps come between a "ready" and the apply)
        elif kind == "ready":    # a node freed from consumers that are not on the loss's path
            # It opens the step of the node it lets run (the engine lets it go after the step
            # before has ended, and runs it next), as the stepper's page shows it live.
            log.close_frame()
            self._ready_opened = True
            log.events.append(("group", log.phase, group, None, [], []))
            log.count += len(group)
        elif kind == "done":
            log.close_frame()
            log.release_held()
            log.event("done", text="backward done: every node ran once; only leaf gradients "
                                   "are kept.")
            log.phase = "release"
            log.event("consume", text="the graph is consumed: saved tensors are freed, a "
                                      "second backward needs a new forward.")
            log.close_frame()

    def expand(self, entry) -> list:
        """The event dicts of one raw group entry (see on_steps)."""
        known = self.tables.ids.known
        _, phase, group, first_values, held, totals = entry
        group = expand(group)
        if group[0].kind == "apply":
            output = self.tables.nodes[known(group[0].node)]["output"]
            first_values = self._last_total.get(output)
        for step, total in zip([s for s in group if s.kind == "accumulate"], totals):
            self._last_total[known(step.variable)] = total
        totals = iter(totals)
        events = [self._step_event(phase, group[0], first_values)]
        events += [{"phase": phase, **event} for event in held]
        events += [self._step_event(phase, step, next(totals) if step.kind == "accumulate"
                                    else None) for step in group[1:]]
        return events

    def _step_event(self, phase: str, step: Step, values_now) -> dict:
        """The event dict of a raw engine step."""
        kind, node = step.kind, self.tables.ids.known(step.node)
        if kind == "start":
            self._last_total[self.tables.ids.known(step.variable)] = values_now
            return {"type": "start", "phase": phase, "node": node,
                    "variable": self.tables.ids.known(step.variable), "grad": values(values_now),
                    "text": _start_text(step.variable)}
        if kind == "apply":
            return {"type": "apply", "phase": phase, "node": node, "grad": values(values_now),
                    "text": self._apply_text(step.node)}
        if kind == "accumulate":
            var = self.tables.variable(step.variable)
            how = "first write" if step.first_write else "added to the gradient already there"
            return {"type": "accumulate", "phase": phase, "node": node, "variable": var,
                    "slot": self._slot(node, var), "first_write": bool(step.first_write),
                    "grad": values(values_now),
                    "text": f"accumulate_grad into {sentence_name(step.variable)}: {how}."}
        if kind == "pending":
            return {"type": "pending", "phase": phase, "node": node,
                    "count": int(step.pending_count),
                    "text": f"{step.node.name}: pending count drops to {step.pending_count}."}
        return {"type": "ready", "phase": phase, "node": node,
                "text": f"{step.node.name} is ready: every consumer has sent its gradient."}

    def _slot(self, op_id: str, var_id: str) -> int:
        """Which input slot an accumulate fed: the k-th time this op feeds var, slot of its k-th
        occurrence among the op's inputs (x + x feeds x twice)."""
        seen = self._slot_seen.get((op_id, var_id), 0)
        self._slot_seen[(op_id, var_id)] = seen + 1
        slots = [i for i, v in enumerate(self.tables.nodes[op_id]["inputs"]) if v == var_id]
        return slots[min(seen, len(slots) - 1)] if slots else 0

    def _apply_text(self, node) -> str:
        """e.g. "mul.backward: grad for w = grad_output * b (a = w, b = x)"."""
        nodes, op_id = self.tables.nodes, self.tables.ids.known(node)
        parts, formulas = [], []
        inputs = nodes[op_id]["inputs"] if op_id in nodes else []
        labels = [nodes[v]["label"] for v in inputs]
        for i, text in enumerate(node.grad_text):
            if i < len(inputs) and nodes[inputs[i]]["role"] != "data":
                parts.append(f"grad for {labels[i]} = {text}")
                formulas.append(text)
        said = " ".join(formulas)
        # The formulas use the op's own names for its inputs; say which variable each one is.
        names = [f"{name} = {label}" for name, label in zip(node.input_names, labels)
                 if re.search(rf"\b{re.escape(name)}\b", said)]
        where = f" ({', '.join(names)})" if names else ""
        return f"{node.name}.backward: " + ("; ".join(parts) or "gradients for its inputs") + \
            where + "."


def _start_text(variable) -> str:
    """The seed's sentence. A checkpoint's recompute seeds its own small backward: that seed is
    not the loss's, it hands on the gradient that reached the checkpoint."""
    if getattr(variable.grad_fn, "name", None) == "recompute_seed":
        return ("the segment's backward starts: recompute_seed = sum(y * g) gets 1, so the "
                "gradient g that reached the checkpoint flows into the segment's output y "
                "(backward of the loss goes on after it).")
    return f"backward starts: d loss / d loss = 1 is seeded into {sentence_name(variable)}."
