"""Layers: Module, Linear, Sequential, MLP and activation modules, on the public minigrad API.

A Module is a plain Python object whose parameters are leaf Variables that require grad, kept
in its attributes (directly, in sub-modules, or in lists, tuples and dicts of them). Nothing is
registered: parameters() finds them by walking the attributes in the order they were set.

    model = MLP([64, 64, 10], seed=0)
    loss = minigrad.cross_entropy(model(X), y)
    loss.backward()
"""
from __future__ import annotations

import contextlib
import math
import threading

import numpy as np

from .. import ops
from ..errors import DtypeError, ShapeError
from ..modes import modes, name_scope
from ..names import check_name
from ..eager.variable import Variable, create_leaf

__all__ = ["Module", "Linear", "Sequential", "MLP", "ReLU", "Tanh", "Sigmoid"]


class Module:
    """Base class of layers: override forward(); model(x) calls model.forward(x)."""

    training = True   # set per instance by train() / eval(); read it in forward if it matters

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward(): a Module subclass "
                                  f"must define forward(self, x) returning its output.")

    def __call__(self, *args, **kwargs):
        # The call runs in a name_scope named after this module (see scope_name), so every
        # node it makes records where in the model it was made.
        running = _running.modules
        name = scope_name(self, running[-1] if running else None)
        if name is not None and not (type(name) is str and name.isprintable()):
            name = name_scope(name).name   # (checked: raises for a name a trace cannot carry)
        running.append(self)
        previous = modes.scope   # name_scope(name)'s two steps, inline: every layer call is one
        if name is not None:
            modes.scope = previous + (name,)
        try:
            return self.forward(*args, **kwargs)
        finally:
            modes.scope = previous
            running.pop()

    def modules(self) -> list:
        """This module and every module below it, depth first, in attribute order."""
        found, seen = [], set()
        for item in _walk(self, seen):
            if isinstance(item, Module):
                found.append(item)
        return found

    def parameters(self) -> list:
        """Every parameter (leaf Variable that requires grad) below this module, each once.

        The order is deterministic: attributes in the order they were assigned, lists and
        tuples front to back, dicts in insertion order, sub-modules depth first.
        """
        found, seen = [], set()
        for item in _walk(self, seen):
            if isinstance(item, Variable) and item.requires_grad and item.is_leaf:
                found.append(item)
        return found

    def zero_grad(self) -> None:
        """Forget every parameter's accumulated gradient."""
        for p in self.parameters():
            p.zero_grad()

    def train(self, mode: bool = True) -> "Module":
        """Set `training` on this module and all below it (True: training, False: evaluation)."""
        for m in self.modules():
            m.training = bool(mode)
        return self

    def eval(self) -> "Module":
        """train(False). It switches layer behaviour only; gradients still need no_grad()."""
        return self.train(False)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class _Running(threading.local):
    modules: list

    def __init__(self):
        self.modules = []   # the Module calls under way in this thread, outermost first


_running = _Running()


def scope_name(module: Module, caller: Module | None) -> str | None:
    """The scope a module's call opens: its `name` if it has one (Linear's "layer0"), else where
    the calling module keeps it ("attn", "blocks.1"; a Sequential's "2"), else its class name
    in lower case. A top-level call of a module without a name opens none."""
    name = getattr(module, "name", None)
    if isinstance(name, str) and name:
        return name
    if caller is None:
        return None
    if isinstance(caller, Sequential):
        for i, m in enumerate(caller.layers):
            if m is module:
                return str(i)
    for attribute, value in vars(caller).items():
        if value is module:
            return attribute
        if isinstance(value, (list, tuple, dict)):
            pairs = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in pairs:
                if item is module:
                    return f"{attribute}.{key}"
    return type(module).__name__.lower()


def _walk(obj, seen: set):
    """Yield obj's Modules and Variables depth first; obj's attributes, lists, tuples and dicts
    (their values: a dict of layers was skipped, and its parameters never trained)."""
    stack = [obj]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        if isinstance(item, (Module, Variable, list, tuple, dict)):
            seen.add(id(item))   # each object once: shared layers, shared lists, cycles
        if isinstance(item, (Module, Variable)):
            yield item
            if isinstance(item, Variable):
                continue
            children = list(vars(item).values())
        elif isinstance(item, (list, tuple)):
            children = list(item)
        elif isinstance(item, dict):
            children = list(item.values())
        else:
            continue
        stack.extend(reversed(children))   # reversed so the first child is visited first


class Linear(Module):
    """y = x @ W + b, with W of shape (in_features, out_features) and b of shape (out_features,).

    Initialisation (Kaiming/He uniform): W ~ U(-a, a) with a = sqrt(6 / in_features), so
    Var(W) = a^2 / 3 = 2 / in_features, which keeps the variance of the activations about
    constant from layer to layer after a ReLU; b = 0.

    seed: an int or None (fresh randomness) for a private np.random.default_rng, or a
    np.random.Generator to draw from (MLP passes one to all its layers). arena: handed to
    create_leaf so the parameters live in that arena.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, seed=None,
                 dtype=np.float32, arena=None, name: str | None = None):
        for label, value in (("in_features", in_features), ("out_features", out_features)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ShapeError(f"Linear({in_features!r}, {out_features!r}): {label} must be a "
                                 f"positive integer (a number of features), got {value!r}.")
        if np.dtype(dtype).kind != "f":
            raise DtypeError(f"Linear(dtype={np.dtype(dtype)}): parameters need a float dtype to "
                            f"have gradients. Fix: dtype=np.float32 or np.float64.")
        self.in_features, self.out_features = int(in_features), int(out_features)
        name = check_name(name, "Linear(name=...)")
        self.name = name   # None: its scope is where the calling module keeps it
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        bound = math.sqrt(6.0 / self.in_features)
        weight = rng.uniform(-bound, bound, size=(self.in_features, self.out_features))
        label = name or "linear"
        # A named layer's parameters are made in its scope, so a view can draw them inside it.
        with name_scope(name) if name else contextlib.nullcontext():
            self.weight = parameter(weight.astype(dtype), f"{label}.weight", arena)
            self.bias = (parameter(np.zeros(self.out_features, dtype), f"{label}.bias", arena)
                         if bias else None)

    def forward(self, x):
        return ops.linear(x, self.weight, self.bias)

    def __repr__(self) -> str:
        return (f"Linear({self.in_features}, {self.out_features}, bias={self.bias is not None}, "
                f"dtype={self.weight.dtype})")


def parameter(array: np.ndarray, name: str, arena) -> Variable:
    """A layer's parameter: a named leaf that requires grad (on `arena` when one is given)."""
    # arena= is passed only when given, so this works with and without arena support.
    if arena is None:
        return create_leaf(array, requires_grad=True, name=name)
    return create_leaf(array, requires_grad=True, name=name, arena=arena)


class Sequential(Module):
    """f(x) = m_n(... m_2(m_1(x))): the modules applied in order."""

    def __init__(self, *modules):
        for i, m in enumerate(modules):
            if not callable(m):
                raise DtypeError(f"Sequential: argument {i} is a {type(m).__name__}, which cannot "
                                f"be called on an input. Pass modules (or functions of one "
                                f"argument), e.g. Sequential(Linear(2, 8), ReLU(), Linear(8, 1)).")
        self.layers = list(modules)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    def __getitem__(self, index):
        return self.layers[index]

    def __len__(self) -> int:
        return len(self.layers)

    def __repr__(self) -> str:
        inner = "".join(f"\n  {layer!r}," for layer in self.layers)
        return f"{type(self).__name__}({inner}\n)"


class ReLU(Module):
    """relu(x) = max(x, 0)"""

    def forward(self, x):
        return ops.relu(x)


class Tanh(Module):
    """tanh(x) = (e^x - e^-x) / (e^x + e^-x)"""

    def forward(self, x):
        return ops.tanh(x)


class Sigmoid(Module):
    """sigmoid(x) = 1 / (1 + e^-x)"""

    def forward(self, x):
        return ops.sigmoid(x)


ACTIVATIONS = {"relu": ReLU, "tanh": Tanh, "sigmoid": Sigmoid}


class MLP(Sequential):
    """A multilayer perceptron: Linear(sizes[0], sizes[1]), activation, ..., Linear(.., sizes[-1]).

    The activation goes between the Linear layers, not after the last one, so the output is
    the raw scores (logits) cross_entropy expects. All layers draw their initial weights from
    one np.random.default_rng(seed) (or the Generator given), in order, so a seed fixes them all.
    Layer i's parameters are named "layer{i}.weight" and "layer{i}.bias".
    """

    def __init__(self, sizes, activation: str = "relu", *, seed=0, dtype=np.float32, arena=None):
        sizes = list(sizes)
        if len(sizes) < 2:
            raise ShapeError(f"MLP(sizes={sizes!r}): sizes lists the width of every layer, input "
                             f"first and output last, so it needs at least two numbers. Fix: "
                             f"e.g. MLP([64, 32, 10]).")
        if activation not in ACTIVATIONS:
            raise ShapeError(f"MLP(activation={activation!r}): the activation must be one of "
                             f"{sorted(ACTIVATIONS)}. Fix: e.g. activation='relu'.")
        self.sizes, self.activation = sizes, activation
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        layers = []
        for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            if layers:
                layers.append(ACTIVATIONS[activation]())
            layers.append(Linear(n_in, n_out, seed=rng, dtype=dtype, arena=arena,
                                 name=f"layer{i}"))
        super().__init__(*layers)

    def __repr__(self) -> str:
        return f"MLP({self.sizes}, activation={self.activation!r})"
