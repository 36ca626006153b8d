"""Timing that a shared machine cannot tilt: the engines take turns, and ratios are per round.

Load on a shared machine comes and goes. Timing engine A for ten seconds and then engine B
puts a busy patch on one side only (five runs of the old chain benchmark gave ratios from 0.66
to 1.25). Here the engines run in rounds, one turn each (A B C, then B C A, ...: no engine
always goes first), and a ratio is taken within each round, between two runs that met the same
load. A benchmark prints the median of those per-round ratios and its quartiles: the spread a
reader should expect when running it again.

The clock is the CPU time of the thread doing the work (time.thread_time), not the wall clock:
on a shared machine the wall clock also counts the slices other processes take, and those land
harder on a 20 ms run than on a 300 ms one, which tilts a ratio of the two. Each engine runs in
one thread (BLAS and torch are set to one). MINIGRAD_BENCH_CLOCK=wall asks for the wall clock.

    times = interleave({"ours": timed(step, x), "floor": timed(floor_step, x)}, rounds=20)
    ratio_fields("ratio", times["ours"], times["floor"])   # 'ratio=1.04 ratio_q1=1.01 ...'
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import time

WALL = os.environ.get("MINIGRAD_BENCH_CLOCK", "cpu") == "wall"
clock = time.perf_counter if WALL else time.thread_time   # what every benchmark times with
CLOCK_NAME = "wall" if WALL else "cpu"


def interleave(runs: dict, rounds: int) -> dict:
    """{name: [one time per round]}: each run (a function returning the time it measured) is
    called once per round, in an order that turns by one each round."""
    names = list(runs)
    times = {name: [] for name in names}
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            times[name].append(runs[name]())
    return times


def timed(step, *args, repeat: int = 1):
    """A run for interleave(): calls step(*args) `repeat` times, returns the median seconds."""
    def run() -> float:
        samples = []
        for _ in range(repeat):
            start = clock()
            step(*args)
            samples.append(clock() - start)
        return statistics.median(samples)
    return run


def quartiles(values: list) -> tuple:
    """(first quartile, median, third quartile) of values (all three the value when one)."""
    if len(values) < 2:
        return values[0], values[0], values[0]
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, median, q3


def ratio_fields(key: str, numerator: list, denominator: list, digits: int = 2) -> str:
    """'key=median key_q1=... key_q3=...' of the per-round ratios numerator[i] / denominator[i]."""
    q1, median, q3 = quartiles([a / b for a, b in zip(numerator, denominator)])
    return f"{key}={median:.{digits}f} {key}_q1={q1:.{digits}f} {key}_q3={q3:.{digits}f}"


class Peer:
    """A reference engine in its own process (torch: its thread pool and OpenBLAS's fight when
    they share one), asked for one round at a time so that it takes its turn with the others.

    The script prints one JSON line when ready, then answers each line "n" on its stdin with
    {"ms": median of n steps} on its stdout."""

    def __init__(self, command: list, env: dict | None = None):
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, env=env)
        self.hello = self._answer()

    def _answer(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the reference process failed:\n{self.process.stderr.read()}")
        return json.loads(line)

    def round(self, steps: int) -> float:
        """The median time of `steps` steps, in seconds."""
        self.process.stdin.write(f"{steps}\n")
        self.process.stdin.flush()
        return self._answer()["ms"] / 1e3

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


# The peer's side of the protocol, appended to a reference script that defines step().
PEER_LOOP = r"""
import json as _json, os as _os, statistics as _statistics, sys as _sys, time as _time
_clock = (_time.perf_counter if _os.environ.get("MINIGRAD_BENCH_CLOCK", "cpu") == "wall"
          else _time.thread_time)   # (as rounds.clock)
def _serve(hello):
    print(_json.dumps(hello), flush=True)
    for line in _sys.stdin:
        times = []
        for _ in range(int(line)):
            t = _clock(); step(); times.append(_clock() - t)
        print(_json.dumps({"ms": _statistics.median(times) * 1e3}), flush=True)
"""
