"""The backward engine: accumulate_grad and the two schedulers (topological and pending-count).

Each graph walk is one short iterative function (no recursion, so a 10,000-op chain is fine).
The engine reads graphs by duck typing and never imports Variable or Function:

* a Variable has `data`, `requires_grad`, `grad_fn` (None for a leaf) and `_grad` (leaf gradient);
* a node (a Function instance) has `inputs` (its parents), `backward`, `pending_count`,
  `grad_output` (the gradient of its output, summed here while backward runs), `seq` (creation
  order), `released` and `release()`.

Both schedulers share `_apply`, the one step that runs a node's backward and hands each parent
its gradient. The rules (and their error messages) live in guards.py, the step records in
steps.py, and memory reuse in the allocators (Pool's use counts): each is one call here.
"""
from __future__ import annotations

import heapq
import random
import threading
from typing import Iterator

import numpy as np

from ..kernels import sum_to_shape
from ..modes import debug_flag, modes
from .guards import (bad_edge, check_all_applied, check_can_run, check_loss, check_no_retain_graph,
                     checked_grads, consumed, negative_count, stepping_roots, unreducible)
from .steps import Step, accumulate_step, apply_step, expand, seed_steps


# A leaf's gradient is read, added to and written back; numpy lets go of the GIL inside a large
# np.add, so two threads summing into one parameter at once lost updates. One lock for all
# leaves: uncontended it costs well under a microsecond per leaf, and contention is rare.
LEAF_LOCK = threading.Lock()


def accumulate_grad(variable, grad) -> bool:
    """The one place gradients are summed. Returns True on the first write.

    Reduces a broadcast gradient to the variable's shape, then assigns it (first write) or adds
    it. A leaf keeps its gradient in `.grad` (its own array, summed in place); a non-leaf's is
    kept on its node as `grad_output` only until the node runs.
    """
    shape = variable._data.shape
    if grad.shape != shape:                       # undo broadcasting (lesson 05)
        reduced = sum_to_shape(grad, shape)
        if reduced is None:
            raise unreducible(variable, grad)
        grad = reduced
    node = variable.grad_fn
    if node is None:                              # a leaf
        with LEAF_LOCK:                           # (two threads' backwards may share a parameter)
            if variable._grad is None:
                variable._grad = _first_leaf_grad(variable, grad)
                return True
            np.add(variable._grad, grad, out=variable._grad, casting="same_kind")
        return False
    dtype = variable._data.dtype
    if grad.dtype is not dtype and grad.dtype != dtype:   # `is`: the cheap common case
        grad = grad.astype(dtype)
    old = node.grad_output
    if old is None:                               # a node's output: the first gradient
        node.grad_output = grad
        if node._block is not None:
            node._block.allocator.retain(grad)    # (a pool's use counts; nothing on an arena)
        return True
    # out of place: grad arrays may be shared views (add hands grad_output to both parents)
    node.grad_output = np.add(old, grad, out=node.buffer(old, grad, kind="grad"))
    if node._block is not None:
        node._block.allocator.use_instead(old, node.grad_output)
    return False


def _first_leaf_grad(variable, grad):
    """The leaf's own gradient array (kept across zero_grad), holding a copy of grad: the grads
    backward returns may alias each other."""
    buffer = variable._grad_buffer
    if buffer is None:
        buffer = variable._grad_buffer = np.array(grad, dtype=variable._data.dtype)
    elif grad is not buffer:   # (an op may have written it there: Function.grad_buffer)
        np.copyto(buffer, grad, casting="same_kind")
    return buffer


def topo_order(root) -> list:
    """Nodes reachable from root, each after all the nodes that feed it (iterative DFS post-order).

    A node is marked visited when it is expanded, not when it is pushed: a node pushed early by
    one consumer may be reached again deeper in another consumer's branch, and it must then be
    finished there, before that consumer.
    """
    order, visited, stack = [], set(), [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
        elif node not in visited:
            visited.add(node)
            stack.append((node, True))
            for parent in node.inputs:
                fn = parent.grad_fn
                if fn is not None and fn not in visited:
                    stack.append((fn, False))
    return order


def backward(loss, order: str = "pending", *, shuffle=None, retain_graph=None) -> None:
    """Fill `.grad` of every leaf that requires grad with d loss / d leaf.

    order="pending" counts down each node's pending_count and runs nodes whose consumers have all
    sent their gradient (dependency counting); order="topo" sorts the graph and walks it in
    reverse. Both give the same gradients. shuffle (an int seed or a random.Random) makes the
    pending scheduler take ready nodes in random order, which must not change any result.

    Rules: the loss must be a scalar that requires grad; leaf grads add up across calls until
    zero_grad(); backward consumes the graph (retain_graph=True is refused), so differentiate again
    by running the forward computation again, or sum several losses and call backward once.
    """
    check_no_retain_graph(retain_graph, "backward")
    run = _scheduler(order, shuffle)
    recorder = modes.recorder
    if recorder is None:
        for _ in run(loss, False, shuffle):
            pass
    else:   # inside minigrad.record(): the same run, its steps written to the trace
        for group in run(loss, True, shuffle):
            recorder.on_steps(group)


def backward_steps(loss, order: str = "pending", *, shuffle=None,
                   retain_graph=None) -> Iterator[Step]:
    """backward() one event at a time: stop half way and the leaf grads written so far are real."""
    check_no_retain_graph(retain_graph, "backward_steps")
    return (step for group in backward_groups(loss, order, shuffle=shuffle) for step in group)


def backward_groups(loss, order: str = "pending", *, shuffle=None) -> Iterator[list]:
    """backward() one engine step at a time: each item is the list of Steps of one step (the
    seed, one node's apply with all it caused, or done)."""
    return (expand(group) for group in compact_groups(loss, order, shuffle=shuffle))


def compact_groups(loss, order: str = "pending", *, shuffle=None) -> Iterator[list]:
    """backward_groups() as the schedulers make them (see steps.expand), written to the trace
    when a recorder is on: what the trace and the stepper widget read."""
    root = getattr(loss, "grad_fn", None)   # (not a Variable: the scheduler's check_loss says so)
    groups = _marked_stepping(_scheduler(order, shuffle)(loss, True, shuffle), root)
    recorder = modes.recorder
    return groups if recorder is None else _recorded(groups, recorder)


def _marked_stepping(groups, root):
    """groups, with root's graph marked as being stepped from the first step (the seed: the loss
    was checked) to the last, and as stopped if the generator is closed before: a backward() of
    it meanwhile is refused with that fix instead of being told the graph was consumed."""
    mine = False
    try:
        for group in groups:
            mine = root is not None and not (group and group[-1][0] == "done")
            if mine:
                stepping_roots[root] = "running"
            elif root is not None:
                stepping_roots.pop(root, None)
            yield group
    finally:
        if mine:
            stepping_roots[root] = "stopped"


def _recorded(groups, recorder):
    for group in groups:
        recorder.on_steps(group)
        yield group


def _scheduler(order, shuffle):
    if order == "pending":
        return run_pending
    if order == "topo":
        if shuffle is not None:
            raise ValueError("backward(order='topo') walks one fixed order; shuffle= applies to "
                             "order='pending' only.")
        return run_topo
    raise ValueError(f"backward: unknown order={order!r}; use 'pending' (dependency counting) "
                     f"or 'topo' (topological sort).")


# The schedulers are generators. With stepping=False they yield nothing and build no Step at
# all (plain backward); with stepping=True they yield one list of Steps per engine step.

def run_pending(loss, stepping: bool, shuffle):
    """Dependency counting: run any node whose pending count is 0, until none is left."""
    root = check_loss(loss)
    seed = _seed(loss)
    if stepping:
        yield seed_steps(loss, root, seed)
    if root is None:
        return
    pick = list.pop if shuffle is None else _random_pick(shuffle)   # any ready node will do
    ready, reached, ran = [root], [root], 0
    waiting = _Waiting(reached)
    steps = [] if stepping else None
    while ready:
        node = pick(ready)
        if stepping and node.recompute_groups is not None:   # a checkpoint: its own steps
            yield from node.recompute_groups()
        _apply(node, ready, reached, steps)   # appends the parents it made ready
        ran += 1
        if stepping:
            yield steps
            steps = []
        # (ran < len(reached): a node got a gradient and has not run; only then is one waiting)
        if not ready and ran < len(reached) and (stalled := waiting.newest()) is not None:
            # Its remaining consumers are not on the loss's path: no more gradient can arrive.
            ready.append(stalled)
            if stepping:
                yield [Step("ready", stalled, None, None, stalled.pending_count)]
    check_all_applied(reached)                       # (in debug mode)
    if stepping:
        yield [Step("done", root)]


def run_topo(loss, stepping: bool, shuffle):
    """Topological sort: run every node after all its consumers, in reverse DFS post-order."""
    root = check_loss(loss)
    order = topo_order(root) if root is not None else []
    for node in order:
        if node.released:   # (not the root: check_loss saw it) reached from another loss too
            raise consumed(node, shared=True)
    seed = _seed(loss)
    if stepping:
        yield seed_steps(loss, root, seed)
    if root is None:
        return
    ready = []   # pending counts still count down, for the views; readiness is not used here
    steps = [] if stepping else None
    for node in reversed(order):
        if stepping and node.recompute_groups is not None:   # a checkpoint: its own steps
            yield from node.recompute_groups()
        _apply(node, ready, None, steps)
        if stepping:
            yield steps
            steps = []
    check_all_applied(order)                         # (in debug mode)
    if stepping:
        yield [Step("done", root)]


def _apply(node, ready, reached, steps) -> None:
    """Run one node's backward and give each parent its gradient (the chain rule, one node)."""
    check_can_run(node)
    grad_output = node.grad_output
    grads = checked_grads(node, node.backward(node, grad_output))   # one per input
    if steps is not None:
        steps.append(apply_step(node, grad_output))
    inputs, saved = node.inputs, node.saved_tensors
    node.release()                                # backward consumes the graph
    for parent, grad in zip(inputs, grads):
        if not parent.requires_grad:
            continue
        fn = parent.grad_fn
        if grad is None or (fn is not None and fn.released):
            raise bad_edge(node, parent, grad, inputs)
        first = accumulate_grad(parent, grad)
        count = None
        if fn is not None:                        # one consumer fewer to wait for
            if first and reached is not None:
                reached.append(fn)
            count = fn.pending_count = fn.pending_count - 1
            if count == 0:
                ready.append(fn)
            elif count < 0 and debug_flag[0]:
                raise negative_count(fn, count)
        if steps is not None:
            steps.append(accumulate_step(node, inputs, parent, grad, count, first))
    if node._block is not None:   # a pool frees what no node needs any more; an arena waits
        node._block.allocator.done_with(grad_output, saved, grads)


def _seed(loss):
    """d loss / d loss = 1."""
    seed = np.ones(loss._data.shape, loss._data.dtype)
    accumulate_grad(loss, seed)
    return seed


class _Waiting:
    """The nodes that hold a gradient but have not run; newest() is the newest of them, or None.

    When the ready queue runs dry while such nodes remain, their pending counts include consumers
    that the loss does not depend on. The newest one (highest seq) cannot be waiting for any node
    that will still run: every consumer is created after its inputs.

    The plain idea is `max((n for n in reached if not n.released), key=seq)`. Asked at every
    stall it rescans all that was reached, and a chain whose every link feeds an unused branch
    stalls at every link: O(n²). So the reached nodes go on a heap by seq as they come (each
    goes in once and, once it has run, out once): n log n for a whole backward.
    """

    def __init__(self, reached: list):
        self.reached, self.heap, self.fed = reached, [], 0

    def newest(self):
        reached, heap = self.reached, self.heap
        for node in reached[self.fed:]:                 # reached since the last call
            heapq.heappush(heap, (-node.seq, id(node), node))
        self.fed = len(reached)
        while heap and heap[0][2].released:             # ran since: not waiting any more
            heapq.heappop(heap)
        return heap[0][2] if heap else None


def _random_pick(shuffle):
    rng = shuffle if isinstance(shuffle, random.Random) else random.Random(shuffle)

    def pick(ready: list):
        i = rng.randrange(len(ready))
        ready[i], ready[-1] = ready[-1], ready[i]
        return ready.pop()
    return pick
