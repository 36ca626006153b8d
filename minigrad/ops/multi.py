"""Ops with several outputs, in an engine where every Variable has exactly one grad_fn.

The eager engine is unchanged: a node still makes one Variable. An op with several outputs is
built from what the engine already has, and `link_outputs` tells minigrad.aot.capture that those
Variables are the outputs of ONE operation:

* the op's own node makes its main output (rmsnorm's y, attention's out, moe_topk's weights);
  arrays only its backward needs (rmsnorm's rstd, attention's lse) are saved tensors of that
  node, and capture gives them IR names of their own (`<op>.rstd`);
* a second *differentiable* output gets a node of its own whose backward is the vector-Jacobian
  product of that output alone (fused_residual_rmsnorm's residual_out is an add node). This is
  exact because backward is linear in the output gradients: J^T (g0, g1) = J0^T g0 + J1^T g1,
  and the engine's accumulate_grad already sums what reaches each input;
* an *integer* output (indices, offsets) carries no gradient: it is plain data, a Variable with
  no grad_fn. It may also be an input of the node (computed first, then handed to it).

`link_outputs(main, indices=idx)` records the secondary Variables under their labels;
`primary_of(v)` and `linked_output(node, label)` are what capture reads. Nothing else of the
engine knows about it.
"""
from __future__ import annotations

import weakref

from ..eager.variable import Variable

# An integer secondary (no node) -> (weak reference to the main Variable, label). Weak both ways:
# it may be an input of the main node, and a strong value would then keep its own key alive.
_PRIMARY: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def link_outputs(main: Variable, **secondaries: Variable) -> None:
    """Declare secondaries (label=Variable) as further outputs of the op that made main."""
    node = main.grad_fn
    if node is None:           # no graph was recorded (no_grad, or nothing requires grad)
        return
    node.linked_outputs = {label: weakref.ref(v) for label, v in secondaries.items()}
    for label, v in secondaries.items():
        if v.grad_fn is not None:    # its own node keeps the main output (used or not) alive
            v.grad_fn.main_output = (main, label)
        else:
            _PRIMARY[v] = (weakref.ref(main), label)


def primary_of(v: Variable):
    """(main Variable, label) when v is a secondary output of a multi-output op, else None."""
    found = v.grad_fn.main_output if v.grad_fn is not None else None
    if found is not None:
        return found
    found = _PRIMARY.get(v)
    if found is None or found[0]() is None:
        return None
    return found[0](), found[1]


def linked_output(node, label: str, default=None):
    """The live secondary Variable of node under label, or default (never linked, or collected).

    (A default argument, not `linked_output(...) or default`: a Variable of several elements has
    no truth value, as in numpy.)"""
    ref = node.linked_outputs.get(label) if node.linked_outputs else None
    found = ref() if ref is not None else None
    return default if found is None else found
