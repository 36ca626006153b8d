"""Design D's op table, the rows of its first groups: what each backward rule keeps from forward.

The transformer, attention and MoE rows have their own tests (test_transformer_ops.py,
test_aot_transformer.py, test_flash_qknorm_ops.py, test_moe_ops.py, test_aot_moe.py); the values
and gradients of these rules are tested in test_aot_rules.py. Here: for each op, a forward graph
where it is the only op that could save anything (the loss is a sum, which saves nothing), and the
backward graph's save list, against the table. A weight that is a parameter is read directly
(it lives for the whole run), so "A, B" becomes "A" when B is a parameter.
"""
import numpy as np
import pytest

from minigrad import aot
from minigrad.aot.ir import Graph, Operation, TensorInfo

SHAPES = {"a": (3, 4), "b": (4, 2), "w": (4, 2), "bias": (2,), "c": (3, 2), "e": (3, 4),
          "m": (3, 4), "r": (4, 3), "loss": ()}


def graph(op_type, inputs, output, attrs=None, params=()):
    g = Graph(inputs=[n for n in ("a", "b", "e") if n in inputs], params=list(params))
    for name, shape in SHAPES.items():
        g.shape_env[name] = TensorInfo(shape, np.dtype(np.float64))
    g.operations = [Operation("op_0", op_type, tuple(inputs), (output,), attrs or {}),
                    Operation("sum_1", "sum", (output,), ("loss",), {"axis": None, "keepdims": False})]
    g.outputs = ["loss"]
    return g


ROWS = [
    # (row of the table, op type, inputs, output, attrs, params, what backward saves)
    ("matmul: A, B (both activations)", "matmul", ["a", "b"], "c", {"transpose": "NN"}, (), ["a", "b"]),
    ("matmul: A (B a parameter)", "matmul", ["a", "w"], "c", {"transpose": "NN"}, ("w",), ["a"]),
    ("linear: A, B", "linear", ["a", "b", "bias"], "c", {"transpose": "NN"}, ("bias",),
     ["a", "b"]),
    ("add: none", "add", ["a", "e"], "m", {}, (), []),
    ("multiply: A, B", "mul", ["a", "e"], "m", {}, (), ["a", "e"]),
    ("reshape: none", "reshape", ["a"], "r", {"shape": (4, 3)}, (), []),
    ("reshape: none", "reshape", ["a"], "r", {"shape": (4, 3)}, (), []),
    ("identity: none", "identity", ["a"], "m", {}, (), []),
    ("copy: none", "copy", ["a"], "m", {}, (), []),
]


@pytest.mark.parametrize("row, op_type, inputs, output, attrs, params, saved", ROWS,
                         ids=[r[0] for r in ROWS])
def test_each_rule_saves_what_the_table_says(row, op_type, inputs, output, attrs, params, saved):
    backward = aot.derive_backward_graph(graph(op_type, inputs, output, attrs, params))
    assert sorted(backward.save) == sorted(saved), (row, backward.save)


def test_bias_add_saves_nothing_of_its_own():
    g = graph("matmul", ["a", "w"], "c", {"transpose": "NN"}, params=("w", "bias"))
    g.operations.insert(1, Operation("bias_add_1", "bias_add", ("c", "bias"), ("m2",), {}))
    g.operations[-1] = Operation("sum_2", "sum", ("m2",), ("loss",), {"axis": None, "keepdims": False})
    g.shape_env["m2"] = TensorInfo((3, 2), np.dtype(np.float64))
    backward = aot.derive_backward_graph(g)
    assert backward.save == ["a"]   # matmul's A only: bias_add adds nothing to the list
    assert "d_bias" in backward.outputs


def test_zeros_saves_nothing_and_sends_no_gradient():
    g = graph("add", ["a", "z"], "m")
    g.shape_env["z"] = TensorInfo((3, 4), np.dtype(np.float64))
    g.operations.insert(0, Operation("zeros_0", "zeros", (), ("z",), {"shape": (3, 4), "dtype": "float64"}))
    backward = aot.derive_backward_graph(g)
    assert backward.save == []
    assert not any("d_z" in op.outputs for op in backward.operations)
