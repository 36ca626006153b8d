"""Checkpointing: trade compute for memory by recomputing a segment in backward (design E).

    h = minigrad.checkpoint(block, x)        # forward: block(x) runs, but no graph is kept
    loss = head(h).sum(); loss.backward()    # backward: block(x) runs again, recorded, then backward

Keep-everything saves every activation until backward has used it. A checkpointed segment saves
only its inputs: its forward runs with recording off, and when backward reaches it, the segment
is run again with recording on (the "recompute") and backward goes through that fresh graph.
Chen et al. 2016 ("Training deep nets with sublinear memory cost") checkpoint every sqrt(n) of n
layers: O(sqrt(n)) activation memory for about one extra forward pass.

Rules (each misuse raises a clear error): fn takes the inputs as Variables and returns one
Variable; it must compute the same thing twice (no randomness, no state it changes); a Variable
it uses that is not one of `inputs` must not have a graph (parameters are fine: leaves).
"""
from __future__ import annotations

import itertools

import numpy as np

from . import engine
from .arena import Pool
from .checks import check_can_run
from .errors import BackwardError, MinigradError
from .function import Function, _creation_counter
from .modes import modes
from .variable import Variable


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
        raise CheckpointError(
            f"checkpoint: none of the {len(inputs)} inputs requires grad, so no node would be "
            f"recorded and backward would never recompute the segment: parameters fn uses would "
            f"get no gradient. Fix: pass the parameters as inputs too, "
            f"checkpoint(fn, x, W, b), with fn(x, W, b).")
    return Checkpoint.apply(*inputs, fn=fn)


class Checkpoint(Function):
    """y = fn(x...), nothing kept but x...; backward recomputes fn and differentiates it"""

    name = "checkpoint"
    grad_text = ("recompute the segment from its saved inputs, then backward through it",) * 8

    @staticmethod
    def forward(ctx, *arrays, fn):
        ctx.fn, ctx.forward_scope = fn, modes.scope   # (the recompute runs in the same scope)
        ctx.save_for_backward(*arrays)   # only the inputs: the segment's graph is not kept
        previous, modes.grad_enabled = modes.grad_enabled, False
        try:
            out, _ = _run_segment(fn, [Variable(a) for a in arrays], place=False)
        finally:
            modes.grad_enabled = previous
        ctx.fingerprint = np.array(out.flat[:8], dtype=np.float64)
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
    leaves = [_stand_in(i, a, x, outer) for i, (a, x) in enumerate(zip(ctx.saved_tensors, outer))]
    first_seq = next(_creation_counter)
    before = modes.grad_enabled, modes.allocator, modes.scope
    modes.grad_enabled, modes.allocator, modes.scope = True, allocator, ctx.forward_scope
    try:
        y = _output(ctx.fn(*leaves), ctx.fn)
        _check_recompute(ctx, y, first_seq)
        seed = RecomputeSeed.apply(y, g=grad_output)
        if isinstance(allocator, Pool):
            _free_unsaved(allocator, mark)
    finally:
        modes.grad_enabled, modes.allocator, modes.scope = before
    if stepping or recorder is not None:
        recomputed = [engine.Step("recompute", ctx, y)]   # the recompute is a step of its own
        for group in itertools.chain([recomputed], engine._run_pending(seed, True, None)):
            if group[0][0] == "done":   # the segment's end is not the end of backward
                continue
            if stepping:
                yield group
            else:   # (a recorded run whose engine does not step checkpoints: record anyway)
                recorder.on_steps(group)
    else:
        engine.backward(seed)
    grads = tuple(_grad_of(leaf) if x.requires_grad else None for leaf, x in zip(leaves, outer))
    if mark is not None:   # the recomputed segment goes (leaf grads are never on it)
        _take_back(allocator, mark)
        grads = tuple(_on(allocator, g, ctx.name) if g is not None and x.grad_fn is not None
                      else g for g, x in zip(grads, outer))   # (counted where the graph lives)
    if recorder is not None:
        recorder.end_recompute(phase)
    ctx.recomputed = grads


def _stand_in(i: int, array, x: Variable, outer: tuple) -> Variable:
    """The leaf that plays input i in the recompute. For a parameter whose gradient backward has
    not written yet, it shares the parameter's gradient buffer: the segment's backward then
    writes the weight gradient straight where the parameter keeps it (no extra copy, nothing
    the size of a weight on the graph's allocator). (x, W, W: only the first W shares.)"""
    leaf = Variable(array, x.requires_grad, None, x.name or f"checkpoint input {i}", x._block)
    first = next(j for j, v in enumerate(outer) if v is x)
    if x.grad_fn is None and x._grad is None and first == i:
        leaf._grad_buffer = x._grad_buffer
    return leaf


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


def _grad_of(leaf: Variable) -> np.ndarray:
    """An input the segment did not use has gradient zero (backward wrote none)."""
    return leaf._grad if leaf._grad is not None else np.zeros_like(leaf._data)


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
    nodes = engine.topo_order(y.grad_fn) if y.grad_fn is not None else ()
    outside = [node for node in nodes if node.seq < first_seq]
    if outside:
        node = max(outside, key=lambda n: n.seq)   # the one whose output the segment captured
        raise CheckpointError(
            f"checkpoint: the segment uses the output of a {node.name} node recorded outside "
            f"it (a Variable with a graph, captured by the function rather than passed in). "
            f"Rule: backward through the segment must stop at its inputs. Fix: pass that "
            f"Variable as an input: checkpoint(fn, x, that_variable).")
    again = np.asarray(y._data.flat[:8], dtype=np.float64)
    if not np.allclose(again, ctx.fingerprint, rtol=1e-5, atol=1e-7, equal_nan=True):
        raise CheckpointError(
            f"checkpoint: recomputing the segment gave a different output (first values "
            f"{again.tolist()} instead of {ctx.fingerprint.tolist()}). Rule: a checkpointed "
            f"segment must compute the same thing twice; randomness (dropout) or state it changes "
            f"breaks that. Fix: draw random numbers outside the segment and pass them in.")


def _free_unsaved(pool: Pool, mark: int) -> None:
    """Activations of the recompute that no backward reads (no node saved them, as the output
    once the seed has read it) go at once: design E's "prove a value is no longer needed"."""
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
    phase = recorder.phase if recorder is not None else None
    allocator.pop_to(mark)
    if recorder is not None:
        recorder.phase = phase


def _on(allocator, array: np.ndarray, owner: str) -> np.ndarray:
    placed = allocator.alloc(array.shape, array.dtype, "grad", owner)
    placed[...] = array
    return placed


__all__ = ["checkpoint", "Checkpoint", "CheckpointError"]
