"""One runner per engine for the differential harness: each evaluates a Program (differential.py)
on some data and returns an Outcome: the loss and the leaves' gradients, or the error raised.

Eager: pending (also with a shuffled ready queue) and topo order on the heap, pending inside an
Arena scope and inside a Pool scope, and checkpoint (the program's segment recomputed in
backward). Tapes: TensorTape (elementwise programs) and the scalar Tape (object arrays of slots;
its fast path and its rule table). Ahead of time: capture, derive, then a save-all or a
recompute plan, each run on several data sets (the plan compiled once).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

import minigrad as mg
from differential import Leaf, Step, grad_nodes, node_values
from differential_ops import OPS, obj, tape_sigmoid
from minigrad import aot
from minigrad.tape import Tape, TensorTape


class Outcome(NamedTuple):
    loss: float | None = None
    grads: tuple = ()        # one per leaf: an array, or None (no gradient reached it)
    error: BaseException | None = None
    loss_dtype: object = None


def attempt(run):
    try:
        return run()
    except Exception as exc:   # noqa: BLE001 - the harness records what each engine raised
        return Outcome(error=exc)


def loss_of(nodes, outputs):
    total = None
    for i, probe in outputs:
        term = nodes[i] * probe
        term = term.sum() if hasattr(term, "sum") else term   # (a 0-d object array gives a bare slot)
        total = term if total is None else total + term
    return total


def copied(grad):
    return None if grad is None else np.array(grad, copy=True)


# -- eager ----------------------------------------------------------------------------------------
def eager_nodes(program, leaf_vars, segment=None):
    """Every node of the program as a Variable; the segment's steps through mg.checkpoint."""
    nodes, leaves = {}, iter(leaf_vars)
    for k, node in enumerate(program.nodes):
        if isinstance(node, Leaf):
            nodes[k] = next(leaves)
    skip = range(*segment) if segment else range(0)
    for k, node in enumerate(program.nodes):
        if segment and k == segment[0]:
            checkpoint_segment(program, nodes, segment)
        if isinstance(node, Step) and k not in skip:
            nodes[k] = OPS[node.op].eager(*(nodes[i] for i in node.inputs), **node.attrs)
    return nodes


def checkpoint_segment(program, nodes, segment):
    """Each node of the segment used after it: mg.checkpoint of the segment's steps it is
    computed from, given as inputs the nodes from outside the segment that those steps read.
    A node that does not require grad is computed plainly (checkpoint refuses it: no node)."""
    first, end = segment
    inside = [k for k in range(first, end) if isinstance(program.nodes[k], Step)]
    later = {i for k in range(end, len(program.nodes)) if isinstance(program.nodes[k], Step)
             for i in program.nodes[k].inputs} | {i for i, _ in program.outputs}
    needs = grad_nodes(program)
    for out in [k for k in inside if k in later]:
        steps = sorted(computed_from(program, out) & set(inside))
        inputs = sorted({i for k in steps for i in program.nodes[k].inputs if i not in inside})

        def segment_fn(*xs, out=out, steps=steps, inputs=inputs):
            local = dict(zip(inputs, xs))
            for k in steps:
                step = program.nodes[k]
                local[k] = OPS[step.op].eager(*(local[i] for i in step.inputs), **step.attrs)
            return local[out]
        args = [nodes[i] for i in inputs]
        nodes[out] = mg.checkpoint(segment_fn, *args) if out in needs else segment_fn(*args)
    # Steps whose result nothing reads still run, as in plain eager (a misuse among them raises).
    used = set().union(*[computed_from(program, k) for k in inside if k in later])
    if any(k not in used for k in inside):
        local = dict(nodes)
        for k in inside:
            step = program.nodes[k]
            local[k] = OPS[step.op].eager(*(local[i] for i in step.inputs), **step.attrs)


def computed_from(program, out) -> set:
    seen, todo = set(), [out]
    while todo:
        i = todo.pop()
        if i not in seen:
            seen.add(i)
            todo.extend(program.nodes[i].inputs if isinstance(program.nodes[i], Step) else ())
    return seen


def make_leaves(program, data, **kwargs):
    return [mg.create_leaf(a, requires_grad=leaf.requires_grad and a.dtype.kind == "f",
                           name=f"leaf{k}", **kwargs)
            for k, (leaf, a) in enumerate(zip(program.leaves(), data))]


def run_eager(program, data, order="pending", segment=None, allocator=None, shuffle=None):
    def run():
        if allocator is None:
            return eager_once(program, data, order, segment, shuffle)
        with allocator.scope():   # leaves, activations, nodes and grads on the allocator
            return eager_once(program, data, order, segment, shuffle)
    return attempt(run)


def eager_once(program, data, order, segment, shuffle):
    leaves = make_leaves(program, data)
    loss = loss_of(eager_nodes(program, leaves, segment), program.outputs)
    value, dtype = loss.item(), loss.dtype
    mg.backward(loss, order=order, shuffle=shuffle)
    return Outcome(value, tuple(copied(v.grad) for v in leaves), loss_dtype=dtype)


# -- tapes ----------------------------------------------------------------------------------------
def run_scalar_tape(program, data, plain=False):
    """plain=False: the tape's fast path; plain=True: the same walk through its rule table."""
    def run():
        tape = Tape()
        leaves, nodes = [], {}
        for leaf, a in zip(program.leaves(), data):
            if a.dtype.kind in "iu":
                leaves.append(a)
                continue
            make = tape.var if leaf.requires_grad else tape.const
            slots = np.empty(a.shape, dtype=object)
            for idx in np.ndindex(a.shape):
                slots[idx] = make(float(a[idx]))
            leaves.append(slots)
        it = iter(leaves)
        for k, node in enumerate(program.nodes):
            nodes[k] = next(it) if isinstance(node, Leaf) else \
                OPS[node.op].tape(*(nodes[i] for i in node.inputs), **node.attrs)
        loss = obj(loss_of(nodes, program.outputs))[()]
        if not hasattr(loss, "value"):   # a sum over empty outputs: a plain 0, no slot, no grads
            return Outcome(float(loss), tuple(None for _ in leaves))
        tape.backward(loss, plain=plain)
        grads = []
        for leaf, slots in zip(program.leaves(), leaves):
            if not leaf.requires_grad or slots.dtype != object:
                grads.append(None)
                continue
            got = [s.grad for s in slots.ravel()]
            grads.append(None if all(g is None for g in got) and slots.size else
                         np.array([0.0 if g is None else g for g in got]).reshape(slots.shape))
        return Outcome(float(loss.value), tuple(grads))
    return attempt(run)


TENSOR_TAPE_OPS = {"sigmoid": tape_sigmoid}
# (matmul too: the scalar tape sums its products left to right, while BLAS may order, block or
# fuse them, so inf - inf meets in one and not in the other: no nan/inf rule to agree on)
COMPOSITE_ON_TAPES = {"sigmoid", "silu", "softmax", "log_softmax", "cross_entropy", "rmsnorm",
                      "matmul"}


def record_on_tensor_tape(program, data):
    """(tape, leaf slots, all node slots, total): the program recorded on a TensorTape."""
    tape = TensorTape()
    leaves = [tape.var(a) if leaf.requires_grad else tape.const(a)
              for leaf, a in zip(program.leaves(), data)]
    it, nodes = iter(leaves), {}
    for k, node in enumerate(program.nodes):
        if isinstance(node, Leaf):
            nodes[k] = next(it)
            continue
        op = TENSOR_TAPE_OPS.get(node.op, OPS[node.op].eager)
        nodes[k] = op(*(nodes[i] for i in node.inputs), **node.attrs)
    terms = [nodes[i] * probe for i, probe in program.outputs]
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return tape, leaves, nodes, total


def tensor_tape_grads(program, tape, leaves, total) -> tuple:
    tape.backward(total)   # backward of an array slot differentiates its sum
    return tuple(copied(s.grad) if leaf.requires_grad else None
                 for leaf, s in zip(program.leaves(), leaves))


def run_tensor_tape(program, data):
    def run():
        tape, leaves, _, total = record_on_tensor_tape(program, data)
        loss = float(np.sum(total.value))
        return Outcome(loss, tensor_tape_grads(program, tape, leaves, total))
    return attempt(run)


# -- ahead of time --------------------------------------------------------------------------------
def run_aot(program, datas, policy="save_all"):
    """The plan compiled once (captured on the program's own leaves), run on each data set."""
    try:
        examples = make_leaves(program, [leaf.array for leaf in program.leaves()])
        forward = aot.capture(lambda *vs: loss_of(eager_nodes(program, vs), program.outputs),
                              *examples)
        backward = aot.derive_backward_graph(forward)
        if policy == "recompute":
            backward = aot.plan_memory(forward, backward, policy="recompute").backward
        executor = aot.Executor(forward, backward, None, *[leaf.array for leaf in program.leaves()])
    except Exception as exc:   # noqa: BLE001
        return [Outcome(error=exc)] * len(datas)
    outcomes = []
    for data in datas:
        def run(data=data):
            loss = executor.run(*data)
            grads = executor.grads()
            return Outcome(float(loss), tuple(copied(grads.get(f"d_leaf{k}"))
                                              for k in range(len(data))), loss_dtype=loss.dtype)
        outcomes.append(attempt(run))
    return outcomes


# -- which engine runs which program ----------------------------------------------------------------
def aot_knows(program) -> bool:
    """Capture has a form for every op (its matmul takes 2-D operands only, its getitem ints and
    slices: an index array would be frozen into the plan, so capture refuses it)."""
    try:
        values = node_values(program, [leaf.array for leaf in program.leaves()])[0]
    except (ValueError, IndexError, TypeError):   # a misuse step: numpy refuses it too
        values = [np.empty((1, 1))] * len(program.nodes)
    return all(OPS[s.op].aot and (s.op != "matmul" or all(values[i].ndim == 2 for i in s.inputs))
               and (s.op != "getitem" or not _has_array(s.attrs["index"]))
               for s in program.steps())


def _has_array(index) -> bool:
    return any(isinstance(i, np.ndarray) for i in (index if isinstance(index, tuple) else (index,)))


def engines_for(program) -> dict:
    """name -> function(data list) -> list of Outcomes (one per data set)."""
    steps, leaves = program.steps(), program.leaves()
    has_empty = any(leaf.array.size == 0 for leaf in leaves)
    engines = {
        "pending": lambda ds: [run_eager(program, d) for d in ds],
        "topo": lambda ds: [run_eager(program, d, order="topo") for d in ds],
        "pending_shuffled": lambda ds: [run_eager(program, d, shuffle=7) for d in ds],
        "arena": lambda ds: [run_eager(program, d, allocator=mg.Arena("harness", 1 << 12)) for d in ds],
        "pool": lambda ds: [run_eager(program, d, allocator=mg.Pool("harness")) for d in ds],
        "checkpoint": lambda ds: [run_eager(program, d, segment=program.segment) for d in ds],
    }
    if aot_knows(program):
        engines["aot_save_all"] = lambda ds: run_aot(program, ds)
        engines["aot_recompute"] = lambda ds: run_aot(program, ds, policy="recompute")
    # the tapes have no sigmoid, softmax or norm: the harness writes them from exp, div, ...,
    # which is the same math on finite data but not the same nan/inf rules at the edges
    composite = program.mode == "edge" and program.ops() & COMPOSITE_ON_TAPES
    floats64 = not composite and all(leaf.array.dtype in (np.float64, np.int64) for leaf in leaves)
    if program.mode != "misuse" and floats64 and not has_empty:
        if all(OPS[s.op].tape is not None for s in steps):
            engines["scalar_tape"] = lambda ds: [run_scalar_tape(program, d) for d in ds]
            engines["scalar_tape_plain"] = lambda ds: [run_scalar_tape(program, d, plain=True) for d in ds]
    if floats64 and all(OPS[s.op].tensor_tape for s in steps) and \
            len({np.shape(p) for _, p in program.outputs}) == 1:
        engines["tensor_tape"] = lambda ds: [run_tensor_tape(program, d) for d in ds]
    return engines


# -- memory the user holds, overwritten between forward and backward ------------------------------
def scribble(array) -> None:
    """Overwrite an array the caller kept; numpy refusing (read-only) is a refusal too."""
    try:
        array[...] = 0 if array.dtype.kind in "iu" else 3.0
    except ValueError:
        pass


def shared_views(data):
    """Each leaf's data as a view into a larger array (what create_leaf(X[0:32]) gives)."""
    bases, views = [], []
    for a in data:
        base = np.zeros(2 * a.size + 1, dtype=a.dtype)
        view = base[1:1 + a.size].reshape(a.shape)
        view[...] = a
        bases.append(base)
        views.append(view)
    return bases, views


def run_eager_scribbled(program, data):
    """copy=False leaves and the loss's probe constants, all views of larger arrays, and fresh
    index arrays; after forward the larger arrays and the index arrays are overwritten, then
    backward."""
    def run():
        bases, views = shared_views(data)
        probe_bases, probes = shared_views([p for _, p in program.outputs])
        bases += probe_bases
        indices, steps = [], []
        for node in program.nodes:
            index = node.attrs.get("index") if isinstance(node, Step) else None
            if isinstance(index, np.ndarray):
                index = index.copy()
                indices.append(index)
                node = node._replace(attrs={**node.attrs, "index": index})
            steps.append(node)
        mine = program._replace(nodes=tuple(steps), outputs=tuple(
            (i, p) for (i, _), p in zip(program.outputs, probes)))
        leaves = make_leaves(mine, views, copy=False)
        loss = loss_of(eager_nodes(mine, leaves), mine.outputs)
        for array in bases + indices:
            scribble(array)
        mg.backward(loss)
        return Outcome(None, tuple(copied(v.grad) for v in leaves))
    return attempt(run)


def run_tensor_tape_scribbled(program, data):
    """TensorTape: after recording, every slot value the caller can reach is overwritten."""
    def run():
        tape, leaves, nodes, total = record_on_tensor_tape(program, data)
        for slot in nodes.values():
            scribble(slot.value)
        return Outcome(None, tensor_tape_grads(program, tape, leaves, total))
    return attempt(run)
