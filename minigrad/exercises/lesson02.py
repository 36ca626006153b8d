"""Lesson 02, building the graph: check_saved_by."""
from __future__ import annotations

import numpy as np

from ._report import StudentError, call, failed, passed

NAMES = ("input 0", "input 1", "output")

# op name -> (number of inputs, how the check builds the op from fresh parameters)
_BUILD = {
    "add": (2, lambda a, b: a + b),
    "sub": (2, lambda a, b: a - b),
    "mul": (2, lambda a, b: a * b),
    "div": (2, lambda a, b: a / b),
    "matmul": (2, lambda a, b: a @ b),
    "neg": (1, lambda a: -a),
    "pow": (1, lambda a: a ** 3),
    "exp": (1, lambda a: a.exp()),
    "log": (1, lambda a: a.log()),
    "tanh": (1, lambda a: a.tanh()),
    "sigmoid": (1, lambda a: a.sigmoid()),
    "relu": (1, lambda a: a.relu()),
    "sum": (1, lambda a: a.sum(axis=0)),
    "mean": (1, lambda a: a.mean()),
    "reshape": (1, lambda a: a.reshape(-1)),
}
OPS_CHECKED = tuple(_BUILD)


def engine_saves(op_name: str, seed: int = 0) -> frozenset:
    """Build op_name on fresh parameters and name each array its node saved, by identity."""
    import minigrad as mg

    arity, build = _BUILD[op_name]
    rng = np.random.default_rng(seed)
    shapes = [(2, 3), (3, 4)] if op_name == "matmul" else [(2, 3), (2, 3)]
    inputs = [mg.create_leaf(rng.uniform(0.5, 2.0, size=shapes[i]), requires_grad=True)
              for i in range(arity)]
    out = build(*inputs)
    assert out.grad_fn.name == op_name, (out.grad_fn.name, op_name)
    found = set()
    for array in out.grad_fn.saved_tensors:
        matches = [f"input {i}" for i, v in enumerate(inputs) if array is v.data]
        if array is out._data:   # (out.data is a read-only view of this very array)
            matches.append("output")
        found.update(matches or ["an array of its own"])
    return frozenset(found)


def _normalise(answer):
    """The student's answer as a frozenset of names, or a string saying what is wrong."""
    if answer is None:
        return "returned None; return a set of names, and set() when the op saves nothing"
    if isinstance(answer, str):
        answer = {answer}
    try:
        names = frozenset(answer)
    except TypeError:
        return f"returned {answer!r}; return a set of names such as {{'input 0', 'output'}}"
    unknown = sorted(str(n) for n in names if n not in NAMES)
    if unknown:
        return (f"returned the unknown name(s) {', '.join(repr(n) for n in unknown)}; use "
                f"only {', '.join(repr(n) for n in NAMES)}")
    return names


def _definition(cls) -> str:
    """The op's math up to the first ';' ("z = a * b"): the rest of some docstrings says what
    the op saves, which is the answer."""
    return (cls.__doc__ or "").strip().splitlines()[0].split(";")[0].rstrip(".")


def _show(names) -> str:
    return "{" + ", ".join(repr(n) for n in sorted(names)) + "}" if names else "set()"


def check_saved_by(saved_by) -> bool:
    """Grade saved_by(op_name) against what each op's node really keeps in saved_tensors."""
    import minigrad as mg

    name = "check_saved_by"
    for op in OPS_CHECKED:
        try:
            answer = call(saved_by, op)
        except StudentError as exc:
            return failed(name, f"saved_by({op!r})", exc.description)
        got = _normalise(answer)
        if isinstance(got, str):
            return failed(name, f"saved_by({op!r})", f"your function {got}")
        truth = engine_saves(op)
        if got != truth:
            cls = mg.OPS[op]
            formulas = "; ".join(f"for input {i}: {text}" for i, text in enumerate(cls.grad_text))
            return failed(
                name, f"saved_by({op!r})",
                f"you said {_show(got)}, but the engine's {op} node saves something else: "
                f"read it off the formula its backward computes\n"
                f"{op}: {_definition(cls)}\n"
                f"its backward computes {formulas}",
                "an op saves exactly the arrays its backward formula reads (a, b or A, B: the "
                "inputs; z: the output; grad_output only arrives during backward). Plain numbers "
                "such as an exponent or a shape live on the node (ctx), not in saved_tensors.")
    return passed(name, f"all {len(OPS_CHECKED)} ops predicted ({', '.join(OPS_CHECKED)})")
