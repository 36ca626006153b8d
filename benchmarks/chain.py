"""Per-op overhead: a 1,000-op chain of alternating add / mul / tanh on a shape-(4,) float64 array.

Forward + backward, median over repeats, in microseconds per op. The arrays are tiny on purpose:
what is measured is the engine's bookkeeping, not numpy's arithmetic. torch runs the same chain
in the same process when it is installed (`pip install -e .[bench]`); the numpy forward of the
chain (no autograd at all) is printed as the floor either way. A second line times the same chain
ahead of time (minigrad.aot): captured and derived once, then forward + backward run by the
compiled plan, against eager minigrad and torch from the same run.

    python benchmarks/chain.py [--ops 1000] [--repeats 30]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import minigrad as mg


def chain_minigrad(n_ops: int) -> float:
    x = mg.create_leaf(np.linspace(-1.0, 1.0, 4), requires_grad=True)
    b = mg.create_leaf(np.full(4, 0.1), requires_grad=True)
    w = mg.create_leaf(np.full(4, 0.9), requires_grad=True)
    start = time.perf_counter()
    h = x
    for _ in range(n_ops // 3):
        h = (h + b) * w
        h = h.tanh()
    h.sum().backward()
    return time.perf_counter() - start


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
        start = time.perf_counter()
        executor.run(data)
        return time.perf_counter() - start
    return run


def chain_torch(n_ops: int) -> float:
    import torch
    x = torch.linspace(-1.0, 1.0, 4, dtype=torch.float64, requires_grad=True)
    b = torch.full((4,), 0.1, dtype=torch.float64, requires_grad=True)
    w = torch.full((4,), 0.9, dtype=torch.float64, requires_grad=True)
    start = time.perf_counter()
    h = x
    for _ in range(n_ops // 3):
        h = (h + b) * w
        h = h.tanh()
    h.sum().backward()
    return time.perf_counter() - start


def chain_numpy_forward(n_ops: int) -> float:
    x, b, w = np.linspace(-1.0, 1.0, 4), np.full(4, 0.1), np.full(4, 0.9)
    start = time.perf_counter()
    h = x
    for _ in range(n_ops // 3):
        h = (h + b) * w
        h = np.tanh(h)
    h.sum()
    return time.perf_counter() - start


def median_us_per_op(fn, n_ops: int, repeats: int) -> float:
    for _ in range(3):
        fn(n_ops)   # warm up caches and allocators
    return statistics.median(fn(n_ops) for _ in range(repeats)) / (3 * (n_ops // 3)) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    mg.set_debug(False)
    floor = median_us_per_op(chain_numpy_forward, args.ops, args.repeats)
    ours = median_us_per_op(chain_minigrad, args.ops, args.repeats)
    ahead = median_us_per_op(aot_runner(args.ops), args.ops, args.repeats)
    try:
        import torch
        torch.set_num_threads(1)
    except ImportError:
        print(f"chain fwd+bwd us/op: minigrad={ours:.2f} torch=n/a (not installed) "
              f"numpy_fwd_floor={floor:.2f} ratio_to_floor={ours / floor:.2f}")
        print(f"chain aot us/op: aot={ahead:.2f} minigrad={ours:.2f} torch=n/a "
              f"ratio_aot_to_eager={ahead / ours:.2f} (numpy_fwd_floor={floor:.2f})")
        return
    theirs = median_us_per_op(chain_torch, args.ops, args.repeats)
    print(f"chain fwd+bwd us/op: minigrad={ours:.2f} torch={theirs:.2f} ratio={ours / theirs:.2f} "
          f"(numpy_fwd_floor={floor:.2f})")
    print(f"chain aot us/op: aot={ahead:.2f} minigrad={ours:.2f} torch={theirs:.2f} "
          f"ratio_aot_to_eager={ahead / ours:.2f} ratio_aot_to_torch={ahead / theirs:.2f} "
          f"(numpy_fwd_floor={floor:.2f})")


if __name__ == "__main__":
    main()
