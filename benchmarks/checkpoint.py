"""Save, recompute, checkpoint: peak activation memory and step time of an n-layer MLP.

One training step (forward, backward, SGD) of an MLP of n layers `relu(linear(h, W, b))`, width
256, batch 64, float32, one BLAS thread, each step inside `with pool.scope():` (parameters and
the batch live on the heap, so the pool holds exactly what the graph and backward allocate).
Four policies, measured side by side in one run:

  keep       plain backward: every activation an op saves stays until its backward has run
  sqrt(n)    minigrad.checkpoint around every segment of k = round(sqrt(n)) layers (Chen et al.
             2016): forward keeps the segments' inputs only; backward recomputes one segment
  recompute  nothing kept but the input: layer j's input is recomputed from the input when
             backward reaches it (nested checkpoints, so O(n^2) layer forwards)
  one        the whole network as one checkpointed segment (for comparison: forward keeps
             nothing, but backward rebuilds the whole graph, so its peak is keep's)

For each: the pool's high-water mark during the step (peak bytes of activations, gradients in
flight and graph records) and the median step time, both as ratios to keep of the same run.

    python benchmarks/checkpoint.py [--layers 16 64 256] [--repeats 5]
"""
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")   # before numpy loads its BLAS

import argparse  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import minigrad as mg  # noqa: E402

WIDTH, BATCH, LR = 256, 64, 1e-3


def make_params(n: int, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    scale = math.sqrt(2.0 / WIDTH)   # He init: activations neither vanish nor blow up over depth
    return [(mg.create_leaf((rng.normal(size=(WIDTH, WIDTH)) * scale).astype(np.float32),
                            requires_grad=True, name=f"W{i}"),
             mg.create_leaf(np.zeros(WIDTH, np.float32), requires_grad=True, name=f"b{i}"))
            for i in range(n)]


def layers(h, *params):
    """relu(h W + b) for each (W, b) in turn: params is W0, b0, W1, b1, ..."""
    for W, b in zip(params[::2], params[1::2]):
        h = mg.relu(mg.linear(h, W, b))
    return h


def flat(params) -> list:
    return [p for pair in params for p in pair]


def forward_keep(x, params):
    return layers(x, *flat(params))


def forward_segments(x, params, k: int):
    """minigrad.checkpoint around every k layers."""
    h = x
    for start in range(0, len(params), k):
        h = mg.checkpoint(layers, h, *flat(params[start:start + k]))
    return h


def forward_recompute(x, params):
    """Layer j's input is recomputed from x: a checkpoint around layers 0..j keeps x only, and
    its recompute is itself a checkpoint around layers 0..j-1 followed by layer j (nested)."""
    def upto(j):
        if j == 0:
            return layers   # layer 0 reads x, which is kept
        inner = upto(j - 1)
        return lambda x, *ps: layers(mg.checkpoint(inner, x, *ps[:-2]), *ps[-2:])
    return mg.checkpoint(upto(len(params) - 1), x, *flat(params))


def policies(n: int) -> dict:
    k = max(1, round(math.sqrt(n)))
    return {
        "keep": forward_keep,
        f"sqrt(n) k={k}": lambda x, p: forward_segments(x, p, k),
        "recompute": forward_recompute,
        "one": lambda x, p: forward_segments(x, p, n),
    }


def step(forward, x, target, params, pool) -> tuple[float, int]:
    """One training step; returns (seconds, pool high-water bytes during the step)."""
    pool.high_water = pool.used
    t0 = time.perf_counter()
    with pool.scope():
        loss = mg.mse(forward(x, params), target)
        loss.backward()
    for W, b in params:
        for p in (W, b):
            p.data[...] -= LR * p.grad   # (in place: backward has consumed the graph)
            p.zero_grad()
    return time.perf_counter() - t0, pool.high_water


def measure(n: int, repeats: int) -> list:
    """Each policy's peak and median step time. The policies take turns, one step each per
    round, so that a load on the machine falls on all of them alike. (recompute costs n^2/2
    layer forwards a step: from n = 256 on it is timed on fewer steps, said in its line.)"""
    rng = np.random.default_rng(1)
    x = mg.create_leaf(rng.normal(size=(BATCH, WIDTH)).astype(np.float32), name="x")
    target = mg.create_leaf(rng.normal(size=(BATCH, WIDTH)).astype(np.float32), name="y")
    runs = {name: (forward, make_params(n), mg.Pool(f"graph-{name}"), [], [])
            for name, forward in policies(n).items()}
    for forward, params, pool, _, _ in runs.values():
        step(forward, x, target, params, pool)   # warm-up: the pool's free lists fill
    for round_ in range(repeats):
        for name, (forward, params, pool, times, peaks) in runs.items():
            if name == "recompute" and n >= 256 and round_ >= 1:
                continue
            seconds, peak = step(forward, x, target, params, pool)
            times.append(seconds)
            peaks.append(peak)
    return [(name, max(peaks), statistics.median(times), len(times))
            for name, (_, _, _, times, peaks) in runs.items()]


def check_same_gradients(n: int = 9) -> None:
    """All policies give the keep policy's gradients (float32: to rounding)."""
    rng = np.random.default_rng(2)
    x = mg.create_leaf(rng.normal(size=(BATCH, WIDTH)).astype(np.float32))
    target = mg.create_leaf(rng.normal(size=(BATCH, WIDTH)).astype(np.float32))
    grads = {}
    for name, forward in policies(n).items():
        params = make_params(n)
        mg.mse(forward(x, params), target).backward()
        grads[name] = [p.grad for p in flat(params)]
    ref = grads.pop("keep")
    for name, got in grads.items():
        worst = max(float(np.max(np.abs(a - b)) / (np.max(np.abs(a)) + 1e-30))
                    for a, b in zip(ref, got))
        assert worst < 1e-4, f"{name}: gradients differ from keep's by {worst:.2e} (relative)"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 40 * max(args.layers) + 1000))
    try:
        from threadpoolctl import threadpool_limits
        threadpool_limits(1)
    except ImportError:
        pass   # the environment variables above did it
    check_same_gradients()
    print(f"MLP relu(linear) x n, width {WIDTH}, batch {BATCH}, float32, one BLAS thread; "
          f"peak = pool high-water during one training step; medians of {args.repeats} steps")
    for n in args.layers:
        rows = measure(n, args.repeats)
        _, keep_peak, keep_time, _ = rows[0]
        for name, peak, seconds, count in rows:
            print(f"checkpoint n={n:<4d} {name:<14s} peak={peak / 2**20:8.2f} MiB "
                  f"peak/keep={peak / keep_peak:6.3f}  step={seconds * 1e3:9.1f} ms "
                  f"time/keep={seconds / keep_time:6.2f}  (steps={count})", flush=True)


if __name__ == "__main__":
    main()
