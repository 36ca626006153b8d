"""Traces: the document record() and trace_of() build, checked against the JSON schema and
against what the engine really did."""
import contextlib
import json
import pathlib

import jsonschema
import numpy as np
import pytest

import minigrad as mg

SCHEMA = json.loads((pathlib.Path(mg.__file__).parent / "trace" / "trace.schema.json").read_text())


def valid(doc):
    jsonschema.validate(doc, SCHEMA)
    json.dumps(doc)   # plain JSON, nothing numpy left inside
    return doc


def mlp_step(allocator=None):
    X, y, _, _ = mg.data.digits_split()
    model = mg.nn.MLP([64, 16, 10], seed=0)
    with mg.record("step") as rec:
        scope = allocator.scope() if allocator is not None else contextlib.nullcontext()
        with scope:
            x = mg.create_leaf(X[:8], name="x")
            loss = mg.cross_entropy(model(x), y[:8])
            loss.backward()
    return rec.trace, model


def by_type(doc, kind):
    return [e for e in doc["events"] if e["type"] == kind]


def test_recorded_mlp_step_matches_the_schema_and_the_graph():
    doc, model = mlp_step()
    valid(doc)
    ops = [n for n in doc["nodes"] if n["type"] == "op"]
    assert [n["name"] for n in ops] == ["linear", "relu", "linear", "cross_entropy"]
    roles = {n["label"]: n["role"] for n in doc["nodes"] if n["type"] == "variable"}
    assert roles["x"] == "data" and roles["layer0.weight"] == "param"
    assert [n["role"] for n in doc["nodes"] if n["type"] == "variable"].count("output") == 1
    # every op applied exactly once, in an order where each op runs after its consumers
    applied = [e["node"] for e in by_type(doc, "apply")]
    assert sorted(applied) == sorted(n["id"] for n in ops)
    assert applied == [n["id"] for n in reversed(ops)]
    # parameters end with the gradient the engine computed
    last = {}
    for e in by_type(doc, "accumulate"):
        last[e["variable"]] = e["grad"]
    for p in model.parameters():
        var = next(n["id"] for n in doc["nodes"] if n.get("name") == p.name)
        assert np.allclose(last[var], p.grad.ravel()[:len(last[var])])


def test_parents_and_saved_tensors_are_different_edges():
    with mg.record() as rec:
        a = mg.create_leaf([1.0, 2.0], requires_grad=True, name="a")
        b = mg.create_leaf([3.0, 4.0], requires_grad=True, name="b")
        s = a + b            # two parents, saves nothing
        e = s.exp()          # one parent, saves its own output
        (e * a).sum().backward()
    doc = valid(rec.trace)
    ops = {n["name"]: n for n in doc["nodes"] if n["type"] == "op"}
    edges = doc["edges"]
    add_parents = [x for x in edges if x["target"] == ops["add"]["id"] and x["kind"] == "parent"]
    assert [x["slot"] for x in add_parents] == [0, 1]
    assert not [x for x in edges if x["target"] == ops["add"]["id"] and x["kind"] == "saved"]
    assert ops["exp"]["saved"][0]["source"] == ops["exp"]["output"]
    assert ops["exp"]["saved"][0]["what"] == "its output"
    assert {s["source"] for s in ops["mul"]["saved"]} == set(ops["mul"]["inputs"])


def test_pending_counts_first_writes_and_sums_in_the_diamond():
    with mg.record() as rec:
        x = mg.create_leaf([1.0, -2.0], requires_grad=True, name="x")
        h = x * 3.0
        z = (h + h).sum()    # h feeds one op twice: two consumer edges
        z.backward()
    doc = valid(rec.trace)
    mul = next(n for n in doc["nodes"] if n["type"] == "op" and n["name"] == "mul")
    assert mul["pending_count"] == 2
    counts = [e["count"] for e in by_type(doc, "pending") if e["node"] == mul["id"]]
    assert counts == [1, 0]
    h_id = mul["output"]
    writes = [e["first_write"] for e in by_type(doc, "accumulate") if e["variable"] == h_id]
    assert writes == [True, False]
    assert np.allclose(x.grad, [6.0, 6.0])


def test_frames_group_forward_ops_and_backward_steps():
    doc, _ = mlp_step()
    events, frames = doc["events"], doc["frames"]
    assert frames == sorted(frames) and frames[-1] == len(events) - 1
    init = frames[doc["initial_frame"]]
    assert all(e["phase"] == "forward" for e in events[:init + 1])
    assert events[init + 1]["type"] == "start"
    # each backward frame after the seed holds exactly one apply
    backward = [f for f in frames if f > init + 1]
    starts = [init + 1] + backward[:-1]
    applies = [sum(e["type"] == "apply" for e in events[a + 1:b + 1])
               for a, b in zip(starts, backward)]
    assert applies[:-1] == [1] * (len(applies) - 1)
    assert events[-1]["type"] == "consume" and events[-2]["type"] == "done"


def test_arena_allocations_and_the_pop_are_in_the_trace():
    graph = mg.Arena("graph", 1 << 16)
    doc, _ = mlp_step(graph)
    valid(doc)
    allocs = by_type(doc, "alloc")
    kinds = {b["kind"] for b in doc["blocks"]}
    assert {"input", "activation", "node", "grad", "saved"} <= kinds
    assert [a["name"] for a in doc["arenas"]] == ["graph"]
    pop = by_type(doc, "pop")[-1]
    assert set(pop["blocks"]) == {a["block"] for a in allocs} and pop["used"] == 0
    assert max(a["high_water"] for a in allocs) == graph.high_water
    # backward allocations are written inside the node's step, after its "apply"
    for i, e in enumerate(doc["events"]):
        if e["type"] == "alloc" and e["phase"] == "backward":
            before = [x["type"] for x in doc["events"][:i]]
            assert "apply" in before


def test_pool_frees_show_up_as_free_events():
    doc, _ = mlp_step(mg.Pool("pool"))
    valid(doc)
    frees = by_type(doc, "free")
    assert frees, "a pool frees saved tensors and grads during backward"
    assert all(e["phase"] == "backward" for e in frees)


def test_trace_of_reads_a_graph_without_recording_it():
    graph = mg.Arena("graph", 1 << 16)
    W = mg.create_leaf(np.ones((3, 2)), requires_grad=True, name="W")
    with graph.scope():
        x = mg.create_leaf(np.ones((4, 3)), name="x")
        h = (x @ W).tanh()
        loss = (h * h).sum()
        doc = valid(mg.trace_of(loss, "read back"))
        assert doc["title"] == "read back"
        assert [e["type"] for e in doc["events"]].count("op") == 4
        tanh = next(n for n in doc["nodes"] if n["type"] == "op" and n["name"] == "tanh")
        assert tanh["pending_count"] == h.grad_fn.pending_count == 2   # h * h: two edges
        assert all(e.get("reconstructed") for e in by_type(doc, "alloc"))
        loss.backward()
    with pytest.raises(ValueError, match="consumed"):
        mg.trace_of(loss)


def test_recording_is_off_by_default_and_ends_with_the_block():
    with mg.record() as rec:
        a = mg.create_leaf([1.0], requires_grad=True)
    (a * 2).sum().backward()   # outside the block: not recorded
    assert [e["type"] for e in rec.trace["events"]] == ["leaf"]
    assert mg.modes.modes.recorder is None


def test_user_names_stay_text():
    name = '<img src=x onerror=alert(1)> "\\N'
    with mg.record() as rec:
        w = mg.create_leaf([1.0], requires_grad=True, name=name)
        (w * 2).sum().backward()
    doc = valid(rec.trace)
    assert any(n.get("name") == name for n in doc["nodes"])


def test_step_total_is_the_gradient_summed_so_far():
    x = mg.create_leaf([1.0, 2.0], requires_grad=True)
    steps = [s for s in mg.backward_steps((x * x + x).sum()) if s.kind == "accumulate"
             and s.variable is x]
    assert [s.first_write for s in steps] == [True, False, False]
    assert np.allclose(steps[-1].total, x.grad)


@pytest.mark.parametrize("path", sorted((pathlib.Path(__file__).parent.parent / "widgets" / "test"
                                         / "fixtures").glob("*.json")), ids=lambda p: p.name)
def test_the_browser_tests_fixtures_are_valid_traces(path):
    valid(json.loads(path.read_text()))


# --- gradient values in the trace are those of the moment, wherever their memory went ---------

def _diamond_loss(X, W1, W2):
    """A graph whose nodes receive sums (h feeds two ops) and whose leaves receive several."""
    h = (mg.create_leaf(X, name="x") @ W1).tanh()
    return ((h * h + h) @ W2 + W1.sum()).sum()


def _reference_values():
    """Each accumulate's total and each apply's grad_output, read at the step (heap, no trace)."""
    X, W1, W2 = _diamond_leaves()
    totals, applied = [], []
    for step in mg.backward_steps(_diamond_loss(X, W1, W2)):
        if step.kind == "accumulate":
            totals.append(mg.trace.values(step.total))
        elif step.kind == "apply":
            applied.append(mg.trace.values(step.grad))
    return totals, applied


def _diamond_leaves():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((4, 3))
    W1 = mg.create_leaf(rng.standard_normal((3, 5)), requires_grad=True, name="W1")
    W2 = mg.create_leaf(rng.standard_normal((5, 2)), requires_grad=True, name="W2")
    return X, W1, W2


def _overwrite(allocator):
    """Another batch on the same allocator: reuses the memory the recorded gradients were in."""
    X, W1, W2 = _diamond_leaves()
    with allocator.scope():
        _diamond_loss(X * 100, W1, W2).backward()


@pytest.mark.parametrize("make", [mg.Arena, mg.Pool], ids=["arena", "pool"])
@pytest.mark.parametrize("nesting", ["record-outside", "record-inside"])
def test_trace_values_survive_the_memory_being_reused(make, nesting):
    totals, applied = _reference_values()
    allocator = make("graph-values", 1 << 16) if make is mg.Arena else make("graph-values")
    X, W1, W2 = _diamond_leaves()
    if nesting == "record-outside":
        with mg.record() as rec:
            with allocator.scope():
                _diamond_loss(X, W1, W2).backward()
    else:   # the scope pops after record() has ended: the recorder hears nothing of it
        with allocator.scope():
            with mg.record() as rec:
                _diamond_loss(X, W1, W2).backward()
    _overwrite(allocator)
    doc = valid(rec.trace)
    assert [e["grad"] for e in by_type(doc, "accumulate")] == totals
    assert [e["grad"] for e in by_type(doc, "apply")] == applied


def test_trace_values_on_the_heap_are_those_of_the_moment():
    totals, applied = _reference_values()
    X, W1, W2 = _diamond_leaves()
    with mg.record() as rec:
        _diamond_loss(X, W1, W2).backward()
    doc = valid(rec.trace)
    assert [e["grad"] for e in by_type(doc, "accumulate")] == totals
    assert [e["grad"] for e in by_type(doc, "apply")] == applied
    # W1 is summed into several times: its totals grow, they are not all the final .grad
    w1 = next(n["id"] for n in doc["nodes"] if n.get("name") == "W1")
    w1_totals = [e["grad"] for e in by_type(doc, "accumulate") if e["variable"] == w1]
    assert len(w1_totals) == 2 and w1_totals[0] != w1_totals[1]


def test_recording_only_backward_reads_the_graph_built_before():
    X, W1, W2 = _diamond_leaves()
    loss = _diamond_loss(X, W1, W2)               # forward not recorded
    with mg.record() as rec:
        loss.backward()
    doc = valid(rec.trace)
    ops = {n["id"] for n in doc["nodes"] if n["type"] == "op"}
    applies = [e["node"] for e in by_type(doc, "apply")]
    assert len(applies) == len(ops) and set(applies) == ops   # every node drawn, each run once
    totals, applied = _reference_values()
    assert [e["grad"] for e in by_type(doc, "accumulate")] == totals
    assert [e["grad"] for e in by_type(doc, "apply")] == applied


def test_recording_half_of_a_forward_adds_the_rest_once():
    X, W1, W2 = _diamond_leaves()
    h = (mg.create_leaf(X, name="x") @ W1).tanh()  # before recording
    with mg.record() as rec:
        loss = ((h * h + h) @ W2 + W1.sum()).sum()
        loss.backward()
    doc = valid(rec.trace)
    ops = [n for n in doc["nodes"] if n["type"] == "op"]
    assert sorted(n["name"] for n in ops) == sorted(
        ["matmul", "tanh", "mul", "add", "matmul", "sum", "add", "sum"])
    assert len(by_type(doc, "op")) == len(ops)                 # one "op" event per node
    edges = [(e["kind"], e["source"], e["target"], e["slot"]) for e in doc["edges"]]
    assert len(edges) == len(set(edges))                       # no edge written twice
    made = [n for n in doc["nodes"] if n["type"] == "variable" and n["role"] != "param"
            and n["role"] != "data"]
    assert made and all(n["op"] in {o["id"] for o in ops} for n in made)


def test_a_name_set_after_the_op_is_in_the_recorded_trace():
    """Rule: the trace shows the names the program ended with, even one given to a Variable
    after the op that made it was recorded (`y = f(x); y.name = "y"`)."""
    with mg.record() as rec:
        x = mg.create_leaf([1.0, 2.0], requires_grad=True, name="x")
        y = x * 2.0
        y.name = "y"
        loss = y.sum()
        loss.backward()
        x.name = "x renamed"
    doc = valid(rec.trace)
    names = {n["name"]: n["label"] for n in doc["nodes"] if n["type"] == "variable"}
    assert names["y"] == "y" and names["x renamed"] == "x renamed"
    unnamed = [n for n in doc["nodes"] if n["type"] == "variable" and n["name"] is None]
    assert [n["label"] for n in unnamed] == ["data", "sum"]   # (the constant 2.0, the loss)


def test_nested_record_both_recorders_see_the_inner_ops():
    """Supported: inside an outer record(), an inner one records its block, and the outer one
    records it too (it used to miss everything the inner block did)."""
    W = mg.create_leaf(np.linspace(-1, 1, 6).reshape(3, 2), requires_grad=True, name="W")
    pool = mg.Pool("graph")
    with mg.record("outer") as outer:
        with pool.scope():
            x = mg.create_leaf(np.ones((4, 3)), name="x")
            h = (x @ W).tanh()
            with mg.record("inner") as inner:
                loss = mg.checkpoint(lambda a: (a * a).exp(), h).sum()   # a recompute phase too
                loss.backward()
        after = (W * 3.0).sum()   # after the inner block: the outer one alone
    outer_doc, inner_doc = valid(outer.trace), valid(inner.trace)

    def ops(doc):
        return [n["name"] for n in doc["nodes"] if n["type"] == "op"]

    def types(doc):
        return [e["type"] for e in doc["events"]]

    assert ops(outer_doc)[:2] == ["matmul", "tanh"] and "checkpoint" in ops(outer_doc)
    assert ops(outer_doc)[-2:] == ["mul", "sum"]
    assert ops(outer_doc).count("checkpoint") == 1 and ops(outer_doc).count("matmul") == 1
    assert "checkpoint" in ops(inner_doc)   # (and the graph before it, read at backward)
    assert "mul" in ops(inner_doc) and "exp" in ops(inner_doc)   # (the recompute's ops)
    for doc in (outer_doc, inner_doc):
        assert {"start", "apply", "accumulate", "done", "alloc", "free"} <= set(types(doc))
        assert any(e["phase"] == "recompute" for e in doc["events"])
    assert "pop" in types(outer_doc) and "pop" not in types(inner_doc)   # (after inner ended)
    assert mg.modes.modes.recorder is None and after.requires_grad


def test_a_stepper_stepped_inside_record_is_recorded_by_it_too():
    """Like a nested record(): the BackwardStepper's own recorder and the enclosing one both
    record the steps it runs inside the block."""
    pytest.importorskip("anywidget")   # (absent only in the oldest-numpy pass, which has no widgets)
    from minigrad.widgets import BackwardStepper
    W = mg.create_leaf([[0.5, -1.0], [2.0, 0.25]], requires_grad=True, name="W")
    loss = (mg.create_leaf([[1.0, 2.0]], name="x") @ W).tanh().sum()
    stepper = BackwardStepper(loss)
    with mg.record("outer") as rec:
        stepper.finish()
    outer, own = valid(rec.trace), valid(stepper.current_trace)
    for doc in (outer, own):
        assert [e["type"] for e in doc["events"] if e["type"] in ("start", "done")] == \
            ["start", "done"]
        assert sum(e["type"] == "apply" for e in doc["events"]) == 3   # matmul, tanh, sum
    np.testing.assert_allclose(W.grad, np.outer([1.0, 2.0], 1 - np.tanh([4.5, -0.5]) ** 2))


def test_a_stepper_made_inside_record_is_recorded_by_it_once():
    """Made inside the block (not only stepped there), the stepper's steps reached the enclosing
    recorder twice: every start, apply and done came twice in its trace. And stepped after the
    block, they went on reaching a recorder whose block had ended."""
    pytest.importorskip("anywidget")
    from minigrad.widgets import BackwardStepper
    W = mg.create_leaf([[0.5, -1.0], [2.0, 0.25]], requires_grad=True, name="W")
    with mg.record("outer") as rec:
        loss = (mg.create_leaf([[1.0, 2.0]], name="x") @ W).tanh().sum()
        stepper = BackwardStepper(loss)
        stepper.step(2)
    recorded_in_block = len(rec.trace["events"])
    stepper.finish()
    assert len(rec.trace["events"]) == recorded_in_block   # the block had ended
    for doc in (valid(rec.trace), valid(stepper.current_trace)):
        assert [e["type"] for e in doc["events"]].count("start") == 1
    assert [e["type"] for e in rec.trace["events"]].count("apply") == 1   # the sum's, in the block
    assert [e["type"] for e in stepper.current_trace["events"]].count("apply") == 3


def test_a_checkpoint_s_recompute_is_told_apart_from_the_loss_s_backward():
    # Lesson 09's checkpoint stepper: the segment's input recorded again is the saved tanh
    # output, not "a parameter"; the recompute's own seed is not a second "d loss / d loss = 1".
    W1 = mg.create_leaf(np.array([[0.5, -0.2], [0.3, 0.8]]), requires_grad=True, name="W1")
    W2 = mg.create_leaf(np.array([[1.0, 0.4], [-0.6, 0.2]]), requires_grad=True, name="W2")
    xs = mg.create_leaf(np.array([[1.0, 2.0]]), name="x")
    with mg.record("checkpoint") as rec:
        loss = mg.checkpoint(lambda h, W: (h @ W).tanh(), (xs @ W1).tanh(), W2).sum()
        loss.backward()
    events = rec.trace["events"]
    recomputed = [e["text"] for e in events if e["type"] == "leaf" and e["phase"] == "recompute"]
    assert len(recomputed) == 2 and not any("a parameter" in t for t in recomputed), recomputed
    assert all("detached for the recompute" in t for t in recomputed), recomputed
    starts = [e["text"] for e in events if e["type"] == "start"]
    assert len(starts) == 2, starts
    assert "d loss / d loss = 1" in starts[0] and "d loss" not in starts[1], starts
    assert "segment's backward starts" in starts[1] and "reached the checkpoint" in starts[1]


def test_a_checkpoint_s_recompute_reads_w2_again_one_step_per_event():
    # Lesson 09's stepper drew two unrelated "W2"s and packed the recompute's five events (two
    # leaves, matmul, tanh, the seed) into one step. The recompute's leaves are named for what
    # they read again, an "again" edge joins each to that input, and each event is a step.
    W1 = mg.create_leaf(np.array([[0.5, -0.2], [0.3, 0.8]]), requires_grad=True, name="W1")
    W2 = mg.create_leaf(np.array([[1.0, 0.4], [-0.6, 0.2]]), requires_grad=True, name="W2")
    xs = mg.create_leaf(np.array([[1.0, 2.0]]), name="x")
    with mg.record("checkpoint") as rec:
        loss = mg.checkpoint(lambda h, W: (h @ W).tanh(), (xs @ W1).tanh(), W2).sum()
        loss.backward()
    doc = valid(rec.trace)
    nodes = {n["id"]: n for n in doc["nodes"]}
    by_label = {}
    for n in doc["nodes"]:
        by_label.setdefault(n["label"], []).append(n["id"])
    assert len(by_label["W2"]) == 1 and len(by_label["W2 (again)"]) == 1, by_label
    again = [(nodes[e["source"]]["label"], nodes[e["target"]]["label"])
             for e in doc["edges"] if e["kind"] == "again"]
    assert again == [("tanh", "tanh output (again)"), ("W2", "W2 (again)")], again
    events, frames = doc["events"], doc["frames"]
    recompute = [k for k, e in enumerate(events) if e["phase"] == "recompute"]
    assert [events[k]["type"] for k in recompute] == ["leaf", "leaf", "op", "op", "op"]
    starts = [0] + [f + 1 for f in frames[:-1]]
    for k in recompute:   # each recompute event ends a frame that holds it alone
        assert k in frames and starts[frames.index(k)] == k, (k, frames)
    w2_again = by_label["W2 (again)"][0]
    leaf_text = next(e["text"] for e in events if e.get("node") == w2_again)
    assert "the same array as W2" in leaf_text and "read again" in leaf_text, leaf_text
    # The stand-in's gradient is W2's, handed back by the checkpoint (same values).
    grads = {e["variable"]: e["grad"] for e in events if e["type"] == "accumulate"}
    np.testing.assert_allclose(grads[w2_again], W2.grad.ravel(), rtol=1e-12)
    np.testing.assert_allclose(grads[by_label["W2"][0]], W2.grad.ravel(), rtol=1e-12)


def test_attention_s_parents_are_named_q_k_v():
    # Lesson 12's stepper: the attention node's parents read q, k, v (both q and k come out of
    # a rope op, so the op's name alone, "rope, rope", could not tell them apart).
    model = mg.nn.TinyTransformer(vocab=11, dim=16, n_layers=1, n_heads=2, hidden=32, seed=0)
    ids, targets = mg.data.sort_digits(1, 4, seed=0)
    trace = mg.trace.Recorder("attention").add_graph(model(ids, targets)).trace
    nodes = {n["id"]: n for n in trace["nodes"]}
    (attention,) = [n for n in trace["nodes"] if n["type"] == "op" and n["label"] == "attention"]
    parents = [nodes[e["source"]]["label"] for e in trace["edges"]
               if e["target"] == attention["id"] and e["kind"] == "parent"]
    assert parents == ["q", "k", "v"], parents


def forward_pending(doc):
    """Each forward op event's (op name, [(consumer-counted node name, its count then)])."""
    names = {n["id"]: n["name"] for n in doc["nodes"]}
    return [(names[e["node"]], [(names[p["node"]], p["count"]) for p in e["pending"]])
            for e in by_type(doc, "op")]


def test_a_graph_read_after_forward_tells_the_pending_counts_as_forward_made_them():
    """A stepper drawn after forward (trace_of, BackwardStepper(loss)) replays the forward ops;
    each one's "now has pending count" must be the count at that op, as a recording made while
    forward ran says, not the final count (which told the diamond's first op 3 at an op where
    it had 2, twice)."""
    def diamond():
        w = mg.create_leaf(1.5, requires_grad=True, name="w")
        a = w * mg.create_leaf(2.0, name="x")
        return (a * a + a).sum()

    with mg.record() as rec:
        live = diamond()
    replayed = forward_pending(mg.trace_of(diamond()))
    assert replayed == forward_pending(rec.trace)
    # a * a: both edges are wired before the op is recorded, so both say 2 (not the final 3)
    assert replayed[1] == ("mul", [("mul", 2), ("mul", 2)])
    # where forward ended, each op's last told count is its real count (what the badges show)
    doc = mg.trace_of(live)
    last = {p["node"]: p["count"] for e in by_type(doc, "op") for p in e["pending"]}
    assert last == {n["id"]: n["pending_count"] for n in doc["nodes"]
                    if n["type"] == "op" and n["pending_count"]}
    node = next(n for n in doc["nodes"] if n["type"] == "op")
    assert node["pending_count"] == live.grad_fn.next_functions[0].next_functions[1] \
        .pending_count == 3


def test_a_replayed_graph_counts_consumers_outside_it_first():
    """A consumer the drawn graph does not reach (a dead branch) is counted before the drawn
    ones, so the last forward op leaves every node at its real count."""
    w = mg.create_leaf([1.0, -2.0], requires_grad=True, name="w")
    h = w * w
    side = h.exp()                      # not part of the loss
    loss = h.sum()
    assert forward_pending(mg.trace_of(loss))[-1] == ("sum", [("mul", 2)])
    assert h.grad_fn.pending_count == 2
    del side


def test_a_ready_off_the_loss_path_opens_the_step_of_the_node_it_lets_run():
    """h has a consumer off the loss's path (side): when the queue runs dry the engine lets h go
    and runs it. Its "ready" is in h's step, not in the step before (where the engine had not let
    it go yet), in a recording and in a stepper's page alike."""
    pytest.importorskip("anywidget")   # (absent only in the oldest-numpy pass, which has no widgets)
    from minigrad.widgets.views import BackwardStepper

    def graph():
        w = mg.create_leaf([1.0, -2.0], requires_grad=True, name="w")
        h = w * w
        return (h * 2.0).sum(), h.exp()

    with mg.record() as rec:
        loss, side = graph()
        loss.backward()
    stepper = BackwardStepper(graph()[0])
    sent = []
    stepper.send = sent.append
    page_frames = list(stepper.trace["frames"])
    while stepper.live:
        stepper.step()
        page_frames += sent[-1]["frames"]
    assert page_frames == stepper.current_trace["frames"]
    for doc in (rec.trace, stepper.current_trace):
        frames = doc["frames"]
        events = doc["events"]   # the ready of a node whose pending count is not 0: h's
        ready = next(i for i, e in enumerate(events) if e["type"] == "ready" and not
                     (events[i - 1]["type"] == "pending" and events[i - 1]["count"] == 0))
        k = next(k for k, last in enumerate(frames) if last >= ready)
        step = doc["events"][frames[k - 1] + 1:frames[k] + 1]
        assert step[0]["type"] == "ready" and step[1] == {**step[1], "type": "apply",
                                                          "node": step[0]["node"]}


def test_a_graph_read_after_forward_tells_the_arena_s_own_used():
    """trace_of / a BackwardStepper read the blocks already on an arena from its ledger. The block
    that made the trace meet the arena (x's, at offset 0) was written after all the others, so
    the strip's last `used` was the end of x's block, not the arena's."""
    graph = mg.Arena("graph", 1 << 16)
    with graph.scope():
        x = mg.create_leaf([[1.0, 2.0]], name="x")
        W = mg.create_leaf([[0.5, -1.0], [2.0, 0.25]], requires_grad=True, name="W")
        loss = (x @ W).tanh().sum()
        doc = valid(mg.trace_of(loss))
        allocs = by_type(doc, "alloc")
        assert allocs[-1]["used"] == graph.used and allocs[-1]["high_water"] == graph.high_water
        offset = {b["id"]: b["offset"] for b in doc["blocks"]}
        offsets = [offset[a["block"]] for a in allocs]
        assert offsets == sorted(offsets)
