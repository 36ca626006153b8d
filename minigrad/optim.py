"""Optimisers: SGD (with momentum) and Adam, updating parameters in place after backward.

    opt = Adam(model.parameters(), lr=1e-3)
    for xb, yb in batches(X, y, 32):
        opt.zero_grad()
        loss = cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()

step() writes into each parameter's own array (p.data) and keeps its state (momentum, Adam's
moments) in buffers allocated at the first step and reused after, so a training loop in steady
state allocates no new persistent arrays. Parameters whose .grad is None are skipped.
"""
from __future__ import annotations

import math

import numpy as np

from .errors import BackwardError, DtypeError, InplaceError, ShapeError
from .eager.readonly import in_live_graph
from .eager.variable import Variable

__all__ = ["Optimizer", "SGD", "Adam"]


class Optimizer:
    """Holds the parameters; subclasses define _update(i, p, grad) for one parameter."""

    def __init__(self, params, lr: float):
        params = list(params)
        if not params:
            raise ValueError(f"{type(self).__name__}: got no parameters to optimise. Pass "
                             f"model.parameters() (a list of Variables made with "
                             f"create_leaf(..., requires_grad=True)).")
        unique, seen = [], set()
        for i, p in enumerate(params):
            if not (isinstance(p, Variable) and p.requires_grad and p.is_leaf):
                what = (type(p).__name__ if not isinstance(p, Variable)
                        else "a Variable made by an op" if not p.is_leaf
                        else "a Variable that does not require grad")
                raise TypeError(f"{type(self).__name__}: parameter {i} is {what}; an optimiser "
                                f"updates leaves that require grad. Fix: pass parameters made "
                                f"with create_leaf(data, requires_grad=True) (model.parameters()).")
            if id(p) not in seen:   # a parameter listed twice is updated once
                seen.add(id(p))
                unique.append(p)
        _check_lr(type(self).__name__, lr)
        self.params = unique
        self.lr = float(lr)
        self.state: list = [None] * len(unique)   # per parameter, made at its first update

    def zero_grad(self) -> None:
        """Forget every parameter's gradient (call before each backward)."""
        for p in self.params:
            p.zero_grad()

    def step(self) -> None:
        """Update every parameter that has a gradient, in place."""
        todo = [(i, p) for i, p in enumerate(self.params) if p._grad is not None]
        if not todo:   # a step that would change nothing is a forgotten backward
            raise _no_gradient_error(self)
        # Check all before changing any, so a refused step leaves parameters and state as they were.
        for i, p in todo:
            p._check_alive()   # a parameter made inside a batch scope is stale by now
            if not p._data.flags.writeable:
                raise _locked_error(self, p)
            state = self.state[i]
            if state is not None and state["scratch"].shape != p._data.shape:
                raise _reshaped_error(self, p, i, state["scratch"].shape)
        for i, p in todo:
            try:
                self._update(i, p._data, p._grad)
            except ValueError as exc:
                if "read-only" in str(exc):
                    raise _locked_error(self, p) from None
                raise

    def _update(self, i: int, data: np.ndarray, grad: np.ndarray) -> None:
        raise NotImplementedError


def _check_lr(owner: str, lr) -> None:
    """A learning rate is a finite positive number: Python's or numpy's (np.float32(0.01) too)."""
    if isinstance(lr, bool) or not isinstance(lr, (int, float, np.integer, np.floating)):
        raise DtypeError(f"{owner}(lr={lr!r}): the learning rate is a {type(lr).__name__}; it must "
                         f"be a number (int, float or a numpy scalar), read once when the "
                         f"optimiser is made. Fix: e.g. lr=0.01 (for a Variable or an array, "
                         f"lr=float(x.item())); to change it later, set opt.lr = new_number.")
    if not (math.isfinite(lr) and lr > 0):
        raise ValueError(f"{owner}(lr={lr!r}): the learning rate must be a finite positive "
                         f"number (0 or less does not descend; inf or nan would make every "
                         f"parameter inf or nan at the first step). Fix: e.g. lr=0.01.")


def _no_gradient_error(opt: Optimizer) -> BackwardError:
    count = len(opt.params)
    return BackwardError(
        f"{type(opt).__name__}.step(): none of its {count} parameter{'s' * (count != 1)} has a "
        f"gradient, so the step would change nothing (training would stand still without a "
        f"word). Rule: step() follows a backward() that reached the optimiser's parameters. "
        f"Fix: call loss.backward() before opt.step(), and opt.zero_grad() before the forward "
        f"(not between backward and step); if the model's parameters were replaced after the "
        f"optimiser was made (layer.weight = create_leaf(...)), make the optimiser again from "
        f"model.parameters().")


def _reshaped_error(opt: Optimizer, p: Variable, i: int, state_shape: tuple) -> ShapeError:
    name = repr(p.name) if p.name else f"number {i} of its list"
    return ShapeError(
        f"{type(opt).__name__}.step(): parameter {name} has shape {p.shape}, but the state the "
        f"optimiser keeps for it (its scratch, momentum or moments) has shape {state_shape}: "
        f"its .data was given another shape since the last step. Rule: an optimiser's state "
        f"has each parameter's shape. Fix: make a new optimiser after changing a parameter's "
        f"shape.")


def _locked_error(opt: Optimizer, p: Variable) -> InplaceError:
    name = repr(p.name) if p.name else f"of shape {p.shape}"
    if not in_live_graph(p._data):   # no graph holds it: the array given to w.data was read-only
        return InplaceError(
            f"{type(opt).__name__}.step(): parameter {name} cannot be updated in place: its "
            f"array is read-only, and no graph holds it, so .data was given a read-only array "
            f"(an op output's .data, np.broadcast_to(...), an array with writeable=False). "
            f"Rule: an optimiser writes into each parameter's own array. Fix: give it a "
            f"writable copy, w.data = np.array(values).")
    return InplaceError(
        f"{type(opt).__name__}.step(): parameter {name} cannot be updated in place: it is saved "
        f"by a graph that is still alive (a loss or output kept without backward, e.g. an "
        f"evaluation run without no_grad()), and a graph's saved arrays are read-only until "
        f"backward consumes it or it is dropped. Fix: run backward on that loss first, evaluate "
        f"under `with minigrad.no_grad():`, or keep `loss.item()` instead of the loss.")


class SGD(Optimizer):
    """Stochastic gradient descent, with optional momentum mu (PyTorch's form):

        v <- mu * v + g        (v starts at 0, so v = g after the first step)
        p <- p - lr * v

    With momentum=0 this is p <- p - lr * g.
    """

    def __init__(self, params, lr: float, momentum: float = 0.0):
        super().__init__(params, lr)
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"SGD(momentum={momentum!r}): momentum must be in [0, 1); it is the "
                             f"fraction of the last velocity kept. Fix: e.g. momentum=0.9.")
        self.momentum = float(momentum)

    def _update(self, i, data, grad):
        state = self.state[i]
        if state is None:   # scratch for lr * v, then the velocity if there is momentum
            state = self.state[i] = {"scratch": np.empty_like(data)}
            if self.momentum:
                state["velocity"] = np.zeros_like(data)
        v = grad
        if self.momentum:
            v = state["velocity"]
            np.multiply(v, self.momentum, out=v)
            np.add(v, grad, out=v)
        step = np.multiply(v, self.lr, out=state["scratch"])
        np.subtract(data, step, out=data)


class Adam(Optimizer):
    """Adam (Kingma and Ba, 2015). For each parameter, at its t-th update (t = 1, 2, ...):

        m <- b1 * m + (1 - b1) * g              running mean of the gradient
        v <- b2 * v + (1 - b2) * g^2            running mean of its square
        m_hat = m / (1 - b1^t),  v_hat = v / (1 - b2^t)   (undo the bias of starting at 0)
        p <- p - lr * m_hat / (sqrt(v_hat) + eps)

    Computed as p <- p - (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps), the same
    number with one fewer array pass. The moments are kept in float32 for float16 parameters:
    in float16, eps = 1e-8 rounds to 0, and an element whose gradient is 0 would step by 0 / 0.
    """

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8):
        super().__init__(params, lr)
        b1, b2 = betas
        if not (0.0 <= b1 < 1.0 and 0.0 <= b2 < 1.0):
            raise ValueError(f"Adam(betas={betas!r}): both betas must be in [0, 1); they are "
                             f"the decay rates of the moment averages. Fix: betas=(0.9, 0.999).")
        if not eps > 0:
            raise ValueError(f"Adam(eps={eps!r}): eps must be positive; it keeps the division "
                             f"finite where the gradient is zero. Fix: eps=1e-8.")
        self.betas = (float(b1), float(b2))
        self.eps = float(eps)

    def _update(self, i, data, grad):
        b1, b2 = self.betas
        state = self.state[i]
        if state is None:   # float32 at least: eps = 1e-8 is 0 in float16, and 0 / 0 is nan
            dtype = np.promote_types(data.dtype, np.float32)
            state = self.state[i] = {"t": 0, "m": np.zeros_like(data, dtype),
                                     "v": np.zeros_like(data, dtype),
                                     "scratch": np.empty_like(data, dtype)}
        state["t"] += 1
        t, m, v, tmp = state["t"], state["m"], state["v"], state["scratch"]
        np.multiply(m, b1, out=m)                     # m = b1 m + (1 - b1) g
        np.multiply(grad, 1.0 - b1, out=tmp, dtype=tmp.dtype)
        np.add(m, tmp, out=m)
        np.multiply(v, b2, out=v)                     # v = b2 v + (1 - b2) g^2
        np.multiply(grad, grad, out=tmp, dtype=tmp.dtype)   # (g^2 of 1e-4 is 0 in float16)
        np.multiply(tmp, 1.0 - b2, out=tmp)
        np.add(v, tmp, out=v)
        np.sqrt(v, out=tmp)                           # tmp = sqrt(v_hat) + eps
        np.divide(tmp, math.sqrt(1.0 - b2 ** t), out=tmp)
        np.add(tmp, self.eps, out=tmp)
        np.divide(m, tmp, out=tmp)                    # tmp = lr m_hat / (sqrt(v_hat) + eps)
        np.multiply(tmp, self.lr / (1.0 - b1 ** t), out=tmp)
        np.subtract(data, tmp, out=data)
