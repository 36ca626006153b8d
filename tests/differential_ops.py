"""The ops of the differential harness, each written four ways side by side:

  eager    the minigrad call (aot captures this same code)
  ref      plain float64 numpy, independent of minigrad: the reference and central differences
  tape     the same math on numpy object arrays whose elements are scalar Tape slots
           (None where the scalar tape has no form for it)
  kink     distance of the inputs to a point where the op is not differentiable (None: smooth)

and which engines know the op (aot: capture has a form; tensor_tape: TensorTape has the op).
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

import minigrad as mg

RMS_EPS = 1e-6


class Op(NamedTuple):
    eager: Callable
    ref: Callable
    tape: Callable | None = None
    aot: bool = True
    tensor_tape: bool = False
    kink: Callable | None = None
    stops_grad: bool = False     # detach, no_grad: central differences see through them


def scaled_without_grad(a):
    with mg.no_grad():
        return a * 2.0


# -- the scalar tape on object arrays ---------------------------------------------------------
def obj(x):
    """x as an object array (numpy turns 0-d object results into bare elements)."""
    if isinstance(x, np.ndarray):
        return x
    out = np.empty((), dtype=object)
    out[()] = x
    return out


def each(fn):
    ufunc = np.frompyfunc(fn, 1, 1)
    return lambda a: obj(ufunc(a))


slot_values = each(lambda s: s.value if hasattr(s, "value") else float(s))


def ref_sigmoid(a):
    """The reference's sigmoid, written from its definition without overflow: 1 / (1 + e^-a)
    for a >= 0, e^a / (1 + e^a) below (at a = -710 that keeps e^-710, where 1 / (1 + e^710)
    rounds to 0; the engines keep it too)."""
    a = np.asarray(a, dtype=np.float64)
    e = np.exp(-np.abs(a))
    return np.where(a >= 0, 1.0, e) / (1.0 + e)


def tape_sigmoid(s):
    return 1.0 / (1.0 + (-s).exp())


def tape_log_softmax(a, axis):
    # the shift c is a constant: log_softmax does not change when every input moves by c
    shifted = a - np.max(slot_values(a).astype(np.float64), axis=axis, keepdims=True)
    total = obj(each(lambda s: s.exp())(shifted).sum(axis=axis, keepdims=True))
    return shifted - each(lambda s: s.log())(total)


def tape_softmax(a, axis):
    shifted = a - np.max(slot_values(a).astype(np.float64), axis=axis, keepdims=True)
    e = each(lambda s: s.exp())(shifted)
    return e / e.sum(axis=axis, keepdims=True)


def tape_mean(a, axis, keepdims):
    count = a.size // max(obj(a.sum(axis=axis, keepdims=keepdims)).size, 1) if a.size else 0
    return obj(obj(a.sum(axis=axis, keepdims=keepdims)) * (1.0 / count))


# -- the numpy reference ------------------------------------------------------------------------
def ref_log_softmax(a, axis):
    shifted = a - a.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def ref_cross_entropy(logits, targets):
    return -ref_log_softmax(logits, -1)[np.arange(len(targets)), targets].mean()


def ref_rmsnorm(x, w):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + RMS_EPS) * w


def ref_gelu(x):   # the tanh form the eager kernel uses (checked against mg.gelu in a test)
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def max_gap(a, axis, keepdims):
    """How far the largest element of each reduced group is above the second largest."""
    if a.size == 0:
        return np.inf
    moved = np.moveaxis(a, axis, -1) if isinstance(axis, int) else a.reshape(-1)
    if moved.shape[-1] < 2:
        return np.inf
    top = np.sort(moved, axis=-1)
    return float(np.min(top[..., -1] - top[..., -2]))


def ce_tape(logits, targets):
    rows = tape_log_softmax(logits, -1)[np.arange(len(targets)), targets]
    return obj(rows.sum() * (-1.0 / len(targets)))


def rms_tape(x, w):
    ms = tape_mean(x * x, -1, True)
    return x * each(lambda s: (s + RMS_EPS) ** -0.5)(ms) * w


OPS = {
    "add": Op(lambda a, b: a + b, np.add, lambda a, b: obj(a + b), tensor_tape=True),
    "sub": Op(lambda a, b: a - b, np.subtract, lambda a, b: obj(a - b), tensor_tape=True),
    "mul": Op(lambda a, b: a * b, np.multiply, lambda a, b: obj(a * b), tensor_tape=True),
    "div": Op(lambda a, b: a / b, np.divide, lambda a, b: obj(a / b), tensor_tape=True),
    "square_plus": Op(lambda a: a * a + 0.5, lambda a: a * a + 0.5, lambda a: obj(a * a + 0.5),
                      tensor_tape=True),
    "neg": Op(lambda a: -a, np.negative, lambda a: obj(-a), tensor_tape=True),
    "exp": Op(lambda a: a.exp(), np.exp, each(lambda s: s.exp()), tensor_tape=True),
    "log": Op(lambda a: a.log(), np.log, each(lambda s: s.log()), tensor_tape=True),
    "tanh": Op(lambda a: a.tanh(), np.tanh, each(lambda s: s.tanh()), tensor_tape=True),
    "sigmoid": Op(lambda a: a.sigmoid(), lambda a: ref_sigmoid(a), each(tape_sigmoid),
                  tensor_tape=True),
    "relu": Op(lambda a: a.relu(), lambda a: np.maximum(a, 0), each(lambda s: s.relu()),
               tensor_tape=True, kink=lambda a: float(np.min(np.abs(a), initial=np.inf))),
    "silu": Op(mg.silu, lambda a: a * ref_sigmoid(a), each(lambda s: s * tape_sigmoid(s))),
    "gelu": Op(mg.gelu, ref_gelu),
    "pow": Op(lambda a, p: a ** p, lambda a, p: np.power(a, p),
              lambda a, p: each(lambda s: s ** p)(a), tensor_tape=True),
    "sum": Op(lambda a, axis, keepdims: a.sum(axis=axis, keepdims=keepdims),
              lambda a, axis, keepdims: np.sum(a, axis=axis, keepdims=keepdims),
              lambda a, axis, keepdims: obj(a.sum(axis=axis, keepdims=keepdims))),
    "mean": Op(lambda a, axis, keepdims: a.mean(axis=axis, keepdims=keepdims),
               lambda a, axis, keepdims: np.mean(a, axis=axis, keepdims=keepdims),
               tape_mean),
    "max": Op(lambda a, axis, keepdims: a.max(axis=axis, keepdims=keepdims),
              lambda a, axis, keepdims: np.max(a, axis=axis, keepdims=keepdims),
              kink=max_gap),
    "reshape": Op(lambda a, shape: mg.reshape(a, shape), np.reshape,
                  lambda a, shape: a.reshape(shape)),
    "transpose": Op(lambda a, axes: mg.transpose(a, axes), np.transpose,
                    lambda a, axes: a.transpose(axes)),
    "broadcast_to": Op(lambda a, shape: mg.broadcast_to(a, shape), np.broadcast_to,
                       lambda a, shape: np.broadcast_to(a, shape)),
    "getitem": Op(lambda a, index: a[index], lambda a, index: a[index],
                  lambda a, index: obj(a[index])),   # (aot: ints and slices, see aot_knows)
    "matmul": Op(lambda a, b: a @ b, np.matmul, lambda a, b: obj(a @ b)),
    "softmax": Op(lambda a, axis: mg.softmax(a, axis=axis),
                  lambda a, axis: np.exp(ref_log_softmax(a, axis)), tape_softmax),
    "log_softmax": Op(lambda a, axis: mg.log_softmax(a, axis=axis), ref_log_softmax,
                      lambda a, axis: obj(tape_log_softmax(a, axis))),
    "mse": Op(mg.mse, lambda a, b: np.mean((a - b) ** 2),
              lambda a, b: tape_mean(obj((a - b) * (a - b)), None, False)),
    "cross_entropy": Op(mg.cross_entropy, ref_cross_entropy, ce_tape),
    "rmsnorm": Op(mg.rmsnorm, ref_rmsnorm, rms_tape),
    # the same mse, drawn with a target of another shape (refused, or right in every engine)
    "mse_broadcast": Op(mg.mse, lambda a, b: np.mean((a - b) ** 2)),
    "detach": Op(lambda a: a.detach(), lambda a: a, stops_grad=True),
    "no_grad": Op(scaled_without_grad, lambda a: a * 2.0, stops_grad=True),
    "concat": Op(lambda a, b, axis: mg.concat([a, b], axis=axis),
                 lambda a, b, axis: np.concatenate([a, b], axis=axis),
                 lambda a, b, axis: np.concatenate([a, b], axis=axis)),
    "stack": Op(lambda a, b, axis: mg.stack([a, b], axis=axis),
                lambda a, b, axis: np.stack([a, b], axis=axis),
                lambda a, b, axis: np.stack([a, b], axis=axis)),
}
