"""What recording a trace costs: backward with and without `minigrad.record()`, same graph.

Prints medians and the ratio (target: at most 2x with recording on; when off, the engine checks
one thread-local per op and one per backward call). The chain of tiny ops is the worst case:
there the engine's own bookkeeping is all there is, so every recorded event shows.

    python benchmarks/trace_cost.py
"""
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")   # before numpy loads its BLAS: the same floor every run

import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import minigrad as mg  # noqa: E402


def mlp_loss(model, x, y):
    return mg.cross_entropy(model(mg.create_leaf(x)), y)


def chain_loss(n: int = 300):
    x = mg.create_leaf(np.linspace(-1, 1, 4), requires_grad=True)
    w = mg.create_leaf(np.full(4, 0.9), requires_grad=True)
    h = x
    for _ in range(n // 3):
        h = (h + w) * w
        h = h.tanh()
    return h.sum()


def timed(build, recording: bool, repeats: int = 30) -> float:
    times = []
    for i in range(repeats + 5):   # the first five warm up caches and allocators
        loss = build()
        start = time.perf_counter()
        if recording:
            with mg.record():
                loss.backward()
        else:
            loss.backward()
        if i >= 5:
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main() -> None:
    mg.set_debug(False)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 784)).astype(np.float32)
    y = rng.integers(0, 10, 128)
    model = mg.nn.MLP([784, 256, 128, 10], seed=0)
    for name, build in (("mlp 784-256-128-10", lambda: mlp_loss(model, x, y)),
                        ("chain of 300 tiny ops", chain_loss)):
        plain, recorded = timed(build, False), timed(build, True)
        print(f"trace cost, backward of {name}: plain_ms={plain:.3f} recorded_ms={recorded:.3f} "
              f"ratio={recorded / plain:.2f} (target <= 2)")


if __name__ == "__main__":
    main()
