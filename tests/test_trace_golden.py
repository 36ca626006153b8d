"""The trace document, byte for byte: each scenario of tests/trace_golden/scenarios.py must give
the JSON pinned next to it (written from the code before trace.py was split by concern)."""
import json
import pathlib
import sys

import jsonschema
import pytest

import minigrad as mg

sys.path.insert(0, str(pathlib.Path(__file__).parent / "trace_golden"))
from scenarios import SCENARIOS, dump, fixture  # noqa: E402

SCHEMA = json.loads((pathlib.Path(mg.__file__).parent / "trace.schema.json").read_text())


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_trace_document_is_unchanged(scenario):
    docs = scenario()
    jsonschema.validate(docs[-1], SCHEMA)   # (the last one holds all the others' events)
    expected = fixture(scenario).read_text()
    assert dump(docs) == expected, f"{scenario.__name__}: the trace document changed"


def test_the_fixtures_are_not_trivial():
    kinds = set()
    for scenario in SCENARIOS:
        for doc in json.loads(fixture(scenario).read_text()):
            kinds |= {e["type"] for e in doc["events"]}
    assert {"leaf", "op", "alloc", "free", "pop", "start", "apply", "accumulate", "pending",
            "ready", "done", "consume"} <= kinds
