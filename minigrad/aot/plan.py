"""Memory plans: when each tensor of forward + backward is alive, and what the peak costs.

Steps are the operations of forward then backward, numbered 0, 1, ...; a tensor lives from the
step that writes it to the last step that reads it. A forward tensor that backward reads through
saved.x lives until that backward read: that is the price of a save, and why the save list
matters. Two policies:

  save_all    keep every tensor the rules ask for (the backward graph as derived);
  recompute   for chosen saves x (default: those a cheap op made: elementwise, or one pass over
              each row like the norms and rope), backward re-runs x's
              producer just before its first use ("recomputed.x") so forward need not keep x;
              the producer's own inputs are saved instead (cheap ops, smaller or shared saves).

Views (the rows marked alias: reshape, transpose, identity, broadcast_to, ...) own no memory: they extend their base's range.
Parameters live for the whole run and are reported apart (param_bytes), not in the peak.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .. import optable
from ..errors import MinigradError
from ..gcpause import gc_paused
from .derive import compute_required_saves
from .ir import Graph, Operation, saved_name_of, unsaved

RECOMPUTED = "recomputed."


class PlanError(MinigradError, ValueError):
    """A recompute request the graphs cannot honour (named tensor, reason, fix)."""


@dataclass
class LiveRange:
    name: str
    kind: str          # input | param | activation | saved | grad | temp
    nbytes: int
    start: int         # first step it is alive (inclusive)
    end: int           # last step it is alive (inclusive)


@dataclass
class MemoryPlan:
    steps: list                  # op ids, forward then backward
    n_forward: int
    ranges: list                 # LiveRange per tensor that owns memory
    peak_bytes: int
    peak_step: int
    saved_bytes: int
    param_bytes: int
    backward: Graph              # the backward graph this plan runs (rewritten by recompute)
    policy: str = "save_all"
    recomputed: list = field(default_factory=list)

    def table(self, width: int = 32) -> str:
        """One row per tensor: kind, bytes, steps and a bar of its life over the run."""
        n = max(len(self.steps), 1)
        cell = lambda s: min(s * width // n, width - 1)   # noqa: E731 - step -> bar column
        name_w = max([len(r.name) for r in self.ranges] + [6])
        rows = [f"{'tensor':<{name_w}}  {'kind':<10} {'bytes':>9}  {'steps':>9}  "
                f"{'forward':<{cell(self.n_forward)}}|backward"]
        for r in sorted(self.ranges, key=lambda r: (r.start, r.name)):
            bar = "".join("#" if cell(r.start) <= c <= cell(r.end) else "." for c in range(width))
            rows.append(f"{r.name:<{name_w}}  {r.kind:<10} {r.nbytes:>9}  "
                        f"{f'{r.start}-{r.end}':>9}  {bar}")
        rows.append(f"policy {self.policy}: peak {self.peak_bytes} bytes at step {self.peak_step} "
                    f"({self.steps[self.peak_step] if self.steps else '-'}), saved "
                    f"{self.saved_bytes} bytes, params {self.param_bytes} bytes"
                    + (f", recomputed {', '.join(self.recomputed)}" if self.recomputed else ""))
        return "\n".join(rows)

    __str__ = table


@gc_paused()   # (a build of records and no cycle: see gcpause.py)
def plan_memory(forward: Graph, backward: Graph, policy: str = "save_all", recompute=None) -> MemoryPlan:
    """Live ranges and peak bytes of forward + backward under a policy (see the module docstring)."""
    chosen: list = []
    if policy == "recompute":
        producer, cheap = _producers(forward), optable.cheap()   # (cheap: a property of each op's row)
        chosen = list(recompute) if recompute is not None else [
            t for t in backward.save if t in producer and producer[t].type in cheap]
        backward = recompute_saves(forward, backward, chosen)
    elif policy != "save_all":
        raise PlanError(f"plan_memory: unknown policy '{policy}'. Fix: 'save_all' or 'recompute'.")
    ops = list(forward.operations) + list(backward.operations)
    env = {**forward.shape_env, **backward.shape_env}
    base, aliases = {}, optable.aliases()   # alias -> the tensor whose memory it is
    for op in ops:
        if op.type in aliases:
            base[op.outputs[0]] = base.get(unsaved(op.inputs[0]), unsaved(op.inputs[0]))
    last = len(ops) - 1
    save, grads = set(backward.save), set(backward.outputs)
    ranges: dict = {}
    for name in forward.inputs:
        ranges[name] = LiveRange(name, "input", env[name].nbytes, 0, 0)
    for step, op in enumerate(ops):
        for t in op.inputs:
            t = base.get(unsaved(t), unsaved(t))
            if t in ranges:
                ranges[t].end = max(ranges[t].end, step)
        for t in op.outputs:
            if t not in base:
                info = env.get(t)
                ranges[t] = LiveRange(t, _kind(t, step < len(forward.operations), save, grads),
                                      info.nbytes if info else 0, step, step)
    for outputs, end in ((forward.outputs, len(forward.operations) - 1), (backward.outputs, last)):
        for t in outputs:
            t = base.get(t, t)
            if t in ranges:
                ranges[t].end = max(ranges[t].end, end)
    for r in ranges.values():
        # Read in backward through an alias (backward saves a reshape of it): its memory is kept
        # for backward, not freed in forward.
        if r.kind == "activation" and r.end >= len(forward.operations):
            r.kind = "saved"
    live = _bytes_alive_per_step(ranges.values(), last + 1)
    peak_step = max(range(len(live)), key=live.__getitem__) if live else 0
    saved = [r for r in ranges.values() if r.kind == "saved" or (r.kind == "input" and r.name in save)]
    params = [*forward.params, *forward.constants]
    return MemoryPlan([op.id for op in ops], len(forward.operations), list(ranges.values()),
                      live[peak_step] if live else 0, peak_step, sum(r.nbytes for r in saved),
                      sum(env[p].nbytes for p in params if p in env), backward, policy, chosen)


def _kind(t: str, in_forward: bool, save: set, grads: set) -> str:
    if in_forward:
        return "saved" if t in save else "activation"
    return "grad" if t in grads else "temp"


def _bytes_alive_per_step(ranges, n_steps: int) -> list:
    """Bytes alive at each step. The plain sum over every range at every step costs steps x
    tensors; adding a range's bytes where it starts and taking them off after it ends, then
    summing along the steps, gives the same numbers in one pass over each."""
    change = [0] * (n_steps + 2)
    for r in ranges:
        change[r.start] += r.nbytes
        change[r.end + 1] -= r.nbytes
    live, total = [], 0
    for step in range(n_steps):
        total += change[step]
        live.append(total)
    return live


def _producers(forward: Graph) -> dict:
    """tensor -> the forward operation that writes it (inputs, params and constants have none)."""
    return {t: op for op in forward.operations for t in op.outputs}


def recompute_saves(forward: Graph, backward: Graph, names) -> Graph:
    """A copy of backward that re-runs the producers of names instead of reading them saved.
    A producer with several outputs is re-run once, writing recomputed.<each output>.

    Each re-run goes just before the first operation that reads one of its outputs: a backward
    operation, or a re-run placed before it (producers are placed latest first, so a re-run whose
    input is itself recomputed is placed before the re-run that needs it)."""
    producer_of, params, save = _producers(forward), {*forward.params, *forward.constants}, set(backward.save)
    order: dict = {}
    for t in (t for op in forward.operations for t in op.outputs):
        order.setdefault(t, len(order))
    producers: dict = {}   # producer id -> (producer, its chosen outputs), latest first
    for t in sorted(names, key=lambda n: -order[n] if n in order else 0):
        producer = producer_of.get(t)
        if producer is None or t not in save:
            raise PlanError(f"recompute: '{t}' is not a saved tensor made by a forward op "
                            f"(saves: {backward.save}). Fix: choose among the saves an "
                            f"operation produced (inputs cannot be recomputed).")
        producers.setdefault(producer.id, (producer, []))[1].append(t)
    ops = list(backward.operations)
    first_reader: dict = {}    # saved name -> index of the first backward operation reading it
    for i, op in enumerate(ops):
        for x in op.inputs:
            first_reader.setdefault(x, i)
    before: dict = {}          # backward op index -> the re-runs placed just before it, in order
    rerun_readers: dict = {}   # saved name -> [(backward op index, re-run)] of re-runs reading it
    for producer, chosen in producers.values():
        inputs = tuple(x if x in params else saved_name_of(x) for x in producer.inputs)
        rerun = Operation(f"recompute_{producer.id}", producer.type, inputs,
                          tuple(RECOMPUTED + o for o in producer.outputs), dict(producer.attrs))
        group, at = _first_read([saved_name_of(t) for t in chosen], first_reader, rerun_readers, before)
        before.setdefault(group, []).insert(at, rerun)
        for x in inputs:
            rerun_readers.setdefault(x, []).append((group, rerun))
    stale = {saved_name_of(t): RECOMPUTED + t for _, chosen in producers.values() for t in chosen}
    ordered = []
    for i in range(len(ops) + 1):
        ordered += before.get(i, []) + ops[i:i + 1]
    ordered = [Operation(op.id, op.type, tuple(stale.get(x, x) for x in op.inputs), op.outputs, op.attrs)
               for op in ordered]
    rewritten = Graph(inputs=list(backward.inputs), params=list(backward.params), operations=ordered,
                      outputs=list(backward.outputs), shape_env=dict(backward.shape_env),
                      constants=dict(backward.constants), name=backward.name + " (recompute)")
    for producer, _ in producers.values():
        for t in producer.outputs:
            rewritten.shape_env[RECOMPUTED + t] = forward.shape_env.get(t)
    rewritten.save = compute_required_saves(rewritten)
    return rewritten


def _first_read(reads: list, first_reader: dict, rerun_readers: dict, before: dict) -> tuple:
    """Where a re-run goes: (backward op index, place among the re-runs before it), just before
    the earliest reader of reads (the front, when nothing reads them)."""
    op = min((first_reader[x] for x in reads if x in first_reader), default=None)
    reruns = [(group, next(k for k, r in enumerate(before[group]) if r is rerun))
              for x in reads for group, rerun in rerun_readers.get(x, ())]
    earliest = min(reruns, default=None)
    if earliest is not None and (op is None or earliest[0] <= op):
        return earliest
    return (op, len(before.get(op, []))) if op is not None else (0, 0)
