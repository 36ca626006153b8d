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

Views (view, reshape, transpose, identity, broadcast_to) own no memory: they extend their base's range.
Parameters live for the whole run and are reported apart (param_bytes), not in the peak.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import MinigradError
from .derive import compute_required_saves
from .ir import Graph, Operation, saved_name_of, unsaved

ALIAS_OPS = {"view", "reshape", "transpose", "identity", "stop_gradient", "broadcast_to"}
CHEAP_OPS = {"relu", "tanh", "sigmoid", "silu", "gelu", "add", "bias_add", "subtract", "multiply",
             "neg", "exp", "swiglu",
             "rmsnorm", "fused_residual_rmsnorm", "rope"}   # (one pass over each row: as cheap)
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


def plan_memory(forward: Graph, backward: Graph, policy: str = "save_all", recompute=None) -> MemoryPlan:
    """Live ranges and peak bytes of forward + backward under a policy (see the module docstring)."""
    chosen: list = []
    if policy == "recompute":
        chosen = list(recompute) if recompute is not None else [
            t for t in backward.save if _producer(forward, t) is not None
            and _producer(forward, t).type in CHEAP_OPS]
        backward = recompute_saves(forward, backward, chosen)
    elif policy != "save_all":
        raise PlanError(f"plan_memory: unknown policy '{policy}'. Fix: 'save_all' or 'recompute'.")
    ops = list(forward.operations) + list(backward.operations)
    env = {**forward.shape_env, **backward.shape_env}
    base = {}   # alias -> the tensor whose memory it is
    for op in ops:
        if op.type in ALIAS_OPS:
            base[op.outputs[0]] = base.get(unsaved(op.inputs[0]), unsaved(op.inputs[0]))
    last = len(ops) - 1
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
                ranges[t] = LiveRange(t, _kind(t, forward, backward, step), info.nbytes if info else 0,
                                      step, step)
    for t in (*forward.outputs, *backward.outputs):
        t = base.get(t, t)
        if t in ranges:
            ranges[t].end = max(ranges[t].end, len(forward.operations) - 1 if t in forward.outputs
                                else last)
    for r in ranges.values():
        # Read in backward through an alias (backward saves a reshape of it): its memory is kept
        # for backward, not freed in forward.
        if r.kind == "activation" and r.end >= len(forward.operations):
            r.kind = "saved"
    live = [sum(r.nbytes for r in ranges.values() if r.start <= s <= r.end) for s in range(last + 1)]
    peak_step = max(range(len(live)), key=live.__getitem__) if live else 0
    saved = [r for r in ranges.values()
             if r.kind == "saved" or (r.kind == "input" and r.name in backward.save)]
    params = [*forward.params, *forward.constants]
    return MemoryPlan([op.id for op in ops], len(forward.operations), list(ranges.values()),
                      live[peak_step] if live else 0, peak_step, sum(r.nbytes for r in saved),
                      sum(env[p].nbytes for p in params if p in env), backward, policy, chosen)


def _kind(t: str, forward: Graph, backward: Graph, step: int) -> str:
    if step < len(forward.operations):
        return "saved" if t in backward.save else "activation"
    return "grad" if t in backward.outputs else "temp"


def _producer(forward: Graph, t: str):
    return forward.producer_of(t)


def recompute_saves(forward: Graph, backward: Graph, names) -> Graph:
    """A copy of backward that re-runs the producers of names instead of reading them saved.
    A producer with several outputs is re-run once, writing recomputed.<each output>."""
    ops = list(backward.operations)
    order = [t for op in forward.operations for t in op.outputs]
    producers: dict = {}   # producer id -> (producer, its chosen outputs), latest first
    for t in sorted(names, key=lambda n: -order.index(n) if n in order else 0):
        producer = _producer(forward, t)
        if producer is None or t not in backward.save:
            raise PlanError(f"recompute: '{t}' is not a saved tensor made by a forward op "
                            f"(saves: {backward.save}). Fix: choose among the saves an "
                            f"operation produced (inputs cannot be recomputed).")
        producers.setdefault(producer.id, (producer, []))[1].append(t)
    for producer, chosen in producers.values():
        stale = {saved_name_of(t): RECOMPUTED + t for t in chosen}
        readers = [i for i, op in enumerate(ops) if any(x in stale for x in op.inputs)]
        ops = [Operation(op.id, op.type, tuple(stale.get(x, x) for x in op.inputs),
                         op.outputs, op.attrs) for op in ops]
        inputs = tuple(x if x in forward.params or x in forward.constants else saved_name_of(x)
                       for x in producer.inputs)
        ops.insert(readers[0] if readers else 0,
                   Operation(f"recompute_{producer.id}", producer.type, inputs,
                             tuple(RECOMPUTED + o for o in producer.outputs), dict(producer.attrs)))
    rewritten = Graph(inputs=list(backward.inputs), params=list(backward.params), operations=ops,
                      outputs=list(backward.outputs), shape_env=dict(backward.shape_env),
                      constants=dict(backward.constants), name=backward.name + " (recompute)")
    for producer, _ in producers.values():
        for t in producer.outputs:
            rewritten.shape_env[RECOMPUTED + t] = forward.shape_env.get(t)
    rewritten.save = compute_required_saves(rewritten)
    return rewritten
