"""The backward engine: accumulate_grad and the two schedulers (topological and pending-count).

Each graph walk is one short iterative function (no recursion, so a 10,000-op chain is fine).
The engine reads graphs by duck typing and never imports Variable or Function:

* a Variable has `data`, `requires_grad`, `grad_fn` (None for a leaf) and `_grad` (leaf gradient);
* a node (a Function instance) has `inputs` (its parents), `backward`, `pending_count`,
  `grad_output` (the gradient of its output, summed here while backward runs), `seq` (creation
  order), `released` and `release()`.

Both schedulers share `_apply`, the one step that runs a node's backward and hands each parent
its gradient. `backward()` and `backward_steps()` run the same generators: with `steps=None` no
Step record is built, so plain backward pays almost nothing for the ability to step.
"""
from __future__ import annotations

import functools
import random
from typing import Iterator, NamedTuple

import numpy as np

from .arena import Pool, stale_error
from .errors import AnomalyError, BackwardError, InvariantError, ShapeError
from .kernels import sum_to_shape
from .modes import _debug, modes


class Step(NamedTuple):
    """One event of a backward run, as yielded by backward_steps().

    kind: "start" (seed dL/dL = 1 into the loss), "apply" (node's backward runs, grad = its
    grad_output), "accumulate" (grad added into `variable`, first_write tells assign vs sum),
    "pending" (node's pending_count after a decrement), "ready" (node can run now), "done";
    and "recompute" (a minigrad.checkpoint node ran its segment again, recording it).
    """

    kind: str
    node: object = None
    variable: object = None
    grad: object = None
    pending_count: int | None = None
    first_write: bool | None = None
    total: object = None   # "accumulate": the gradient summed so far (read it before the next
    #                        step: later steps may add to the same array)


PREVIEW = 8   # how many leading values a Step or a trace keeps of an array
_step = functools.partial(tuple.__new__, Step)   # Step(...) without NamedTuple's Python-level
#                                                  __new__: stepping makes several per node


def preview(array) -> np.ndarray:
    """A small copy of an array's first values in C order (cheap even for big arrays)."""
    if type(array) is not np.ndarray:
        array = np.asarray(array)
    return array.flat[:PREVIEW]


def accumulate_grad(variable, grad) -> bool:
    """The one place gradients are summed. Returns True on the first write.

    Reduces a broadcast gradient to the variable's shape, casts it to the variable's dtype, then
    assigns it (first write) or adds it. Leaves keep their grad in `.grad` (a private copy, summed
    in place); a non-leaf's grad is kept on its node as `grad_output` only until the node runs.
    """
    data = variable._data
    if grad.shape != data.shape:
        reduced = sum_to_shape(grad, data.shape)
        if reduced is None:
            raise ShapeError(
                f"accumulate_grad: a gradient of shape {grad.shape} cannot be reduced to the shape "
                f"{data.shape} of {_label(variable)}. Rule: a backward returns, for each input, a "
                f"gradient of the input's shape or of a shape it broadcasts to. Fix the backward of "
                f"the op that consumed this variable.")
        grad = reduced
    node = variable.grad_fn
    if node is None:
        if variable._grad is None:
            buffer = variable._grad_buffer
            if buffer is None:   # own copy: the grads backward returns may alias each other
                buffer = variable._grad_buffer = np.array(grad, dtype=data.dtype)
            elif grad is not buffer:   # (an op may have written it there: Function.grad_buffer)
                np.copyto(buffer, grad, casting="same_kind")
            variable._grad = buffer
            return True
        np.add(variable._grad, grad, out=variable._grad, casting="same_kind")
        return False
    if grad.dtype is not data.dtype and grad.dtype != data.dtype:   # `is`: the cheap common case
        grad = grad.astype(data.dtype)
    block = node._block
    pool = block.allocator if block is not None and type(block.allocator) is Pool else None
    old = node.grad_output
    if old is None:
        node.grad_output = grad
        if pool is not None:
            pool.retain(grad)
        return True
    # out of place: grad arrays may be shared views (add hands grad_output to both parents)
    node.grad_output = np.add(old, grad, out=node.buffer(old, grad, kind="grad"))
    if pool is not None:
        pool.retain(node.grad_output)
        pool.release(old)
    return False


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


def backward(loss, order: str = "pending", *, shuffle=None) -> None:
    """Fill `.grad` of every leaf that requires grad with d loss / d leaf.

    order="pending" counts down each node's pending_count and runs nodes whose consumers have all
    sent their gradient (design B); order="topo" sorts the graph and walks it in reverse (designs
    A and C). Both give the same gradients. shuffle (an int seed or a random.Random) makes the
    pending scheduler take ready nodes in random order, which must not change any result.

    Rules: the loss must be a scalar that requires grad; leaf grads add up across calls until
    zero_grad(); backward consumes the graph (no retain_graph), so differentiate again by running
    the forward computation again.
    """
    run = _scheduler(order, shuffle)
    recorder = modes.recorder
    if recorder is None:
        for _ in run(loss, False, shuffle):
            pass
    else:   # inside minigrad.record(): the same run, its steps written to the trace
        for group in run(loss, True, shuffle):
            recorder.on_steps(group)


def backward_steps(loss, order: str = "pending", *, shuffle=None) -> Iterator[Step]:
    """backward() one event at a time: stop half way and the leaf grads written so far are real."""
    return (step for group in backward_groups(loss, order, shuffle=shuffle) for step in group)


def backward_groups(loss, order: str = "pending", *, shuffle=None) -> Iterator[list]:
    """backward() one engine step at a time: each item is the list of Steps of one step (the
    seed, one node's apply with all it caused, or done)."""
    return (expand(group) for group in compact_groups(loss, order, shuffle=shuffle))


def compact_groups(loss, order: str = "pending", *, shuffle=None) -> Iterator[list]:
    """backward_groups() as the schedulers make them (see expand), written to the trace when a
    recorder is on: what the trace and the stepper widget read."""
    groups = _scheduler(order, shuffle)(loss, True, shuffle)
    recorder = modes.recorder
    return groups if recorder is None else _recorded(groups, recorder)


def expand(group: list) -> list:
    """The Steps of a compact group. To keep stepping cheap, the schedulers write plain tuples
    laid out like Step, and fold what an accumulate into a node's output does to that node into
    the accumulate itself (its pending_count); here that becomes the accumulate, a "pending"
    Step with the node's count, and a "ready" Step when the count reached 0."""
    steps = []
    for step in group:
        kind, node, variable, grad, count, first_write, total = step
        if kind != "accumulate" or count is None:
            steps.append(_step(step))
            continue
        fn = variable.grad_fn
        steps.append(_step(("accumulate", node, variable, grad, None, first_write, total)))
        steps.append(_step(("pending", fn, variable, None, count, None, None)))
        if count == 0:
            steps.append(_step(("ready", fn, variable, None, 0, None, None)))
    return steps


def _recorded(groups, recorder):
    for group in groups:
        recorder.on_steps(group)
        yield group


def _scheduler(order, shuffle):
    if order == "pending":
        return _run_pending
    if order == "topo":
        if shuffle is not None:
            raise ValueError("backward(order='topo') walks one fixed order; shuffle= applies to "
                             "order='pending' only.")
        return _run_topo
    raise ValueError(f"backward: unknown order={order!r}; use 'pending' (dependency counting) "
                     f"or 'topo' (topological sort).")


# The schedulers are generators. With stepping=False they yield nothing and build no Step at
# all (plain backward); with stepping=True they yield one list of Steps per engine step.

def _run_pending(loss, stepping: bool, shuffle):
    root = _check_loss(loss)
    seeded = _seed(loss, root, stepping)
    if stepping:
        yield seeded
    if root is None:
        return
    pick = _random_pick(shuffle) if shuffle is not None else list.pop
    ready, reached = [root], [root]
    steps = [] if stepping else None
    while True:
        while ready:
            node = pick(ready)
            if stepping and hasattr(node, "recompute_groups"):   # a checkpoint: its own steps
                yield from node.recompute_groups()
            _apply(node, ready, reached, steps)
            if stepping:
                yield steps
                steps = []
        stalled = _stalled_node(reached)
        if stalled is None:
            break
        # Its remaining consumers are not on the loss's path, so no more gradient can arrive.
        ready.append(stalled)
        if stepping:
            yield [Step("ready", stalled, None, None, stalled.pending_count)]
    if _debug[0]:
        _check_all_applied(reached)
    if stepping:
        yield [Step("done", root)]


def _run_topo(loss, stepping: bool, shuffle):
    root = _check_loss(loss)
    order = topo_order(root) if root is not None else []
    for node in order:
        if node.released:
            raise _consumed(node)
    seeded = _seed(loss, root, stepping)
    if stepping:
        yield seeded
    if root is None:
        return
    ready = []   # pending counts still count down, for the views; readiness is not used here
    steps = [] if stepping else None
    for node in reversed(order):
        if stepping and hasattr(node, "recompute_groups"):   # a checkpoint: its own steps
            yield from node.recompute_groups()
        _apply(node, ready, None, steps)
        if stepping:
            yield steps
            steps = []
    if _debug[0]:
        _check_all_applied(order)
    if stepping:
        yield [Step("done", root)]


def _apply(node, ready, reached, steps) -> None:
    """Run one node's backward and give each parent its gradient (the chain rule, one node)."""
    grad_output = node.grad_output
    if node.released:
        raise _consumed(node)
    block = node._block   # None unless the node was recorded inside an arena or pool scope
    if block is not None and not block.alive:
        raise stale_error(f"The graph of {node.name} (needed by backward)", block)
    if _debug[0] and grad_output is None:
        raise InvariantError(f"{node.name}: applied before its output gradient arrived "
                             f"(scheduler bug: a node runs only after a consumer sent a gradient).")
    grads = node.backward(node, grad_output)
    if type(grads) is not tuple:
        grads = (grads,)
    inputs = node.inputs
    if len(grads) != len(inputs):
        raise BackwardError(f"{node.name}.backward returned {len(grads)} gradients for "
                            f"{len(inputs)} inputs; return one per input (None where not needed).")
    if modes.anomaly:
        _check_finite(node, grads)
    if steps is not None:   # (plain tuples laid out like Step: see expand)
        steps.append(("apply", node, None, grad_output, None, None, None))
    saved = node.saved_tensors
    node.release()
    for parent, grad in zip(inputs, grads):
        if not parent.requires_grad:
            continue
        if grad is None:
            raise BackwardError(f"{node.name}.backward returned None for input "
                                f"{inputs.index(parent)}, which requires grad; return its "
                                f"gradient (shape {parent._data.shape}).")
        fn = parent.grad_fn
        if fn is not None and fn.released:   # a gradient must never land where no one reads it
            raise _consumed(fn)
        first = accumulate_grad(parent, grad)
        count = None
        if fn is not None:
            if first and reached is not None:
                reached.append(fn)
            count = fn.pending_count = fn.pending_count - 1
            if count == 0:
                ready.append(fn)
            elif count < 0 and _debug[0]:
                raise InvariantError(f"{fn.name}: pending_count went negative ({count}); it must "
                                     f"equal the consumer edges recorded in forward (h + h "
                                     f"counts 2).")
        if steps is not None:   # one compact Step for the write and the count it left (expand)
            total = parent._grad if fn is None else fn.grad_output
            if inputs.count(parent) > 1:   # x + x: the next write lands before anyone reads
                total = preview(total)
            steps.append(("accumulate", node, parent, grad, count, first, total))
    pool = block.allocator if block is not None and type(block.allocator) is Pool else None
    if pool is not None:   # use counts: free what no node still needs (design E)
        if not node.__dict__.get("released_grad_output"):   # (a checkpoint may free it early)
            pool.release(grad_output)
        for array in saved:
            pool.release(array)
        for grad in grads:
            pool.free_if_unused(grad)


def _check_loss(loss):
    if not loss.requires_grad:
        raise BackwardError(
            f"backward() on {_label(loss)}, which does not require grad: nothing in its graph is a "
            f"parameter. Create the parameters with create_leaf(..., requires_grad=True) and make "
            f"sure the loss was not computed under no_grad().")
    if loss._data.size != 1:
        raise BackwardError(
            f"backward() on {_label(loss)} of shape {loss._data.shape}: backward is defined for "
            f"scalar losses only. Reduce it first, e.g. loss.sum().backward() or "
            f"loss.mean().backward().")
    root = loss.grad_fn
    if root is not None and root.released:
        raise _consumed(root)
    return root


def _seed(loss, root, stepping: bool) -> list | None:
    """d loss / d loss = 1; returns the Steps of this first step (when stepping)."""
    seed = np.ones(loss._data.shape, loss._data.dtype)
    accumulate_grad(loss, seed)
    if not stepping:
        return None
    start = Step("start", root, loss, seed, None, True)
    return [start] if root is not None else [start, Step("done")]


def _consumed(node) -> BackwardError:
    return BackwardError(
        f"backward() reached the {node.name} node, whose graph was already consumed by an earlier "
        f"backward(): minigrad frees saved tensors as backward runs and keeps no retain_graph. "
        f"Run forward again to build a fresh graph, then call backward on the new loss. "
        f"(Leaf grads accumulated by this call so far are partial: zero_grad() before retrying.)")


def _stalled_node(reached):
    """The newest node that holds a gradient but has not run, or None.

    When the ready queue runs dry while such nodes remain, their pending counts include consumers
    that the loss does not depend on. The newest one (highest seq) cannot be waiting for any node
    that will still run: every consumer is created after its inputs.
    """
    waiting = [n for n in reached if not n.released]
    return max(waiting, key=lambda n: n.seq) if waiting else None


def _check_all_applied(nodes) -> None:
    missed = [n.name for n in nodes if not n.released]
    if missed:
        raise InvariantError(f"backward finished with nodes never applied: {missed}")


def _check_finite(node, grads) -> None:
    for i, grad in enumerate(grads):
        if grad is not None and not np.all(np.isfinite(grad)):
            where = getattr(node, "created_at", "an unknown place (created outside detect_anomaly)")
            raise AnomalyError(
                f"{node.name}.backward produced NaN or Inf in the gradient for input {i} "
                f"(shape {np.shape(grad)}). The {node.name} op was created at {where}. Look at "
                f"its inputs there: log or division at 0, a negative base with a fractional power, "
                f"exp overflowing.")


def _random_pick(shuffle):
    rng = shuffle if isinstance(shuffle, random.Random) else random.Random(shuffle)

    def pick(ready: list):
        i = rng.randrange(len(ready))
        ready[i], ready[-1] = ready[-1], ready[i]
        return ready.pop()
    return pick


def _label(variable) -> str:
    name = getattr(variable, "name", None)
    if name:
        return f"Variable {name!r}"
    fn = variable.grad_fn
    return f"the output of {fn.name}" if fn is not None else "a leaf Variable"
