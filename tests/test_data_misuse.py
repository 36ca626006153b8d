"""minigrad.data: every argument a dataset or batches() cannot take is a clear error, raised when
the function is called; Variables are batched by their data."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import data
from minigrad.data import DataError, DataTypeError
from minigrad.errors import MinigradError


def test_batches_of_variables_batch_their_data():
    """Supported: X and y may be Variables; the batches are numeric numpy arrays (not object
    arrays of Variables)."""
    X, y = data.moons(23, seed=1)
    got = list(data.batches(mg.create_leaf(X), mg.create_leaf(y), 5, shuffle=False))
    want = list(data.batches(X, y, 5, shuffle=False))
    assert len(got) == len(want) == 5
    for (xb, yb), (xw, yw) in zip(got, want):
        assert type(xb) is np.ndarray and xb.dtype == np.float32 and yb.dtype == np.int64
        np.testing.assert_array_equal(xb, xw)
        np.testing.assert_array_equal(yb, yw)


def test_misuse_batches_of_a_single_value():
    with pytest.raises(DataError, match=r"X is a single value \(shape \(\)\).*first axis counts"):
        data.batches(np.float32(3.0), np.int64(1), 2)   # raised at the call, not at next()
    with pytest.raises(DataError, match=r"y is a single value"):
        data.batches(np.ones((3, 2)), 1, 2)


def test_misuse_batches_of_non_numeric_rows():
    with pytest.raises(DataTypeError, match=r"X has dtype object.*numeric"):
        data.batches(np.array([object()] * 3), np.arange(3), 2)
    with pytest.raises(DataTypeError, match=r"y has dtype <U1"):
        data.batches(np.ones((3, 1)), ["a", "b", "c"], 2)


@pytest.mark.parametrize("call", [
    lambda s: data.batches(np.ones((4, 1)), np.arange(4), 2, seed=s),
    lambda s: data.moons(10, seed=s), lambda s: data.spirals(5, seed=s),
    lambda s: data.digits_split(seed=s), lambda s: data.sort_digits(2, seed=s)],
    ids=["batches", "moons", "spirals", "digits_split", "sort_digits"])
def test_misuse_a_seed_must_be_a_non_negative_integer_or_a_generator(call):
    with pytest.raises(DataError, match=r"seed=-1, but a seed must be an integer >= 0.*Fix"):
        call(-1)
    with pytest.raises(DataTypeError, match=r"seed='1' \(str\).*np.random.Generator"):
        call("1")
    with pytest.raises(DataTypeError, match=r"seed=1.5 \(float\)"):
        call(1.5)
    rng = np.random.default_rng(0)
    call(rng), call(np.int64(3)), call(None)   # supported: a Generator, a numpy int, None


@pytest.mark.parametrize("bad", ["0.5", None, [0.5]])
def test_misuse_a_test_fraction_must_be_a_number(bad):
    with pytest.raises(DataTypeError, match=r"test_fraction=.*must be a number.*0.25"):
        data.digits_split(bad)


@pytest.mark.parametrize("make", [data.moons, data.spirals], ids=["moons", "spirals"])
@pytest.mark.parametrize("noise", [float("nan"), float("inf"), -0.1])
def test_misuse_noise_must_be_a_finite_non_negative_number(make, noise):
    with pytest.raises(DataError, match=r"noise=.*a finite number >= 0.*Fix"):
        make(noise=noise)
    with pytest.raises(DataTypeError, match=r"noise='0.1' \(str\)"):
        make(noise="0.1")
    X, _ = make(noise=0)
    assert np.all(np.isfinite(X))


def test_data_errors_are_minigrad_errors_and_builtins():
    assert issubclass(DataError, MinigradError) and issubclass(DataError, ValueError)
    assert issubclass(DataTypeError, MinigradError) and issubclass(DataTypeError, TypeError)
    with pytest.raises(DataError, match="same length"):   # the older checks too
        data.batches(np.ones((3, 1)), np.arange(2), 2)
    with pytest.raises(DataError, match="integer >= 1"):
        data.batches(np.ones((3, 1)), np.arange(3), 0)
