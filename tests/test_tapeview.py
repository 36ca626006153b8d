"""TapeView's Python side: the tape's document (checked against tape.schema.json and against the
tape itself), live stepping on the real tape, what one step sends, replays and save_html.
(The browser side is tested in tests/browser/test_tapeview_browser.py.)"""
import json
import math
import pathlib

import jsonschema
import numpy as np
import pytest

import minigrad as mg
from minigrad.tape import SlotError, Tape, TensorTape
from minigrad.tape.document import numbers, tape_document
from minigrad.widgets import TapeView, save_html

SCHEMA = json.loads((pathlib.Path(mg.__file__).parent / "tape" / "tape.schema.json").read_text())
IMG = "<img src=x onerror=alert(1)>"


def small_tape():
    """y = sin(x * w + c * c) * x with c a const: c * c records no instruction."""
    tape = Tape()
    x, w, c = tape.var(0.7, name="x"), tape.var(-1.3, name="w"), tape.const(2.0, name="c")
    cc = c * c
    y = tape.sin(x * w + cc) * x
    return tape, x, w, cc, y


def chain_tape(n_slots: int, seed: int = 0):
    """x -> tanh(h * w) -> ... with consts mixed in: about n_slots slots."""
    rng = np.random.default_rng(seed)
    tape = Tape()
    x, w = tape.var(rng.normal(), name="x"), tape.var(rng.normal(), name="w")
    h = x
    while len(tape.values) < n_slots - 2:
        h = tape.tanh(h * w) + tape.const(0.1)
    return tape, h


def fold(doc, k):
    """Grads, use counts and freed slots at frame k, folded from the document's deltas."""
    grads, uses = list(doc["slots"]["grads"]), list(doc["slots"]["uses"])
    freed = set()
    for f in doc["frames"][:k]:
        for slot, grad in f["grads"]:
            grads[slot] = grad
        for slot, count in f["uses"]:
            uses[slot] = count
        freed.update(f["freed"])
    return grads, uses, freed


def test_document_is_the_slot_table_and_matches_the_schema():
    tape, x, w, cc, y = small_tape()
    doc = tape_document(tape, y.index, title="small")
    jsonschema.validate(doc, SCHEMA)
    slots = doc["slots"]
    assert slots["kinds"] == list(tape.kinds) and slots["names"] == list(tape.names)
    assert slots["requires_grad"] == list(tape.requires_grad)
    assert slots["uses"] == list(tape.use_counts())
    assert slots["values"][x.index] == [0.7] and slots["grads"] == [None] * len(tape.values)
    assert [(i["op"], tuple(i["inputs"]), i["output"]) for i in doc["instrs"]] == \
        [(i.op, tuple(i.inputs), i.output) for i in tape.instrs]
    # the skipped op: c * c is a const slot that no instruction writes, and nothing reads c twice
    assert slots["kinds"][cc.index] == "const" and not slots["requires_grad"][cc.index]
    assert cc.index not in [i["output"] for i in doc["instrs"]]
    assert set(doc["rules"]) == {i.op for i in tape.instrs}
    assert doc["output"] == y.index and doc["frames"] == [] and doc["done"] is False


def test_numbers_are_short_and_json_safe():
    assert numbers(1 / 3) == [0.333333]
    assert numbers(np.arange(10.0).reshape(2, 5)) == [0.0, 1.0, 2.0, 3.0]
    assert numbers(np.array([np.nan, np.inf, -1.0])) == [None, None, -1.0]


def test_step_runs_the_real_tape_one_instruction_at_a_time():
    tape, x, w, cc, y = small_tape()
    view = TapeView(tape, y)
    n = len(tape.instrs)
    assert view.live and view.frame == 0 and all(g is None for g in tape.grads)
    seen_positions = []
    for k in range(n):
        view.step()
        doc = view.current_trace
        # the first step is the seed and one instruction: two frames
        assert view.frame == len(doc["frames"]) == k + 2
        last = doc["frames"][-1]
        seen_positions.append(last["position"])
        # what the frame says was written is what the tape holds right now
        for slot, grad in last["grads"]:
            assert grad == numbers(tape.grads[slot])
        grads, uses, _ = fold(doc, view.frame)
        assert grads == [None if g is None else numbers(g) for g in tape.grads]
        # use counts: how many instructions not yet run (lower positions) read the slot
        expected = [sum(i.inputs.count(s) for i in tape.instrs[:last["position"]])
                    for s in range(len(tape.values))]
        assert uses == expected, (k, uses, expected)
    assert doc["frames"][0] == {"position": None, "grads": [[y.index, [1.0]]], "uses": [],
                                "freed": []}
    assert seen_positions == list(range(n - 1, -1, -1)), "reverse order, one at a time"
    assert not view.live and doc["done"]
    view.step()   # over: nothing more happens
    assert view.frame == len(doc["frames"]) == n + 1
    jsonschema.validate(doc, SCHEMA)
    # the grads the tape wrote are the derivatives: d/dx (sin(xw + c²) x), d/dw
    xv, wv = 0.7, -1.3
    u = xv * wv + 4.0
    assert math.isclose(tape.grads[x.index], math.cos(u) * wv * xv + math.sin(u), rel_tol=1e-12)
    assert math.isclose(tape.grads[w.index], math.cos(u) * xv * xv, rel_tol=1e-12)


def test_freed_slots_are_never_read_again_and_vars_are_never_freed():
    tape, out = chain_tape(60)
    view = TapeView(tape, out)
    view.finish()
    doc = view.current_trace
    freed_at = {}
    for k, f in enumerate(doc["frames"]):
        for slot in f["freed"]:
            assert slot not in freed_at, f"s{slot} freed twice"
            freed_at[slot] = k
    assert freed_at, "a chain frees its temporaries during backward"
    for slot, k in freed_at.items():
        assert tape.kinds[slot] != "var"
        later = [f["position"] for f in doc["frames"][k + 1:]]
        assert not any(slot in tape.instrs[p].inputs for p in later), f"s{slot} read after free"
    _, uses, _ = fold(doc, len(doc["frames"]))
    assert uses == [0] * len(tape.values)


def test_a_step_sends_a_small_delta_whatever_the_size_of_the_tape():
    sizes = {}
    for n in (40, 1500):
        tape, out = chain_tape(n)
        view = TapeView(tape, out)
        sent = []
        view.send = lambda content, buffers=None, sent=sent: sent.append(content)
        view.step()      # the seed and the first instruction
        view.step()
        assert [m["kind"] for m in sent] == ["append", "append"]
        assert sent[1]["frames"] == view.current_trace["frames"][-1:]
        sizes[n] = len(json.dumps(sent[1]))
        whole = len(json.dumps(view.current_trace))
        assert sizes[n] < 300 and whole > 10 * sizes[n], (sizes[n], whole)
    assert sizes[1500] <= sizes[40] + 20, sizes   # (slot numbers have more digits)


def test_the_views_requests_run_the_tape_and_a_late_view_gets_the_whole_document():
    tape, x, w, cc, y = small_tape()
    view = TapeView(tape, y)
    view._on_message(view, {"kind": "advance", "steps": 1, "seq": 0}, [])
    assert view.frame == 2 and tape.grads[y.index] == 1.0
    first = view.trace
    view._on_message(view, {"kind": "hello", "frames": 0}, [])     # a view drawn from scratch
    assert view.trace is not first and len(view.trace["frames"]) == 2
    view._on_message(view, {"kind": "finish", "seq": 1}, [])
    assert not view.live and view.frame == len(tape.instrs) + 1
    assert tape.grads[x.index] is not None and tape.grads[w.index] is not None


def test_a_stale_move_from_the_page_is_undone():
    tape, x, w, cc, y = small_tape()
    view = TapeView(tape, y)
    view._on_message(view, {"kind": "advance", "steps": 1, "seq": 3}, [])
    view.frame = 0          # a move the page made before its request, arriving after the answer
    view.frame_seq = 3
    assert view.frame == 2
    view.frame = 1          # a new move (seq 4) stays
    view.frame_seq = 4
    assert view.frame == 1


def test_a_replay_has_no_tape_behind_it():
    tape, x, w, cc, y = small_tape()
    view = TapeView(tape, y, title="t")
    view.finish()
    replay = TapeView.from_document(json.loads(json.dumps(view.current_trace)))
    assert not replay.live and replay.frame == 0
    replay.step()
    assert replay.frame == 0 and len(replay.trace["frames"]) == len(view.current_trace["frames"])


def test_misuse_is_explained():
    tape, x, w, cc, y = small_tape()
    with pytest.raises(SlotError, match=r"TapeView: slot 99 does not exist; the tape has \d+ "):
        TapeView(tape, 99)
    other, *_ = small_tape()
    with pytest.raises(SlotError, match="TapeView: slot .* belongs to another tape"):
        TapeView(other, y)
    with pytest.raises(ValueError, match="the tape is empty"):
        TapeView(Tape())


def test_a_tape_without_instructions_steps_once_for_the_seed():
    tape = Tape()
    x = tape.var(3.0, name="x")
    view = TapeView(tape, x)
    view.step()
    assert view.frame == 1 and not view.live and tape.grads[x.index] == 1.0


def test_save_html_keeps_names_as_text(tmp_path):
    tape = Tape()
    a = tape.var(0.5, name=IMG)
    b = tape.var(2.0, name="</script><script>alert(2)</script>")
    view = TapeView(tape, tape.exp(a * b), title=IMG)
    path = save_html(view, tmp_path / "tape.html")
    text = path.read_text(encoding="utf-8")
    assert view.current_trace["done"] and not view.live    # save_html runs backward to the end
    data = text.split('id="minigrad-data">')[1].split("</script>")[0]
    assert "<" not in data, "user text inside the JSON is escaped"
    doc = json.loads(data)
    assert doc["widget"] == "tape" and doc["trace"]["slots"]["names"][:2] == [IMG, b.tape.names[1]]
    assert "<title>&lt;img src=x onerror=alert(1)&gt;</title>" in text
    assert "https://" not in data and text.count("<script") == 3
    # the page carries the tape view's own script, without the Graphviz of the graph views
    assert path.stat().st_size < 100_000, path.stat().st_size     # (Graphviz alone: ~630 KiB)


def test_a_tensor_tape_shows_shapes_and_frees_buffers_as_counts_reach_zero():
    tape = TensorTape()
    x = tape.var(np.arange(6.0).reshape(2, 3) / 10, name="x")
    h = tape.tanh(x * x)                            # recorded, shape (2, 3)
    s = tape.var(np.array(0.3), name="s")
    out = tape.exp(tape.sin(s * s) * tape.const(np.array(2.0)))
    doc = tape_document(tape, out.index)
    jsonschema.validate(doc, SCHEMA)
    assert doc["slots"]["shapes"][h.index] == [2, 3]
    assert doc["slots"]["values"][x.index] == [0.0, 0.1, 0.2, 0.3]     # the first 4 of 6
    view = TapeView(tape, out)
    view.finish()
    frames = view.current_trace["frames"]
    freed = {slot for f in frames for slot in f["freed"]}
    produced = {instr.output for instr in tape.instrs}     # every temporary, output included
    assert produced <= freed and not any(tape.kinds[slot] == "var" for slot in freed)
    assert all(tape.values[slot] is None for slot in freed), "the pool got the buffers back"
    assert np.isclose(tape.grads[s.index], np.exp(2 * np.sin(0.09)) * 2 * np.cos(0.09) * 0.6)
    late = tape_document(tape, out.index)       # a view made after backward: values are gone
    jsonschema.validate(late, SCHEMA)
    assert all(late["slots"]["values"][slot] is None for slot in freed)


def test_a_misuse_while_stepping_reaches_the_view_and_the_cell():
    tape, x, w, cc, y = small_tape()
    tape.backward(y)                                  # consumed: no retain
    view = TapeView(tape, y)
    sent = []
    view.send = lambda content, buffers=None: sent.append(content)
    with pytest.raises(mg.errors.BackwardError, match="already backpropagated.*retain=True"):
        view._on_message(view, {"kind": "advance", "steps": 1, "seq": 0}, [])
    assert sent and sent[-1]["kind"] == "error" and "retain=True" in sent[-1]["text"]


def test_a_second_backward_s_seed_drops_the_temps_grads_in_the_view_too():
    """A second backward (the first retained) starts by dropping the temps' grads of the pass
    before; the seed frame said only grad(y) = 1, so at that frame the view still showed h's old
    grad, which the tape no longer had."""
    tape = Tape()
    x = tape.var(0.5, name="x")
    h = x * x
    y = h * h
    tape.backward(y, retain=True)
    old = {slot: tape.grads[slot] for slot in (x.index, h.index)}
    view = TapeView(tape, y)
    view.send = lambda message: None
    seed_grads, seed = {}, tape._seed   # the tape's grads right after its seed

    def seeded(out, retain):
        slot = seed(out, retain)
        seed_grads.update(enumerate(tape.grads))
        return slot
    tape._seed = seeded
    view.step()
    doc = jsonschema.validate(view.current_trace, SCHEMA) or view.current_trace
    grads, _, _ = fold(doc, 1)
    assert seed_grads[h.index] is None and grads[h.index] is None     # dropped by the seed
    assert seed_grads[x.index] == old[x.index] and grads[x.index] == numbers(old[x.index])  # kept
    assert grads[y.index] == [1.0]
