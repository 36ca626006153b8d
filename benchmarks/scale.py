"""Cost that grows with the work: each case at n and at 4n, and the ratio of the two times.

A part that is linear in the size of its work costs about 4x at 4n; n log n a little more. Each
case prints

    scale <what>: n=… t=…ms 4n=… t=…ms ratio=… (target ≤ 4.5; per-round quartiles …–…; …)

with t the median over rounds of the CPU time of one run (rounds.clock: on a shared machine the
wall clock also counts other people's work). The runs at n and 4n take turns in rounds
(rounds.py), and `ratio` is the median of the per-round ratios, each taken between two turns
that met the same load; the quartiles are the spread to expect from a run again. n is chosen so
the small run takes at least about 50 ms; the ratio, not the time, is the figure. Tests pin the
algorithms themselves (nodes visited, bytes kept per step, and each function's calls and lines
run at n and 4n: tests/test_scale.py); this file shows what a user waits for.

A turn at n is four runs one after the other (t is their mean): as long as one run at 4n, so
that both sides of a ratio meet the load of an equally long stretch. Load from other processes
comes and goes over seconds and adds more to a bigger working set (a busy patch made a run at 4n
of the pending scheduler 1.8x slower, one at n 1.4x), and a 50 ms run can fall in a quiet moment
that a 200 ms one cannot. With one run at n per turn, the per-round ratios of one case spread
over a whole unit and their median moved by ±0.5 between runs, enough to put a linear part over
4.5 or under 4 by chance. Measured in one session, each way in turn (collector on, then paused,
twice): the stepper's medians were 4.26, 3.69, 3.70, 4.11 with one run at n, and 3.71, 3.89,
3.92, 4.20 with four, their quartiles within about 0.3 of the median in three of the four; the kept
tape steps' quartiles went from 3.27–5.38 to 3.67–4.14 (the trace's, under heavier load, still
spread 3.20–5.35 with four). The ratio of the fastest turns is printed too ("fastest turns"):
load only adds time, so it is the part with the least load in it, but taken from single runs it
swung the most of all (the stepper's: 3.03 to 4.83 in those runs).

    python benchmarks/scale.py            # every case
    python benchmarks/scale.py trace_of   # the cases whose name contains "trace_of"

Python's cyclic garbage collector is part of what a user waits for, so `ratio` includes it. It
does not grow with the work in steps of the same size: a full collection rescans every container
alive and comes when the heap has grown by a quarter, so 4x the objects can bring 3 full
collections where n brought 1, and a bigger heap misses the caches more. Each line also gives
the ratio with the collector paused (measured in the same rounds): the part's own algorithm.
And it gives the kernel's share of t (median, collector on): new memory costs a page fault per
4 KB the first time it is touched, and the Python heap hands back freed memory in 1 MB arenas
that a run at n may find again and one at 4n does not, so a ratio above 4 that is all kernel
time is the size of what the part makes, not its algorithm.

Adding a case: write `prepare(n) -> state` (untimed setup, made again for every run: a run may
consume it) and `run(state)` (the timed work; what it returns is freed after the clock), and
list them in CASES with n and the target (and `close(state)` if the state is a widget).
"""
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")   # before numpy loads its BLAS: the same floor every run

import gc  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
from typing import Callable, NamedTuple  # noqa: E402

import minigrad as mg  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # (run from anywhere)
import scale_aot  # noqa: E402
from rounds import clock, interleave, quartiles  # noqa: E402
from workloads import chain, chain_with_unused_consumers, scoped_blocks, tape_chain  # noqa: E402


class Case(NamedTuple):
    what: str                          # printed after "scale "
    prepare: Callable                  # n -> state (untimed: graphs a run consumes are made here)
    run: Callable                      # state -> None (timed)
    n: int
    target: float = 4.5                # 5.0 where n log n is the honest bound
    rounds: int = 7
    close: Callable | None = None      # state -> None, after the clock (a widget: see measure)


# -- the cases ----------------------------------------------------------------------------------

def _unused_consumers(n_ops: int):
    return chain_with_unused_consumers(n_ops // 2)[2]   # (two ops a link)


def _pending(loss):
    loss.backward(order="pending")


def _stepper(n_ops: int):
    from minigrad.widgets import BackwardStepper
    return BackwardStepper(chain(n_ops))


def _step_through(stepper) -> None:
    while stepper.live:
        stepper.step()


def _tape_steps(state) -> list:
    tape, _, out = state
    kept = list(tape.backward_steps(out, retain=True))
    assert kept
    return kept


def _click_state(n_blocks: int):
    from minigrad.widgets import GraphView
    view = GraphView(scoped_blocks(n_blocks), max_nodes=40)
    scopes = view.scope_table["scopes"]
    return view, [[scopes[i]] for i in range(0, len(scopes), 2)][:20]


def _clicks(state) -> None:
    """Twenty box clicks as the page sends them (a comm message setting `expanded`)."""
    view, clicks = state
    for expanded in clicks:
        view.set_state({"expanded": expanded})


def _click_then_read(state) -> None:
    """One click, then Python reads the drawing (as save_html or a test does)."""
    view, clicks = state
    view.set_state({"expanded": clicks[1]})
    assert view.dot and view.folding


CASES = [
    Case("pending scheduler, unused consumers (backward)", _unused_consumers, _pending,
         n=16000, target=5.0),
    Case("stepper.step() through a whole backward (live)", _stepper, _step_through, n=400,
         close=lambda stepper: stepper.close()),
    Case("trace_of(chain)", chain, mg.trace_of, n=2000),
    Case("Tape.backward_steps() kept (list of steps)", tape_chain, _tape_steps, n=12000),
    Case("box clicks (20, kernel side)", _click_state, _clicks, n=100,
         close=lambda state: state[0].close()),
    Case("box click then read dot and folding", _click_state, _click_then_read, n=500,
         close=lambda state: state[0].close()),
]
# The ahead-of-time steps (derive, both memory plans, the Executor build) on an MLP of n layers:
# their cases live in scale_aot.py, beside the workload, and run here too.
CASES += [Case(what, prepare, run, n=800, rounds=5) for what, prepare, run in scale_aot.CASES]


def measure(case: Case, runs_at_n: int = 4) -> tuple:
    """CPU seconds of case.run at n and at 4n, with Python's cyclic collector running and
    paused, and the part of them spent in the kernel: ({(n, gc_on): [one time per round]},
    the same of kernel seconds). The four runs take turns in rounds (rounds.py: the order turns
    by one each round), so that a ratio is taken between runs that met the same load. A turn at n
    is `runs_at_n` runs one after the other (their mean is its time): the same length of time as
    one run at 4n, so that both meet the load of an equally long stretch (a 50 ms run can fall
    in a quiet moment that a 200 ms one cannot).

    Each timed run starts from the heap a run of its own size left: a run's garbage leaves
    holes that the next run's objects fill in whatever order they were freed, and a graph laid
    out in the holes of a 4x bigger one is slower to walk (the trace of 2,000 ops: +17 ms, +25%,
    after a run at 8,000). So when the size changes, an untimed run of the new size goes first.
    And a widget is closed after its run: ipywidgets keeps every widget alive until closed (a
    notebook may still show it), so 40 steppers left open made each later run pay for the ones
    before (12,000 containers more per stepper of 400 ops for every full collection to rescan,
    and the 4n runs' collections met the biggest heaps)."""
    last, kernel = [None], {}

    def once(n: int, gc_on: bool) -> tuple:
        state = case.prepare(n)
        gc.collect()
        if not gc_on:
            gc.disable()
        start, kernel_start = clock(), resource.getrusage(resource.RUSAGE_THREAD).ru_stime
        result = case.run(state)
        seconds = clock() - start
        in_kernel = resource.getrusage(resource.RUSAGE_THREAD).ru_stime - kernel_start
        gc.enable()
        if case.close is not None:
            case.close(state)
        del state, result   # (freed after the clock: a caller keeps what it asked for)
        return seconds, in_kernel

    def run(n: int, gc_on: bool):
        def timed_run() -> float:
            if last[0] != n:
                once(n, gc_on)   # (untimed: the heap as a run of this size leaves it)
                last[0] = n
            repeat = runs_at_n if n == case.n else 1
            seconds, kernel_seconds = map(sum, zip(*(once(n, gc_on) for _ in range(repeat))))
            kernel.setdefault((n, gc_on), []).append(kernel_seconds / repeat)
            return seconds / repeat
        return timed_run
    times = interleave({(n, on): run(n, on) for n in (case.n, 4 * case.n) for on in (True, False)},
                       rounds=case.rounds)
    return times, kernel


def main(argv: list[str], n: int | None = None) -> int:
    """Measure and print the cases whose name contains one of argv (all if none); n, if given,
    replaces each case's own n. Returns 1 if a ratio is over its target."""
    mg.set_debug(False)
    chosen = [c if n is None else c._replace(n=n)
              for c in CASES if not argv or any(a in c.what for a in argv)]
    over = 0
    for case in chosen:
        t, kernel = measure(case)
        small, big = (statistics.median(t[k, True]) for k in (case.n, 4 * case.n))
        q1, ratio, q3 = quartiles([b / a for a, b in zip(t[case.n, True], t[4 * case.n, True])])
        paused = statistics.median(b / a for a, b in zip(t[case.n, False], t[4 * case.n, False]))
        fastest = min(t[4 * case.n, True]) / min(t[case.n, True])
        k_small, k_big = (statistics.median(kernel[k, True]) for k in (case.n, 4 * case.n))
        over += ratio > case.target
        print(f"scale {case.what}: n={case.n} t={small * 1e3:.1f}ms 4n={4 * case.n} "
              f"t={big * 1e3:.1f}ms ratio={ratio:.2f} (target ≤ {case.target:g}; per-round "
              f"quartiles {q1:.2f}–{q3:.2f}; fastest turns: {fastest:.2f}; cyclic gc paused: "
              f"ratio={paused:.2f}; in the kernel: {k_small * 1e3:.0f}ms and {k_big * 1e3:.0f}ms)",
              flush=True)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
