"""Checkpointing: trade compute for memory by recomputing a segment in backward.

    h = minigrad.checkpoint(block, x)        # forward: block(x) runs, but no graph is kept
    loss = head(h).sum(); loss.backward()    # backward: block(x) runs again, recorded, then backward

Keep-everything saves every activation until backward has used it. A checkpointed segment saves
only its inputs: its forward runs with recording off, and when backward reaches it, the segment
is run again with recording on (the "recompute") and backward goes through that fresh graph.
Chen et al. 2016 ("Training deep nets with sublinear memory cost") checkpoint every sqrt(n) of n
layers: O(sqrt(n)) activation memory for about one extra forward pass.

Rules (each misuse raises a clear error): fn takes the inputs as Variables and returns one
Variable; it must compute the same thing twice (no randomness, no state it changes); a Variable
it uses that is not one of `inputs` must not have a graph (parameters are fine: leaves, passed
in or reached through fn's closure).
"""
from __future__ import annotations

import itertools

import numpy as np

from .eager import engine
from .arena import Pool
from .eager.guards import check_can_run
from .errors import BackwardError, MinigradError
from .eager.function import Function, next_seq
from .modes import modes
from .eager.variable import Variable


class CheckpointError(MinigradError, RuntimeError):
    """checkpoint() used outside its rules."""


def checkpoint(fn, *inputs: Variable) -> Variable:
    """fn(*inputs), keeping only the inputs for backward; backward recomputes fn first."""
    if not callable(fn):
        raise CheckpointError(f"checkpoint: the first argument must be the segment to run (a "
                              f"function of the inputs), got {type(fn).__name__}. Call "
                              f"checkpoint(fn, *inputs).")
    for i, x in enumerate(inputs):
        if not isinstance(x, Variable):
            raise CheckpointError(
                f"checkpoint: input {i} is a {type(x).__name__}, not a Variable. Rule: the inputs "
                f"are what the segment keeps for backward, so they must be Variables. Fix: wrap "
                f"data with create_leaf(...), or let fn use constants directly.")
    if not inputs:
        raise CheckpointError("checkpoint: no inputs. Pass the Variables the segment starts "
                              "from: checkpoint(fn, x).")
    if not modes.grad_enabled:   # no graph either way: run the segment, keep only its output
        out, block = _run_segment(fn, inputs)
        return Variable(out, False, None, None, block)
    if not any(x.requires_grad for x in inputs):
        return _checkpoint_closure_params(fn, inputs)
    return Checkpoint.apply(*inputs, fn=fn, n_inputs=len(inputs))


def _checkpoint_closure_params(fn, inputs: tuple) -> Variable:
    """No input requires grad, but fn may reach parameters through its closure (PyTorch's
    non-reentrant checkpoint supports that). Only a recorded run can tell, so the segment runs
    once with recording on; its graph is dropped at once and the parameters it reached become
    extra inputs of the checkpoint node, which is what makes backward reach the segment."""
    recorder, modes.recorder = modes.recorder, None   # (a trial run: not part of the trace)
    try:
        out, params = _run_recorded(fn, inputs)
    finally:
        modes.recorder = recorder
    if not params:   # nothing to differentiate: a plain result, as under no_grad
        return _placed_constant(out)
    return Checkpoint.apply(*inputs, *params, fn=fn, n_inputs=len(inputs), computed=out)


class Checkpoint(Function):
    """y = fn(x...), nothing kept but x...; backward recomputes fn and differentiates it"""

    name = "checkpoint"
    grad_text = ("recompute the segment from its saved inputs, then backward through it",) * 8

    @staticmethod
    def forward(ctx, *arrays, fn, n_inputs, computed=None):
        ctx.fn, ctx.forward_scope = fn, modes.scope   # (the recompute runs in the same scope)
        ctx.n_inputs = n_inputs   # inputs after these are parameters fn reaches by closure
        ctx.save_for_backward(*arrays)   # only the inputs: the segment's graph is not kept
        out = computed
        if out is None:
            previous, modes.grad_enabled = modes.grad_enabled, False
            try:
                out, _ = _run_segment(fn, [Variable(a) for a in arrays[:n_inputs]], place=False)
            finally:
                modes.grad_enabled = previous
        ctx._fingerprint = fingerprint(out)
        return out   # (apply() places it on the allocator)

    @staticmethod
    def backward(ctx, grad_output):
        grads = ctx.__dict__.pop("recomputed", None)   # left by recompute_groups (stepping)
        if grads is None:
            for _ in _recompute_and_backward(ctx, grad_output, stepping=False):
                pass
            grads = ctx.__dict__.pop("recomputed")
        return grads

    def recompute_groups(self):
        """The engine's hook while stepping: the recompute and the segment's backward, one
        group of Steps at a time, before this node's own apply."""
        check_can_run(self)   # the recompute reads the saved inputs: check them first
        return _recompute_and_backward(self, self.grad_output, stepping=True)


class RecomputeSeed(Function):
    """s = sum(y * g): backward from s hands g, the gradient arriving at the segment, to y"""

    name = "recompute_seed"
    grad_text = ("the gradient that reached the checkpoint",)

    @staticmethod
    def forward(ctx, y, *, g):
        ctx.g = g
        return np.asarray(np.vdot(y, g), dtype=y.dtype)   # a scalar: nothing big is allocated

    @staticmethod
    def backward(ctx, grad_output):
        g, pool = ctx.g, ctx.arena
        if isinstance(pool, Pool) and pool.block_of(g) is not None:
            # Hand the segment a copy and free the checkpoint's gradient now, not when the
            # checkpoint's backward returns: with nested checkpoints, each level would
            # otherwise hold its gradient while every level below it recomputes.
            copy = ctx.buffer(g, kind="grad")
            copy[...] = g
            pool.release_early(g)
            g = copy
        ctx.g = None
        return g if grad_output == 1 else grad_output * g


def _recompute_and_backward(ctx, grad_output, stepping: bool):
    """Rebuild the segment's graph from the saved inputs, then run backward through it."""
    allocator = ctx.arena
    mark = allocator.mark() if allocator is not None else None
    recorder = modes.recorder
    if recorder is not None:
        recorder.keep_values()
        phase = recorder.begin_recompute()
    outer = ctx.inputs
    leaves = [_stand_in(i, a, x, outer, ctx.n_inputs)
              for i, (a, x) in enumerate(zip(ctx.saved_tensors, outer))]
    if recorder is not None:   # (the leaves fn starts from, each linked to what it reads again)
        recorder.stand_ins(list(zip(leaves, outer))[:ctx.n_inputs])
    first_seq = next_seq()
    before = modes.grad_enabled, modes.allocator, modes.scope
    modes.grad_enabled, modes.allocator, modes.scope = True, allocator, ctx.forward_scope
    try:
        y = _output(ctx.fn(*leaves[:ctx.n_inputs]), ctx.fn)
        _check_recompute(ctx, y, first_seq)
        seed = RecomputeSeed.apply(y, g=grad_output)
        if isinstance(allocator, Pool):
            _free_unsaved(allocator, mark)
    finally:
        modes.grad_enabled, modes.allocator, modes.scope = before
    closure = _ClosureGrads(outer, leaves)
    try:
        if stepping or recorder is not None:
            recomputed = [engine.Step("recompute", ctx, y)]   # the recompute is a step of its own
            for group in itertools.chain([recomputed], engine.run_pending(seed, True, None)):
                if group[0][0] == "done":   # the segment's end is not the end of backward
                    continue
                if stepping:
                    yield group
                else:   # (a recorded run whose engine does not step checkpoints: record anyway)
                    recorder.on_steps(group)
        else:
            engine.backward(seed)
    finally:
        through_closure = closure.restore()
    grads = tuple(_grad_of(leaf, through_closure.get(i)) if x.requires_grad else None
                  for i, (leaf, x) in enumerate(zip(leaves, outer)))
    if mark is not None:   # the recomputed segment goes (leaf grads are never on it)
        _take_back(allocator, mark)
        grads = tuple(_on(allocator, g, ctx.name) if g is not None and x.grad_fn is not None
                      else g for g, x in zip(grads, outer))   # (counted where the graph lives)
    if recorder is not None:
        recorder.end_recompute(phase)
    ctx.recomputed = grads


def _stand_in(i: int, array, x: Variable, outer: tuple, n_inputs: int) -> Variable:
    """The leaf that plays input i in the recompute. For a parameter whose gradient backward has
    not written yet, it shares the parameter's gradient buffer: the segment's backward then
    writes the weight gradient straight where the parameter keeps it (no extra copy, nothing
    the size of a weight on the graph's allocator). (x, W, W: only the first W shares; a
    parameter the node holds only because fn reaches it by closure, i >= n_inputs, does not:
    fn never sees that stand-in, and W keeps the buffer for itself, see _ClosureGrads.)"""
    leaf = Variable(array, x.requires_grad, None, f"{_described(x, i)} (again)", x._block)
    if x.grad_fn is None and x._grad is None and _first(x, outer) == i and i < n_inputs:
        leaf._grad_buffer = x._grad_buffer
    return leaf


def _described(x: Variable, i: int) -> str:
    """What a stand-in is called: the variable it reads again, by name, else by its op."""
    if x.name:
        return x.name
    return f"{x.grad_fn.name} output" if x.grad_fn is not None else f"checkpoint input {i}"


def _first(x: Variable, outer: tuple) -> int:
    return next(j for j, v in enumerate(outer) if v is x)


class _ClosureGrads:
    """The parameters among the checkpoint's inputs, set aside while the segment's backward runs.

    fn may also use such a parameter W through its closure (or the node may hold W only because
    fn reaches it that way). The recompute's backward then writes W's gradient twice: through the
    stand-in, which shares W's gradient buffer, and into W itself, which would write that same
    buffer and overwrite one part with the other. So while it runs, W has no gradient, and what
    the closure gives lands in an array restore() hands back (input index -> gradient) to be
    added to the stand-in's; then W gets its state back. That array is W's own buffer when
    nothing else holds it (no stand-in shares it, no gradient is in it yet), else a fresh one."""

    def __init__(self, outer: tuple, leaves: list):
        self.saved = [(i, x, x._grad, x._grad_buffer) for i, x in enumerate(outer)
                      if x.grad_fn is None and x.requires_grad and _first(x, outer) == i]
        for i, x, grad, buffer in self.saved:
            free = grad is None and leaves[i]._grad_buffer is not buffer
            x._grad, x._grad_buffer = None, (buffer if free else None)

    def restore(self) -> dict:
        through_closure = {}
        for i, x, grad, buffer in self.saved:
            if x._grad is not None:
                through_closure[i] = x._grad
            x._grad, x._grad_buffer = grad, buffer
        return through_closure


def _run_segment(fn, inputs, place: bool = True):
    """fn(*inputs) with no graph; returns (output array, its block or None).

    On an arena or a pool, what the segment allocated is taken back as soon as it returns, and
    only its output is kept (copied onto the allocator when place is True). Without this, a
    pool would keep every activation of a no-grad forward until the scope ends: it frees by
    use counts, and no node counts a use when no graph is built.
    """
    allocator = modes.allocator
    if allocator is None:
        return _output(fn(*inputs), fn)._data, None
    mark = allocator.mark()
    out = np.array(_output(fn(*inputs), fn)._data)
    _take_back(allocator, mark)
    if not place:
        return out, None
    placed, block = allocator._alloc(out.shape, out.dtype, "activation", "checkpoint")
    placed[...] = out
    return placed, block


def _grad_of(leaf: Variable, through_closure) -> np.ndarray:
    """The stand-in's gradient plus what fn's closure gave the same parameter; an input the
    segment did not use has gradient zero (backward wrote none)."""
    grad = leaf._grad
    if through_closure is not None:
        grad = through_closure if grad is None else np.add(grad, through_closure, out=grad)
    return grad if grad is not None else np.zeros_like(leaf._data)


def _run_recorded(fn, inputs: tuple) -> tuple:
    """fn(*inputs) with recording on: (its output array, the parameters its graph reached).
    The graph is released and what it allocated taken back before returning."""
    allocator = modes.allocator
    mark = allocator.mark() if allocator is not None else None
    first_seq = next_seq()
    y = _output(fn(*inputs), fn)
    nodes = _segment_graph(y, first_seq)
    params = {}
    for node in nodes:
        for v in node.inputs:
            if v.grad_fn is None and v.requires_grad:
                params[id(v)] = v
    out = np.array(y._data)
    for node in nodes:
        node.release()   # (unlocks what it saved: the parameters' data among them)
    if mark is not None:
        _take_back(allocator, mark)
    return out, tuple(params.values())


def _placed_constant(out: np.ndarray) -> Variable:
    allocator = modes.allocator
    if allocator is None:
        return Variable(out)
    placed, block = allocator._alloc(out.shape, out.dtype, "activation", "checkpoint")
    placed[...] = out
    return Variable(placed, False, None, None, block)


def fingerprint(out: np.ndarray) -> tuple:
    """What the recompute must reproduce, kept small: shape, dtype, where the values are not
    finite, and two projections of the finite values on fixed random weights (float64), with
    their rounding scale. Every value counts (one changed value moves both projections), yet a
    recompute may differ in the last bits: summed at another memory address, numpy's SIMD loops
    may round differently. Comparing a kept copy within a tolerance would keep a whole output per
    segment until backward, the memory checkpointing exists to save."""
    x = np.asarray(out, dtype=np.float64).reshape(-1)
    finite = np.isfinite(x)
    values = np.where(finite, x, 0.0)
    # scaled by a power of two (exact) so that the sums cannot overflow near float64's maximum
    exponent = int(np.frexp(np.abs(values).max(initial=0.0))[1])
    values = np.ldexp(values, -exponent)
    weights = _weights(x.size)
    projections, scale = weights @ values, np.abs(weights) @ np.abs(values)
    return (out.shape, out.dtype.str, np.flatnonzero(~finite).tobytes(), exponent, projections,
            scale)


def _weights(n: int, cache: dict = {}) -> np.ndarray:   # noqa: B006 (a cache on purpose)
    if n not in cache:
        if len(cache) > 64:
            cache.clear()
        cache[n] = np.random.default_rng(n).standard_normal((2, n))
    return cache[n]


def _same_output(now: tuple, then: tuple) -> bool:
    """The tolerance: 64 ulps of the output's dtype, relative to the projections' own scale."""
    if now[:3] != then[:3]:
        return False
    top = max(now[3], then[3])   # (both on the larger one's scale: no overflow)
    p_now, s_now = np.ldexp(now[4], now[3] - top), np.ldexp(now[5], now[3] - top)
    p_then, s_then = np.ldexp(then[4], then[3] - top), np.ldexp(then[5], then[3] - top)
    eps = np.finfo(np.dtype(then[1])).eps if np.dtype(then[1]).kind == "f" else 0.0
    return bool(np.all(np.abs(p_now - p_then) <= 64 * eps * np.maximum(s_now, s_then)))


def _output(y, fn) -> Variable:
    if not isinstance(y, Variable):
        name = getattr(fn, "__name__", type(fn).__name__)
        raise CheckpointError(
            f"checkpoint: the segment {name} returned a {type(y).__name__}, not a Variable. "
            f"Rule: a checkpointed segment has one output. Fix: return one Variable (concat "
            f"several, or checkpoint each output separately).")
    return y


def _check_recompute(ctx, y: Variable, first_seq: int) -> None:
    if not y.requires_grad:
        raise CheckpointError(
            f"checkpoint: the recomputed output (shape {y.shape}) does not require grad: the "
            f"segment does not use its inputs that require grad. Fix: compute the output from "
            f"them, or do not checkpoint this segment.")
    _segment_graph(y, first_seq)
    if not _same_output(fingerprint(y._data), ctx._fingerprint):
        shape, dtype = ctx._fingerprint[:2]
        raise CheckpointError(
            f"checkpoint: recomputing the segment gave a different output (shape {y.shape}, "
            f"{y.dtype}; in forward: {shape}, {np.dtype(dtype)}; the values differ by more than "
            f"rounding). Rule: a checkpointed segment must compute the same thing twice; "
            f"randomness (dropout), state it changes, or parameters changed between forward and "
            f"backward break that. Fix: draw random numbers outside the segment and pass them "
            f"in, and update parameters only after backward.")


def _segment_graph(y: Variable, first_seq: int) -> list:
    """The nodes of the segment's graph; refused if it reaches a node recorded before it."""
    nodes = engine.topo_order(y.grad_fn) if y.grad_fn is not None else []
    outside = [node for node in nodes if node.seq < first_seq]
    if outside:
        node = max(outside, key=lambda n: n.seq)   # the one whose output the segment captured
        raise CheckpointError(
            f"checkpoint: the segment uses the output of a {node.name} node recorded outside "
            f"it (a Variable with a graph, captured by the function rather than passed in). "
            f"Rule: backward through the segment must stop at its inputs. Fix: pass that "
            f"Variable as an input: checkpoint(fn, x, that_variable).")
    return nodes


def _free_unsaved(pool: Pool, mark: int) -> None:
    """Activations of the recompute that no backward reads (no node saved them, as the output
    once the seed has read it) go at once: memory goes back as soon as no reader is left."""
    for block in pool.blocks[mark:]:
        if block.alive and block.kind == "activation" and block.uses <= 0 and not block.pinned:
            pool.free(block)


def _take_back(allocator, mark: int) -> None:
    """Free everything allocated since mark. (A pool frees block by block, so the trace shows
    frees; an arena pops, and the trace keeps its phase.)"""
    if isinstance(allocator, Pool):
        for block in allocator.blocks[mark:]:
            allocator.free(block)
        return
    recorder = modes.recorder
    phases = recorder.phases() if recorder is not None else None
    allocator.pop_to(mark)
    if recorder is not None:
        recorder.restore_phases(phases)


def _on(allocator, array: np.ndarray, owner: str) -> np.ndarray:
    placed = allocator.alloc(array.shape, array.dtype, "grad", owner)
    placed[...] = array
    return placed


__all__ = ["checkpoint", "Checkpoint", "CheckpointError"]
