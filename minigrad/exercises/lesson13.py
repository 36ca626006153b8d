"""Lesson 13 (forward mode): check_tangent_rules, check_hvp.

The student writes the tangent rule of each tape op: given the inputs' values, their tangents and
the output's value, the output's tangent (the directional derivative along the seed). The check
tries each rule alone against central differences, naming the first op that is wrong, then walks
random tape programs forward with the rules and compares the output's tangent with what reverse
mode gives for the same direction: the sum over inputs of (gradient x seed).
"""
from __future__ import annotations

import math

import numpy as np

from ..eager.higher import grad
from ..eager.variable import Variable, create_leaf
from ..ops import linear, mse, tanh
from ..tape import Tape
from ._report import StudentError, call, failed, passed

CHECK = "check_tangent_rules"
UNARY = {"sin": math.sin, "exp": math.exp, "tanh": math.tanh, "log": math.log}
BINARY = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
          "div": lambda a, b: a / b}
HINTS = {   # graded: the idea first, then the formula's shape
    "mul": ("the product rule: each input's tangent times the other input's value, summed",
            "tangent = t[0] * v[1] + v[0] * t[1]"),
    "div": ("d(a/b) = da/b - a·db/b²: the quotient rule, one term per input",
            "tangent = t[0] / v[1] - v[0] * t[1] / v[1] ** 2 (or (t[0] - out * t[1]) / v[1])"),
    "sin": ("the chain rule: the derivative of sin at the input, times the input's tangent",
            "tangent = cos(v[0]) * t[0]"),
    "exp": ("exp is its own derivative; the output's value is already at hand",
            "tangent = out * t[0]"),
    "tanh": ("tanh' = 1 - tanh²; the output's value is tanh of the input",
             "tangent = (1 - out ** 2) * t[0]"),
    "log": ("log' = 1/x", "tangent = t[0] / v[0]"),
    "pow": ("d(x^p) = p·x^(p-1)·dx; p is attrs['exponent'], a constant",
            "tangent = p * v[0] ** (p - 1) * t[0]"),
}


def forward_tangents(tape: Tape, seeds: dict, rules: dict) -> list:
    """Tangent of every slot: seeds for the vars (0 when not given), 0 for consts, then each
    instruction in recording order applies its op's rule (the check's copy of the lesson's walk)."""
    tangent = [seeds.get(i, 0.0) for i in range(len(tape.values))]
    for instr in tape.instrs:
        values = [tape.values[i] for i in instr.inputs]
        tangents = [tangent[i] for i in instr.inputs]
        tangent[instr.output] = rules[instr.op](values, tangents, tape.values[instr.output],
                                                **instr.attrs)
    return tangent


def _one_op_cases():
    yield from ((op, [0.7], lambda x, f=f: f(x[0]), {}) for op, f in UNARY.items())
    yield from ((op, [0.7, -1.3], lambda x, f=f: f(x[0], x[1]), {}) for op, f in BINARY.items())
    yield "pow", [0.7], lambda x: x[0] ** 3.0, {"exponent": 3.0}


def _check_each_rule(rules) -> bool:
    for op, point, f, attrs in _one_op_cases():
        if op not in rules:
            return failed(CHECK, f"the rule for '{op}'", f"TANGENT has no entry '{op}'.",
                          HINTS.get(op, "add it: a function (v, t, out, **attrs) -> tangent"))
        for k in range(len(point)):
            seed = [0.0] * len(point)
            seed[k] = 1.0
            eps = 1e-6
            plus = [p + eps * s for p, s in zip(point, seed)]
            minus = [p - eps * s for p, s in zip(point, seed)]
            want = (f(plus) - f(minus)) / (2 * eps)
            case = f"the rule for '{op}' at v = {point}, t = {seed}"
            try:
                got = call(rules[op], list(point), list(seed), f(point), **attrs)
            except StudentError as err:
                return failed(CHECK, case, err.description, HINTS.get(op, ()))
            number = isinstance(got, (int, float, np.floating))
            if not (number and math.isclose(got, want, rel_tol=1e-5, abs_tol=1e-7)):
                return failed(CHECK, case, f"your rule gave {got!r}; the derivative along t is not that.",
                              HINTS.get(op, ()))
    return True


def _random_program(rng):
    tape = Tape()
    xs = [tape.var(float(rng.uniform(0.5, 1.5)), name=f"x{i}") for i in range(3)]
    live = list(xs)
    for _ in range(8):
        a, b = (live[int(rng.integers(len(live)))] for _ in range(2))
        pick = int(rng.integers(7))
        live.append([a + b, a - b, a * b, a / (b * b + 1.0), tape.sin(a), tape.tanh(a),
                     tape.exp(a * 0.3)][pick])
    return tape, xs, live[-1]


def check_tangent_rules(rules) -> bool:
    """Each rule against central differences, then whole programs against reverse mode."""
    if not isinstance(rules, dict):
        return failed(CHECK, "check_tangent_rules(TANGENT)", f"got {type(rules).__name__}, not a dict.",
                      "pass the dict of rules itself")
    if not _check_each_rule(rules):
        return False
    rng = np.random.default_rng(13)
    for trial in range(20):
        tape, xs, out = _random_program(rng)
        seeds = {x.index: float(rng.normal()) for x in xs}
        try:
            forward = call(forward_tangents, tape, seeds, rules)[out.index]
        except StudentError as err:
            return failed(CHECK, f"random program {trial}", err.description)
        tape.backward(out)
        reverse = sum((x.grad or 0.0) * seeds[x.index] for x in xs)   # None: out does not read x
        if not math.isclose(forward, reverse, rel_tol=1e-7, abs_tol=1e-9):
            return failed(CHECK, f"random program {trial} ({len(tape.instrs)} instructions)",
                          f"forward mode gave {forward:.6g}, reverse mode {reverse:.6g} for the same "
                          f"direction.", "each rule alone is right, so look at how a rule uses "
                          "`out` and the attrs")
    return passed(CHECK, "each rule matches central differences, and forward mode matches reverse "
                  "mode on 20 random programs")


# -- a Hessian-vector product by reverse over reverse -------------------------------------------
HVP = "check_hvp"
HVP_HINTS = (
    "H v is the gradient of (gradient . v): take the first gradient so that it can itself be "
    "differentiated (create_graph=True), dot it with v, and differentiate that scalar",
    "grads = mg.grad(loss_fn(params), params, create_graph=True); then "
    "mg.grad(sum((g * v).sum() for g, v in zip(grads, vectors)), params)",
)


def _quartic(params):
    (w,) = params
    return (w ** 4).sum() * 0.25 + tanh(w).sum()


def _mlp(x, y):
    def loss(params):
        w1, b1, w2 = params
        return mse(tanh(linear(x, w1, b1)) @ w2, y)
    return loss


def _finite_hvp(loss_fn, values, vectors, eps=1e-5) -> list:
    """(g(w + eps v) - g(w - eps v)) / 2 eps, each g a plain first gradient."""
    def gradient(shift):
        leaves = [create_leaf(w + shift * v, requires_grad=True) for w, v in zip(values, vectors)]
        return [g.data for g in grad(loss_fn(leaves), leaves)]
    plus, minus = gradient(eps), gradient(-eps)
    return [(p - m) / (2 * eps) for p, m in zip(plus, minus)]


def check_hvp(hvp) -> bool:
    """hvp(loss_fn, params, vectors) -> H v, one array (or Variable) per parameter, against
    finite differences of the gradient, on a one-parameter loss and a small MLP."""
    rng = np.random.default_rng(13)
    x, y = rng.standard_normal((6, 3)), rng.standard_normal((6, 1))
    cases = [("sum(w^4)/4 + sum(tanh w)", _quartic, [rng.standard_normal(4)]),
             ("a small MLP, mse(tanh(linear(x, W1, b1)) @ W2, y)", _mlp(x, y),
              [rng.standard_normal((3, 5)), rng.standard_normal(5), rng.standard_normal((5, 1))])]
    for name, loss_fn, values in cases:
        vectors = [rng.standard_normal(w.shape) for w in values]
        params = [create_leaf(w, requires_grad=True) for w in values]
        try:
            got = call(hvp, loss_fn, params, [v.copy() for v in vectors])
        except StudentError as err:
            return failed(HVP, name, err.description, HVP_HINTS)
        want = _finite_hvp(loss_fn, values, vectors)
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            return failed(HVP, name, f"hvp returned {type(got).__name__}; return one H v per "
                          f"parameter, a list of {len(want)}.", HVP_HINTS)
        for i, (g, w) in enumerate(zip(got, want)):
            g = g.data if isinstance(g, Variable) else np.asarray(g)
            if g.shape != w.shape or not np.allclose(g, w, rtol=1e-5, atol=1e-7):
                return failed(HVP, f"{name}, parameter {i} (shape {w.shape})",
                              f"your H v is {np.array2string(g.ravel()[:4], precision=5)}..., "
                              f"finite differences of the gradient give "
                              f"{np.array2string(w.ravel()[:4], precision=5)}...", HVP_HINTS)
    return passed(HVP, "H v matches finite differences of the gradient on a one-parameter loss "
                  "and a small MLP")
