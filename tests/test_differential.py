"""The differential harness: the same random programs through every engine (eager pending and
topo, heap / Arena / Pool, checkpointed segments, TensorTape and the scalar Tape where the ops
exist, aot save-all and recompute plans run twice with new data), against float64 central
differences. Programs, ops and engines: differential.py, differential_ops.py, differential_engines.py.

Properties:
  (a) finite float64 programs (250 examples, 40 more of elementwise ops only, so that TensorTape
      runs): every engine agrees with the numpy reference loss (rtol 1e-9),
      with central differences (rtol 1e-4, atol 1e-5; skipped only where an input sits within
      1e-3 of a kink: relu at 0, a tie in max, or behind detach / no_grad) and with eager
      pending (rtol 1e-8, atol 1e-10); mse with a target of another shape may instead be
      refused, but then by every engine;
  (b) edge values (0, -0, +-inf, nan, huge, tiny): every engine has nan and +-inf in the same
      places as eager pending (loss and gradients) and the loss's as the numpy reference's;
  (c) misuse: every engine refuses with a MinigradError that is also a ValueError, TypeError or
      RuntimeError, whose message says how to fix it; never an answer, never a raw error;
  (d) an aot plan compiled once gives the eager answer on its first data and on new data;
      checkpointed segments give the unsegmented gradients (inside (a) and (b));
  (e) memory the user still holds (copy=False leaves, views of a larger array, index arrays,
      TensorTape values) overwritten between forward and backward: the clean gradients or a
      MinigradError, never a different gradient (numpy refusing the write, read-only, is fine);
  (f) float16 programs: every engine gives the same dtypes, and gradients near float64
      central differences (|g - cd| <= 0.05 (1 + max|cd|)), or every engine refuses.

Each property first runs the programs written out below (the cases issue 24 names), then the
random ones. CI runs a fixed, derandomized set of examples. To search longer locally:
    MINIGRAD_HARNESS_EXAMPLES=2000 MINIGRAD_HARNESS_RANDOM=1 python -m pytest tests/test_differential.py
(RANDOM=1 draws new examples on each run; a failure prints the program to reproduce it.)
"""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings

import minigrad as mg
from differential import (ELEMENTWISE, Leaf, Step, central_differences, new_data, order_sensitive,
                          programs,
                          reachable, reference, run_data, written)
from differential_ops import OPS
from differential_engines import engines_for, run_eager, run_eager_scribbled, run_tensor_tape_scribbled

# numpy warns about what the harness draws on purpose (0/0, overflow, the mean of an empty batch)
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
EXAMPLES = int(os.environ.get("MINIGRAD_HARNESS_EXAMPLES", "0"))
RANDOM = os.environ.get("MINIGRAD_HARNESS_RANDOM") == "1"


def harness(n: int):
    return settings(max_examples=EXAMPLES or n, deadline=None, derandomize=not RANDOM,
                    database=None if not RANDOM else settings.default.database,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much, HealthCheck.large_base_example])


def with_examples(cases):
    """Run these written programs first, every time (the cases issue 24 names)."""
    def decorate(test):
        for case in reversed(cases):
            test = example(case)(test)
        return test
    return decorate


F16, F32 = np.float16, np.float32
ROW = np.array([0.5, -1.0, 2.0])
KNOWN_FINITE = [
    # transpose with negative axes on a (3, 3, 3) array: a wrong gradient (eager and aot)
    written("finite", Leaf(np.arange(27.0).reshape(3, 3, 3) / 10 - 1.3, True),
            Step("transpose", (0,), {"axes": (1, 0, -1)})),
    # x ** 0 at x = 0: the gradient is 0 (it was nan; the scalar tape raised)
    written("finite", Leaf(np.array([0.0, 1.5, -2.0]), True), Step("pow", (0,), {"p": 0})),
    # 1-D @ 1-D: backward raised an AxisError
    written("finite", Leaf(ROW, True), Leaf(np.array([1.0, 0.25, -0.5]), True),
            Step("matmul", (0, 1), {})),
    # mse with a (3, 1) prediction and a (3, 4) target: aot's gradient came back (3, 4)
    written("finite", Leaf(np.array([[0.5], [-1.0], [2.0]]), True),
            Leaf(np.linspace(-1, 1, 12).reshape(3, 4), False), Step("mse_broadcast", (0, 1), {})),
    # detach and no_grad inside a captured function: aot froze them at the capture-time data
    written("finite", Leaf(ROW, True), Step("detach", (0,), {}), Leaf(ROW[::-1].copy(), True),
            Step("mul", (1, 2), {})),
    written("finite", Leaf(ROW, True), Step("no_grad", (0,), {}), Leaf(ROW[::-1].copy(), True),
            Step("mul", (1, 2), {})),
    # a 0-d leaf and its detach(), the loss over both: aot froze the detached term (the ops
    # after detach() read no value that requires grad, so they built no graph)
    written("finite", Leaf(np.array(0.75), True), Step("detach", (0,), {}), Step("exp", (1,), {}),
            Step("add", (0, 2), {})),
    written("finite", Leaf(np.array(0.75), False), Leaf(ROW, True), Step("detach", (0,), {}),
            Step("exp", (2,), {}), Step("mul", (1, 3), {})),
]
KNOWN_EDGE = [
    written("edge", Leaf(np.array([0.0, -0.0, np.inf, np.nan]), True), Step("pow", (0,), {"p": 0})),
    # the mean of an empty batch is nan (0/0) in eager and numpy
    written("edge", Leaf(np.zeros((0, 3)), True), Step("mean", (0,), {"axis": None, "keepdims": False})),
]
KNOWN_MISUSE = [
    # mse of a (4, 1) prediction and a (4,) target: 16 terms instead of 4
    written("misuse", Leaf(np.ones((4, 1)), True), Leaf(np.arange(4.0), False), Step("mse", (0, 1), {})),
    # a plan compiled on good targets, run with -1 (silently the last class) and 4 (IndexError)
    written("misuse", Leaf(np.ones((3, 4)), True),
            Leaf(np.array([0, 2, 1]), False, np.array([0, -1, 1])), Step("cross_entropy", (0, 1), {})),
    written("misuse", Leaf(np.ones((3, 4)), True),
            Leaf(np.array([0, 2, 1]), False, np.array([0, 4, 1])), Step("cross_entropy", (0, 1), {})),
]
KNOWN_OVERWRITES = [
    # saved arrays that are views of the caller's array (and TensorTape values)
    written("finite", Leaf(ROW, True), Leaf(np.array([1.0, 0.25, -0.5]), True), Step("mul", (0, 1), {})),
    # an index array kept by reference
    written("finite", Leaf(np.array([0.5, -1.0, 2.0, 0.25]), True),
            Step("getitem", (0,), {"index": np.array([0, 2, 2])}), Step("mul", (1, 1), {})),
]
KNOWN_F16 = [
    # float16 rmsnorm of |x| ~ 300 overflowed (0 instead of +-1); f16 x with an f32 or f16 weight
    written("f16", Leaf(np.array([[300.0, -300.0, 300.0]], dtype=F16), True),
            Leaf(np.array([1.0, 0.5, 2.0], dtype=F32), True), Step("rmsnorm", (0, 1), {})),
    written("f16", Leaf(np.array([[300.0, -300.0, 300.0]], dtype=F16), True),
            Leaf(np.array([1.0, 0.5, 2.0], dtype=F16), True), Step("rmsnorm", (0, 1), {})),
]


# What one engine refuses by design (docs/errors.md), for programs with that op: the engine must
# raise this error for every data set; it is then left out of the comparison.
REFUSED_BY_DESIGN = {
    # a captured function may not enter no_grad(): its values would be frozen at capture time
    "no_grad": ("aot", mg.aot.CaptureError),
}


def run_all(program, datas):
    """name -> [Outcome per data set]; eager pending and the aot plans get every data set."""
    results = {name: run(datas if name == "pending" or name.startswith("aot") else datas[:1])
               for name, run in engines_for(program).items()}
    for op, (engine, error) in REFUSED_BY_DESIGN.items():
        if op not in program.ops():
            continue
        for name in [n for n in results if n.startswith(engine)]:
            outs = results.pop(name)
            # (error, or any MinigradError when another refused op of the program comes first)
            wanted = error if program.misuse is None and "mse_broadcast" not in program.ops() \
                else mg.errors.MinigradError
            assert all(isinstance(out.error, wanted) for out in outs), report(
                program, [f"{name}: {op} must be refused with {error.__name__}, got "
                          f"{[out.error for out in outs]!r}"])
    return results


def raised(name, out):
    return f"{name} raised {type(out.error).__name__}: {out.error}"


def close(a, b, rtol, atol):
    a = np.zeros(np.shape(b)) if a is None else a
    b = np.zeros(np.shape(a)) if b is None else b
    return np.shape(a) == np.shape(b) and np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)


def report(program, problems):
    return program.describe() + "\n" + "\n".join(problems)


# -- (a) finite programs ------------------------------------------------------------------------
def grad_problems(name, program, out, want, rtol, atol, what):
    problems = []
    params = [k for k, leaf in enumerate(program.leaves()) if leaf.requires_grad]
    for k in params:
        got = out.grads[k]
        if k in reachable(program) and not name.startswith("scalar_tape") and got is None \
                and want[k] is not None:
            problems.append(f"{name}: leaf {k} got no gradient")
        elif not close(got, want[k], rtol, atol):
            problems.append(f"{name} vs {what}: leaf {k}\n  got  {got}\n  want {want[k]}")
    return problems


def finite_problems(program, results):
    data = run_data(program)
    loss, margin = reference(program, data)
    numeric = central_differences(program, data)
    base = results["pending"][0]
    problems = []
    for name, outs in results.items():
        out = outs[0]
        if out.error is not None:
            problems.append(raised(name, out))
            continue
        if not np.isclose(out.loss, loss, rtol=1e-9, atol=1e-9):
            problems.append(f"{name}: loss {out.loss}, numpy reference {loss}")
        if margin > 1e-3 and not any(OPS[op].stops_grad for op in program.ops()):
            problems += grad_problems(name, program, out, numeric, 1e-4, 1e-5, "central differences")
        if base.error is None:
            problems += grad_problems(name, program, out, base.grads, 1e-8, 1e-10, "pending")
    return problems


def second_run_problems(results):
    """(d): a plan run again on new data gives what eager gives on that data."""
    problems, want = [], results["pending"][1]
    for name in [n for n in results if n.startswith("aot")]:
        out = results[name][1]
        if want.error is not None or out.error is not None:
            if (want.error is None) != (out.error is None):
                problems.append(f"{name}, second run: {out.error!r}, eager: {want.error!r}")
            continue
        if not np.isclose(out.loss, want.loss, rtol=1e-9, atol=1e-9, equal_nan=True):
            problems.append(f"{name}, second run: loss {out.loss}, eager {want.loss}")
        for k, (g, w) in enumerate(zip(out.grads, want.grads)):
            if not close(g, w, 1e-8, 1e-10):
                problems.append(f"{name}, second run: leaf {k}\n  got  {g}\n  want {w}")
    return problems


def refused_everywhere(results) -> bool:
    return all(isinstance(outs[0].error, mg.errors.MinigradError) and "fix" in str(outs[0].error).lower()
               for outs in results.values())


def check_finite(program):
    results = run_all(program, [run_data(program), new_data(program)])
    if "mse_broadcast" in program.ops() and refused_everywhere(results):
        return   # a target of another shape: refusing it everywhere is a rule, not a failure
    problems = finite_problems(program, results) + second_run_problems(results)
    assert not problems, report(program, problems)


@harness(250)
@given(programs("finite"))
@with_examples(KNOWN_FINITE)
def test_finite_programs_agree_in_every_engine_and_with_central_differences(program):
    check_finite(program)


@harness(40)
@given(programs("finite", ops=ELEMENTWISE))
def test_finite_elementwise_programs_agree_in_every_engine_and_both_tapes(program):
    check_finite(program)


# -- (b) edge values --------------------------------------------------------------------------------
def pattern(x):
    """Where an array is nan, +inf, -inf (0 elsewhere)."""
    x = np.asarray(x, dtype=np.float64)
    return np.select([np.isnan(x), np.isposinf(x), np.isneginf(x)], [1, 2, 3], 0)


def edge_problems(program, results):
    base = results["pending"][0]
    problems = []
    ref = reference(program, run_data(program))[0]
    sum_order_decides = order_sensitive(program, run_data(program))   # (then the loss pins nothing)
    for name, outs in results.items():
        out = outs[0]
        if (out.error is None) != (base.error is None) or (
                out.error is not None and not isinstance(out.error, mg.errors.MinigradError)):
            problems.append(f"{name}: {out.error!r}; pending: {base.error!r}")
            continue
        if out.error is not None:
            continue
        if not sum_order_decides and (pattern(out.loss) != pattern(ref) or
                                      pattern(out.loss) != pattern(base.loss)):
            problems.append(f"{name}: loss {out.loss}, pending {base.loss}, numpy reference {ref}")
        for k, (g, w) in enumerate(zip(out.grads, base.grads)):
            if g is None or w is None:
                continue
            if np.shape(g) != np.shape(w):
                problems.append(f"{name} vs pending: leaf {k} grad shape {np.shape(g)}, not {np.shape(w)}")
            elif not np.array_equal(pattern(g), pattern(w)):
                problems.append(f"{name} vs pending: leaf {k} nan/inf differ\n  got  {g}\n  want {w}")
            elif not close(np.where(pattern(g) == 0, g, 0), np.where(pattern(w) == 0, w, 0), 1e-6, 1e-9):
                problems.append(f"{name} vs pending: leaf {k}\n  got  {g}\n  want {w}")
    return problems


@harness(120)
@given(programs("edge"))
@with_examples(KNOWN_EDGE)
def test_edge_values_give_nan_and_inf_in_the_same_places_in_every_engine(program):
    with np.errstate(all="ignore"):
        results = run_all(program, [run_data(program)])
    problems = edge_problems(program, results)
    assert not problems, report(program, problems)


# -- (c) misuse --------------------------------------------------------------------------------------
@harness(60)
@given(programs("misuse", max_steps=2))
@with_examples(KNOWN_MISUSE)
def test_misuse_is_refused_by_every_engine_with_a_clear_error(program):
    results = run_all(program, [run_data(program)])
    problems = misuse_problems(results)
    assert not problems, report(program, problems)


def misuse_problems(results):
    problems = []
    for name, outs in results.items():
        error = outs[0].error
        if error is None:
            problems.append(f"{name} gave loss {outs[0].loss} and grads {outs[0].grads}, no error")
        elif not isinstance(error, mg.errors.MinigradError) or \
                not isinstance(error, (ValueError, TypeError, RuntimeError)):
            problems.append(f"{name}: a raw {type(error).__name__}: {error}")
        elif "fix" not in str(error).lower():
            problems.append(f"{name}: {type(error).__name__} says no fix: {error}")
    return problems


# -- (e) memory the user holds, overwritten between forward and backward ----------------------------
@harness(60)
@given(programs("finite"))
@with_examples(KNOWN_OVERWRITES)
def test_overwriting_user_memory_after_forward_never_changes_the_gradient(program):
    data = run_data(program)
    clean = run_eager(program, data)
    runs = {"eager copy=False": run_eager_scribbled(program, data)}
    if "tensor_tape" in engines_for(program):
        runs["tensor_tape"] = run_tensor_tape_scribbled(program, data)
    problems = []
    for name, out in runs.items():
        if out.error is not None:
            if not isinstance(out.error, mg.errors.MinigradError):
                problems.append(raised(name, out))
            continue
        for k, (g, w) in enumerate(zip(out.grads, clean.grads)):
            if not close(g, w, 1e-9, 1e-12):
                problems.append(f"{name}: leaf {k} changed silently\n  got  {g}\n  want {w}")
    assert not problems, report(program, problems)


# -- (f) float16 ------------------------------------------------------------------------------------
@harness(60)
@given(programs("f16", max_steps=4))
@with_examples(KNOWN_F16)
def test_float16_programs_agree_in_dtype_and_value_or_are_refused_everywhere(program):
    with np.errstate(all="ignore"):
        results = run_all(program, [run_data(program)])
    outs = {name: o[0] for name, o in results.items()}
    errors = {name: o.error for name, o in outs.items() if o.error is not None}
    problems = [f"{name}: {e!r}" for name, e in errors.items()
                if not isinstance(e, mg.errors.MinigradError) or len(errors) != len(outs)]
    if not errors:
        numeric = central_differences(program, run_data(program))
        base = outs["pending"]
        for name, out in outs.items():
            if out.loss_dtype != base.loss_dtype:
                problems.append(f"{name}: loss dtype {out.loss_dtype}, pending {base.loss_dtype}")
            for k, (g, w, cd) in enumerate(zip(out.grads, base.grads, numeric)):
                if g is None or cd is None:
                    continue
                if w is not None and g.dtype != w.dtype:
                    problems.append(f"{name}: leaf {k} grad dtype {g.dtype}, pending {w.dtype}")
                tol = 0.05 * (1 + np.max(np.abs(cd), initial=0))
                if not np.all(np.abs(g.astype(np.float64) - cd) <= tol):
                    problems.append(f"{name} vs central differences: leaf {k}\n  got  {g}\n  want {cd}")
    assert not problems, report(program, problems)


# -- the checks themselves can fail ----------------------------------------------------------------
def test_each_check_reports_a_wrong_engine():
    """A harness that cannot fail proves nothing: one engine's answer is spoilt on purpose and
    each property's check must name it (a gradient off by 0.1%, a nan pending does not have, a
    plan's second run that kept the first data, an answer where a misuse needs an error)."""
    program = written("finite", Leaf(ROW, True), Leaf(np.array([1.0, 0.25, -0.5]), True),
                      Step("mul", (0, 1), {}), Step("tanh", (2,), {}))
    results = run_all(program, [run_data(program), new_data(program)])
    assert set(results) == {"pending", "pending_shuffled", "topo", "arena", "pool", "checkpoint",
                            "aot_save_all", "aot_recompute", "scalar_tape", "scalar_tape_plain",
                            "tensor_tape"}
    assert not finite_problems(program, results) + second_run_problems(results)
    assert not edge_problems(program, results)

    good = results["topo"][0]
    off = good._replace(grads=(good.grads[0] * 1.001, good.grads[1]))
    assert any(p.startswith("topo vs central differences: leaf 0")
               for p in finite_problems(program, {**results, "topo": [off]}))
    with_nan = good._replace(grads=(np.where(ROW > 0, np.nan, good.grads[0]), good.grads[1]))
    assert any(p.startswith("topo vs pending: leaf 0 nan/inf differ")
               for p in edge_problems(program, {**results, "topo": [with_nan]}))
    stale = {**results, "aot_recompute": [results["aot_recompute"][0]] * 2}
    assert any(p.startswith("aot_recompute, second run") for p in second_run_problems(stale))
    assert misuse_problems({"pool": [good]}) == [
        f"pool gave loss {good.loss} and grads {good.grads}, no error"]


# -- the draws include the edge cases on purpose -------------------------------------------------
def features(program) -> set:
    """The edge cases a program draws (for the coverage test below)."""
    found, uses = set(), {}
    for node in program.nodes:
        if isinstance(node, Leaf):
            a = node.array
            found |= {f"{a.ndim}-d leaf"} | ({"empty leaf"} if a.size == 0 else set())
            found |= {"float16"} if a.dtype == np.float16 else set()
            found |= {"nan"} if np.isnan(a).any() else set()
            found |= {"inf"} if np.isinf(a).any() else set()
            continue
        for i in node.inputs:
            uses[i] = uses.get(i, 0) + 1
        axes = node.attrs.get("axes") or ()
        found |= {"transpose, a negative axis"} if any(ax < 0 for ax in axes) else set()
        found |= {"an index array"} if isinstance(node.attrs.get("index"), np.ndarray) else set()
        found |= {node.op, f"{node.op} p={node.attrs['p']}"} if node.op == "pow" else {node.op}
        found |= {"mse misuse"} if program.misuse and node.op == "mse" else set()
    found |= {"fan-out"} if any(n > 1 for n in uses.values()) else set()
    return found


def drawn_features(mode: str) -> set:
    found = set()

    @harness(300)   # (drawing only, no engine runs: cheap; enough to meet every named case)
    @given(programs(mode))
    def collect(program):
        found.update(features(program))
    collect()
    return found


def test_the_draws_include_every_edge_case_the_issue_names():
    drawn = {mode: drawn_features(mode) for mode in ("finite", "edge", "f16", "misuse")}
    assert {"transpose, a negative axis", "pow p=0", "0-d leaf", "1-d leaf", "empty leaf", "fan-out",
            "an index array", "mse_broadcast", "matmul", "detach", "no_grad", "rmsnorm",
            "cross_entropy"} <= drawn["finite"]
    assert {"nan", "inf", "0-d leaf", "empty leaf"} <= drawn["edge"]
    assert {"float16", "rmsnorm"} <= drawn["f16"]
    assert {"mse misuse", "cross_entropy", "matmul", "transpose"} <= drawn["misuse"]
