"""Per-op overhead: a 1,000-op chain of alternating add / mul / tanh on a shape-(4,) float64 array.

Forward + backward, in microseconds per op: the engines take turns, one chain each per round
(see rounds.py), and each ratio is the median of per-round ratios with its quartiles. The arrays
are tiny on purpose: what is measured is the engine's bookkeeping, not numpy's arithmetic. torch
runs the same chain in the same process when it is installed (`pip install -e .[bench]`); the
numpy forward of the chain (no autograd at all) is printed as the floor either way. A second
line times the same chain ahead of time (minigrad.aot): captured and derived once, then forward
+ backward run by the compiled plan, against eager minigrad and torch from the same run.

    python benchmarks/chain.py [--ops 1000] [--repeats 30]
"""
from __future__ import annotations

import argparse
import functools
import os
import sys

import numpy as np

import minigrad as mg

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # (when imported by a test)
from rounds import CLOCK_NAME, clock, interleave, quartiles, ratio_fields  # noqa: E402


def chain_minigrad(n_ops: int) -> float:
    x = mg.create_leaf(np.linspace(-1.0, 1.0, 4), requires_grad=True)
    b = mg.create_leaf(np.full(4, 0.1), requires_grad=True)
    w = mg.create_leaf(np.full(4, 0.9), requires_grad=True)
    start = clock()
    h = x
    for _ in range(n_ops // 3):
        h = (h + b) * w
        h = h.tanh()
    h.sum().backward()
    return clock() - start


def aot_runner(n_ops: int):
    """Capture, derive and compile the chain once; the returned function times one run."""
    from minigrad import aot
    x = mg.create_leaf(np.linspace(-1.0, 1.0, 4), requires_grad=True, name="x")
    params = {"b": mg.create_leaf(np.full(4, 0.1), requires_grad=True, name="b"),
              "w": mg.create_leaf(np.full(4, 0.9), requires_grad=True, name="w")}

    def chain(h):
        for _ in range(n_ops // 3):
            h = (h + params["b"]) * params["w"]
            h = h.tanh()
        return h.sum()
    forward = aot.capture(chain, x, params=params)
    executor = aot.Executor(forward, aot.derive_backward_graph(forward), params, x.data)
    data = x.data

    def run(_n_ops: int) -> float:
        start = clock()
        executor.run(data)
        return clock() - start
    return run


def chain_torch(n_ops: int) -> float:
    import torch
    x = torch.linspace(-1.0, 1.0, 4, dtype=torch.float64, requires_grad=True)
    b = torch.full((4,), 0.1, dtype=torch.float64, requires_grad=True)
    w = torch.full((4,), 0.9, dtype=torch.float64, requires_grad=True)
    start = clock()
    h = x
    for _ in range(n_ops // 3):
        h = (h + b) * w
        h = h.tanh()
    h.sum().backward()
    return clock() - start


def chain_numpy_forward(n_ops: int) -> float:
    x, b, w = np.linspace(-1.0, 1.0, 4), np.full(4, 0.1), np.full(4, 0.9)
    start = clock()
    h = x
    for _ in range(n_ops // 3):
        h = (h + b) * w
        h = np.tanh(h)
    h.sum()
    return clock() - start


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=30, help="rounds: one chain per engine each")
    args = parser.parse_args(argv)
    mg.set_debug(False)
    n = args.ops
    runs = {"floor": lambda: chain_numpy_forward(n), "minigrad": lambda: chain_minigrad(n),
            "aot": functools.partial(aot_runner(n), n)}
    try:
        import torch
        torch.set_num_threads(1)
        runs["torch"] = lambda: chain_torch(n)
    except ImportError:
        pass
    for run in runs.values():
        for _ in range(3):
            run()   # warm up caches and allocators
    times = interleave(runs, args.repeats)
    us = {name: quartiles(t)[1] / (3 * (n // 3)) * 1e6 for name, t in times.items()}
    ours, ahead, floor = us["minigrad"], us["aot"], us["floor"]
    spread = f"rounds={args.repeats} clock={CLOCK_NAME}"
    if "torch" not in runs:
        print(f"chain fwd+bwd us/op: minigrad={ours:.2f} torch=n/a (not installed) "
              f"numpy_fwd_floor={floor:.2f} "
              f"{ratio_fields('ratio_to_floor', times['minigrad'], times['floor'])} {spread}")
        print(f"chain aot us/op: aot={ahead:.2f} minigrad={ours:.2f} torch=n/a "
              f"{ratio_fields('ratio_aot_to_eager', times['aot'], times['minigrad'])} "
              f"(numpy_fwd_floor={floor:.2f}) {spread}")
        return
    theirs = us["torch"]
    print(f"chain fwd+bwd us/op: minigrad={ours:.2f} torch={theirs:.2f} "
          f"{ratio_fields('ratio', times['minigrad'], times['torch'])} "
          f"(numpy_fwd_floor={floor:.2f}) {spread}")
    print(f"chain aot us/op: aot={ahead:.2f} minigrad={ours:.2f} torch={theirs:.2f} "
          f"{ratio_fields('ratio_aot_to_eager', times['aot'], times['minigrad'])} "
          f"{ratio_fields('ratio_aot_to_torch', times['aot'], times['torch'])} "
          f"(numpy_fwd_floor={floor:.2f}) {spread}")


if __name__ == "__main__":
    main()
