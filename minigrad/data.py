"""Small datasets to train on, and a batch iterator. numpy only, never the network.

Every function returns plain numpy arrays: X float32 of shape (N, features) and y int64 class
indices of shape (N,), ready for `minigrad.cross_entropy(model(X), y)`.

* moons, spirals: 2-D toy problems, generated from a seed (same seed, same points).
* digits: the 1,797 8x8 handwritten digits (UCI, as shipped with scikit-learn), stored in this
  package as minigrad/datasets/digits.npz; see minigrad/datasets/README.md for the source.
* batches: (X_batch, y_batch) pairs covering every row once per pass, optionally shuffled.
* sort_digits: a sequence task made on the fly (sort n digits), for the tiny transformer.

Arguments are checked before anything is drawn: counts are integers, `noise` a finite number
>= 0, `seed` an integer >= 0 or a np.random.Generator (or None), a fraction a number in (0, 1); a wrong
kind raises DataTypeError (a TypeError), a wrong value DataError (a ValueError).
"""
from __future__ import annotations

import math
from importlib import resources
from typing import Iterator

import numpy as np

from .errors import MinigradError
from .eager.variable import Variable


class DataError(MinigradError, ValueError):
    """An argument of a dataset or of batches() with a value it cannot take."""


class DataTypeError(MinigradError, TypeError):
    """An argument of a dataset or of batches() of the wrong kind."""

__all__ = ["moons", "spirals", "digits", "digits_split", "batches", "sort_digits",
           "sort_answer_rows", "SORT_SEP", "DataError", "DataTypeError"]


def moons(n: int = 200, noise: float = 0.1, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaving half circles, classes 0 and 1 (n - n//2 and n//2 points).

    Class 0: (cos t, sin t) for t evenly spaced in [0, pi], the upper arc.
    Class 1: (1 - cos t, 1/2 - sin t), the lower arc, shifted so the arcs hook into each other.
    Gaussian noise of standard deviation `noise` is added to every coordinate.
    """
    _check_count("moons", "n", n, minimum=2)
    _check_noise("moons", noise)
    rng = _rng("moons", seed)
    n0, n1 = n - n // 2, n // 2
    t0, t1 = np.linspace(0, np.pi, n0), np.linspace(0, np.pi, n1)
    upper = np.stack([np.cos(t0), np.sin(t0)], axis=1)
    lower = np.stack([1 - np.cos(t1), 0.5 - np.sin(t1)], axis=1)
    X = np.concatenate([upper, lower]) + noise * rng.standard_normal((n, 2))
    y = np.concatenate([np.zeros(n0, np.int64), np.ones(n1, np.int64)])
    return X.astype(np.float32), y


def spirals(n_per_class: int = 100, classes: int = 3, noise: float = 0.2,
            seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """`classes` interleaved spiral arms, n_per_class points each, inside the unit disc.

    Point i of arm k sits at radius r = i / (n_per_class - 1) and angle
    theta = 2 pi k / classes + 4 r + noise * N(0, 1), i.e. (r sin theta, r cos theta):
    the arms start together at the centre and wind apart. `noise` is in radians of angle.
    """
    _check_count("spirals", "n_per_class", n_per_class, minimum=2)
    _check_count("spirals", "classes", classes, minimum=2)
    _check_noise("spirals", noise)
    rng = _rng("spirals", seed)
    r = np.tile(np.linspace(0.0, 1.0, n_per_class), classes)
    k = np.repeat(np.arange(classes), n_per_class)
    theta = 2 * np.pi * k / classes + 4 * r + noise * rng.standard_normal(r.size)
    X = np.stack([r * np.sin(theta), r * np.cos(theta)], axis=1)
    return X.astype(np.float32), k.astype(np.int64)


def digits() -> tuple[np.ndarray, np.ndarray]:
    """The 1,797 handwritten digits: X float32 (1797, 64) in [0, 1], y int64 (1797,) in 0..9.

    Each row is an 8x8 image read row by row (X[i].reshape(8, 8) shows it); each pixel counts
    the ink in a 4x4 block of a 32x32 bitmap, 0..16, and is divided by 16 here.
    """
    with resources.files("minigrad.datasets").joinpath("digits.npz").open("rb") as f:
        with np.load(f) as stored:
            X, y = stored["X"], stored["y"]
    return X.astype(np.float32) / np.float32(16), y.astype(np.int64)


def digits_split(test_fraction: float = 0.25, seed: int = 0):
    """digits() shuffled with `seed` and cut in two: X_train, y_train, X_test, y_test.

    The test part has round(1797 * test_fraction) rows. Not stratified: with a shuffle each
    class still gets about its share of both parts.
    """
    _check_real("digits_split", "test_fraction", test_fraction, "e.g. 0.25")
    if not 0 < test_fraction < 1:
        raise DataError(f"digits_split(test_fraction={test_fraction!r}): the fraction of rows "
                        f"kept for testing must be strictly between 0 and 1. Fix: e.g. 0.25.")
    rng = _rng("digits_split", seed)
    X, y = digits()
    order = rng.permutation(len(y))
    n_test = int(round(len(y) * test_fraction))
    if not 0 < n_test < len(y):
        raise DataError(f"digits_split(test_fraction={test_fraction!r}) leaves {n_test} of "
                         f"{len(y)} rows for testing; both parts need at least one row. Fix: "
                         f"pick a fraction between 1/{len(y)} and 1 - 1/{len(y)}.")
    test, train = order[:n_test], order[n_test:]
    return X[train], y[train], X[test], y[test]


def batches(X, y, size: int, shuffle: bool = True,
            seed: int | np.random.Generator = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield (X_batch, y_batch) of `size` rows (the last batch may be smaller): one pass.

    Every row appears exactly once per pass. With shuffle, the order is a permutation drawn
    from `seed`: an int makes a fresh np.random.default_rng(seed), so the same int gives the
    same order every pass (use seed=epoch for a new order each epoch); a np.random.Generator is
    drawn from and advances, so passing the same Generator every epoch gives a new order each
    time. Batches are new arrays (copies), safe to keep or change.

    X and y may also be Variables: their data is batched (the batches are numpy arrays; wrap
    them with create_leaf as usual). Arguments are checked when batches() is called, not when
    the first batch is asked for.
    """
    X, y = _rows("X", X), _rows("y", y)
    if len(X) != len(y):
        raise DataError(f"batches: X has {len(X)} rows but y has {len(y)}; each row needs one "
                        f"label. Fix: pass X and y of the same length.")
    _check_count("batches", "size", size, minimum=1)
    order = _rng("batches", seed).permutation(len(y)) if shuffle else np.arange(len(y))
    return _batches(X, y, order, size)


def _batches(X, y, order, size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    for start in range(0, len(y), size):
        rows = order[start:start + size]
        yield X[rows], y[rows]


def _rows(name: str, data) -> np.ndarray:
    """data (an array, a list, or a Variable's data) as numeric rows: one axis at least."""
    array = np.asarray(data.data if isinstance(data, Variable) else data)
    if array.dtype.kind not in "biuf":
        raise DataTypeError(f"batches: {name} has dtype {array.dtype} ({type(data).__name__}); "
                            f"batches are cut from numeric rows. Fix: pass a numeric numpy array "
                            f"(or a Variable, whose data is used).")
    if array.ndim == 0:
        raise DataError(f"batches: {name} is a single value (shape ()), not rows to cut into "
                        f"batches. Fix: pass an array whose first axis counts the rows, e.g. "
                        f"shape (N, features) for X and (N,) for y.")
    return array


def _rng(where: str, seed) -> np.random.Generator:
    """A Generator is drawn from as is; an integer >= 0 seeds a fresh one (None: fresh entropy,
    numpy's own default)."""
    if isinstance(seed, np.random.Generator) or seed is None:
        return np.random.default_rng(seed)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise DataTypeError(f"{where}: seed={seed!r} ({type(seed).__name__}); a seed is an "
                            f"integer >= 0 or a np.random.Generator. Fix: e.g. seed=0.")
    if seed < 0:
        raise DataError(f"{where}: seed={seed}, but a seed must be an integer >= 0 (numpy's "
                        f"generators take no negative seeds). Fix: e.g. seed=0 or seed=abs(s).")
    return np.random.default_rng(seed)


def _check_real(where: str, name: str, value, example: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise DataTypeError(f"{where}: {name}={value!r} ({type(value).__name__}), but {name} "
                            f"must be a number. Fix: pass a number, {example}.")


def _check_noise(where: str, noise) -> None:
    _check_real(where, "noise", noise, "noise=0.1")
    if not (math.isfinite(noise) and noise >= 0):
        raise DataError(f"{where}: noise={noise!r}, but noise is a standard deviation: a finite "
                        f"number >= 0 (NaN or infinity would make every point NaN or infinite). "
                        f"Fix: e.g. noise=0.1, or noise=0 for none.")


def _check_count(where: str, name: str, value, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise DataError(f"{where}: {name}={value!r}, but {name} must be an integer >= {minimum}. "
                        f"Fix: pass e.g. {name}={max(minimum, 2)}.")


SORT_SEP = 10   # the separator token of sort_digits; the digits are the tokens 0..9


def sort_digits(batch: int, n_digits: int = 8,
                seed: int | np.random.Generator = 0) -> tuple[np.ndarray, np.ndarray]:
    """A batch of the sorting task for a causal language model: (ids, targets), int64.

    Each row is one sequence `d_1 .. d_n SEP s_1 .. s_n`: n random digits, the separator
    (token 10), then the same digits sorted. The model reads every token but the last
    (ids, shape (batch, 2n)) and predicts every token but the first (targets, shape
    (batch * 2n,), flattened the way a loss over all positions reads them, row after row).

    Only the sorted half can be predicted: the first n - 1 targets are random digits (the
    best a model can do there is a uniform guess, ln 10 nats each), the separator always
    comes after n digits. So the best mean loss over all positions is (n - 1) ln(10) / (2n),
    and the real score is the accuracy on the n sorted positions (see sort_answer_rows).
    Generated on the fly from `seed` (an int, or a Generator that advances): no file.
    """
    _check_count("sort_digits", "batch", batch, minimum=1)
    _check_count("sort_digits", "n_digits", n_digits, minimum=2)
    rng = _rng("sort_digits", seed)
    digits = rng.integers(0, 10, size=(batch, n_digits))
    sep = np.full((batch, 1), SORT_SEP)
    sequence = np.concatenate([digits, sep, np.sort(digits, axis=1)], axis=1).astype(np.int64)
    return sequence[:, :-1].copy(), sequence[:, 1:].reshape(-1).copy()


def sort_answer_rows(batch: int, n_digits: int) -> np.ndarray:
    """The rows of the flattened targets of sort_digits that hold the sorted digits (the part a
    model can learn), as a boolean mask of shape (batch * 2n,)."""
    position = np.arange(2 * n_digits)
    return np.tile(position >= n_digits, batch)
