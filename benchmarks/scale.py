"""Cost that grows with the work: each case at n and at 4n, and the ratio of the two times.

A part that is linear in the size of its work costs about 4x at 4n; n log n a little more. Each
case prints

    scale <what>: n=… t=…ms 4n=… t=…ms ratio=… (target ≤ 4.5; per-round quartiles …–…; …)

with t the median over rounds of the CPU time of the run (rounds.clock: on a shared machine the
wall clock also counts other people's work). The runs at n and 4n take turns in rounds
(rounds.py), and `ratio` is the median of the per-round ratios, each taken between two runs that
met the same load; the quartiles are the spread to expect from a run again. n is chosen so the
small run takes at least about 50 ms; the ratio, not the time, is the figure. Tests pin the
algorithms themselves (nodes visited, bytes kept per step: tests/test_scale.py); this file shows
what a user waits for.

    python benchmarks/scale.py            # every case
    python benchmarks/scale.py trace_of   # the cases whose name contains "trace_of"

Python's cyclic garbage collector is part of what a user waits for, so `ratio` includes it. It
does not grow with the work in steps of the same size: a full collection rescans every container
alive and comes when the heap has grown by a quarter, so 4x the objects can bring 3 full
collections where n brought 1, and a bigger heap misses the caches more. Each line also gives
the ratio with the collector paused (measured in the same rounds): the part's own algorithm.

Adding a case: write `prepare(n) -> state` (untimed setup, made again for every run: a run may
consume it) and `run(state)` (the timed work; what it returns is freed after the clock), and
list them in CASES with n and the target.
"""
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")   # before numpy loads its BLAS: the same floor every run

import gc  # noqa: E402
import pickle  # noqa: E402
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
    target: float | None = 4.5         # 5.0 where n log n is the honest bound; None: a floor
    rounds: int = 7


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


_DOCUMENTS: dict = {}


def _document_pickle(n_ops: int) -> bytes:
    """trace_of's document of chain(n_ops), pickled (made once per size)."""
    if n_ops not in _DOCUMENTS:
        _DOCUMENTS[n_ops] = pickle.dumps(mg.trace_of(chain(n_ops)), pickle.HIGHEST_PROTOCOL)
    return _DOCUMENTS[n_ops]


CASES = [
    Case("pending scheduler, unused consumers (backward)", _unused_consumers, _pending,
         n=16000, target=5.0),
    Case("stepper.step() through a whole backward (live)", _stepper, _step_through, n=400,
         rounds=5),
    Case("trace_of(chain)", chain, mg.trace_of, n=2000),
    # The floor under trace_of: its document's dicts and lists made again by pickle (C, no
    # minigrad). Making that much new memory costs more than 4x at 4x the size on its own
    # (fresh pages from the OS, caches), so a ratio at or under this one is the document's size.
    Case("floor: trace_of's document made again (pickle.loads, no minigrad)", _document_pickle,
         pickle.loads, n=2000, target=None),
    Case("Tape.backward_steps() kept (list of steps)", tape_chain, _tape_steps, n=12000),
    Case("box clicks (20, kernel side)", _click_state, _clicks, n=100),
    Case("box click then read dot and folding", _click_state, _click_then_read, n=500),
]
# The ahead-of-time steps (derive, both memory plans, the Executor build) on an MLP of n layers:
# their cases live in scale_aot.py, beside the workload, and run here too.
CASES += [Case(what, prepare, run, n=800, rounds=5) for what, prepare, run in scale_aot.CASES]


def measure(case: Case) -> dict:
    """CPU seconds of case.run at n and at 4n, with Python's cyclic collector running and
    paused: {(n, gc_on): [one time per round]}. The four runs take turns in rounds (rounds.py:
    the order turns by one each round), so that a ratio is taken between runs that met the
    same load on the machine.

    Each timed run starts from the heap a run of its own size left: a run's garbage leaves
    holes that the next run's objects fill in whatever order they were freed, and a graph laid
    out in the holes of a 4x bigger one is slower to walk (the trace of 2,000 ops: +17 ms, +25%,
    after a run at 8,000). So when the size changes, an untimed run of the new size goes first."""
    last = [None]

    def once(n: int, gc_on: bool) -> float:
        state = case.prepare(n)
        gc.collect()
        if not gc_on:
            gc.disable()
        start = clock()
        result = case.run(state)
        seconds = clock() - start
        gc.enable()
        del state, result   # (freed after the clock: a caller keeps what it asked for)
        return seconds

    def run(n: int, gc_on: bool):
        def timed_run() -> float:
            if last[0] != n:
                once(n, gc_on)   # (untimed: the heap as a run of this size leaves it)
                last[0] = n
            return once(n, gc_on)
        return timed_run
    return interleave({(n, on): run(n, on) for n in (case.n, 4 * case.n) for on in (True, False)},
                      rounds=case.rounds)


def main(argv: list[str]) -> int:
    mg.set_debug(False)
    chosen = [c for c in CASES if not argv or any(a in c.what for a in argv)]
    over = 0
    for case in chosen:
        t = measure(case)
        small, big = (statistics.median(t[k, True]) for k in (case.n, 4 * case.n))
        q1, ratio, q3 = quartiles([b / a for a, b in zip(t[case.n, True], t[4 * case.n, True])])
        paused = statistics.median(b / a for a, b in zip(t[case.n, False], t[4 * case.n, False]))
        over += case.target is not None and ratio > case.target
        target = "no target" if case.target is None else f"target ≤ {case.target:g}"
        print(f"scale {case.what}: n={case.n} t={small * 1e3:.1f}ms 4n={4 * case.n} "
              f"t={big * 1e3:.1f}ms ratio={ratio:.2f} ({target}; per-round "
              f"quartiles {q1:.2f}–{q3:.2f}; cyclic gc paused: ratio={paused:.2f})", flush=True)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
