"""minigrad.tape: the slot tape against central differences and the eager engine, the slot table
it shows, every rule it enforces (each with its misuse test), and TensorTape's early freeing."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minigrad as mg
from minigrad.errors import BackwardError, DtypeError, InplaceError, MinigradError, ShapeError
from minigrad.tape import (Instr, Slot, SlotError, SlotValueError, StaleSlotError, Tape, TapeStep,
                           TensorTape)

# ----------------------------------------------------------------------------------------------
# random scalar DAGs: recipes chosen from the values, so that every op stays in its domain and
# away from its kinks (central differences need a smooth neighbourhood)
# ----------------------------------------------------------------------------------------------
MATH = {  # name -> (arity, float function); pow's exponent is drawn with the recipe
    "add": (2, lambda a, b: a + b), "sub": (2, lambda a, b: a - b),
    "mul": (2, lambda a, b: a * b), "div": (2, lambda a, b: a / b),
    "neg": (1, lambda a: -a), "sin": (1, math.sin), "cos": (1, math.cos),
    "exp": (1, math.exp), "log": (1, math.log), "tanh": (1, math.tanh),
    "relu": (1, lambda a: max(a, 0.0)), "pow": (1, None),
}
EAGER_OPS = {"add", "sub", "mul", "div", "neg", "exp", "log", "tanh", "relu", "pow"}


def allowed(name, a, b) -> bool:
    """Is op `name` safe at inputs a (and b): defined, smooth nearby, and not blowing up?"""
    if name == "div":
        return abs(b) > 0.5
    if name == "log":
        return a > 0.2
    if name == "exp":
        return a < 2.0
    if name == "relu":
        return abs(a) > 1e-3
    if name == "mul":
        return abs(a * b) < 20
    return True


def random_recipe(seed: int, ops=tuple(MATH)):
    """(leaf values, steps [(op, inputs, exponent)], output node indices)."""
    rng = random.Random(seed)
    values = [rng.uniform(-1.5, 1.5) for _ in range(rng.randint(1, 3))]
    n_leaves, steps = len(values), []
    for _ in range(rng.randint(1, 14)):
        name = rng.choice(ops)
        a, b = rng.randrange(len(values)), rng.randrange(len(values))
        va, vb = values[a], values[b]
        exponent = None
        if name == "pow":
            exponent = rng.choice([2.0, 3.0] + ([-1.0, 0.5, 1.5] if va > 0.2 else []))
        if not allowed(name, va, vb):
            continue
        arity, fn = MATH[name]
        value = va ** exponent if name == "pow" else fn(va, vb) if arity == 2 else fn(va)
        if abs(value) > 40:
            continue
        steps.append((name, (a, b) if arity == 2 else (a,), exponent))
        values.append(value)
    outputs = sorted(set(rng.choices(range(len(values)), k=rng.randint(1, 3))))
    return values[:n_leaves], steps, outputs


def evaluate(recipe, leaves, op):
    """Run the recipe with op(name, inputs, exponent); the loss is the sum of the outputs."""
    _, steps, outputs = recipe
    nodes = list(leaves)
    for name, inputs, exponent in steps:
        nodes.append(op(name, [nodes[i] for i in inputs], exponent))
    loss = nodes[outputs[0]]
    for i in outputs[1:]:
        loss = loss + nodes[i]
    return loss


def float_op(name, xs, exponent):
    return xs[0] ** exponent if name == "pow" else MATH[name][1](*xs)


def slot_op(name, xs, exponent):
    tape = xs[0].tape
    return tape.pow(xs[0], exponent) if name == "pow" else getattr(tape, name)(*xs)


def eager_op(name, xs, exponent):
    if name == "pow":
        return xs[0] ** exponent
    return getattr(mg, name)(*xs)


def numeric_grads(recipe, eps=1e-6):
    leaves = recipe[0]
    grads = []
    for k in range(len(leaves)):
        plus, minus = list(leaves), list(leaves)
        plus[k] += eps
        minus[k] -= eps
        grads.append((evaluate(recipe, plus, float_op) - evaluate(recipe, minus, float_op))
                     / (2 * eps))
    return grads


def tape_grads(recipe, how="fast"):
    tape = Tape()
    leaves = [tape.var(v) for v in recipe[0]]
    loss = evaluate(recipe, leaves, slot_op)
    if not loss.requires_grad:
        return [None] * len(leaves)
    if how == "steps":
        list(tape.backward_steps(loss))
    else:
        tape.backward(loss, plain=how == "plain")
    return [leaf.grad for leaf in leaves]


def eager_grads(recipe):
    leaves = [mg.create_leaf(np.array(v), requires_grad=True) for v in recipe[0]]
    loss = evaluate(recipe, leaves, eager_op)
    if loss.grad_fn is None and not loss.is_leaf:
        return [None] * len(leaves)
    loss.backward()
    return [None if leaf.grad is None else float(leaf.grad) for leaf in leaves]


def zeros_for_none(grads):
    return [0.0 if g is None else g for g in grads]


@pytest.mark.parametrize("seed", range(60))
def test_tape_matches_central_differences_on_random_dags(seed):
    recipe = random_recipe(seed)
    want = numeric_grads(recipe)
    for how in ("fast", "plain", "steps"):
        got = zeros_for_none(tape_grads(recipe, how))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=how)


@pytest.mark.parametrize("seed", range(60))
def test_tape_matches_eager_engine_on_random_dags(seed):
    recipe = random_recipe(1000 + seed, ops=tuple(sorted(EAGER_OPS)))
    fast, eager = tape_grads(recipe), eager_grads(recipe)
    assert [g is None for g in fast] == [g is None for g in eager]
    np.testing.assert_allclose(zeros_for_none(fast), zeros_for_none(eager), rtol=1e-12, atol=1e-14)
    # the plain walk (the rules of rules.py) and the fast loop agree to the last bit or nearly
    np.testing.assert_allclose(zeros_for_none(tape_grads(recipe, "plain")),
                               zeros_for_none(fast), rtol=1e-13, atol=1e-15)


# ----------------------------------------------------------------------------------------------
# gradcheck every op in float64: scalar tape (fast path, apply + plain walk) and TensorTape
# ----------------------------------------------------------------------------------------------
UNARY_POINTS = {"neg": 0.7, "sin": 0.7, "cos": 0.7, "exp": 0.7, "log": 0.7, "tanh": 0.7,
                "relu": 0.7}


def central(f, x, eps=1e-6):
    return (f(x + eps) - f(x - eps)) / (2 * eps)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
@pytest.mark.parametrize("path", ["method", "apply"])
def test_gradcheck_binary_ops(op, path):
    fn = MATH[op][1]
    for a, b in [(0.7, -1.3), (-2.1, 0.6), (1.5, 1.5)]:
        tape = Tape()
        x, y = tape.var(a), tape.var(b)
        out = getattr(tape, op)(x, y) if path == "method" else tape.apply(op, x, y)
        assert out.value == fn(a, b)
        tape.backward(out, plain=path == "apply")
        assert x.grad == pytest.approx(central(lambda t: fn(t, b), a), rel=1e-7, abs=1e-9)
        assert y.grad == pytest.approx(central(lambda t: fn(a, t), b), rel=1e-7, abs=1e-9)


@pytest.mark.parametrize("op", sorted(UNARY_POINTS))
@pytest.mark.parametrize("path", ["method", "apply"])
@pytest.mark.parametrize("x0", [0.7, -0.4, 1.9])
def test_gradcheck_unary_ops(op, path, x0):
    if op == "log" and x0 < 0:
        x0 = -x0
    fn = MATH[op][1]
    tape = Tape()
    x = tape.var(x0)
    out = getattr(tape, op)(x) if path == "method" else tape.apply(op, x)
    assert out.value == pytest.approx(fn(x0), rel=1e-15)
    tape.backward(out, plain=path == "apply")
    assert x.grad == pytest.approx(central(fn, x0), rel=1e-7, abs=1e-9)


@pytest.mark.parametrize("exponent", [2.0, 3.0, -1.0, 0.5, 1.5, 2])
@pytest.mark.parametrize("path", ["method", "apply"])
def test_gradcheck_pow(exponent, path):
    tape = Tape()
    x = tape.var(1.3)
    out = x ** exponent if path == "method" else tape.apply("pow", x, exponent=float(exponent))
    tape.backward(out, plain=path == "apply")
    assert x.grad == pytest.approx(central(lambda t: t ** exponent, 1.3), rel=1e-7)
    assert tape.instrs == [Instr("pow", (0,), 1, {"exponent": float(exponent)})]


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "neg", "pow", "sin", "cos", "exp",
                                "log", "tanh", "relu"])
def test_gradcheck_tensor_tape_ops_with_broadcasting(op):
    rng = np.random.default_rng(3)
    a0 = rng.uniform(0.3, 1.5, (3, 4)) * rng.choice([-1, 1], (3, 4))
    b0 = rng.uniform(0.5, 1.5, (4,))
    if op == "log":
        a0 = np.abs(a0)

    def loss(a, b):   # the sum of op(a, b), each weighted so that the gradient is not uniform
        weights = np.arange(12.0).reshape(3, 4) / 7 + 0.5
        arity = MATH[op][0]
        if op == "pow":
            y = a ** 3.0
        elif arity == 2:
            y = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op](a, b)
        else:
            y = {"neg": np.negative, "sin": np.sin, "cos": np.cos, "exp": np.exp, "log": np.log,
                 "tanh": np.tanh, "relu": lambda v: np.maximum(v, 0)}[op](a)
        return float((y * weights).sum()), weights

    tape = TensorTape()
    a, b = tape.var(a0), tape.var(b0)
    w = tape.const(loss(a0, b0)[1])
    if op == "pow":
        y = a ** 3.0
    elif MATH[op][0] == 2:
        y = getattr(tape, op)(a, b)
    else:
        y = getattr(tape, op)(a)
    tape.backward(y * w)    # backward of a many-element slot differentiates the sum
    for slot, x0, k in ((a, a0, 0), (b, b0, 1)):
        numeric = np.zeros_like(x0)
        for idx in np.ndindex(x0.shape):
            plus, minus = [a0.copy(), b0.copy()], [a0.copy(), b0.copy()]
            plus[k][idx] += 1e-6
            minus[k][idx] -= 1e-6
            numeric[idx] = (loss(*plus)[0] - loss(*minus)[0]) / 2e-6
        if slot.grad is None:
            assert np.all(numeric == 0) and (k == 1 and MATH[op][0] == 1)
        else:
            np.testing.assert_allclose(slot.grad, numeric, rtol=1e-6, atol=1e-8)
            assert slot.grad.shape == x0.shape


# ----------------------------------------------------------------------------------------------
# the slot table: SSA, requires-grad skipping, instrs, use counts
# ----------------------------------------------------------------------------------------------
def test_every_op_writes_a_fresh_slot_and_the_table_shows_it():
    tape = Tape()
    x = tape.var(2.0, name="x")
    c = tape.const(3.0, name="c")
    y = x * c
    z = y + x
    assert [x.index, c.index, y.index, z.index] == [0, 1, 2, 3]
    assert tape.values == [2.0, 3.0, 6.0, 8.0]
    assert tape.kinds == ["var", "const", "temp", "temp"]
    assert tape.requires_grad == [True, False, True, True]
    assert tape.names == ["x", "c", None, None]
    assert tape.instrs == [Instr("mul", (0, 1), 2, {}), Instr("add", (2, 0), 3, {})]
    assert tape.use_counts() == [2, 1, 1, 0]
    tape.backward(z)
    assert tape.grads == [4.0, None, 1.0, 1.0]   # a const gets no grad


def test_op_on_consts_only_records_no_instruction():
    tape = Tape()
    x = tape.var(1.5)
    c = tape.const(2.0)
    k = tape.exp(c * c)              # nothing here requires grad: two consts, no instruction
    y = x * k
    assert tape.kinds == ["var", "const", "const", "const", "temp"]
    assert [i.op for i in tape.instrs] == ["mul"]
    assert k.kind == "const" and not k.requires_grad
    assert "const" in tape.table().splitlines()[3]
    tape.backward(y)
    assert x.grad == pytest.approx(math.exp(4.0))
    assert c.grad is None and k.grad is None


def test_int_api_returns_ints_and_slot_api_returns_slots():
    tape = Tape()
    a, b = tape.var(3.0).index, tape.var(4.0).index
    c = tape.mul(a, b)
    d = tape.sin(c)
    assert type(c) is int and type(d) is int
    s = tape.add(Slot(tape, a), b)
    assert isinstance(s, Slot) and s.value == 7.0
    assert tape.values[Slot(tape, c)] == 12.0      # a Slot indexes the tables directly
    tape.backward(d)
    assert tape.grads[a] == pytest.approx(math.cos(12.0) * 4.0)


def test_slot_operators_with_numbers_make_consts():
    tape = Tape()
    x = tape.var(2.0)
    y = 1.0 - 3 * x / 4.0 + 2 ** 0 * x ** 2.0
    assert y.value == pytest.approx(1.0 - 1.5 + 4.0)
    tape.backward(y)
    assert x.grad == pytest.approx(-0.75 + 4.0)
    assert tape.kinds.count("const") == 4     # 1.0, 3, 4.0 and the 1 that Python made of 2 ** 0


def test_dead_branch_and_instructions_after_the_output_get_no_grad():
    tape = Tape()
    x = tape.var(0.5)
    h = x.tanh()
    loss = h * h
    dead = h.exp() + x
    tape.backward(loss)
    assert x.grad == pytest.approx(2 * math.tanh(0.5) * (1 - math.tanh(0.5) ** 2))
    assert dead.grad is None


# ----------------------------------------------------------------------------------------------
# backward_steps: the contract the view reads
# ----------------------------------------------------------------------------------------------
def test_backward_steps_walks_instructions_newest_first_and_counts_uses_down():
    tape = Tape()
    x = tape.var(0.3, name="x")
    c = tape.const(2.0)
    y = (x * c).sin() + x
    counts = tape.use_counts()
    steps = list(tape.backward_steps(y))
    assert all(isinstance(s, TapeStep) for s in steps)
    assert [s.position for s in steps] == [2, 1, 0]
    assert [s.instr for s in steps] == list(reversed(tape.instrs))
    assert steps[0].grad_writes == ((3, 1.0), (0, 1.0))           # add: both inputs get g
    assert steps[1].grad_writes == ((2, math.cos(0.6)),)
    assert steps[2].grad_writes == ((0, pytest.approx(1.0 + 2 * math.cos(0.6))),)
    assert counts == [2, 1, 1, 1, 0]
    assert [s.remaining for s in steps] == [(1, 1, 1, 0, 0), (1, 1, 0, 0, 0), (0, 0, 0, 0, 0)]
    assert [s.freed for s in steps] == [(4,), (3,), (2, 1)]        # never the var
    assert x.grad == pytest.approx(1.0 + 2 * math.cos(0.6))


@pytest.mark.parametrize("seed", range(20))
def test_backward_equals_exhausting_backward_steps(seed):
    recipe = random_recipe(500 + seed)
    fast, steps = tape_grads(recipe, "fast"), tape_grads(recipe, "steps")
    np.testing.assert_allclose(zeros_for_none(steps), zeros_for_none(fast), rtol=1e-13, atol=1e-15)


def test_use_counts_count_down_during_backward_steps():
    tape = Tape()
    x = tape.var(0.3)
    y = (x * x).exp() + x
    recorded = tape.use_counts()
    seen = []
    for step in tape.backward_steps(y, retain=True):
        seen.append(tape.use_counts())
        assert seen[-1] == list(step.remaining)
    assert recorded == [3, 1, 1, 0] and seen[-1] == [0, 0, 0, 0]
    assert tape.use_counts() == recorded          # the walk is over: the recording again
    steps = tape.backward_steps(y)
    next(steps)
    steps.close()                                  # an abandoned walk too
    assert tape.use_counts() == recorded


def test_retained_backward_steps_free_nothing():
    tape = Tape()
    x = tape.var(0.3)
    y = x.exp() * x
    assert all(s.freed == () for s in tape.backward_steps(y, retain=True))


# ----------------------------------------------------------------------------------------------
# zero_grad vs reset, retain
# ----------------------------------------------------------------------------------------------
def test_zero_grad_keeps_values_and_recording():
    tape = Tape()
    x = tape.var(1.2)
    y = x * x
    tape.backward(y, retain=True)
    assert x.grad == pytest.approx(2.4)
    tape.zero_grad()
    assert tape.grads == [None, None] and tape.values == [1.2, pytest.approx(1.44)]
    tape.backward(y)
    assert x.grad == pytest.approx(2.4)


def test_retain_lets_a_second_backward_run_and_var_grads_accumulate():
    tape = Tape()
    x = tape.var(0.5)
    y = x.sin() * x
    tape.backward(y, retain=True)
    once = x.grad
    tape.backward(y)     # temps' grads are cleared first, so only the var accumulates
    assert x.grad == pytest.approx(2 * once)


def test_reset_empties_the_same_lists_and_starts_a_new_generation():
    tape = Tape()
    columns = [tape.values, tape.grads, tape.requires_grad, tape.kinds, tape.names, tape.instrs]
    x = tape.var(1.0)
    tape.backward(x * x)
    tape.reset()
    assert tape.generation == 1 and all(c == [] for c in columns)
    assert [tape.values, tape.grads, tape.requires_grad, tape.kinds, tape.names, tape.instrs] \
        == columns and all(a is b for a, b in zip(columns, [tape.values, tape.grads,
                                                            tape.requires_grad, tape.kinds,
                                                            tape.names, tape.instrs]))
    y = tape.var(3.0)           # a new recording: backward is allowed again
    tape.backward(y * y)
    assert y.grad == 6.0


# ----------------------------------------------------------------------------------------------
# misuse: every rule raises an error that names it and the fix
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["+=", "-=", "*=", "/=", "**="])
def test_inplace_ops_on_a_slot_raise_naming_the_ssa_rule(op):
    tape = Tape()
    x = tape.var(1.0)
    with pytest.raises(InplaceError, match=r"fresh slot.*SSA.*x = x \+ y"):
        exec(f"x {op} 2.0", {}, {"x": x})


def test_setting_a_slot_value_raises():
    tape = Tape()
    x = tape.var(1.0)
    with pytest.raises(InplaceError, match="in-place"):
        x.value = 3.0


def test_second_backward_without_retain_raises_and_says_how_to_opt_in():
    tape = Tape()
    x = tape.var(1.0)
    y = x * x
    tape.backward(y)
    with pytest.raises(BackwardError, match=r"one backward per recording.*retain=True"):
        tape.backward(y)
    with pytest.raises(BackwardError, match="retain=True"):
        list(tape.backward_steps(y))


@pytest.mark.parametrize("use", ["op", "value", "grad", "backward", "index"])
def test_slot_from_before_reset_raises(use):
    tape = Tape()
    x = tape.var(1.0)
    y = x * x
    tape.reset()
    tape.var(5.0)
    tape.var(6.0)
    with pytest.raises(StaleSlotError, match=r"before tape.reset\(\).*Fix"):
        {"op": lambda: y + 1.0, "value": lambda: y.value, "grad": lambda: x.grad,
         "backward": lambda: tape.backward(y), "index": lambda: tape.values[y]}[use]()
    assert "stale" in repr(y)


def test_backward_of_something_that_does_not_require_grad_raises():
    tape = Tape()
    c = tape.const(2.0)
    with pytest.raises(BackwardError, match=r"const.*does not require grad.*tape.var"):
        tape.backward(c * c)


def test_slot_of_another_tape_raises():
    one, two = Tape(), Tape()
    x, y = one.var(1.0), two.var(2.0)
    with pytest.raises(SlotError, match="another tape"):
        x + y


@pytest.mark.parametrize("bad", [2.5, "x", None, True, -1, 99])
def test_tape_methods_take_slots_not_numbers(bad):
    tape = Tape()
    x = tape.var(1.0)
    with pytest.raises(SlotError, match=r"slot.*Fix"):
        tape.mul(x, bad)


def test_pow_needs_a_constant_exponent():
    tape = Tape()
    x, y = tape.var(2.0), tape.var(3.0)
    with pytest.raises(SlotError, match="constant"):
        x ** y
    with pytest.raises(SlotError, match="constant exponent"):
        2.0 ** x
    with pytest.raises(SlotError, match="constant number, got NoneType"):
        tape.apply("pow", x)
    tensor_tape = TensorTape()
    with pytest.raises(SlotError, match="constant number"):
        tensor_tape.var(np.ones(2)) ** tensor_tape.var(np.ones(2))


def test_apply_names_unknown_ops_and_wrong_arity():
    tape = Tape()
    x = tape.var(1.0)
    with pytest.raises(SlotError, match="no such op.*add, sub"):
        tape.apply("sigmoid", x)
    with pytest.raises(SlotError, match="takes 2 slot"):
        tape.apply("mul", x)


@pytest.mark.parametrize("bad", ["1.0", [1.0, 2.0], None, True])
def test_scalar_tape_slots_hold_floats(bad):
    with pytest.raises(DtypeError, match=r"one float.*Fix"):
        Tape().var(bad)


def test_a_slot_has_no_truth_value():
    tape = Tape()
    with pytest.raises(TypeError, match="slot.value > 0"):
        bool(tape.var(1.0))


def test_all_tape_errors_are_minigrad_errors():
    for cls in (SlotError, StaleSlotError):
        assert issubclass(cls, MinigradError)


# ----------------------------------------------------------------------------------------------
# TensorTape: values (and grads) from a Pool, given back as soon as their use count reaches 0
# ----------------------------------------------------------------------------------------------
def tanh_chain(tape, width=32, depth=6):
    x = tape.var(np.linspace(-1, 1, width * width).reshape(width, width), name="x")
    h = x
    for _ in range(depth):
        h = (h * 0.9 + 0.1).tanh()
    return x, h


def test_tensor_tape_frees_by_use_count_so_the_peak_is_lower():
    peaks, grads = {}, {}
    for retain in (False, True):
        tape = TensorTape()
        x, out = tanh_chain(tape)
        forward_peak = tape.pool.high_water
        tape.backward(out, retain=retain)
        peaks[retain], grads[retain] = tape.pool.high_water, x.grad.copy()
        if not retain:
            # only the var and its grad are left
            assert tape.pool.used == 2 * 32 * 32 * 8
            assert all(v is None for v, k in zip(tape.values, tape.kinds) if k == "temp")
            assert peaks[retain] < forward_peak * 1.5
    np.testing.assert_array_equal(grads[False], grads[True])
    assert peaks[False] < 0.75 * peaks[True], peaks


def test_tensor_tape_matches_scalar_tape_elementwise():
    values = np.array([[-0.7, 0.2], [1.1, 0.4]])
    tt = TensorTape()
    a = tt.var(values)
    tt.backward((a * a).sin().exp() / (a.cos() + 2.0))
    for idx in np.ndindex(values.shape):
        t = Tape()
        s = t.var(float(values[idx]))
        t.backward((s * s).sin().exp() / (s.cos() + 2.0))
        assert a.grad[idx] == pytest.approx(s.grad, rel=1e-13)


def test_tensor_tape_steps_report_what_was_freed_and_free_it():
    tape = TensorTape()
    x = tape.var(np.ones(4))
    c = tape.const(np.full(4, 2.0))
    y = (x * c).exp()
    steps = list(tape.backward_steps(y))
    assert [s.freed for s in steps] == [(3,), (2, 1)]
    assert tape.values[1] is None and tape.values[2] is None and tape.values[3] is None
    np.testing.assert_allclose(x.grad, 2 * np.exp(2.0))
    # grad_writes are copies: the buffers they came from were freed and may be reused
    assert steps[0].grad_writes[0][0] == 2
    np.testing.assert_allclose(steps[0].grad_writes[0][1], np.exp(2.0))


def test_tensor_tape_reset_keeps_the_pool_capacity():
    tape = TensorTape()
    capacities = []
    for _ in range(4):
        tape.reset()
        x, out = tanh_chain(tape, width=16, depth=3)
        tape.backward(out)
        capacities.append(tape.pool.capacity)
    assert capacities[1:] == capacities[:1] * 3
    tape.reset()
    assert tape.pool.used == 0


def test_tensor_tape_op_on_a_freed_value_raises():
    tape = TensorTape()
    x = tape.var(np.ones(3))
    h = x.exp()
    tape.backward(h * h)
    with pytest.raises(SlotError, match=r"given back to the pool.*reset\(\)"):
        h + 1.0


def test_tensor_tape_shape_mismatch_raises():
    tape = TensorTape()
    a, b = tape.var(np.ones((2, 3))), tape.var(np.ones((4,)))
    with pytest.raises(ShapeError, match=r"tape.add.*\(2, 3\).*\(4,\).*Fix"):
        a + b


# ----------------------------------------------------------------------------------------------
# edge values: every path (fast method, apply, TensorTape) computes numpy's IEEE value, and every
# backward (fast loop, plain loop, backward_steps, TensorTape) the same gradient; no Python error
# ----------------------------------------------------------------------------------------------
EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, -2.0, 709.5, 710.0, -750.0, 1e200, -1e200, math.inf,
         -math.inf, math.nan]
EXPONENTS = [0.0, 1.0, 2.0, -1.0, -2.0, 0.5, 3.0]
# what numpy says, written here with numpy (not with minigrad's rules): value and d/da, d/db
NUMPY = {
    "add": (np.add, lambda a, b: (1.0, 1.0)),
    "sub": (np.subtract, lambda a, b: (1.0, -1.0)),
    "mul": (np.multiply, lambda a, b: (b, a)),
    "div": (np.divide, lambda a, b: (1.0 / b, -(1.0 / b) * a / b)),   # (b * b would overflow)
    "neg": (np.negative, lambda a: (-1.0,)),
    "sin": (np.sin, lambda a: (np.cos(a),)),
    "cos": (np.cos, lambda a: (-np.sin(a),)),
    "exp": (np.exp, lambda a: (np.exp(a),)),
    "log": (np.log, lambda a: (1.0 / a,)),
    "tanh": (np.tanh, lambda a: (1.0 - np.tanh(a) ** 2,)),
    "relu": (lambda a: np.maximum(a, 0.0), lambda a: (float(a > 0),)),
}


def edge_cases():
    for op, (value, _) in NUMPY.items():
        arity = 2 if op in ("add", "sub", "mul", "div") else 1
        for a in EDGES:
            for b in (EDGES if arity == 2 else [None]):
                yield op, (a,) if b is None else (a, b), {}
    for a in EDGES:
        for p in EXPONENTS:
            yield "pow", (a,), {"exponent": p}


def numpy_value_and_grads(op, inputs, attrs):
    with np.errstate(all="ignore"):
        xs = [np.float64(x) for x in inputs]
        if op == "pow":
            p = attrs["exponent"]
            # d/da a^p = p a^(p-1); a^0 = 1 is flat, so 0 (p a^(p-1) would be 0 * inf at a = 0)
            return np.power(xs[0], p), (0.0 if p == 0 else p * np.power(xs[0], p - 1),)
        value, grads = NUMPY[op]
        return value(*xs), grads(*xs)


def run_paths(op, inputs, attrs):
    """(value, grads) from every path: the fast methods and loop, apply and the plain loop,
    backward_steps, and TensorTape on a 0-d and a 1-d slot."""
    results = {}
    for how in ("fast", "plain", "steps"):
        tape = Tape()
        slots = [tape.var(x) for x in inputs]
        if how == "fast":
            y = tape.pow(slots[0], attrs["exponent"]) if op == "pow" else getattr(tape, op)(*slots)
            tape.backward(y)
        else:
            y = tape.apply(op, *slots, **attrs)
            if how == "plain":
                tape.backward(y, plain=True)
            else:
                list(tape.backward_steps(y))
        results[how] = (y.value, [s.grad for s in slots])
    for shape in ((), (2,)):
        tape = TensorTape()
        slots = [tape.var(np.full(shape, x)) for x in inputs]
        y = tape.apply(op, *slots, **attrs)
        value = y.value
        tape.backward(y)
        results[f"tensor{shape}"] = (value, [s.grad for s in slots])
    return results


def test_edge_values_and_gradients_follow_numpy_in_every_path():
    """Rule: the tapes compute IEEE values as numpy does (exp(710) = inf, 1/0 = inf, log(-1) =
    nan, relu(nan) = nan, ...), the same in the fast path, the rules and TensorTape."""
    checked = 0
    for op, inputs, attrs in edge_cases():
        want_value, want_grads = numpy_value_and_grads(op, inputs, attrs)
        for how, (value, grads) in run_paths(op, inputs, attrs).items():
            where = f"{op}{inputs} {attrs} [{how}]"
            np.testing.assert_allclose(value, np.broadcast_to(want_value, np.shape(value)),
                                       rtol=1e-14, equal_nan=True, err_msg=where)
            for got, want in zip(grads, want_grads):
                np.testing.assert_allclose(got, np.broadcast_to(want, np.shape(got)),
                                           rtol=1e-14, equal_nan=True, err_msg=where)
            checked += 1
    assert checked == 5 * (4 * 14 * 14 + 7 * 14 + 14 * 7)     # 5 paths, every case


def test_relu_of_negative_zero_is_positive_zero_in_every_path():
    """The scalar tape kept -0.0 where TensorTape (np.maximum) gave +0.0, so 1 / relu(-0.0) was
    -inf in one path and +inf in the other (found by the random programs below; assert_allclose
    takes -0.0 for 0.0, so the edge table could not see it)."""
    for how, (value, _) in run_paths("relu", (-0.0,), {}).items():
        assert not np.any(np.signbit(value)), how
    tape = Tape()
    assert tape.pow(tape.relu(tape.var(-0.0)), -1.0).value == math.inf


@pytest.mark.parametrize("x0", [0.0, -0.0, 2.0, -3.0, math.inf])
def test_pow_zero_exponent_has_zero_gradient_everywhere(x0):
    """Rule: d/dx x^0 = 0, also at x = 0 (p x^(p-1) there is 0 * inf: nan before)."""
    for how, (value, (grad,)) in run_paths("pow", (x0,), {"exponent": 0.0}).items():
        np.testing.assert_allclose(value, np.ones(np.shape(value)), err_msg=how)
        np.testing.assert_allclose(grad, np.zeros(np.shape(grad)), err_msg=how)


def test_overflow_and_domain_edges_give_ieee_values_not_python_errors():
    """Rule: where Python's float arithmetic raises (OverflowError, math domain error,
    ZeroDivisionError) the scalar tape gives numpy's value instead."""
    tape = Tape()
    big, inf, zero, one = tape.var(1e200), tape.var(math.inf), tape.var(0.0), tape.var(1.0)
    assert (big ** 2).value == math.inf                    # OverflowError before
    assert ((-big) ** 3).value == -math.inf
    assert math.isnan(inf.sin().value) and math.isnan(inf.cos().value)   # math domain error
    assert (one / zero).value == math.inf and math.isnan((zero / zero).value)
    assert zero.log().value == -math.inf and math.isnan((-one).log().value)
    assert math.isnan(((-one - one) ** 0.5).value)         # complex in Python
    assert tape.exp(tape.var(709.5)).value == pytest.approx(1.3549863193146328e308, rel=1e-14)
    assert math.isnan(tape.exp(tape.var(math.nan)).value)  # inf before
    for plain in (False, True):                            # backward of 0 ** -1: ZeroDivisionError
        t = Tape()
        x = t.var(0.0)
        t.backward(x ** -1.0, plain=plain)
        assert x.grad == -math.inf


def test_every_path_reads_the_one_formula_of_its_op():
    """Rule: each formula is written once (rules.py); the fast loop calls those rules by op code
    and the view prints their docstrings."""
    from minigrad.tape import core
    from minigrad.tape.document import tape_document
    from minigrad.tape.rules import RULES, rule_text
    assert core.BACKWARD == tuple(RULES[name].backward for name in core.OP_NAMES)
    tape = Tape()
    x = tape.var(0.4)
    y = (x * x).tanh() ** 2.0
    doc = tape_document(tape, y.index)
    assert doc["rules"] == {"mul": "ḡa += b·ḡy;  ḡb += a·ḡy", "tanh": "ḡa += (1 − y²)·ḡy",
                            "pow": "ḡa += p·a^(p−1)·ḡy  (0 when p = 0)"}
    assert all(rule_text(op) in RULES[op].__doc__ for op in RULES)


def test_the_fast_methods_compute_with_the_rules_forward(monkeypatch):
    from minigrad.tape import rules
    calls = []
    real = rules.Exp.forward
    monkeypatch.setattr(rules.Exp, "forward", lambda a, out=None: calls.append(a) or real(a, out))
    tape = Tape()
    tape.exp(tape.var(0.5))
    tape.apply("exp", tape.var(0.25))
    assert calls == [0.5, 0.25]


# ----------------------------------------------------------------------------------------------
# random programs at edge values: every path of the tapes computes the same values and grads
# ----------------------------------------------------------------------------------------------
EDGE_LEAVES = st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, -2.0, 709.5, 710.0, 1e200, -1e200,
                               math.inf, -math.inf, math.nan, 1e-300])
PROGRAM_STEP = st.tuples(st.sampled_from(sorted(MATH)), st.integers(0, 99), st.integers(0, 99),
                         st.sampled_from(EXPONENTS))


def run_program(tape, leaves, program, how):
    """Record program (steps of (op, i, j, exponent) reading earlier nodes, fan-out included),
    backward the sum of the last two nodes; return every node's value and the leaves' grads."""
    nodes = [tape.var(x if how != "tensor" else np.full(2, x)) for x in leaves]
    for op, i, j, p in program:
        a, b = nodes[i % len(nodes)], nodes[j % len(nodes)]
        if how == "fast":
            y = a ** p if op == "pow" else getattr(tape, op)(*((a, b) if MATH[op][0] == 2 else (a,)))
        else:
            y = tape.apply(op, *((a, b) if MATH[op][0] == 2 else (a,)),
                           **({"exponent": p} if op == "pow" else {}))
        nodes.append(y)
    loss = nodes[-1] + nodes[-2]
    values = [np.asarray(n.value) for n in nodes]
    if how == "steps":
        list(tape.backward_steps(loss))
    else:
        tape.backward(loss, plain=how == "plain")
    return values, [n.grad for n in nodes[:len(leaves)]]


@settings(max_examples=60, deadline=None)
@given(st.lists(EDGE_LEAVES, min_size=1, max_size=3), st.lists(PROGRAM_STEP, min_size=1,
                                                                max_size=8))
def test_random_programs_at_edge_values_agree_in_every_path(leaves, program):
    """Rule: one formula per op, so the fast loop, the plain loop, backward_steps and
    TensorTape agree on values and gradients also where they are inf or nan."""
    fast_values, fast_grads = run_program(Tape(), leaves, program, "fast")
    for how, tape in (("plain", Tape()), ("steps", Tape()), ("tensor", TensorTape())):
        values, grads = run_program(tape, leaves, program, how)
        for got, want in zip(values, fast_values):
            np.testing.assert_allclose(got, np.broadcast_to(want, got.shape), rtol=1e-13,
                                       equal_nan=True, err_msg=how)
        for got, want in zip(grads, fast_grads):
            got, want = zeros_for_none([got])[0], zeros_for_none([want])[0]
            np.testing.assert_allclose(got, np.broadcast_to(want, np.shape(got)), rtol=1e-13,
                                       equal_nan=True, err_msg=how)

# ----------------------------------------------------------------------------------------------
# what goes into a slot, and what counts as a slot index
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("tape_class", [Tape, TensorTape])
@pytest.mark.parametrize("kind", ["var", "const"])
def test_an_int_beyond_float64_is_refused_naming_the_range(tape_class, kind):
    with pytest.raises(SlotValueError, match=r"401 digits.*float64.*1\.8e308.*Fix") as info:
        getattr(tape_class(), kind)(-10 ** 400)
    assert isinstance(info.value, ValueError) and isinstance(info.value, MinigradError)


@pytest.mark.parametrize("bad", ["1.5", ["1", "2"], True, np.array([True]), np.array([1 + 2j]),
                                 1j, None, {"a": 1}])
def test_tensor_tape_slots_hold_real_numbers_only(bad):
    """Rule: a TensorTape slot holds real numbers; "1.5" was parsed and accepted before."""
    for kind in ("var", "const"):
        with pytest.raises(DtypeError, match=r"TensorTape slot holds a float64 array of real "
                                             r"numbers.*dtype.*Fix"):
            getattr(TensorTape(), kind)(bad)


def test_tensor_tape_slots_take_ints_and_floats_of_any_width():
    tape = TensorTape()
    for x in (3, np.int8(-2), np.float32(0.5), np.arange(3), np.ones(2, np.float16), [1, 2.5]):
        value = tape.var(x).value
        assert value.dtype == np.float64
        np.testing.assert_allclose(value, np.asarray(x, dtype=np.float64))


def test_a_numpy_integer_is_a_slot_index_like_an_int():
    """Supported: np.int64 (from np.argmax, an index array) names a slot as an int does; it was
    refused before with advice to make it a const."""
    tape = Tape()
    x, w = tape.var(3.0), tape.var(4.0)
    slots = np.array([x.index, w.index])
    y = tape.mul(slots[0], slots[1])
    assert type(y) is int and tape.values[y] == 12.0
    z = tape.add(x, np.int32(y))
    assert isinstance(z, Slot) and z.value == 15.0
    with pytest.raises(SlotError, match=r"slot 7 does not exist.*Fix"):
        tape.mul(x, np.int64(7))


# ----------------------------------------------------------------------------------------------
# numpy and slots: numpy's operators are the slot's, its other functions are refused
# ----------------------------------------------------------------------------------------------
def test_numpy_array_times_a_slot_is_one_op_not_an_object_array():
    """Rule: a Slot is not a numpy element; np.ones(3) * slot made an object array of 3 slots
    and recorded 3 ops before."""
    tape = TensorTape()
    x = tape.var(np.array([1.0, 2.0, 3.0]))
    c = np.array([2.0, 0.5, 4.0])
    y = c * x
    assert isinstance(y, Slot) and len(tape.instrs) == 1
    z = (c - y) / x                      # reflected sub and div keep their order
    np.testing.assert_allclose(z.value, (c - c * x.value) / x.value)
    tape.backward(z)
    # z = c / x - c: dz/dx = -c / x^2
    np.testing.assert_allclose(x.grad, -c / np.array([1.0, 4.0, 9.0]))
    scalar = Tape()
    s = scalar.var(2.0)
    assert (np.float64(3.0) * s).value == 6.0 and (np.float64(3.0) - s).value == 1.0
    assert len(scalar.instrs) == 2
    with pytest.raises(DtypeError, match=r"one float, got ndarray.*TensorTape"):
        np.ones(3) * s                   # the scalar tape holds floats: a clear refusal
    assert len(scalar.instrs) == 2


@pytest.mark.parametrize("call", [lambda s: np.exp(s), lambda s: np.maximum(s, 0.0),
                                  lambda s: np.add.accumulate(s)])
def test_numpy_functions_on_a_slot_are_refused_naming_the_slot_op(call):
    tape = Tape()
    s = tape.var(2.0)
    with pytest.raises(SlotError, match=r"np\.\w+.*slot 0: numpy functions do not record.*"
                                        r"slot\.sin\(\).*relu"):
        call(s)
    assert tape.instrs == []


# ----------------------------------------------------------------------------------------------
# TensorTape: what it hands out cannot change what backward reads, nor change afterwards
# ----------------------------------------------------------------------------------------------
def test_tensor_tape_values_cannot_be_written_after_recording():
    """Rule: SSA also for arrays; x.value[...] = 10 changed the gradient before."""
    tape = TensorTape()
    x = tape.var(np.ones(3))
    y = x * x
    with pytest.raises(ValueError, match="read-only"):
        x.value[...] = 10.0
    with pytest.raises(ValueError, match="read-only"):
        tape.values[x][...] = 10.0       # the table itself
    with pytest.raises(ValueError, match="read-only"):
        tape.values[y] += 1.0
    tape.backward(y, retain=True)
    np.testing.assert_allclose(x.grad, [2.0, 2.0, 2.0])
    with pytest.raises(ValueError, match="read-only"):
        tape.grads[x][...] = 0.0
    tape.backward(y)                     # the tape's own accumulation still writes the grad
    np.testing.assert_allclose(x.grad, [4.0, 4.0, 4.0])


@pytest.mark.parametrize("then", ["zero_grad", "backward", "reset"])
def test_tensor_tape_value_and_grad_handed_out_stay_as_they_were(then):
    """Rule: a kept x.grad or y.value is a copy; the pool buffer behind it is reused by the
    next recording (it read 49 instead of 2 before)."""
    tape = TensorTape()
    x = tape.var(np.ones(3))
    y = x * x
    tape.backward(y, retain=True)
    kept_grad, kept_value = x.grad, y.value
    if then == "zero_grad":
        tape.zero_grad()
    elif then == "reset":
        tape.reset()
    else:
        tape.backward(y, retain=True)    # a second pass adds into x's grad buffer in place
    z = tape.var(np.full(3, 7.0))
    tape.backward(z * z)                 # frees the temps: the next allocations reuse them
    w = tape.var(np.full(3, 5.0)) * 3.0
    np.testing.assert_allclose(w.value, [15.0, 15.0, 15.0])
    np.testing.assert_allclose(kept_grad, [2.0, 2.0, 2.0])
    np.testing.assert_allclose(kept_value, [1.0, 1.0, 1.0])
    assert not kept_grad.flags.writeable


# ----------------------------------------------------------------------------------------------
# benchmarks/tape.py: its engines compute the same step, and it prints its lines
# ----------------------------------------------------------------------------------------------
def test_tape_benchmark_engines_agree_and_it_prints_its_lines(capsys):
    import importlib.util
    import pathlib
    import re
    path = pathlib.Path(__file__).parent.parent / "benchmarks" / "tape.py"
    spec = importlib.util.spec_from_file_location("tape_benchmark", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.main(["--repeats", "1"])     # checks the engines agree before it times anything
    out = capsys.readouterr().out
    number = r"(\d+\.\d|nan)"
    assert re.search(rf"^tape step ms: micrograd={number} eager={number} tape={number} "
                     rf"speedup={number} speedup_q1={number} speedup_q3={number} ", out, re.M), out
    peaks = re.search(r"keep-everything=(\d+) use-count-freeing=(\d+)", out)
    kept, freed = map(int, peaks.groups())
    assert freed < 0.6 * kept
