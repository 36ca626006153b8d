"""The engine's rules as checks and error messages, kept out of the functions lessons print.

Each check raises an error that names the op, the shapes, the rule that was broken and the fix
(design §9); the engine calls them in one line where the rule applies. This module reads graphs
by duck typing, like the engine, and imports neither Variable nor Function.
"""
from __future__ import annotations

import gc
import math
import os
import traceback
import weakref

import numpy as np

from ..arena import stale_error
from ..errors import (AnomalyError, BackwardError, ConversionError, DomainError, DtypeError,
                     InplaceError, InvariantError, ShapeError)
from ..modes import debug_flag, modes

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


# -- naming things in messages ---------------------------------------------------------------------
def describe(variable, with_shape: bool = True) -> str:
    """A Variable as messages name it: its name, or what made it, then its shape (left out when
    the message gives the shape that matters)."""
    fn = variable.grad_fn
    who = (f"Variable {variable.name!r}" if variable.name
           else f"the output of {fn.name}" if fn is not None else "a leaf Variable")
    if not with_shape:
        return who
    if variable.name or fn is not None:
        return f"{who} (shape {variable.shape})"
    return f"{who} of shape {variable.shape}"


# -- leaves ----------------------------------------------------------------------------------------
def check_leaf_dtype(array: np.ndarray, given: str, requires_grad: bool) -> None:
    if array.dtype.kind not in "biuf":
        raise DtypeError(f"create_leaf: data of dtype {array.dtype} ({given}) is not "
                         f"numeric. Pass numbers (int, float, bool) or a numeric numpy array.")
    if requires_grad and array.dtype.kind != "f":
        raise DtypeError(
            f"create_leaf(requires_grad=True): data of dtype {array.dtype} cannot have a gradient; "
            f"gradients need floating point numbers. Fix: pass float data, e.g. "
            f"create_leaf(data, requires_grad=True, dtype=np.float32).")


def not_numeric(data, exc: Exception) -> DtypeError:
    return DtypeError(f"create_leaf: cannot make a numeric array from {type(data).__name__} "
                      f"({exc}). Pass a number, a (nested) list of numbers or a numpy array.")


def check_shareable(data, dtype, arena) -> None:
    """create_leaf(copy=False) shares the caller's array: it must be one, as it is."""
    if arena is not None:
        raise ValueError(f"create_leaf(copy=False, arena={arena.name!r}): arena= asks for a copy "
                         f"on the arena and copy=False for no copy; choose one. Fix: drop arena= "
                         f"to share your array, or drop copy=False to place a copy on the arena.")
    if not isinstance(data, np.ndarray):
        raise TypeError(f"create_leaf(copy=False): got {type(data).__name__}, but only a numpy "
                        f"array can be shared without a copy. Fix: pass np.asarray(data) or "
                        f"leave copy=True.")
    if dtype is not None and np.dtype(dtype) != data.dtype:
        raise DtypeError(f"create_leaf(copy=False, dtype={np.dtype(dtype)}): the array has dtype "
                         f"{data.dtype}, and converting it would be a copy. Fix: convert it first "
                         f"(data.astype({np.dtype(dtype).name})) or leave copy=True.")


# -- Variables meeting numpy, and hand-set gradients -------------------------------------------
def not_an_array(variable, what: str) -> ConversionError:
    return ConversionError(
        f"{what} got {describe(variable)}: a Variable is not a numpy array, and numpy would "
        f"either make an object array of Variables or compute without autograd. Rule: numpy "
        f"functions take arrays; minigrad ops take Variables. Fix: pass x.data (the values; "
        f"read-only for an op's output) or x.numpy() (a copy) to numpy, or use the minigrad op "
        f"(x.exp(), mg.exp(x), x.sum(), ...) to keep the gradient.")


def not_comparable(variable, op: str, other) -> ConversionError:
    """A comparison of a Variable: no op (it has no gradient), and Python's fallback for == and
    != compares identity, one False or True instead of numpy's elementwise mask."""
    theirs = describe(other) if hasattr(other, "grad_fn") else type(other).__name__
    return ConversionError(
        f"{op} of {describe(variable)} and {theirs}: a Variable is not compared (Python would "
        f"compare identity and give one bool, not numpy's elementwise mask). Rule: comparisons "
        f"have no gradient, so they are not ops. Fix: compare the arrays, e.g. `x.data == 0` or "
        f"`x.data > y.data` (a numpy bool mask, used as a constant), or `x is y` to ask whether "
        f"two Variables are the same one.")


def log_of_base(base, exponent):
    """log(base) for base ** x = exp(x * log(base)): a constant base must be positive."""
    try:
        array = np.asarray(base, dtype=np.result_type(base, np.float32))
    except (TypeError, ValueError) as exc:
        raise DtypeError(f"pow: cannot use {type(base).__name__} as the base of "
                         f"base ** {describe(exponent)} ({exc}). Pass a number or a numeric "
                         f"array.") from None
    if array.dtype.kind not in "biuf" or not np.all(array > 0):
        raise DomainError(
            f"pow: base ** {describe(exponent)} with a constant base of {array.dtype} values "
            f"{np.array2string(array.ravel()[:8], separator=', ')}: the power is computed as "
            f"exp(x * log(base)), defined only for base > 0 (log(0) = -inf, log of a negative "
            f"number is not real). Fix: use a positive base; for a negative base and integer "
            f"powers, write (-1) ** n * abs(base) ** x with n a plain number.")
    return math.log(base) if isinstance(base, (int, float)) else np.log(array)


def checked_grad(variable, value) -> np.ndarray:
    """A gradient assigned by hand: for a leaf, numeric, of the data's shape; copied."""
    if variable.grad_fn is not None:
        raise BackwardError(f"cannot set .grad of {describe(variable)}: only leaf gradients are "
                            f"kept (an op's output gets its gradient only while backward runs). "
                            f"Set the gradient of a leaf, or make the value a leaf.")
    try:
        array = np.array(value, dtype=variable._data.dtype)   # a copy: backward adds into it
    except (TypeError, ValueError) as exc:
        raise DtypeError(f".grad = {type(value).__name__} on {describe(variable)}: not numeric "
                         f"({exc}). Assign a numeric array, or None.") from None
    if array.shape != variable._data.shape:
        raise ShapeError(
            f".grad = an array of shape {array.shape} on {describe(variable)}: a gradient has "
            f"the shape of its data. Fix: assign an array of shape {variable._data.shape} "
            f"(np.full({variable._data.shape}, value) for one value), or None to forget it.")
    return array


def reshaped_while_saved(variable, shape: tuple) -> InplaceError:
    return InplaceError(
        f"w.data = an array of shape {shape} on {describe(variable)}: a graph that reads it "
        f"(saved its data, or will send it a gradient) is still alive, and its backward would "
        f"send a gradient of the old shape {variable.shape}. Rule: a parameter changes shape "
        f"only when no graph uses it. Fix: run backward (or drop the loss) first, then assign "
        f"the new data.")


def read_by_live_graph(variable) -> bool:
    """Whether a live graph node has variable among its inputs, so that its backward will send
    variable a gradient of the shape it has now. Nodes are found through the tuples that hold
    variable (gc.get_referrers scans the heap: run only when a leaf's data changes shape, which
    is rare; an add saves nothing, so the saved-array table cannot tell)."""
    for holder in gc.get_referrers(variable):
        if type(holder) is tuple:
            for node in gc.get_referrers(holder):
                if getattr(node, "inputs", None) is holder and getattr(node, "released", None) is False:
                    return True
    return False


# -- backward --------------------------------------------------------------------------------------
# The root nodes of the graphs a stepped backward (backward_steps, BackwardStepper) is half way
# through ("running"), or was closed half way through ("stopped"): a second backward of such a
# graph is refused with the fix. Weak keys: a graph nobody holds is not kept alive by this.
stepping_roots: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def check_loss(loss):
    """The loss backward starts from: a scalar that requires grad, whose graph is not consumed
    and not being stepped through. Returns its node (None for a leaf loss)."""
    if not hasattr(loss, "requires_grad"):   # (a list of losses, a number, an array)
        raise BackwardError(
            f"backward() takes one loss Variable, got {type(loss).__name__}. Fix: for several "
            f"losses sum them and call backward once, mg.backward(l1 + l2) (their graphs may "
            f"share nodes, which one backward consumes), or use mg.grad([l1, l2], inputs).")
    if not loss.requires_grad:
        who = describe(loss, with_shape=False)
        raise BackwardError(
            f"backward() on {who}, which does not require grad: nothing in its graph is a "
            f"parameter. Create the parameters with create_leaf(..., requires_grad=True) and make "
            f"sure the loss was not computed under no_grad().")
    if loss._data.size != 1:
        who = describe(loss, with_shape=False)
        raise BackwardError(
            f"backward() on {who} of shape {loss._data.shape}: backward is defined for "
            f"scalar losses only. Reduce it first, e.g. loss.sum().backward() or "
            f"loss.mean().backward().")
    root = loss.grad_fn
    if root is not None and root in stepping_roots:
        raise stepping_in_progress(loss, stepping_roots[root])
    if root is not None and root.released:
        raise consumed(root)
    return root


def check_no_retain_graph(retain_graph, where: str) -> None:
    """retain_graph=True is PyTorch's; minigrad keeps no graph after backward, on purpose."""
    if retain_graph:
        raise BackwardError(
            f"{where}(retain_graph={retain_graph!r}): minigrad has no retain_graph. Rule: backward "
            f"consumes the graph, freeing each saved tensor once its node has run (a kept graph "
            f"would keep all its memory). Fix: to differentiate several losses of one forward, sum "
            f"them and call backward once, (loss1 + loss2).backward(); to differentiate again, run "
            f"forward again; for a gradient of a gradient, mg.grad(loss, params, "
            f"create_graph=True) keeps the graph. (The tape keeps a graph on request too: "
            f"tape.backward(out, retain=True).)")


_RETRY = "(Leaf grads accumulated by this call so far are partial: zero_grad() before retrying.)"


def consumed(node, shared: bool = False) -> BackwardError:
    """node's graph was consumed by an earlier backward; shared: the loss being differentiated
    is a different one that reaches node (two losses of one forward)."""
    if not shared:
        return BackwardError(
            f"backward() reached the {node.name} node, whose graph was already consumed by an "
            f"earlier backward(): minigrad frees saved tensors as backward runs and keeps no "
            f"retain_graph. Run forward again to build a fresh graph, then call backward on the "
            f"new loss. {_RETRY}")
    by = "an earlier backward()" + (" (or a stepped backward still in progress)"
                                    if "running" in stepping_roots.values() else "")
    return BackwardError(
        f"backward() reached the {node.name} node, which {by} already consumed: this loss shares "
        f"that part of the graph with a loss differentiated before (two losses computed from one "
        f"intermediate, such as l1 and l2 from h). minigrad keeps no retain_graph. Fix: add the "
        f"losses and call backward once, (l1 + l2).backward(): one backward through the shared "
        f"graph gives every parameter the sum of both gradients. Or run forward again and call "
        f"backward on the new loss. {_RETRY}")


def stepping_in_progress(loss, state: str) -> BackwardError:
    """state: "running" (a stepped backward is half way) or "stopped" (it was closed half way)."""
    if state == "stopped":
        who = describe(loss, with_shape=False)
        return BackwardError(
            f"backward() on {who}: a stepped backward of this graph (backward_steps() or a "
            f"BackwardStepper) was closed half way (or stopped by an error), so the graph is partly "
            f"consumed and its leaf grads are partial. Fix: zero_grad(), run forward again and call backward on the new "
            f"loss.")
    who = describe(loss, with_shape=False)
    return BackwardError(
        f"backward() on {who}: a stepped backward of this graph is in progress (a "
        f"BackwardStepper or a backward_steps() generator has run part of it). Rule: one backward "
        f"consumes a graph, and that one has not finished. Fix: finish it, stepper.finish() or "
        f"`for _ in steps: pass` (the leaf grads are then complete); or close the generator, "
        f"steps.close(), then zero_grad() and run forward again for a new graph.")


def check_can_run(node) -> None:
    """A node may run once, while its memory lives, after its output gradient arrived."""
    if node.released:
        raise consumed(node)
    block = node._block   # None unless the node was recorded inside an arena or pool scope
    if block is not None and not block.alive:
        raise stale_error(f"The graph of {node.name} (needed by backward)", block)
    guard = node._locked   # saved arrays a user could write (readonly.py)
    if guard is not None:
        guard.check(node)
    if debug_flag[0] and node.grad_output is None:
        raise InvariantError(f"{node.name}: applied before its output gradient arrived "
                             f"(scheduler bug: a node runs only after a consumer sent a gradient).")


def checked_grads(node, grads) -> tuple:
    """What a backward returned, as a tuple of one gradient per input (finite, under anomaly
    detection)."""
    if type(grads) is not tuple:
        grads = (grads,)
    if len(grads) != len(node.inputs):
        raise BackwardError(f"{node.name}.backward returned {len(grads)} gradients for "
                            f"{len(node.inputs)} inputs; return one per input (None where not "
                            f"needed).")
    if modes.anomaly:
        _check_finite(node, grads)
    return grads


def bad_edge(node, parent, grad, inputs) -> BackwardError:
    """A gradient for parent that cannot be sent: missing, or its node already consumed."""
    if grad is not None:   # a gradient must never land where no one reads it
        return consumed(parent.grad_fn, shared=True)   # (this backward runs a node only once)
    return BackwardError(f"{node.name}.backward returned None for input "
                         f"{inputs.index(parent)}, which requires grad; return its "
                         f"gradient (shape {parent._data.shape}).")


def negative_count(fn, count: int) -> InvariantError:
    return InvariantError(f"{fn.name}: pending_count went negative ({count}); it must equal the "
                          f"consumer edges recorded in forward (h + h counts 2).")


def unreducible(variable, grad) -> ShapeError:
    who = describe(variable, with_shape=False)
    return ShapeError(
        f"accumulate_grad: a gradient of shape {grad.shape} cannot be reduced to the shape "
        f"{variable._data.shape} of {who}. Rule: a backward returns, for each input, "
        f"a gradient of the input's shape or of a shape it broadcasts to. Fix the backward of "
        f"the op that consumed this variable.")


def check_all_applied(nodes) -> None:
    """Debug mode: backward ran every node it reached."""
    if not debug_flag[0]:
        return
    missed = [n.name for n in nodes if not n.released]
    if missed:
        raise InvariantError(f"backward finished with nodes never applied: {missed}")


def _check_finite(node, grads) -> None:
    for i, grad in enumerate(grads):
        if grad is not None and not np.all(np.isfinite(grad)):
            where = node.created_at or "an unknown place (created outside detect_anomaly)"
            raise AnomalyError(
                f"{node.name}.backward produced NaN or Inf in the gradient for input {i} "
                f"(shape {np.shape(grad)}). The {node.name} op was created at {where}. Look at "
                f"its inputs there: log or division at 0, a negative base with a fractional power, "
                f"exp overflowing.")


def creation_site() -> str:
    """file:line of the user code that called the op (first frame outside minigrad)."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        if not os.path.abspath(frame.filename).startswith(_PACKAGE_DIR):
            return f"{frame.filename}:{frame.lineno} ({frame.line})"
    return "inside minigrad"
