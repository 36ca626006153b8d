"""Gradients as values: mg.grad, and backward(create_graph=True) for gradients of gradients.

backward() runs each node's numpy backward and frees the node: fast, and the gradient it leaves
is a plain array with no history. To differentiate a gradient again, its computation must itself
be a graph. With create_graph=True each node runs its `differentiable_backward` instead: the same
derivative written with Variable ops, so every multiplication of the chain rule is recorded like
any forward op, and the forward graph is kept (the recorded gradient reads its values: tanh's
backward needs tanh's input, still wired to everything before it).

One walk serves both: nodes taken newest first (each node is created after its inputs, so a
descending `seq` is a reverse topological order), each one's output gradient summed from its
consumers before it runs. Like the engine, this module reads graphs by duck typing. It is not
the engine's scheduler: it writes no step records (backward_steps and the stepper widget show
backward() only) and, inside a Pool scope, returns no buffer early (the scope's end does).
"""
from __future__ import annotations

import numpy as np

from ..arena import stale_error
from ..errors import BackwardError
from ..kernels import sum_to_shape
from ..modes import modes
from ..optable import TABLE
from .engine import accumulate_grad
from .guards import check_can_run, check_loss, checked_grads, describe, unreducible


def grad(outputs, inputs, grad_outputs=None, create_graph: bool = False,
         allow_unused: bool = False) -> tuple:
    """d outputs / d inputs, one gradient per input, as Variables; leaf `.grad`s are not touched.

    outputs: a Variable or a list of them (their gradients add up); grad_outputs: the vector of
    the vector-Jacobian product, one per output (default 1, for scalar outputs only).
    create_graph=False: the gradients are constants and the graph is consumed, as by backward().
    create_graph=True: the gradients are Variables with a graph (differentiate them again) and
    the forward graph is kept. allow_unused=True: an input the outputs do not depend on gets a
    zero gradient instead of an error.
    """
    outputs, inputs = _as_list(outputs), _as_list(inputs)
    seeds = _seeds(outputs, grad_outputs)
    for i, x in enumerate(inputs):
        if not x.requires_grad:
            raise BackwardError(f"mg.grad: input {i}, {describe(x)}, does not require grad, so it "
                                f"has no gradient. Fix: create it with requires_grad=True, or "
                                f"leave it out of inputs.")
    node_grads, leaf_grads = _walk(outputs, seeds, create_graph)
    results = []
    for i, x in enumerate(inputs):
        g = leaf_grads.get(id(x)) if x.grad_fn is None else node_grads.get(x.grad_fn)
        if g is None and not allow_unused:
            raise BackwardError(f"mg.grad: the outputs do not depend on input {i}, {describe(x)}: "
                                f"no path leads from it to them. Fix: check the inputs list, or "
                                f"pass allow_unused=True for a zero gradient.")
        if g is None:
            g = np.zeros(x.shape, x.dtype)
        results.append(type(x)(g) if isinstance(g, np.ndarray) else g)
    return tuple(results)


def backward_create_graph(loss) -> None:
    """loss.backward(create_graph=True): each leaf's `.grad` gets its values (an array, as always,
    so optimisers read it unchanged) and `.grad_variable` the gradient as a Variable with a
    graph; both add up across calls until zero_grad()."""
    check_loss(loss)
    _, leaf_grads = _walk([loss], [None], True, leaves=True)
    for leaf, g in leaf_grads.values():
        accumulate_grad(leaf, g.data)   # the values, as backward() writes them
        old = leaf._grad_variable
        leaf._grad_variable = g if old is None else old + g


def _walk(outputs, seeds, create_graph: bool, leaves: bool = False):
    """Run every node between the outputs and the leaves, newest first. Returns each node's
    output gradient and each leaf's gradient (by id; with leaves=True, (leaf, gradient))."""
    if create_graph and modes.capture is not None:
        raise _no_aot_create_graph()
    if create_graph and not modes.grad_enabled:   # its ops would record nothing
        raise BackwardError("create_graph=True inside no_grad(): the gradient's ops would build no "
                            "graph, so it could not be differentiated again. Fix: take it outside "
                            "the no_grad() block.")
    node_grads, leaf_grads = {}, {}
    for out, seed in zip(outputs, seeds):
        if seed is None:
            seed = np.ones(out.shape, out.dtype)        # d out / d out = 1
        elif not create_graph and hasattr(seed, "grad_fn"):
            seed = seed.data                            # a plain backward reads values only
        _send(out, seed, create_graph, node_grads, leaf_grads, leaves)
    for node in sorted(_reached(outputs), key=lambda n: -n.seq):
        g = node_grads.get(node)
        if g is None:          # no gradient reaches it (a branch off the outputs' paths)
            continue
        grads = _run(node, g, create_graph)
        for parent, parent_grad in zip(node.inputs, grads):
            if parent.requires_grad and parent_grad is not None:
                _send(parent, parent_grad, create_graph, node_grads, leaf_grads, leaves)
        if not create_graph:
            node.release()     # consumed, as backward() consumes it
    return node_grads, leaf_grads


def _run(node, grad_output, create_graph: bool) -> tuple:
    """One node's gradients: its numpy backward, or its differentiable one (recorded)."""
    if create_graph and node.released:
        raise BackwardError(f"create_graph reached the {node.name} node, whose graph an earlier "
                            f"backward() consumed. Rule: a gradient of a gradient reads the forward "
                            f"graph, so the first gradient must be taken with create_graph=True "
                            f"(which keeps the graph). Fix: run forward again and take the first "
                            f"gradient with mg.grad(..., create_graph=True).")
    if not create_graph:
        node.grad_output = grad_output
        check_can_run(node)
        grads = node.backward(node, grad_output)
    else:
        check_can_run_recorded(node)
        grads = node.differentiable_backward(node, grad_output)
    return checked_grads(node, grads)   # one per input (finite, under detect_anomaly)


def check_can_run_recorded(node) -> None:
    """create_graph needs every op on the path to have a differentiable backward."""
    if node.differentiable_backward is None:
        raise BackwardError(
            f"create_graph reached the {node.name} node, which has only a numpy backward. Rule: "
            f"create_graph needs a differentiable backward for every op on the path (its "
            f"derivative written with Variable ops, so that it is recorded). Fix: write the "
            f"function with ops that have one ({', '.join(differentiable_ops())}), or give "
            f"{type(node).__name__} a `differentiable_backward(ctx, grad_output)` (lesson 13).")
    block = node._block    # None unless recorded inside an arena or pool scope
    if block is not None and not block.alive:
        raise stale_error(f"The graph of {node.name} (needed by create_graph)", block)
    guard = node._locked   # saved arrays changed since forward: refused, as backward refuses
    if guard is not None:
        guard.check(node)


def _send(variable, g, create_graph: bool, node_grads: dict, leaf_grads: dict, leaves: bool):
    """Add g into variable's gradient: accumulate_grad's sum, without writing `.grad`."""
    if g.shape != variable.shape:               # undo broadcasting (Variables sum too)
        reduced = sum_to_shape(g, variable.shape)
        if reduced is None:
            raise unreducible(variable, g)
        g = reduced
    if not create_graph:                        # a copy: an op may have written g into a
        g = np.array(g, dtype=variable.dtype)   # parameter's gradient buffer (grad_buffer)
    elif isinstance(g, np.ndarray):
        g = type(variable)(g)                   # a constant seed
    node = variable.grad_fn
    if node is not None:
        old = node_grads.get(node)
        node_grads[node] = g if old is None else old + g
    elif leaves:
        old = leaf_grads.get(id(variable))
        leaf_grads[id(variable)] = (variable, g if old is None else old[1] + g)
    else:
        old = leaf_grads.get(id(variable))
        leaf_grads[id(variable)] = g if old is None else old + g


def _reached(outputs) -> set:
    """The nodes the outputs depend on (iterative DFS)."""
    seen, stack = set(), [out.grad_fn for out in outputs if out.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        stack.extend(p.grad_fn for p in node.inputs if p.grad_fn is not None)
    return seen


def _seeds(outputs: list, grad_outputs) -> list:
    given = _as_list(grad_outputs) if grad_outputs is not None else [None] * len(outputs)
    if len(given) != len(outputs):
        raise BackwardError(f"mg.grad: {len(outputs)} outputs but {len(given)} grad_outputs; "
                            f"give one per output (or none, for scalar outputs).")
    for i, out in enumerate(outputs):
        if not out.requires_grad:
            raise BackwardError(
                f"mg.grad: output {i}, {describe(out)}, does not require grad: no parameter is "
                f"in its graph. If it was computed from a gradient, that gradient is a constant: "
                f"take it with mg.grad(..., create_graph=True) (or backward(create_graph=True) "
                f"and .grad_variable) so that its computation is recorded and can be "
                f"differentiated. Otherwise create the parameters with requires_grad=True.")
    for out, seed in zip(outputs, given):
        check_loss(out) if seed is None else _check_seed(out, seed)
    return [None if s is None else s if hasattr(s, "grad_fn") else np.asarray(s, out.dtype)
            for out, s in zip(outputs, given)]


def _check_seed(out, seed) -> None:
    shape = seed.shape if hasattr(seed, "grad_fn") else np.shape(seed)
    if tuple(shape) != out.shape:
        raise BackwardError(f"mg.grad: grad_outputs of shape {tuple(shape)} for an output of shape "
                            f"{out.shape}. Rule: the vector of a vector-Jacobian product has the "
                            f"output's shape. Fix: pass one of shape {out.shape}.")
    if out.grad_fn is not None and out.grad_fn.released:
        check_loss(out)   # (its message: the graph was consumed)


def _as_list(x) -> list:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def differentiable_ops() -> list:
    """The ops that can run under create_graph (their Function has a differentiable_backward)."""
    return sorted(row.name for row in TABLE.values()
                  if row.function is not None and row.function.differentiable_backward is not None)


def _no_aot_create_graph() -> BackwardError:
    return BackwardError(
        "create_graph inside aot.capture: not supported. The ahead-of-time engine captures one "
        "forward graph and derives its backward from one rule per op; its backward ops "
        "(tanh_backward, matmul with transposes, ...) have no rules of their own, so a gradient "
        "it computes cannot be differentiated again. Fix: take higher-order gradients with the "
        "eager engine, mg.grad(..., create_graph=True), outside the captured function.")
