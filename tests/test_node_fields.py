"""A graph node's fields are all declared by Function (slots set by apply, and class defaults for
the few nodes that set them), so nothing reads them with hasattr/getattr probes; a trace shows
the op's own data only."""
import numpy as np

import minigrad as mg
from minigrad.eager.function import Function

FIELDS = [f for f in Function.__slots__ if f not in ("__dict__", "__weakref__")] + [
    "created_at", "linked_outputs", "main_output"]


def _fields(node) -> dict:
    return {f: getattr(node, f) for f in FIELDS}   # AttributeError: a field was never set


def test_a_recorded_node_has_every_field():
    w = mg.create_leaf(np.ones(3), requires_grad=True, name="w")
    node = (w * 2.0).grad_fn
    fields = _fields(node)
    assert fields["released"] is False and fields["pending_count"] == 0 and fields["seq"] >= 0
    assert fields["created_at"] is None and fields["linked_outputs"] is None
    assert fields["main_output"] is None
    assert repr(node) == "<mul node, pending_count=0>"


def test_a_graph_root_node_has_every_field_and_its_data_in_dict():
    v = mg.create_leaf(np.arange(3.0))
    node = mg.OPS["stop_gradient"].apply(v).grad_fn
    fields = _fields(node)
    assert fields["inputs"] == () and fields["released"] is False and fields["seq"] >= 0
    assert set(node.__dict__) == {"source"}


def test_the_node_forward_sees_before_recording_says_it_is_not_in_a_graph():
    seen = {}

    class Spy(Function):
        name = "spy"

        @staticmethod
        def forward(ctx, a):
            seen["released"], seen["repr"] = ctx.released, repr(ctx)
            seen["needs"] = ctx.needs_input_grad
            return a * 1.0

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output

    w = mg.create_leaf(np.ones(2), requires_grad=True)
    with mg.no_grad():
        Spy.apply(w)
    assert seen["released"] is None and seen["repr"] == "<spy node, not in a graph>"
    assert seen["needs"] == (False,)
    Spy.apply(w)
    assert seen["needs"] == (True,)


def test_anomaly_mode_sets_created_at():
    w = mg.create_leaf(np.ones(2), requires_grad=True)
    with mg.check.detect_anomaly():
        node = w.tanh().grad_fn
    assert "test_node_fields.py" in node.created_at


def test_links_of_a_multi_output_op_are_fields_not_op_data():
    """The links ops/multi.py sets are node fields: the op's data (its ctx in a trace) stays
    the op's own, in a recorded trace and in one read off the graph afterwards."""
    x = mg.create_leaf(np.ones((2, 4)), requires_grad=True)
    r = mg.create_leaf(np.ones((2, 4)), requires_grad=True)
    w = mg.create_leaf(np.ones(4), requires_grad=True)
    residual, h = mg.fused_residual_rmsnorm(x, r, w)
    ops = [n for n in mg.trace_of(residual + h)["nodes"] if n["type"] == "op"]
    assert [(n["name"], n["ctx"]) for n in ops] == [
        ("add", {}), ("fused_residual_rmsnorm", {"eps": 1e-6}), ("add", {})]
    assert h.grad_fn.linked_outputs is not None or residual.grad_fn.linked_outputs is not None
