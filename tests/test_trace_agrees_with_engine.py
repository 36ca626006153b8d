"""What the step-through views say equals what the engine did, at every step.

Random small graphs (shared subexpressions, x * x, unused branches, broadcasting, leaves with
and without requires_grad) are stepped through backward, on the heap, inside an Arena scope and
on a Pool, with both schedulers. Two documents are checked: a trace recorded while forward and
backward ran (minigrad.record()), and a BackwardStepper built after forward. Each document is
folded event by event the way the page folds it (widgets/src/trace/replay.js: pending counts,
which ops ran, the ready queue, each variable's gradient so far, which blocks are alive), and at
every frame the fold is compared with the engine itself, read off its objects at that very step
(a wrapper around the engine's generator reads them as each step is handed out, before any
recorder sees the step; under a plain backward(), as the recorder is told of the step, without
the ready queue, which only the generator holds). Forward frames are compared with the
pending counts the nodes had as each op was made. The slot tapes' TapeView is checked the same
way against the tape it steps.
"""
from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import minigrad as mg
from minigrad.eager.engine import compact_groups, topo_order
from minigrad.eager.steps import PREVIEW
from minigrad.tape import Tape, TensorTape
from minigrad.widgets import TapeView
from minigrad.widgets.views import BackwardStepper
from test_graph_properties import LEAF_BOUND, MAX_BOUND, OPS, TAPE_OPS
from test_tapeview import fold as tape_fold   # (the fold of widgets/src/trace/tape-replay.js)

SHAPES = [(3,), (2, 3), (1, 3)]   # any two broadcast together


@st.composite
def graphs(draw):
    """(leaf arrays, requires_grad flags, steps (op name, input indices), outputs summed)."""
    n_leaves = draw(st.integers(1, 3))
    elements = st.floats(-LEAF_BOUND, LEAF_BOUND, allow_nan=False, allow_subnormal=False)
    leaves = tuple(draw(arrays(np.float64, draw(st.sampled_from(SHAPES)), elements=elements))
                   for _ in range(n_leaves))
    flags = (True,) + tuple(draw(st.booleans()) for _ in range(n_leaves - 1))
    bounds, steps = [LEAF_BOUND] * n_leaves, []
    for _ in range(draw(st.integers(1, 7))):
        n = len(bounds)
        a, b = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        if draw(st.booleans()):
            b = a   # x * x, x + x: one variable twice in one op
        allowed = [name for name, (arity, _, bound) in OPS.items()
                   if (bound(bounds[a]) if arity == 1 else bound(bounds[a], bounds[b]))
                   <= MAX_BOUND]
        name = draw(st.sampled_from(allowed))
        inputs = (a,) if OPS[name][0] == 1 else (a, b)
        steps.append((name, inputs))
        bounds.append(OPS[name][2](*(bounds[i] for i in inputs)))
    outputs = draw(st.lists(st.integers(0, len(bounds) - 1), min_size=1, max_size=3))
    return leaves, flags, tuple(steps), tuple(outputs)


PLACES = {
    "heap": lambda: None,
    "arena": lambda: mg.Arena("graph", 1 << 18),
    "pool": lambda: mg.Pool("pool"),
}


def build(graph, leaves=None):
    """The graph's leaves, every op made (dead branches too, in creation order), and its
    variables (leaves, each step's output, the loss last)."""
    leaf_arrays, flags, steps, outputs = graph
    if leaves is None:
        leaves = [mg.create_leaf(a.copy(), requires_grad=g) for a, g in zip(leaf_arrays, flags)]
    nodes = list(leaves)
    for name, inputs in steps:
        nodes.append(OPS[name][1](*(nodes[i] for i in inputs)))
    total = nodes[outputs[0]]
    for i in outputs[1:]:
        total = total + nodes[i]
    loss = total.sum()
    nodes.append(loss)
    ops = set()
    for v in nodes:
        if v.grad_fn is not None:
            ops.update(topo_order(v.grad_fn))
    return leaves, sorted(ops, key=lambda n: n.seq), nodes


# -- the engine's side: its objects, read as each step is handed out ---------------------------
def scheduler_of(groups):
    """The scheduler generator (run_pending / run_topo) under compact_groups' wrappers."""
    while groups is not None and "groups" in groups.gi_frame.f_locals:
        groups = groups.gi_frame.f_locals["groups"]
    return groups


class Engine:
    """Reads the engine's state: pending counts, which nodes ran, the ready queue, gradients,
    live blocks. Variables are read through the objects found before backward (release() drops
    a node's inputs)."""

    def __init__(self, leaves, ops, nodes, allocator, order):
        self.leaves, self.ops, self.allocator, self.order = leaves, ops, allocator, order
        self.loss = nodes[-1]
        self.outputs = {}   # node -> its output Variable
        for v in nodes + [v for node in ops for v in node.inputs]:
            if v.grad_fn is not None:
                self.outputs[v.grad_fn] = v
        self.inputs = {node: list(node.inputs) for node in ops}
        self.saved = {node: list(node.saved_tensors) for node in ops}
        self.scheduler = None
        # leaves holding a gradient from an earlier backward: the document tells it only from
        # the first accumulate into it on (it has no field for a gradient from before)
        self.had_grad = {v for v in leaves if v._grad is not None}
        self.forward_end = {**self.state(), "sent": []}   # the document's initial_frame

    def gradient(self, v):
        if v.grad_fn is None:
            return v._grad
        return None if v.grad_fn.released else v.grad_fn.grad_output

    def variables(self):
        return list(self.leaves) + [self.outputs[n] for n in self.ops]

    def state(self) -> dict:
        ready, root = None, self.loss.grad_fn   # (None: the queue cannot be read here)
        frame = self.scheduler.gi_frame if self.scheduler is not None else None
        if frame is not None:
            # At the seed the pending scheduler has not made its queue yet: its next line is
            # `ready = [root]`. Topo keeps no queue: the root is simply the first to run.
            queue = frame.f_locals.get("ready", [root])
            ready = {n for n in queue if not n.released}
            if self.order == "topo" and not root.released:
                ready.add(root)
        grads = {}
        for v in self.variables():
            g = self.gradient(v)
            if g is not None:
                grads[v] = np.array(g, dtype=float)
        alive, used = set(), None
        if self.allocator is not None:
            alive = {b for b in self.allocator.blocks if b.alive}
            used = (int(self.allocator.used), int(self.allocator.high_water))
        return {"pending": {n: int(n.pending_count) for n in self.ops},
                "applied": {n for n in self.ops if n.released}, "ready": ready,
                "grads": grads, "alive": alive, "used": used}

    def watch(self, groups, snapshots: list):
        """groups, each followed by the engine's state right after it (read before any
        recorder is told about the step)."""
        outer = groups
        for group in groups:
            self.scheduler = scheduler_of(outer)   # (its locals exist once it has started)
            snapshots.append(self.snapshot(group))
            yield group

    def snapshot(self, group) -> tuple:
        state = self.state()
        # each gradient the step sent, in order: (variable, grad as the op returned it)
        state["sent"] = [(s[2], np.array(s[3], dtype=float)) for s in group
                         if s[0] == "accumulate"]
        return group[0][0], state


# -- the document's side: folded the way the page folds it -------------------------------------
def fold(doc, last_event: int) -> dict:
    """widgets/src/trace/replay.js applyEvent, for the fields compared here."""
    pending, applied, ready, grads, blocks, used = {}, set(), [], {}, {}, None
    writes = {}
    for ev in doc["events"][:last_event + 1]:
        kind = ev["type"]
        if kind == "op":
            pending.setdefault(ev["node"], 0)
            for p in ev["pending"]:
                pending[p["node"]] = p["count"]
        elif kind == "start":
            grads[ev["variable"]] = ev["grad"]
            if ev["node"] and ev["node"] not in applied and ev["node"] not in ready:
                ready.append(ev["node"])
        elif kind == "apply":
            applied.add(ev["node"])
            if ev["node"] in ready:
                ready.remove(ev["node"])
        elif kind == "accumulate":
            grads[ev["variable"]] = ev["grad"]
            writes[ev["variable"]] = writes.get(ev["variable"], 0) + 1
        elif kind == "pending":
            pending[ev["node"]] = ev["count"]
        elif kind == "ready":
            if ev["node"] not in applied and ev["node"] not in ready:
                ready.append(ev["node"])
        if kind in ("alloc", "free", "pop"):
            used = (ev["used"], ev["high_water"])
        if kind == "alloc":
            blocks[ev["block"]] = "alive"
        elif kind == "free":
            blocks[ev["block"]] = "freed"
        elif kind == "pop":
            for b in ev["blocks"]:
                blocks[b] = "popped"
    return {"pending": pending, "applied": applied, "ready": set(ready), "grads": grads,
            "alive": {b for b, s in blocks.items() if s == "alive"}, "used": used}


def frame_events(doc, k: int) -> list:
    start = doc["frames"][k - 1] + 1 if k > 0 else 0
    return doc["events"][start:doc["frames"][k] + 1]


def backward_frames(doc) -> list:
    """The frames of backward's steps: the seed's, each apply's, done's."""
    return [k for k in range(len(doc["frames"]))
            if any(e["type"] in ("start", "apply", "done") for e in frame_events(doc, k))]


def engine_steps(snapshots: list) -> list:
    """One state per step a view shows. A "ready" group (the queue ran dry and a node off the
    loss's path was let go) is no step of its own: it belongs to the next node's step, which
    runs that node (the stepper runs both at once). Before it, the engine had not let it go."""
    return [state for kind, state in snapshots if kind != "ready"]


def close(got, want) -> bool:
    """The document's first values against the engine's array."""
    want = np.asarray(want, dtype=float).ravel()[:PREVIEW]
    got = np.array([np.nan if x is None else x for x in got], dtype=float)
    return got.shape == want.shape and np.allclose(got, want, rtol=1e-9, atol=1e-12,
                                                   equal_nan=True)


def compare(doc, known, engine, before, after, k, where) -> list:
    """Disagreements between the document folded to frame k and the engine after that step."""
    state, problems = fold(doc, doc["frames"][k]), []
    say = problems.append
    ids = {n: known(n) for n in engine.ops if known(n) is not None}
    for node, op_id in ids.items():
        shown = state["pending"].get(op_id, doc_node(doc, op_id)["pending_count"])
        if shown != after["pending"][node]:
            say(f"{where}: {node.name} {op_id} pending {shown}, engine {after['pending'][node]}")
        if (op_id in state["applied"]) != (node in after["applied"]):
            say(f"{where}: {node.name} {op_id} applied={op_id in state['applied']}, engine "
                f"released={node in after['applied']}")
        if after["ready"] is not None and (op_id in state["ready"]) != (node in after["ready"]):
            say(f"{where}: {node.name} {op_id} ready={op_id in state['ready']}, engine "
                f"ready={node in after['ready']}")
    for v in engine.variables():
        var_id, want = known(v), after["grads"].get(v)
        if var_id is None:
            continue
        if want is None:
            if v.grad_fn is None and var_id in state["grads"]:
                say(f"{where}: leaf {var_id} shows a gradient the engine has not written")
        elif var_id not in state["grads"]:
            if v in engine.had_grad:
                continue
            say(f"{where}: {var_id} has gradient {want} in the engine, none in the view")
        elif not close(state["grads"][var_id], want):
            say(f"{where}: {var_id} gradient {state['grads'][var_id]}, engine {want}")
    if engine.allocator is not None:
        blocks = {known(b) for b in after["alive"]} - {None}
        told = state["alive"]
        if told != blocks:
            say(f"{where}: alive blocks {sorted(told)}, engine {sorted(blocks)}")
        if state["used"] != after["used"]:
            say(f"{where}: the strip says (used, high water) {state['used']}, the allocator "
                f"{after['used']}")
    # this step's events: first write vs sum, and what apply says it received
    # (x * x sends x two gradients in one step: the first event tells the first sum)
    sums = {v: g for v, g in before["grads"].items()} if before is not None else {}
    sent = iter(after["sent"])
    for ev in frame_events(doc, k):
        if ev["type"] == "accumulate":
            variable, grad = next(sent)
            if known(variable) != ev["variable"]:
                say(f"{where}: accumulate into {ev['variable']}, engine into {known(variable)}")
                continue
            first = variable not in sums
            sums[variable] = reduced(grad, variable._data.shape) + sums.get(variable, 0.0)
            if ev["first_write"] != first:
                say(f"{where}: accumulate into {ev['variable']} first_write={ev['first_write']},"
                    f" engine {'had no' if first else 'had a'} gradient there")
            if not close(ev["grad"], sums[variable]):
                say(f"{where}: accumulate into {ev['variable']} tells {ev['grad']}, the sum "
                    f"so far is {sums[variable]}")
        elif ev["type"] == "apply" and before is not None:
            node = next(n for n, i in ids.items() if i == ev["node"])
            want = before["grads"].get(engine.outputs[node])
            if want is None or not close(ev["grad"], want):
                say(f"{where}: apply {ev['node']} grad {ev['grad']}, engine grad_output {want}")
    return problems


def reduced(grad, shape):
    """A broadcast gradient summed back to the variable's shape (lesson 05), written out."""
    while grad.ndim > len(shape):
        grad = grad.sum(axis=0)
    for axis, n in enumerate(shape):
        if n == 1 and grad.shape[axis] != 1:
            grad = grad.sum(axis=axis, keepdims=True)
    return grad


def doc_node(doc, node_id) -> dict:
    return next(n for n in doc["nodes"] if n["id"] == node_id)


def compare_backward(doc, known, engine, snapshots, label) -> list:
    steps = engine_steps(snapshots)
    frames = backward_frames(doc)
    if len(frames) != len(steps):
        return [f"{label}: {len(frames)} backward frames, engine made {len(steps)} steps"]
    problems = compare(doc, known, engine, None, engine.forward_end, doc["initial_frame"],
                       f"{label} where forward ended")
    for i, (k, after) in enumerate(zip(frames, steps)):
        before = steps[i - 1] if i else engine.forward_end
        problems += compare(doc, known, engine, before, after, k, f"{label} step {i}")
    return problems


# -- forward: pending counts as each op was made; what each op saved ---------------------------
def compare_saved(doc, known, engine, label) -> list:
    problems = []
    for node in engine.ops:
        op_id = known(node)
        if op_id is None:
            continue
        entries, saved = doc_node(doc, op_id)["saved"], engine.saved[node]
        if len(entries) != len(saved):
            problems.append(f"{label}: {op_id} saves {len(entries)} arrays, engine {len(saved)}")
            continue
        for entry, array in zip(entries, saved):
            sources = {known(v) for v in engine.inputs[node] if v._data is array}
            if array is engine.outputs[node]._data:
                sources.add(known(engine.outputs[node]))
            if list(np.shape(array)) != entry["shape"] or \
                    (entry["source"] if sources else None) not in (sources or {None}):
                problems.append(f"{label}: {op_id} saved slot {entry['slot']} {entry} vs "
                                f"engine shape {np.shape(array)} from {sources or 'nothing'}")
    return problems


def compare_forward(doc, known, counts_when_made, label) -> list:
    """counts_when_made: for each op event, in order, {node: pending count} of the ops made so
    far (the engine's own counts at that moment, or the replay's rule for a stepper)."""
    ops = [k for k in range(len(doc["frames"]))
           if any(e["type"] == "op" and e["phase"] == "forward" for e in frame_events(doc, k))]
    if len(ops) != len(counts_when_made):
        return [f"{label}: {len(ops)} forward op frames, {len(counts_when_made)} ops made"]
    problems = []
    for i, (k, counts) in enumerate(zip(ops, counts_when_made)):
        shown = fold(doc, doc["frames"][k])["pending"]
        want = {known(n): c for n, c in counts.items() if known(n) is not None}
        got = {op_id: shown.get(op_id) for op_id in want}
        if got != want:
            problems.append(f"{label}: forward op {i}: view {got}, engine {want}")
    return problems


class CountsWhenMade:
    """Wraps a recorder's forward hook: the pending counts of every op made so far, read the
    moment each op is recorded (its edges are wired by then)."""

    def __init__(self, recorder, allocator=None):
        self.made, self.counts, self.hook = [], [], recorder.forward.on_op
        self.allocator, self.memory = allocator, []   # (its used, high water, live blocks)
        recorder.forward.on_op = self

    def __call__(self, node, output, counts=None):
        self.made.append(node)
        self.counts.append({n: int(n.pending_count) for n in self.made})
        if self.allocator is not None:
            a = self.allocator
            self.memory.append(((int(a.used), int(a.high_water)), {b for b in a.blocks if b.alive}))
        return self.hook(node, output, counts)


def compare_forward_memory(doc, known, made, label) -> list:
    """At each forward op's frame: the strip's used and high water, and the live blocks, are
    the allocator's as the op was recorded (its allocations came before it)."""
    ops = [k for k in range(len(doc["frames"]))
           if any(e["type"] == "op" and e["phase"] == "forward" for e in frame_events(doc, k))]
    problems = []
    for i, (k, (used, alive)) in enumerate(zip(ops, made.memory)):
        state = fold(doc, doc["frames"][k])
        if state["used"] != used or state["alive"] != {known(b) for b in alive}:
            problems.append(f"{label}: forward op {i}: strip {state['used']} "
                            f"{sorted(state['alive'])}, allocator {used} "
                            f"{sorted(known(b) for b in alive)}")
    return problems


def replayed_counts(engine, loss) -> list:
    """What a graph read after forward tells at each replayed op: consumers inside the drawn
    graph counted as their op replays (in creation order), consumers outside it (dead branches)
    counted with the first drawn one, so the last op leaves every node at its real count."""
    drawn = set(topo_order(loss.grad_fn))
    consumers = {n: [] for n in engine.ops}
    for node in engine.ops:
        for v in engine.inputs[node]:
            if v.grad_fn is not None:
                consumers[v.grad_fn].append(node)
    order = sorted(drawn, key=lambda n: n.seq)

    def count(n, op):   # (0 until a drawn consumer replays: forward had no consumer either)
        drawn_so_far = sum(1 for c in consumers[n] if c in drawn and c.seq <= op.seq)
        return drawn_so_far and drawn_so_far + sum(1 for c in consumers[n] if c not in drawn)
    return [{n: count(n, op) for n in order[:i + 1]} for i, op in enumerate(order)]


# -- the two documents ---------------------------------------------------------------------------
def scope_of(allocator):
    return allocator.scope() if allocator is not None else contextlib.nullcontext()


HISTORIES = ("fresh", "forward before record", "grads from an earlier backward")


def recorded(graph, order, shuffle, place, history, plain):
    """record() around forward (or only backward: its forward ran before) and a stepped
    backward; the document read once at the end. The leaves may hold gradients already."""
    allocator, snapshots = PLACES[place](), []
    with scope_of(allocator), contextlib.ExitStack() as stack:
        leaves = None
        if history == "grads from an earlier backward":
            leaves, _, nodes = build(graph)
            nodes[-1].backward()
        if history == "forward before record":
            leaves, ops, nodes = build(graph)
        rec = stack.enter_context(mg.record())
        made = CountsWhenMade(rec, allocator)
        if history != "forward before record":
            leaves, ops, nodes = build(graph, leaves)
        engine = Engine(leaves, ops, nodes, allocator, order)
        loss = engine.loss
        counts = made.counts if history != "forward before record" else \
            replayed_counts(engine, loss)
        if plain:   # backward() itself: each step read as the recorder is told it
            rec.on_steps = lambda group, hook=rec.on_steps: (
                snapshots.append(engine.snapshot(group)), hook(group))
            mg.backward(loss, order=order, shuffle=shuffle)
        else:
            for _ in engine.watch(compact_groups(loss, order, shuffle=shuffle), snapshots):
                pass
    doc = rec.trace
    label = f"recorded {'backward()' if plain else 'steps'} {order} shuffle={shuffle} {place} " \
            f"{history}"
    problems = compare_backward(doc, rec.known, engine, snapshots, label)
    problems += compare_saved(doc, rec.known, engine, label)
    problems += compare_forward(doc, rec.known, counts, label)
    if history != "forward before record":
        problems += compare_forward_memory(doc, rec.known, made, label)
    return problems, len(snapshots)


def stepped(graph, order, place, inside_record):
    """A BackwardStepper made after forward, stepped one engine step at a time; the document
    read after every step (what the page is sent) and at the end. Inside a record() block,
    that block's trace (forward recorded as it ran, the stepper's steps) is checked too."""
    allocator, snapshots, problems = PLACES[place](), [], []
    label = f"stepper {order} {place}"
    with contextlib.ExitStack() as stack:
        if inside_record:
            outer = stack.enter_context(mg.record())
            made = CountsWhenMade(outer, allocator)
        stack.enter_context(scope_of(allocator))
        leaves, ops, nodes = build(graph)
        engine = Engine(leaves, ops, nodes, allocator, order)
        loss = engine.loss
        counts = replayed_counts(engine, loss)
        stepper = BackwardStepper(loss, order=order)
        stepper._groups = engine.watch(stepper._groups, snapshots)
        known = stepper._recorder.known
        sent = []
        stepper.send = sent.append   # what the page is sent: "append" messages
        page_frames = list(stepper.trace["frames"])
        page_events = [dict(e) for e in stepper.trace["events"]]
        while stepper.live:
            stepper.step()
            page_frames += sent[-1]["frames"]
            page_events += [dict(e) for e in sent[-1]["events"]]
            doc = stepper.current_trace
            steps = engine_steps(snapshots)
            k = backward_frames(doc)[-1]
            problems += compare(doc, known, engine, steps[-2] if len(steps) > 1 else None,
                                steps[-1], k, f"{label} (live) step {len(steps) - 1}")
        doc = stepper.current_trace
    if inside_record:
        problems += compare_backward(outer.trace, outer.known, engine, snapshots, label + " outer")
        problems += compare_forward(outer.trace, outer.known, made.counts, label + " outer")
        problems += compare_forward_memory(outer.trace, outer.known, made, label + " outer")
    # What the page was sent step by step, and the document at the end: the same numbers sent
    # twice (copies, not two computations), so equal exactly.
    if page_events != doc["events"]:
        problems.append(f"{label}: the page's events differ from the document's: "
                        f"{[e for e in page_events if e not in doc['events']][:2]}")
    if page_frames != doc["frames"]:   # (the page keeps its frames when the trace is re-sent)
        problems.append(f"{label}: the page's frames {page_frames}, the document's "
                        f"{doc['frames']}")
    problems += compare_backward(doc, known, engine, snapshots, label)
    problems += compare_saved(doc, known, engine, label)
    problems += compare_forward(doc, known, counts, label)
    return problems, len(snapshots)


def loss_requires_grad(graph) -> bool:
    leaves, flags, steps, outputs = graph
    needs = list(flags)
    for _, inputs in steps:
        needs.append(any(needs[i] for i in inputs))
    return any(needs[i] for i in outputs)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(graphs(), st.sampled_from([("pending", None), ("pending", 3), ("topo", None)]),
       st.sampled_from(sorted(PLACES)), st.sampled_from(HISTORIES), st.booleans(), st.booleans())
def test_every_step_of_the_documents_is_what_the_engine_did(graph, order_and_shuffle, place,
                                                            history, inside_record, plain):
    assume(loss_requires_grad(graph))
    order, shuffle = order_and_shuffle
    problems, _ = recorded(graph, order, shuffle, place, history, plain)
    more, _ = stepped(graph, order, place, inside_record)
    assert not problems + more, "\n".join(problems + more)


# -- the tape view: slot grads, use counts and freed slots at every step -----------------------
def tape_disagreements(doc, tape, remaining, where) -> list:
    """The document folded to its last frame against the tape itself: grads (6 digits, as the
    document rounds them), use counts (the walk's own), and for a TensorTape, freed slots
    (their buffers given back: value None)."""
    grads, uses, freed = tape_fold(doc, len(doc["frames"]))
    problems = []
    for slot, grad in enumerate(tape.grads):
        if slot in freed and grad is None:
            continue   # (a TensorTape gave the buffer back: the page strikes the row through)
        shown = grads[slot]
        if (grad is None) != (shown is None) or (grad is not None and not np.allclose(
                shown, np.asarray(grad, float).ravel()[:len(shown)], rtol=1e-5, atol=1e-12)):
            problems.append(f"{where}: slot {slot} ({tape.kinds[slot]}, freed: "
                            f"{slot in freed}) grad {shown}, tape {grad}")
    if uses != [int(n) for n in remaining]:
        problems.append(f"{where}: uses {uses}, tape {list(remaining)}")
    if isinstance(tape, TensorTape):
        gone = {i for i, v in enumerate(tape.values) if v is None}
        if freed != gone:
            problems.append(f"{where}: freed {sorted(freed)}, tape {sorted(gone)}")
    return problems


def tape_graph_loss(tape, graph):
    leaf_arrays, flags, steps, outputs = graph
    value = (lambda a: float(a)) if type(tape) is Tape else (lambda a: a.copy())
    slots = [tape.var(value(a)) if g else tape.const(value(a)) for a, g in zip(leaf_arrays, flags)]
    return tape_loss_of(slots, steps, outputs)


def tape_loss_of(slots, steps, outputs):
    nodes = list(slots)
    for name, inputs in steps:
        nodes.append(TAPE_OPS[name](*(nodes[i] for i in inputs)))
    total = nodes[outputs[0]]
    for i in outputs[1:]:
        total = total + nodes[i]
    return total


@settings(max_examples=150, deadline=None, derandomize=True)
@given(graphs(), st.booleans())
def test_every_step_of_the_tape_view_is_what_the_tape_did(graph, scalar):
    assume(loss_requires_grad(graph))
    if scalar:   # the scalar Tape, on the first element of each leaf
        graph = (tuple(a.reshape(-1)[:1].reshape(()) for a in graph[0]),) + graph[1:]
        tape = Tape()
    else:
        tape = TensorTape()
    out = tape_graph_loss(tape, graph)
    assume(tape.requires_grad[tape.index(out)])
    view = TapeView(tape, out)
    view.send = lambda message: None
    counted, use_counts = [], tape.use_counts
    tape.use_counts = lambda: counted.append(use_counts()) or counted[-1]
    problems = []
    while view.live:
        view.step()
        walk = counted[-1]   # the use counts backward's walk counts down (it asks for them first)
        problems += tape_disagreements(view.current_trace, tape, walk, f"{type(tape).__name__} "
                                       f"frame {len(view.current_trace['frames'])}")
    assert not problems, "\n".join(problems)
