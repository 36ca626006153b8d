"""Memory of training: what a step allocates on the heap, whether memory grows, and peak bytes.

Workload: one training step of an MLP 784-256-128-10 (ReLU, cross-entropy, SGD), batch 128,
float32, in two modes measured in the same run:
  arena  parameters on a permanent arena, each step inside `with graph.scope():`
  heap   no arena at all (ordinary numpy arrays, freed by Python)
Inputs are random arrays of the right shape (784 features, 10 classes): the digits that ship with
minigrad are only 64 pixels wide, and for memory only the shapes matter.

Measured with tracemalloc. numpy reports every array data buffer it allocates to tracemalloc in
its own domain (np.lib.tracemalloc_domain); a Filter on that domain separates array buffers from
the Python objects (Variables, graph nodes) that tracemalloc also sees. Per step, after warm-up:
  new_buffers   numpy data buffers alive after the step that were not alive before it: the
                snapshot after the step compared with the one before, per allocation site
                (a full traceback), counting only sites whose number of live buffers went up
  numpy_bytes   net growth of live numpy data bytes over the step
  traced_bytes  net growth of all traced bytes (numpy buffers and Python objects), averaged
                over as many steps run back to back without snapshots
  temp_peak     peak traced bytes during the step minus traced bytes at its start: what the
                step holds at its worst moment beyond what it started with (activations,
                gradients and temporaries on the heap; arena memory is not heap and not counted)
Medians over the measured steps (traced_bytes: the mean). Then: growth over 1,000 arena steps (target 0 for numpy
buffers; interpreter caches may add a few kilobytes of Python objects while they fill), and the
peak bytes of one step of a 16-layer MLP (width 256, batch 64) on an Arena, which keeps
everything until the scope ends, and on a Pool, which frees saved tensors and gradients as soon
as backward is done with them (high_water of each).

    python benchmarks/memory.py [--steps 50] [--long 1000]
"""
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")   # before numpy loads its BLAS: no per-thread BLAS buffers

import argparse  # noqa: E402
import gc  # noqa: E402
import statistics  # noqa: E402
import tracemalloc  # noqa: E402

import numpy as np  # noqa: E402

import minigrad as mg  # noqa: E402

SIZES = [784, 256, 128, 10]
BATCH = 128
LR = 0.01
DEEP_WIDTH, DEEP_LAYERS, DEEP_BATCH = 256, 16, 64

DOMAIN = getattr(np.lib, "tracemalloc_domain", None)
if DOMAIN is None:
    raise SystemExit(f"numpy {np.__version__} has no np.lib.tracemalloc_domain: it does not "
                     f"report its buffers to tracemalloc, so this benchmark cannot count them.")
NUMPY_ONLY = [tracemalloc.Filter(True, "*", domain=DOMAIN)]


def make_data(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], BATCH)
    return x, y


def make_step(mode: str):
    """A function running one training step in `mode`, and the arenas it uses (or None)."""
    x_data, y_data = make_data()
    if mode == "arena":
        perm, graph = mg.Arena("perm", 1 << 20), mg.Arena("graph", 1 << 20)
        model = mg.nn.MLP(SIZES, seed=0, arena=perm)
    else:
        perm = graph = None
        model = mg.nn.MLP(SIZES, seed=0)
    opt = mg.optim.SGD(model.parameters(), lr=LR)
    last = np.zeros(1)   # the loss is copied here, so keeping it allocates nothing

    def step_arena():
        with graph.scope():
            loss = mg.cross_entropy(model(mg.create_leaf(x_data, name="x")), y_data)
            opt.zero_grad()
            loss.backward()
            opt.step()
            last[0] = loss.item()

    def step_heap():
        loss = mg.cross_entropy(model(mg.create_leaf(x_data, name="x")), y_data)
        opt.zero_grad()
        loss.backward()
        opt.step()
        last[0] = loss.item()

    return (step_arena if mode == "arena" else step_heap), (perm, graph)


def numpy_snapshot():
    return tracemalloc.take_snapshot().filter_traces(NUMPY_ONLY)


def numpy_bytes(snapshot) -> int:
    return sum(trace.size for trace in snapshot.traces)


def new_buffers(before, after) -> int:
    """Buffers alive after that were not alive before, counted per allocation site."""
    return sum(diff.count_diff for diff in after.compare_to(before, "traceback")
               if diff.count_diff > 0)


def per_step(mode: str, steps: int) -> dict:
    step, _ = make_step(mode)
    for _ in range(20):                  # warm-up: optimiser state, BLAS, interpreter caches
        step()
    tracemalloc.start(25)
    try:
        for _ in range(20):              # warm-up under tracing as well
            step()
        rows = []
        for _ in range(steps):
            gc.collect()
            before = numpy_snapshot()
            tracemalloc.reset_peak()
            start = tracemalloc.get_traced_memory()[0]
            step()
            peak = tracemalloc.get_traced_memory()[1]
            gc.collect()
            after = numpy_snapshot()
            rows.append((new_buffers(before, after), numpy_bytes(after) - numpy_bytes(before),
                         peak - start))
            del before, after
        # All traced bytes (numpy and Python objects) over the same number of steps in one go,
        # with no snapshot objects made in between to blur the count.
        gc.collect()
        start = tracemalloc.get_traced_memory()[0]
        for _ in range(steps):
            step()
        gc.collect()
        traced = (tracemalloc.get_traced_memory()[0] - start) / steps
    finally:
        tracemalloc.stop()
    columns = list(zip(*rows))
    return {"new_buffers_per_step": statistics.median(columns[0]),
            "max_new_buffers": max(columns[0]),
            "numpy_bytes_per_step": statistics.median(columns[1]),
            "traced_bytes_per_step": traced,
            "temp_peak_bytes_per_step": statistics.median(columns[2])}


def long_run(steps: int) -> dict:
    step, (perm, graph) = make_step("arena")
    for _ in range(20):
        step()
    tracemalloc.start(25)
    try:
        for _ in range(20):
            step()
        gc.collect()
        before = numpy_snapshot()
        start = tracemalloc.get_traced_memory()[0]
        capacity = (perm.capacity, graph.capacity)
        for _ in range(steps):
            step()
        gc.collect()
        end = tracemalloc.get_traced_memory()[0]
        after = numpy_snapshot()
    finally:
        tracemalloc.stop()
    return {"numpy_growth_bytes": numpy_bytes(after) - numpy_bytes(before),
            "new_buffers": new_buffers(before, after),
            "traced_growth_bytes": end - start,
            "arena_capacity_growth_bytes": perm.capacity + graph.capacity - sum(capacity)}


def deep_peaks() -> tuple[int, int]:
    sizes = [DEEP_WIDTH] * (DEEP_LAYERS + 1) + [10]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((DEEP_BATCH, DEEP_WIDTH)).astype(np.float32)
    y = rng.integers(0, 10, DEEP_BATCH)
    peaks = []
    for allocator in (mg.Arena("deep-arena", 1 << 20), mg.Pool("deep-pool")):
        model = mg.nn.MLP(sizes, seed=0)
        with allocator.scope():
            loss = mg.cross_entropy(model(mg.create_leaf(x, name="x")), y)
            loss.backward()
            loss.item()
        peaks.append(allocator.high_water)
    return peaks[0], peaks[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50, help="measured steps per mode")
    parser.add_argument("--long", type=int, default=1000, help="steps of the growth run")
    args = parser.parse_args()
    mg.set_debug(False)

    results = {mode: per_step(mode, args.steps) for mode in ("arena", "heap")}
    for mode, r in results.items():
        print(f"memory {mode} (MLP {'-'.join(map(str, SIZES))}, batch {BATCH}, float32, SGD; "
              f"median of {args.steps} steps): "
              f"new_buffers_per_step={r['new_buffers_per_step']:g} "
              f"(max {r['max_new_buffers']}) "
              f"numpy_bytes_per_step={r['numpy_bytes_per_step']:g} "
              f"traced_bytes_per_step={r['traced_bytes_per_step']:.1f} "
              f"temp_peak_bytes_per_step={r['temp_peak_bytes_per_step']:g}")
    arena_peak = results["arena"]["temp_peak_bytes_per_step"]
    heap_peak = results["heap"]["temp_peak_bytes_per_step"]
    print(f"memory heap vs arena: temp_peak_ratio={heap_peak / max(arena_peak, 1):.2f} "
          f"(heap {heap_peak:g} B / arena {arena_peak:g} B)")

    grown = long_run(args.long)
    print(f"memory arena {args.long} steps: growth_bytes_{args.long}_steps="
          f"{grown['numpy_growth_bytes']} (numpy buffers; target 0) "
          f"new_buffers={grown['new_buffers']} "
          f"arena_capacity_growth_bytes={grown['arena_capacity_growth_bytes']} "
          f"traced_growth_bytes={grown['traced_growth_bytes']} (numpy + Python objects)")

    arena, pool = deep_peaks()
    print(f"memory {DEEP_LAYERS}-layer peak bytes (width {DEEP_WIDTH}, batch {DEEP_BATCH}): "
          f"arena={arena} pool={pool} ratio={pool / arena:.3f}")


if __name__ == "__main__":
    main()
