"""benchmarks/rounds.py: engines take turns and ratios are taken per round; the benchmarks that
use it print their lines with the spread added."""
from __future__ import annotations

import importlib.util
import pathlib
import re
import sys

import pytest

BENCH = pathlib.Path(__file__).parent.parent / "benchmarks"


def load(name: str):
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(f"{name}_benchmark", BENCH / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def test_each_round_runs_every_engine_once_and_the_first_turn_moves():
    rounds = load("rounds")
    calls = []

    def run(name):
        def one():
            calls.append(name)
            return float(len(calls))
        return one
    times = rounds.interleave({"a": run("a"), "b": run("b"), "c": run("c")}, 4)
    assert calls == list("abc" "bca" "cab" "abc")
    assert times == {"a": [1.0, 6.0, 8.0, 10.0], "b": [2.0, 4.0, 9.0, 11.0],
                     "c": [3.0, 5.0, 7.0, 12.0]}


def test_ratios_pair_runs_of_the_same_round():
    rounds = load("rounds")
    # One slow round (100 against 1) moves a ratio of medians (6 / 2 = 3); per round, 2 stays 2.
    ours, theirs = [2.0, 4.0, 6.0, 8.0, 100.0], [1.0, 2.0, 3.0, 4.0, 1.0]
    assert rounds.ratio_fields("ratio", ours, theirs) == "ratio=2.00 ratio_q1=2.00 ratio_q3=2.00"
    assert rounds.quartiles([1.0, 2.0, 3.0, 4.0, 5.0]) == (2.0, 3.0, 4.0)
    assert rounds.quartiles([7.0]) == (7.0, 7.0, 7.0)


def test_chain_benchmark_prints_its_lines_with_the_spread(capsys):
    load("chain").main(["--ops", "30", "--repeats", "3"])
    out = capsys.readouterr().out
    n = r"\d+\.\d+"
    assert re.search(rf"^chain fwd\+bwd us/op: minigrad={n} (torch={n} ratio={n} ratio_q1={n} "
                     rf"ratio_q3={n}|torch=n/a .* ratio_to_floor={n} ratio_to_floor_q1={n})", out,
                     re.M), out
    assert re.search(rf"^chain aot us/op: aot={n} minigrad={n} .*ratio_aot_to_eager={n} "
                     rf"ratio_aot_to_eager_q1={n} ratio_aot_to_eager_q3={n}", out, re.M), out


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_mlp_benchmark_prints_its_line_with_the_spread(capsys):
    load("mlp").main(["--steps", "3", "--rounds", "3"])
    out = capsys.readouterr().out
    n = r"\d+\.\d+"
    assert re.search(rf"^mlp step ms: floor={n} minigrad_heap={n} minigrad_arena={n} "
                     rf"ratio_heap={n} ratio_heap_q1={n} ratio_heap_q3={n} ratio_arena={n} "
                     rf"ratio_arena_q1={n} ratio_arena_q3={n} ", out, re.M), out
    assert re.search(r" (torch=n/a|ratio_torch=\S+ ratio_torch_q1=\S+ ratio_torch_q3=\S+) ", out), \
        out
