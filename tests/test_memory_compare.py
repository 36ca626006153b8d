"""MemoryView.compare on the Python side: the lines it sends are the runs' bytes over time."""
import numpy as np
import pytest

import minigrad as mg
from minigrad.widgets import MemoryView, save_html


def recorded_step(k, n=4):
    rng = np.random.default_rng(0)
    ws = [mg.create_leaf(rng.normal(size=(8, 8)) * 0.3, requires_grad=True) for _ in range(n)]
    x = mg.create_leaf(np.ones((4, 8)))
    pool = mg.Pool("graph")

    def layers(h, *ws):
        for W in ws:
            h = (h @ W).tanh()
        return h

    with mg.record() as rec, pool.scope():
        h = x
        for i in range(0, n, k or n):
            h = mg.checkpoint(layers, h, *ws[i:i + k]) if k else layers(h, *ws)
        h.sum().backward()
    return rec, pool.high_water


def test_compare_sends_each_runs_bytes_and_peak():
    (keep, keep_hw), (ck, ck_hw) = recorded_step(0), recorded_step(2)
    view = MemoryView.compare({"keep": keep.trace, "every 2": ck}, title="t")
    runs = view.options["compare"]
    assert [r["name"] for r in runs] == ["keep", "every 2"]
    assert [r["peak"] for r in runs] == [keep_hw, ck_hw]   # the pools' own high-water marks
    assert runs[1]["peak"] < runs[0]["peak"]
    assert runs[0]["events"] == len(keep.trace["events"])
    assert runs[0]["points"][-1][1] == 0   # the scope's end takes everything back
    # The chart marks where backward begins: the first event of the backward phase.
    for run, trace in zip(runs, (keep.trace, ck.trace)):
        phases = [e.get("phase") for e in trace["events"]]
        at = run["backward_at"]
        assert phases[at] == "backward" and "backward" not in phases[:at]
        assert 0 < at < run["events"] - 1


def test_compare_save_html(tmp_path):
    view = MemoryView.compare({"a": recorded_step(0)[0].trace, "b": recorded_step(1)[0].trace})
    text = save_html(view, tmp_path / "c.html").read_text()
    assert '"compare"' in text and '"peak"' in text


@pytest.mark.parametrize("runs, match", [
    ({"only": {}}, "2 to 6 runs"),
    ([1, 2], "got list"),
    ({"a": {"events": []}, "b": 3}, "run 'b' is a int, not a trace"),
])
def test_compare_misuse(runs, match):
    with pytest.raises(TypeError, match=match):
        MemoryView.compare(runs)
