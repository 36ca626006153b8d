"""The trace document of each scenario in tests/trace_golden/scenarios.py must match the JSON
pinned next to it: structure, ids, kinds, order, shapes, dtypes, names and every non-float field
exactly; floats within the tolerance of their dtype (tests/golden.py says which and why: a
float32 sum's last bits depend on the processor's BLAS and SIMD loops).

Regenerate the fixtures, only when the document is meant to change, with one command from the
repository root:

    .venv/bin/python tests/trace_golden/scenarios.py
"""
import json
import pathlib
import random
import sys

import jsonschema
import numpy as np
import pytest

import minigrad as mg
from golden import TOLERANCES, assert_same_document, first_difference, tolerance, trace_dtypes

sys.path.insert(0, str(pathlib.Path(__file__).parent / "trace_golden"))
from scenarios import SCENARIOS, dump, fixture  # noqa: E402

SCHEMA = json.loads((pathlib.Path(mg.__file__).parent / "trace" / "trace.schema.json").read_text())


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_trace_document_is_unchanged(scenario):
    docs = scenario()
    jsonschema.validate(docs[-1], SCHEMA)   # (the last one holds all the others' events)
    computed = json.loads(dump(docs))       # the numbers as the fixture file holds them
    assert_same_document(json.loads(fixture(scenario).read_text()), computed, scenario.__name__)


def test_the_fixtures_are_not_trivial():
    kinds = set()
    for scenario in SCENARIOS:
        for doc in json.loads(fixture(scenario).read_text()):
            kinds |= {e["type"] for e in doc["events"]}
    assert {"leaf", "op", "alloc", "free", "pop", "start", "apply", "accumulate", "pending",
            "ready", "done", "consume"} <= kinds


# --- the comparison itself: platform noise passes, real changes fail with their path -----------

def _load(name: str) -> list:
    return json.loads((pathlib.Path(__file__).parent / "trace_golden" / f"{name}.json").read_text())


def _nudge(value: float, dtype: str, ulps: int) -> float:
    """value moved by `ulps` units in the last place of its dtype (int dtypes: unchanged)."""
    if dtype not in TOLERANCES:
        return value
    x = np.array(value, dtype)
    toward = np.array(np.inf if ulps > 0 else -np.inf, dtype)
    for _ in range(abs(ulps)):
        x = np.nextafter(x, toward)
    return float(x)


def _perturb_every_float(docs: list, rng: random.Random) -> int:
    """Move every float value of every node and event by 1-4 ulps of its dtype, in place."""
    moved = 0
    for doc in docs:
        dtypes = trace_dtypes(doc)
        carriers = [(n, "value", n["dtype"]) for n in doc["nodes"] if n["type"] == "variable"]
        carriers += [(e, "grad", dtypes[e.get("variable", e.get("node"))])
                     for e in doc["events"] if "grad" in e]
        for item, key, dtype in carriers:
            for i, v in enumerate(item[key]):
                if isinstance(v, float):
                    item[key][i] = _nudge(v, dtype, rng.choice([-4, -3, -2, -1, 1, 2, 3, 4]))
                    moved += item[key][i] != v
    return moved


@pytest.mark.parametrize("name", ["mlp_heap", "leaf_loss_and_ops_zoo", "stepper_on_pool_read_each_step"])
def test_a_few_ulps_on_every_float_still_match(name):
    pinned, perturbed = _load(name), _load(name)
    moved = _perturb_every_float(perturbed, random.Random(name))
    assert moved > 100, "the perturbation must reach the document's numbers"
    assert dump(perturbed) != dump(pinned)   # a byte-for-byte comparison would fail here
    assert first_difference(pinned, perturbed) is None


def _set(docs, path, value):
    *inner, last = path
    for key in inner:
        docs = docs[key]
    docs[last] = value


def _swap_first_two_events(docs):
    events = docs[0]["events"]
    events[0], events[1] = events[1], events[0]


STRUCTURAL = {
    "an id": (lambda d: _set(d, [0, "nodes", 3, "id"], "v99"), "$[0].nodes[3].id"),
    "a kind": (lambda d: _set(d, [0, "events", 0, "type"], "op"), "$[0].events[0].type"),
    "a shape": (lambda d: _set(d, [0, "nodes", 0, "shape", 0], 9), "$[0].nodes[0].shape[0]"),
    "a dtype": (lambda d: _set(d, [0, "nodes", 1, "dtype"], "float64"), "$[0].nodes[1].dtype"),
    "a name": (lambda d: _set(d, [0, "nodes", 1, "name"], "layer0.W"), "$[0].nodes[1].name"),
    "an integer": (lambda d: _set(d, [0, "frames", 2], 10**6), "$[0].frames[2]"),
    "the order": (_swap_first_two_events, "$[0].events[0].node"),
    "a missing value": (lambda d: d[0]["nodes"][0]["value"].pop(), "$[0].nodes[0].value"),
    "an int for a float": (lambda d: _set(d, [0, "nodes", 1, "value", 0], 0), "$[0].nodes[1].value[0]"),
    "a float32 well past its tolerance":
        (lambda d: _set(d, [0, "nodes", 1, "value", 0], d[0]["nodes"][1]["value"][0] * 1.001),
         "$[0].nodes[1].value[0]"),
}


@pytest.mark.parametrize("change", STRUCTURAL, ids=str)
def test_one_real_change_fails_with_its_path(change):
    mutate, path = STRUCTURAL[change]
    pinned, changed = _load("mlp_heap"), _load("mlp_heap")
    mutate(changed)
    with pytest.raises(AssertionError, match=r"first difference at ") as failure:
        assert_same_document(pinned, changed, "mlp_heap")
    message = str(failure.value)
    assert f"at {path}: " in message, message


def test_the_tolerance_is_read_from_the_node_dtype():
    """A move of 1e-8 relative hides in float32 noise but is a real change for float64 data."""
    zoo = _load("leaf_loss_and_ops_zoo")
    f64 = next(i for i, n in enumerate(zoo[0]["nodes"]) if n.get("dtype") == "float64"
               and n["value"] and abs(n["value"][-1]) > 0.1)
    value = zoo[0]["nodes"][f64]["value"][-1]
    zoo_moved = _load("leaf_loss_and_ops_zoo")
    zoo_moved[0]["nodes"][f64]["value"][-1] = value * (1 + 1e-8)
    message = first_difference(zoo, zoo_moved)
    assert message and message.startswith(f"$[0].nodes[{f64}].value[") and "float64" in message
    assert repr(value) in message and repr(value * (1 + 1e-8)) in message

    mlp, mlp_moved = _load("mlp_heap"), _load("mlp_heap")
    assert mlp[0]["nodes"][1]["dtype"] == "float32"
    mlp_moved[0]["nodes"][1]["value"][0] *= 1 + 1e-8
    assert first_difference(mlp, mlp_moved) is None
    assert tolerance("int64") == (0.0, 0.0)
