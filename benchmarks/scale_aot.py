"""How the ahead-of-time steps grow with the graph: each at n and 4n operations.

The workload is an MLP of n layers (width 8, relu between, cross-entropy at the end): about
2n forward operations and 3n backward ones. Each step is timed at n and at 4n and printed as

    scale <what>: n=... t=...ms 4n=... t=...ms ratio=... (target ≤ 4.5; ...)

A step whose cost is linear in the graph gives a ratio near 4; the target is at most 4.5.

Interface for benchmarks/scale.py: CASES is a list of (name, prepare, run): prepare(n) builds
what run needs outside the timing, run(prepared) is the timed step. scale.py runs them (n=800)
with the rest; alone, they are measured the same way (scale.py's rounds) at n:

    python benchmarks/scale_aot.py [n]      (default n=250)
"""
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")   # before numpy loads its BLAS: the same floor every run

import sys  # noqa: E402

import numpy as np  # noqa: E402

import minigrad as mg  # noqa: E402
from minigrad import aot  # noqa: E402


def mlp_graphs(n: int) -> tuple:
    """forward and backward graphs of an n-layer MLP, with what the Executor needs."""
    model = mg.nn.MLP([8] * (n + 1), seed=0, dtype=np.float64)
    x, y = np.ones((4, 8)), np.array([0, 1, 2, 3])
    forward = aot.capture(lambda x, y: mg.cross_entropy(model(x), y), x, y, params=model,
                          input_names=["x", "y"])
    return forward, aot.derive_backward_graph(forward), model, x, y


CASES = [
    ("aot derive_backward_graph", mlp_graphs, lambda g: aot.derive_backward_graph(g[0])),
    ("aot plan_memory", mlp_graphs, lambda g: aot.plan_memory(g[0], g[1])),
    ("aot plan_memory recompute", mlp_graphs,
     lambda g: aot.plan_memory(g[0], g[1], policy="recompute")),
    ("aot Executor build", mlp_graphs, lambda g: aot.Executor(*g)),
]


if __name__ == "__main__":
    import scale   # (scale.py lists these cases with its own; its measurement is the one used)
    sys.exit(scale.main(["aot "], n=int(sys.argv[1]) if len(sys.argv) > 1 else 250))
