"""Shared by the aot tests: eager gradients, central differences, and aot gradients of one function."""
import numpy as np

import minigrad as mg
from minigrad import aot


def eager_grads(fn, arrays, order="pending"):
    leaves = [mg.create_leaf(a.copy(), requires_grad=True, name=f"x{i}") for i, a in enumerate(arrays)]
    loss = fn(*leaves)
    mg.backward(loss, order=order)
    return loss.item(), [np.zeros_like(a) if v.grad is None else v.grad for a, v in zip(arrays, leaves)]


def central_differences(fn, arrays, eps=1e-6):
    def f(values):
        with mg.no_grad():
            return fn(*[mg.create_leaf(v) for v in values]).item()
    grads = []
    for k, a in enumerate(arrays):
        g = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            plus, minus = [x.copy() for x in arrays], [x.copy() for x in arrays]
            plus[k][idx] += eps
            minus[k][idx] -= eps
            g[idx] = (f(plus) - f(minus)) / (2 * eps)
        grads.append(g)
    return grads


def aot_grads(fn, arrays, options=None, registry=None):
    """Capture fn with every array a differentiable input, derive, execute; loss, grads, graphs."""
    inputs = [mg.create_leaf(a.copy(), requires_grad=True, name=f"x{i}") for i, a in enumerate(arrays)]
    forward = aot.capture(fn, *inputs)
    backward = aot.derive_backward_graph(forward, options, registry=registry)
    return run_graphs(forward, backward, arrays)


def run_graphs(forward, backward, arrays, params=None):
    executor = aot.Executor(forward, backward, params, *arrays)
    loss = float(executor.run(*arrays))
    grads = executor.grads()
    return loss, [grads.get(f"d_{name}", np.zeros_like(a)).copy()
                  for name, a in zip(forward.inputs, arrays)], forward, backward
