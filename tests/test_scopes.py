"""Scopes: every Variable records the name_scope()s and Module calls it was made in, and traces
carry that path per node (trace version 2; version 1 documents still validate)."""
from __future__ import annotations

import json
import pathlib
import threading

import jsonschema
import numpy as np
import pytest

import minigrad as mg

SCHEMA = json.loads((pathlib.Path(mg.__file__).parent / "trace" / "trace.schema.json").read_text())
FIXTURES = pathlib.Path(__file__).parent.parent / "widgets" / "test" / "fixtures"


def leaf(value=1.0, **kwargs):
    return mg.create_leaf(np.asarray(value, float), **kwargs)


def test_name_scopes_nest_and_end():
    w = leaf(2.0, requires_grad=True, name="w")
    with mg.name_scope("encoder"):
        a = w * 3.0
        with mg.name_scope("layer0"):
            b = a + 1.0
        c = b * b
    d = c - 1.0
    assert (w.scope, a.scope, b.scope, c.scope, d.scope) == \
        ((), ("encoder",), ("encoder", "layer0"), ("encoder",), ())


def test_a_scope_ends_when_its_block_raises():
    with pytest.raises(ZeroDivisionError):
        with mg.name_scope("broken"):
            1 / 0
    assert (leaf() * 2.0).scope == ()


@pytest.mark.parametrize("bad", ["", None, 3, ("a",)])
def test_a_scope_needs_a_name(bad):
    with pytest.raises(TypeError, match=r"name_scope\(.*non-empty string.*name_scope\('encoder'\)"):
        with mg.name_scope(bad):
            pass


def test_scopes_are_per_thread():
    seen = {}
    inside, leave = threading.Event(), threading.Event()

    def other():
        with mg.name_scope("other"):
            inside.set()
            leave.wait(10)
            seen["other"] = (leaf() * 2.0).scope

    thread = threading.Thread(target=other)
    thread.start()
    assert inside.wait(10)
    seen["main"] = (leaf() * 2.0).scope
    leave.set()
    thread.join(10)
    assert seen == {"main": (), "other": ("other",)}


def test_mlp_calls_push_layer_names():
    model = mg.nn.MLP([4, 3, 2], seed=0)            # Linear layer0, ReLU, Linear layer1
    x = leaf(np.ones((2, 4)), name="x")
    with mg.name_scope("classifier"):
        logits = model(x)
    linear1 = logits.grad_fn                        # layer1's linear op
    relu = linear1.inputs[0].grad_fn
    linear0 = relu.inputs[0].grad_fn
    assert linear0.inputs[0] is x and x.scope == ()
    assert logits.scope == ("classifier", "layer1")
    assert relu.inputs[0].scope == ("classifier", "layer0")
    assert linear1.inputs[0].scope == ("classifier", "1")   # the ReLU: Sequential's index
    w0, b0, w1, b1 = model.parameters()
    assert w0.scope == b0.scope == ("layer0",) and w1.scope == b1.scope == ("layer1",)


class Attention(mg.nn.Module):
    def __init__(self):
        self.query = mg.nn.Linear(2, 2, seed=1)        # no name: named after the attribute

    def forward(self, x):
        return self.query(x).tanh()


class Block(mg.nn.Module):
    def __init__(self):
        self.attn = Attention()

    def forward(self, x):
        return x + self.attn(x)


class Model(mg.nn.Module):
    def __init__(self, n):
        self.blocks = [Block() for _ in range(n)]

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def test_nested_modules_give_dotted_paths():
    y = Model(2)(leaf(np.ones((1, 2))))
    add = y.grad_fn
    tanh_out = add.inputs[1]
    linear_out = tanh_out.grad_fn.inputs[0]
    assert y.scope == ("blocks.1",)
    assert tanh_out.scope == ("blocks.1", "attn")
    assert linear_out.scope == ("blocks.1", "attn", "query")
    assert ".".join(linear_out.scope) == "blocks.1.attn.query"
    first_block_out = add.inputs[0]
    assert first_block_out.scope == ("blocks.0",)


def test_a_module_called_from_plain_code_by_its_class_name():
    relu = mg.nn.ReLU()
    with mg.name_scope("head"):
        y = relu(leaf([1.0, -1.0], requires_grad=True))
    assert y.scope == ("head",)        # a top-level call of a nameless module opens no scope

    class Wrapper(mg.nn.Module):
        def forward(self, x, f):
            return f(x)                 # f is no attribute of the wrapper
    y = Wrapper()(leaf([1.0, -1.0], requires_grad=True), relu)
    assert y.scope == ("relu",)


def test_the_trace_carries_each_nodes_scope():
    model = mg.nn.MLP([3, 2, 2], seed=0)
    x = leaf(np.ones((1, 3)), name="x")
    with mg.record("scoped") as rec:
        with mg.name_scope("loss"):
            loss = mg.cross_entropy(model(x), [1])
        loss.backward()
    doc = rec.trace
    jsonschema.validate(doc, SCHEMA)
    assert doc["version"] == 2
    scopes = {n["label"] if n["type"] == "variable" else n["name"]: n["scope"]
              for n in doc["nodes"] if n["type"] == "op" or n["name"]}
    assert scopes["x"] == []
    assert scopes["layer0.weight"] == ["layer0"] and scopes["layer1.bias"] == ["layer1"]
    assert scopes["relu"] == ["loss", "1"]
    assert scopes["cross_entropy"] == ["loss"]
    assert doc == json.loads(json.dumps(doc))
    # trace_of (a graph read after the fact) says the same
    with mg.name_scope("again"):
        again = (model(x) * 2.0).sum()
    read = mg.trace_of(again)
    jsonschema.validate(read, SCHEMA)
    ops = {n["name"]: n["scope"] for n in read["nodes"] if n["type"] == "op"}
    assert ops["sum"] == ["again"] and ops["relu"] == ["again", "1"]


def test_old_traces_still_validate_and_new_ones_need_scopes():
    for fixture in sorted(FIXTURES.glob("*.json")):
        old = json.loads(fixture.read_text())
        assert old["version"] == 1
        jsonschema.validate(old, SCHEMA)          # version 1: no scopes, still valid
    doc = mg.trace_of((leaf(2.0, requires_grad=True) * 3.0).sum())
    del doc["nodes"][0]["scope"]
    with pytest.raises(jsonschema.ValidationError, match="scope"):
        jsonschema.validate(doc, SCHEMA)
