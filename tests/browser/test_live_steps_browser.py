"""A live BackwardStepper after many stepper.step() calls from the kernel, in JupyterLab.

Each step reaches the page as an "append" message that extends the page's trace index in place
(widgets/src/trace/replay.js extendIndex) and is painted by what it changed (widgets/src/ui/paint.js
update). After many of them the view must show what the kernel ran, and the same, classes and
accessible names, as a second view of the same stepper drawn afterwards from the whole trace.
"""

from __future__ import annotations

from browser_harness import open_notebook, write_notebook
from test_widgets import TRACE_INFO, kernel_json, no_dialogs, wait_for

SETUP = TRACE_INFO + r'''
import numpy as np
import minigrad as mg
from minigrad.widgets import BackwardStepper

# On an arena, so that steps bring memory blocks too (backward's gradients are allocated there).
graph = mg.Arena("graph", 1 << 20)
graph_scope = graph.scope()
graph_scope.__enter__()
x = mg.create_leaf(np.linspace(-1.0, 1.0, 4), requires_grad=True, name="x")
h = x
for i in range(30):
    h = (h * x).tanh()
loss = h.sum()
stepper = BackwardStepper(loss, max_nodes=500)

def kernel_state(st):
    """What the engine has done so far, read off the kernel's trace."""
    t = st.current_trace
    events = t["events"][:t["frames"][st.frame] + 1]
    return {"frame": st.frame, "events": len(t["events"]),
            "done": sorted({e["node"] for e in events if e["type"] == "apply"}),
            "grads": sorted({e["variable"] for e in events if e["type"] in ("start", "accumulate")})}
'''

STEPS = 40


def test_live_stepper_shows_the_engine_after_many_kernel_steps(lab, page, browser_log):
    dialogs = no_dialogs(page)
    path = write_notebook(lab.root, "live_steps.ipynb", [SETUP, "stepper"])
    nb = open_notebook(page, lab, path)
    nb.run_all()
    root = nb.wait_for_output_selector(1, ".mg-stepper")
    start = wait_for(root, lambda s: s["graph"] == "ready", "the graph to be drawn")

    info = kernel_json(nb, f"for _ in range({STEPS}):\n    stepper.step()\n"
                           "print(_json.dumps(kernel_state(stepper)))")
    assert info["frame"] == start["frame"] + STEPS
    snap = wait_for(root, lambda s: s["frame"] == info["frame"],
                    f"the view to follow {STEPS} stepper.step() calls")
    assert sorted(snap["done"]) == info["done"] and len(info["done"]) >= STEPS - 2
    assert sorted(snap["hasGrad"]) == info["grads"]
    assert snap["dataPhase"] == "backward"
    assert snap["counter"] == f"step {STEPS} of {STEPS}+", snap["counter"]
    # the last message was indexed by what it brought (one step's events, its frame, its new
    # blocks and the arena record), not the whole trace again
    indexed = int(snap["dataset"]["indexedEntries"])
    assert 0 < indexed < info["events"] / 10, (indexed, info["events"])
    # and painted by what the step changed: a few nodes and their edges, not all of them
    # (widgets/src/ui/paint.js update; "all" would be a full paint)
    visits = snap["dataset"]["paintVisits"]
    assert visits != "all" and 0 < int(visits) <= 40 < len(snap["ids"]) + len(snap["edges"]), \
        (visits, len(snap["ids"]), len(snap["edges"]))

    # a second view of the same stepper is drawn from the whole trace: it agrees
    nb.run_new_cell("stepper")
    second = nb.wait_for_output_selector(nb.cells.count() - 1, ".mg-stepper")
    fresh = wait_for(second, lambda s: s["graph"] == "ready" and s["frame"] == info["frame"],
                     "the second view")
    snap = wait_for(root, lambda s: s["frame"] == info["frame"], "the first view")
    for key in ("done", "hasGrad", "gradFirst", "gradSum", "current", "badges", "blocks",
                "dataPhase", "counter", "sentence", "names", "edges", "tags"):
        assert snap[key] == fresh[key], (key, snap[key], fresh[key])
    assert any(state == "alive" for state in snap["blocks"].values()), snap["blocks"]

    # and on to the end
    info = kernel_json(nb, "stepper.finish()\nprint(_json.dumps(kernel_state(stepper)))")
    snap = wait_for(root, lambda s: s["frame"] == info["frame"], "the view to follow finish()")
    assert sorted(snap["done"]) == info["done"]
    assert dialogs == []
    browser_log.assert_no_console_errors()
    browser_log.assert_all_requests_local()
