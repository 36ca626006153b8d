"""Every misuse raises an error whose message says what was done, which rule it broke and how to fix it."""
import gc
import inspect
import operator
import re

import numpy as np
import pytest

import minigrad as mg
from minigrad import errors


def leaf(values, requires_grad=False, **kwargs):
    return mg.create_leaf(np.array(values, dtype=np.float64), requires_grad=requires_grad, **kwargs)


def message_of(excinfo):
    return str(excinfo.value)


def numbers_in(text):
    return [float(s) for s in re.findall(r"-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?", text)]


def mentions_number(text, value, tol=1e-3):
    return any(abs(n - value) <= tol for n in numbers_in(text))


# --- the error classes themselves -------------------------------------------------------------

@pytest.mark.parametrize(
    "cls, builtin",
    [
        (errors.ShapeError, ValueError),
        (errors.DtypeError, TypeError),
        (errors.BackwardError, RuntimeError),
        (errors.InplaceError, RuntimeError),
        (errors.TargetError, ValueError),
        (errors.GradcheckError, AssertionError),
        (errors.AnomalyError, RuntimeError),
        (errors.InvariantError, AssertionError),
    ],
)
def test_error_classes_are_minigrad_errors_and_builtin_errors(cls, builtin):
    assert issubclass(cls, errors.MinigradError)
    assert issubclass(cls, builtin)


def test_non_leaf_grad_warning_is_a_user_warning():
    assert issubclass(errors.NonLeafGradWarning, UserWarning)


# --- 1. backward on a non-scalar --------------------------------------------------------------

def test_backward_on_non_scalar_names_shape_and_suggests_reducing():
    x = mg.create_leaf(np.ones((2, 3)), requires_grad=True)
    y = x * 2.0
    with pytest.raises(errors.BackwardError) as excinfo:
        y.backward()
    msg = message_of(excinfo)
    assert "(2, 3)" in msg
    assert "sum" in msg or "mean" in msg


# --- 2. backward twice through the same graph -------------------------------------------------

def test_second_backward_through_same_graph_says_run_forward_again():
    x = leaf([1.0, 2.0])
    w = leaf([3.0, 4.0], requires_grad=True)
    loss = (x * w).sum()
    loss.backward()
    with pytest.raises(errors.BackwardError) as excinfo:
        loss.backward()
    assert "forward" in message_of(excinfo).lower()


def test_backward_through_an_already_consumed_subgraph_raises():
    x = leaf([1.0, 2.0])
    w = leaf([3.0, 4.0], requires_grad=True)
    y = x * w
    z1 = y.sum()
    z1.backward()
    z2 = (y * 2.0).sum()
    with pytest.raises(errors.BackwardError) as excinfo:
        z2.backward()
    assert "forward" in message_of(excinfo).lower()


# --- 3. backward on something that does not require grad --------------------------------------

def test_backward_on_leaf_without_requires_grad_mentions_requires_grad():
    x = leaf(3.0)
    with pytest.raises(errors.BackwardError) as excinfo:
        x.backward()
    assert "requires_grad" in message_of(excinfo)


def test_backward_on_result_of_constants_mentions_requires_grad():
    x = leaf([1.0, 2.0])
    loss = (x * 2.0).sum()
    with pytest.raises(errors.BackwardError) as excinfo:
        loss.backward()
    assert "requires_grad" in message_of(excinfo)


# --- 4. in-place operators on a Variable that requires grad -----------------------------------

@pytest.mark.parametrize(
    "inplace_op",
    [operator.iadd, operator.isub, operator.imul, operator.itruediv],
    ids=["+=", "-=", "*=", "/="],
)
def test_inplace_operator_on_requires_grad_variable_raises_and_leaves_data_alone(inplace_op):
    w = leaf([1.0, 2.0, 3.0], requires_grad=True)
    before = w.data.copy()
    with pytest.raises(errors.InplaceError):
        inplace_op(w, 2.0)  # same as `w += 2.0` etc.
    np.testing.assert_array_equal(w.data, before)


def test_augmented_assignment_statement_raises_inplace_error():
    w = leaf([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(errors.InplaceError):
        w += 1.0
    np.testing.assert_array_equal(w.data, [1.0, 2.0, 3.0])


@pytest.mark.parametrize("requires_grad", [True, False])
def test_item_assignment_into_a_variable_says_how_to_build_a_new_one(requires_grad):
    # was Python's TypeError "'Variable' object does not support item assignment"
    w = leaf([1.0, 2.0, 3.0], requires_grad=requires_grad)
    with pytest.raises(errors.InplaceError, match=r"x\[0\] = \.\.\. on .*records no writes "
                       r"into a Variable.*Build a new Variable instead.*w\.data\[0\] = value"):
        w[0] = 5.0
    np.testing.assert_array_equal(w.data, [1.0, 2.0, 3.0])


# --- 5. writing into arrays a live graph saved for backward -----------------------------------

def test_writing_into_saved_array_of_live_graph_raises_numpy_readonly_error():
    x = leaf([1.0, 2.0, 3.0])
    w = leaf([0.5, -1.0, 2.0], requires_grad=True)
    y = (x * w).sum()
    with pytest.raises(ValueError):
        w.data[0] = 5.0
    y.backward()


def test_saved_array_is_writable_again_after_backward():
    x = leaf([1.0, 2.0, 3.0])
    w = leaf([0.5, -1.0, 2.0], requires_grad=True)
    y = (x * w).sum()
    y.backward()
    w.data[0] = 5.0
    assert w.data[0] == 5.0


def test_saved_array_is_writable_again_when_graph_is_dropped_without_backward():
    x = leaf([1.0, 2.0, 3.0])
    w = leaf([0.5, -1.0, 2.0], requires_grad=True)
    y = (x * w).sum()
    with pytest.raises(ValueError):
        w.data[0] = 5.0
    del y
    gc.collect()
    w.data[0] = 5.0
    assert w.data[0] == 5.0


def test_blocked_write_does_not_corrupt_the_gradient():
    x = leaf([1.0, 2.0, 3.0])
    w = leaf([0.5, -1.0, 2.0], requires_grad=True)
    y = (x * w).sum()
    with pytest.raises(ValueError):
        x.data[0] = 100.0  # d(sum(x*w))/dw needs this very array
    with pytest.raises(ValueError):
        w.data[0] = 5.0
    y.backward()
    np.testing.assert_array_equal(w.grad, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(w.data, [0.5, -1.0, 2.0])


# --- 6. shape mismatches ----------------------------------------------------------------------

def test_matmul_shape_mismatch_names_op_and_both_shapes():
    a = mg.create_leaf(np.ones((3, 4)), requires_grad=True)
    b = mg.create_leaf(np.ones((5, 2)), requires_grad=True)
    with pytest.raises(errors.ShapeError) as excinfo:
        a @ b
    assert isinstance(excinfo.value, ValueError)
    msg = message_of(excinfo)
    assert "matmul" in msg
    assert "(3, 4)" in msg and "(5, 2)" in msg


def test_add_broadcast_mismatch_names_op_and_both_shapes():
    a = mg.create_leaf(np.ones(3), requires_grad=True)
    b = mg.create_leaf(np.ones(4))
    with pytest.raises(errors.ShapeError) as excinfo:
        a + b
    assert isinstance(excinfo.value, ValueError)
    msg = message_of(excinfo)
    assert "add" in msg
    assert "(3,)" in msg and "(4,)" in msg


# --- 7. requires_grad on integer data ---------------------------------------------------------

def test_requires_grad_on_integer_data_suggests_float_dtype():
    with pytest.raises(errors.DtypeError) as excinfo:
        mg.create_leaf(np.array([1, 2, 3]), requires_grad=True)
    assert isinstance(excinfo.value, TypeError)
    assert "float" in message_of(excinfo).lower()


# --- 8. cross_entropy targets -----------------------------------------------------------------

@pytest.mark.parametrize("bad", [7, -1])
def test_cross_entropy_out_of_range_target_names_value_and_class_count(bad):
    logits = mg.create_leaf(np.zeros((2, 3)), requires_grad=True)
    targets = np.array([0, bad])
    with pytest.raises(errors.TargetError) as excinfo:
        mg.cross_entropy(logits, targets)
    assert isinstance(excinfo.value, ValueError)
    msg = message_of(excinfo)
    assert re.search(rf"(?<![\d.]){re.escape(str(bad))}(?![\d.])", msg), msg
    assert re.search(r"(?<![\d.])3(?![\d.])", msg), msg


def test_cross_entropy_float_targets_raise_dtype_error():
    logits = mg.create_leaf(np.zeros((2, 3)), requires_grad=True)
    with pytest.raises(errors.DtypeError):
        mg.cross_entropy(logits, np.array([0.0, 1.0]))


# --- 9. non-numeric input ---------------------------------------------------------------------

@pytest.mark.parametrize("data", ["abc", [object()]], ids=["string", "object-list"])
def test_create_leaf_on_non_numeric_data_names_create_leaf(data):
    with pytest.raises(errors.DtypeError) as excinfo:
        mg.create_leaf(data)
    assert "create_leaf" in message_of(excinfo)


def test_adding_a_string_names_the_add_op():
    x = leaf([1.0, 2.0], requires_grad=True)
    with pytest.raises(errors.DtypeError) as excinfo:
        x + "a"
    assert "add" in message_of(excinfo)


# --- 10. .grad on a non-leaf ------------------------------------------------------------------

def test_reading_grad_of_non_leaf_returns_none_and_warns_only_leaves_keep_grads():
    x = leaf([1.0, 2.0])
    w = leaf([3.0, 4.0], requires_grad=True)
    y = x * w
    y.sum().backward()
    with pytest.warns(UserWarning, match=r"(?i)leaf") as record:
        grad = y.grad
    assert grad is None
    assert any(issubclass(r.category, errors.NonLeafGradWarning) for r in record)


# --- gradcheck on a wrong custom Function -----------------------------------------------------

class CubeWithWrongBackward(mg.Function):
    """x**3, but backward returns 3*x instead of 3*x**2 (right only where x is 0 or 1)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * 3.0 * x


@pytest.mark.parametrize("inputs", [
    pytest.param(lambda: [mg.create_leaf(np.array([1.0, -2.0]))], id="variable_without_requires_grad"),
    pytest.param(lambda: [], id="no_inputs"),
])
def test_gradcheck_with_nothing_to_check_is_refused_not_passed(inputs):
    # it returned True without comparing anything: a wrong backward passed
    weight = mg.create_leaf(np.array([1.0, 1.0]), requires_grad=True)

    def fn(*xs):
        return (CubeWithWrongBackward.apply(xs[0] if xs else weight) * weight).sum()

    with pytest.raises(errors.GradcheckError, match=r"gradcheck: none of the \d inputs is "
                       r"differentiated.*would pass whatever backward computes.*Fix: pass "
                       r"float64 arrays, or Variables made with requires_grad=True"):
        mg.check.gradcheck(fn, *inputs())


def test_gradcheck_failure_names_input_index_and_both_values():
    scale = mg.create_leaf(np.ones(5), requires_grad=True, name="scale_in")
    cube_in = mg.create_leaf(np.array([1.0, 0.0, 1.0, 0.0, -2.0]), requires_grad=True, name="cube_in")

    def fn(a, b):
        return (a * CubeWithWrongBackward.apply(b)).sum()

    with pytest.raises(errors.GradcheckError) as excinfo:
        mg.check.gradcheck(fn, scale, cube_in)
    msg = message_of(excinfo)
    # the wrong input: its name or its position (second input, index 1)
    assert "cube_in" in msg or re.search(r"input\w*\s*(#|\[)?\s*1\b", msg), msg
    # the wrong element: index 4 (only x=-2 is wrong)
    assert re.search(r"(?<![\d.])4(?![\d.])", msg), msg
    # analytic 3*(-2) = -6, numeric 3*(-2)**2 = 12
    assert mentions_number(msg, -6.0), msg
    assert mentions_number(msg, 12.0), msg


# --- detect_anomaly ---------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_detect_anomaly_names_op_and_where_it_was_created():
    x = mg.create_leaf(np.array([0.0, 4.0]), requires_grad=True)
    with pytest.raises(errors.AnomalyError) as excinfo:
        with mg.check.detect_anomaly():
            root = x ** 0.5; created_on = inspect.currentframe().f_lineno  # noqa: E702
            # forward is finite (sqrt(0) = 0, times 0); backward: 0 * 0.5 / sqrt(0) = NaN
            loss = (root * 0.0).sum()
            loss.backward()
    msg = message_of(excinfo)
    assert "pow" in msg
    assert re.search(rf"test_misuse\.py.{{0,12}}?(?<!\d){created_on}(?!\d)", msg), msg


# --- 10. create_leaf(copy=False): sharing the caller's array ----------------------------------

def test_create_leaf_copy_false_shares_the_array_and_guards_it_while_the_graph_lives():
    batch = np.array([[1.0, 2.0], [3.0, 4.0]])
    w = leaf([[0.5], [-1.0]], requires_grad=True)
    x = mg.create_leaf(batch, copy=False)
    assert x.data is batch                                   # no copy at all
    y = (x @ w).sum()
    with pytest.raises(ValueError):                          # d y / d w needs these numbers
        batch[0, 0] = 100.0
    y.backward()
    np.testing.assert_array_equal(w.grad, [[4.0], [6.0]])
    batch[0, 0] = 100.0                                      # consumed: the array is yours again
    assert x.data[0, 0] == 100.0


def test_create_leaf_copy_false_inside_a_scope_stays_on_the_heap():
    graph = mg.Arena("graph-shared-input", 1 << 16)
    batch = np.ones((4, 3), dtype=np.float32)
    w = mg.create_leaf(np.ones((3, 2), dtype=np.float32), requires_grad=True)
    with graph.scope():
        x = mg.create_leaf(batch, copy=False, name="x")
        (x @ w).sum().backward()
        assert all(b.owner != "x" for b in graph.blocks)     # no "input" block: nothing copied
    np.testing.assert_array_equal(x.data, batch)             # not stale after the pop
    np.testing.assert_array_equal(w.grad, np.full((3, 2), 4.0, dtype=np.float32))


@pytest.mark.parametrize("data, kwargs, error, words", [
    ([1.0, 2.0], {}, TypeError, ["copy=False", "list", "np.asarray"]),
    (np.ones(3, np.float64), {"dtype": np.float32}, errors.DtypeError,
     ["copy=False", "float32", "float64", "astype"]),
    (np.ones(3, np.int64), {"requires_grad": True}, errors.DtypeError,
     ["requires_grad", "int64", "float"]),
    (np.array(["a"]), {}, errors.DtypeError, ["create_leaf", "not numeric"]),
], ids=["list", "dtype-change", "int-parameter", "strings"])
def test_create_leaf_copy_false_refuses_what_would_need_a_copy(data, kwargs, error, words):
    with pytest.raises(error) as excinfo:
        mg.create_leaf(data, copy=False, **kwargs)
    for word in words:
        assert word in message_of(excinfo), (word, message_of(excinfo))


def test_create_leaf_copy_false_with_an_arena_asks_to_choose():
    perm = mg.Arena("perm-choose", 1 << 12)
    with pytest.raises(ValueError) as excinfo:
        mg.create_leaf(np.ones(3), copy=False, arena=perm)
    text = message_of(excinfo)
    assert "copy=False" in text and "'perm-choose'" in text and "Fix" in text
