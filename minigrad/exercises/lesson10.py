"""Lesson 10 (ahead of time): check_multiply_rule.

The student writes the backward rule of the IR op `mul` (multiply) (C = A * B: dA = dC * B, dB =
dC * A). The check registers it in a copy of the rule registry (the library's own mul rule
is left alone), then, for a few captured graphs that use mul, derives the backward graph
with it, runs forward + backward with the aot executor and compares every gradient with the
eager engine's on the same function, in float64.
"""
from __future__ import annotations

import numpy as np

from ._report import StudentError, call, failed, passed

CHECK = "check_multiply_rule"


def _square_plus(x, W):
    h = x @ W
    return (h * h + h * h.tanh()).sum()


def _cases():
    """(description, fn(x, *params), x, {param name: array}) for graphs that use multiply."""
    rng = np.random.default_rng(10)
    x = rng.normal(size=(3, 4))
    w, v = rng.normal(size=(4, 5)), rng.normal(size=(3, 5))
    g = rng.normal(size=(5,))
    return [
        ("tanh(x @ W) * V: an activation times a parameter",
         lambda x, W, V: ((x @ W).tanh() * V).sum(), x, {"W": w, "V": v}),
        ("h * h and h * tanh(h): the same activation on both sides, and read three times",
         _square_plus, x, {"W": w}),
        ("x * V2 where x is data: no gradient is wanted for x",
         lambda x, V2: (x * V2).tanh().sum(), x, {"V2": rng.normal(size=(3, 4))}),
        ("tanh(x @ W) * g with g of shape (5,): broadcast along the rows",
         lambda x, W, g: ((x @ W).tanh() * g).sum(), x, {"W": w, "g": g}),
    ]


def _eager_grads(fn, x, params: dict) -> dict:
    import minigrad as mg

    leaves = {name: mg.create_leaf(value.copy(), requires_grad=True, name=name)
              for name, value in params.items()}
    fn(mg.create_leaf(x), *leaves.values()).backward()
    return {name: leaf.grad for name, leaf in leaves.items()}


def _aot_grads(rule, fn, x, params: dict) -> tuple[dict, object]:
    import minigrad as mg
    from minigrad import aot

    rules = aot.registry.copy()
    rules.register_rule("mul", rule)
    leaves = {name: mg.create_leaf(value.copy(), requires_grad=True, name=name)
              for name, value in params.items()}
    forward = aot.capture(lambda x: fn(x, *leaves.values()), x, params=leaves)
    # derive checks the rule's operations (a name None, unknown or unsaved is a DeriveError)
    backward = call(aot.derive_backward_graph, forward, registry=rules)
    try:   # compiling runs every operation once: a wrong shape fails there, or in run
        run = aot.Executor(forward, backward, leaves, x)
        run.run(x)
    except Exception as exc:   # a wrong shape or op in the student's emitted operations
        raise StudentError(f"running the derived backward graph failed: {type(exc).__name__}: "
                           f"{exc}\n{backward}") from None
    grads = run.grads()
    return {name: grads.get("d_" + name) for name in params}, backward


def check_multiply_rule(multiply_backward) -> bool:
    """Derive and execute graphs that use multiply with the student's rule; compare with eager."""
    if not callable(multiply_backward):
        return failed(CHECK, "check_multiply_rule(multiply_backward)",
                      f"got {type(multiply_backward).__name__}, not a function.",
                      "pass the rule itself: check_multiply_rule(multiply_backward)")
    cases = _cases()
    for what, fn, x, params in cases:
        try:
            got, backward = _aot_grads(multiply_backward, fn, x, params)
        except StudentError as err:
            hint = ""
            if "did not write" in err.description or "named None" in err.description:
                hint = ("write every ctx.d_inputs[i] whose ctx.needs_grad(i) is true, and only "
                        "those: d_inputs[i] is None for an input that needs no gradient")
            elif "directly" in err.description:
                hint = "read the other operand with ctx.read(name): saved.<name> for an activation"
            return failed(CHECK, what, err.description, hint)
        want = _eager_grads(fn, x, params)
        for name, value in want.items():
            mine = got[name]
            if mine is None or np.shape(mine) != np.shape(value) or \
                    not np.allclose(mine, value, rtol=1e-10, atol=1e-12):
                shown = "nothing" if mine is None else f"shape {np.shape(mine)}: {np.ravel(mine)[:4]}"
                return failed(CHECK, what,
                              f"d_{name} from your rule is {shown}\n"
                              f"eager's {name}.grad has shape {np.shape(value)}: {np.ravel(value)[:4]}\n"
                              f"the backward graph your rule made:\n{backward}",
                              "dA = dC * B and dB = dC * A: each operand's gradient multiplies "
                              "the incoming gradient by the *other* operand; ctx.to_input_shape(i, "
                              "'mul', [...]) sums it back to input i's shape when it was "
                              "broadcast")
    return passed(CHECK, f"{len(cases)} captured graphs derived with your rule; every gradient "
                         f"from the aot executor equals eager's (float64)")
