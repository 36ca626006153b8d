"""What recording a trace costs: backward with and without `minigrad.record()`, same graph.

Prints medians and the ratio (target: at most 2x with recording on; when off, the engine checks
one thread-local per op and one per backward call). The chain of tiny ops is the worst case:
there the engine's own bookkeeping is all there is, so every recorded event shows.

The forward is recorded too (untimed in the ratio, printed beside it): a backward recorded on
its own first reads the graph it was given, which is forward work. The recorded backward
includes what it adds to freeing the recorder later (see freeing_ms), since a plain backward
frees the graph as it runs. Recording keeps the engine's
steps raw; the event dicts (and their sentences) are built when `rec.trace` is first read,
printed as read_ms.

    python benchmarks/trace_cost.py
"""
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")   # before numpy loads its BLAS: the same floor every run

import contextlib  # noqa: E402
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


def timed(build, recording: bool, repeats: int = 30) -> tuple[float, float, float]:
    """Median ms of forward, of backward (leaving record() included) and of the first read of
    the trace, with the whole step inside record() when recording, as a lesson does it."""
    forward, backward, reads = [], [], []
    for i in range(repeats + 5):   # the first five warm up caches and allocators
        with mg.record() if recording else contextlib.nullcontext() as rec:
            start = time.perf_counter()
            loss = build()
            built = time.perf_counter()
            loss.backward()
        done = time.perf_counter()
        if recording:
            rec.trace
        if i >= 5:
            forward.append(built - start)
            backward.append(done - built)
            reads.append(time.perf_counter() - done)
    return tuple(statistics.median(t) * 1e3 for t in (forward, backward, reads))


def freeing_ms(build, repeats: int = 30) -> float:
    """What backward adds to freeing a recorder (its raw steps, and the graph nodes it keeps
    alive, which a plain backward frees as it goes): the median time to drop a recorder after
    forward and backward, minus after forward only."""
    def drop(run_backward: bool) -> float:
        times = []
        for i in range(repeats + 5):
            with mg.record() as rec:
                loss = build()
                if run_backward:
                    loss.backward()
            start = time.perf_counter()
            del rec, loss
            if i >= 5:
                times.append(time.perf_counter() - start)
        return statistics.median(times) * 1e3
    return drop(True) - drop(False)


def main() -> None:
    mg.set_debug(False)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 784)).astype(np.float32)
    y = rng.integers(0, 10, 128)
    model = mg.nn.MLP([784, 256, 128, 10], seed=0)
    for name, build in (("mlp 784-256-128-10", lambda: mlp_loss(model, x, y)),
                        ("chain of 300 tiny ops", chain_loss)):
        (fwd, plain, _), (fwd_rec, recorded, read) = timed(build, False), timed(build, True)
        recorded += max(freeing_ms(build), 0.0)
        print(f"trace cost, backward of {name}: plain_ms={plain:.3f} recorded_ms={recorded:.3f} "
              f"ratio={recorded / plain:.2f} (target <= 2); forward plain_ms={fwd:.3f} "
              f"recorded_ms={fwd_rec:.3f} ratio={fwd_rec / fwd:.2f}; first read of the trace "
              f"read_ms={read:.3f}")


if __name__ == "__main__":
    main()
