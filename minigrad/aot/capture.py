"""capture(fn, *example_inputs, params=...): run ordinary minigrad code once, keep its graph as IR.

The eager engine already records every op it runs (the grad_fn graph). capture runs fn on the
examples with every float input marked requires_grad (so every op is recorded), then walks that
graph from the outputs back and writes one Operation per node, in an order where each tensor is
written before it is read. Names come from Variable names (parameters such as "layer0.weight",
inputs) and otherwise from the op ("relu_3"). Shapes and dtypes go into the graph's shape_env.
"""
from __future__ import annotations

import numpy as np

from ..errors import MinigradError
from ..variable import Variable, create_leaf
from ..ops.multi import linked_output, primary_of
from .derive import INDEX_NAME
from .ir import Graph, Operation, TensorInfo


class CaptureError(MinigradError, ValueError):
    """fn used something the IR cannot hold (an op without an aot form, a batched matmul, ...)."""


def capture(fn, *example_inputs, params=None, input_names=None, output_names=None) -> Graph:
    """The forward Graph of fn(*example_inputs); params: a Module, a list or a dict of Variables."""
    param_vars = named_params(params)
    leaves, names, no_grad = [], {}, set()
    for i, value in enumerate(example_inputs):
        name = _input_name(value, i, len(example_inputs), input_names)
        data = value.data if isinstance(value, Variable) else np.asarray(value)
        differentiable = data.dtype.kind == "f" and not INDEX_NAME.search(name)   # rope_freqs
        leaf = create_leaf(data, requires_grad=differentiable, name=name)   # recorded, even for data
        if not (isinstance(value, Variable) and value.requires_grad):
            no_grad.add(name)
        leaves.append(leaf)
        names[id(leaf)] = name
    for name, p in param_vars.items():
        names[id(p)] = name
    result = fn(*leaves)
    outputs = list(result) if isinstance(result, (tuple, list)) else [result]
    if output_names is None:
        output_names = ["loss"] if len(outputs) == 1 else [f"out{i}" for i in range(len(outputs))]
    graph = Graph(inputs=[names[id(v)] for v in leaves], params=list(param_vars), no_grad=no_grad)
    for v, out_name in zip(outputs, output_names):
        if not isinstance(v, Variable):
            raise CaptureError(f"capture: fn returned {type(v).__name__}, not a Variable. "
                               f"Fix: return the minigrad result (e.g. the loss).")
        names.setdefault(id(v), out_name)
    for v in leaves + list(param_vars.values()):
        graph.shape_env[names[id(v)]] = TensorInfo(v.shape, v.dtype)
    for v in _topological(outputs):
        _record(graph, v, names)
    graph.outputs = [names[id(v)] for v in outputs]
    return graph


def named_params(params) -> dict:
    """name -> parameter, from a Module, a list of named Variables or a dict."""
    if params is None:
        return {}
    if hasattr(params, "parameters"):
        params = params.parameters()
    if isinstance(params, dict):
        return dict(params)
    found = {}
    for i, p in enumerate(params):
        found[p.name or f"param{i}"] = p
    return found


def _input_name(value, i: int, count: int, given) -> str:
    if given is not None:
        return given[i]
    if isinstance(value, Variable) and value.name:
        return value.name
    return "x" if count == 1 else f"x{i}"


def _topological(outputs: list) -> list:
    """Non-leaf Variables, each after the Variables it reads (iterative post-order walk).
    A secondary output of a multi-output op (ops/multi.py) comes after its op's main output."""
    order, done, stack = [], set(), [(v, False) for v in outputs]
    while stack:
        v, expanded = stack.pop()
        link = primary_of(v)
        if id(v) in done or (v.grad_fn is None and link is None):
            continue
        if expanded:
            done.add(id(v))
            order.append(v)
            continue
        stack.append((v, True))
        stack.extend((p, False) for p in reversed(_reads(v, link)))
    return order


def _reads(v: Variable, link) -> list:
    """What v depends on: its parents, minus its op's own linked outputs, plus its op's main output."""
    parents = [p for p in v.parents if (primary_of(p) or (None,))[0] is not v]
    return parents + [link[0]] if link is not None else parents


def _record(graph: Graph, v: Variable, names: dict) -> None:
    if primary_of(v) is not None:   # written by the record of its op's main output (named there)
        return
    node = v.grad_fn
    inputs = _reads(v, None)
    for x in inputs:
        if id(x) not in names:   # a leaf nobody named: a constant folded into the graph
            fresh = f"const{len(graph.constants)}"   # (a name already taken gets this prefix)
            names[id(x)] = x.name if x.name and x.name not in graph.shape_env else \
                (f"{fresh}.{x.name}" if x.name else fresh)
            graph.constants[names[id(x)]] = x.data
            graph.shape_env[names[id(x)]] = TensorInfo(x.shape, x.dtype)
    translate = CAPTURED.get(node.name)
    if translate is None:
        raise CaptureError(f"capture: the eager op '{node.name}' has no ahead-of-time form. "
                           f"Supported: {', '.join(sorted(CAPTURED))}. Fix: express it with these "
                           f"ops, or add it to minigrad.aot.capture.CAPTURED (with an executor "
                           f"kernel and a backward rule).")
    op_type, attrs, *more = translate(node, v, inputs)
    outputs = more[0] if more else [v]   # several: Variables and (label, TensorInfo) pairs
    k = len(graph.operations)
    op_id = f"{op_type}_{k}"
    if id(v) not in names:
        names[id(v)] = _output_name(v, op_id, [names[id(x)] for x in inputs], graph)
    out_names = []
    for out in outputs:
        if isinstance(out, Variable):
            if id(out) not in names:
                names[id(out)] = _free_name(out.name, f"{names[id(v)]}.{_label(node, out)}", graph)
            name, info = names[id(out)], TensorInfo(out.shape, out.dtype)
        else:
            label, info = out
            name = _free_name(None, f"{names[id(v)]}.{label}", graph)
        graph.shape_env[name] = info
        out_names.append(name)
    graph.operations.append(Operation(op_id, op_type, tuple(names[id(x)] for x in inputs),
                                      tuple(out_names), attrs))


def _label(node, out: Variable) -> str:
    labels = [k for k, ref in getattr(node, "linked_outputs", {}).items() if ref() is out]
    return labels[0] if labels else "out"


def _free_name(own, fallback: str, graph: Graph) -> str:
    """own if it is free, else fallback, else fallback with a number."""
    for name in (own, fallback):
        if name and name not in graph.shape_env:
            return name
    k = 1
    while f"{fallback}{k}" in graph.shape_env:
        k += 1
    return f"{fallback}{k}"


def _output_name(v: Variable, op_id: str, input_names: list, graph: Graph) -> str:
    """The Variable's own name; else the module's, read off its parameters ("layer0.weight" ->
    "layer0"); else the op id ("relu_1"). A name already taken falls through to the next."""
    modules = [n.rsplit(".", 1)[0] for n in input_names if n in graph.params and "." in n]
    for name in (v.name, *modules[:1], op_id):
        if name and name not in graph.shape_env:
            return name
    return op_id


def _same(op_type: str):
    return lambda node, v, inputs: (op_type, {})


def _matmul(node, v, inputs):
    shapes = [x.shape for x in inputs[:2]]
    if any(len(s) != 2 for s in shapes):
        raise CaptureError(f"capture: {node.name} of shapes {shapes[0]} and {shapes[1]}: the aot "
                           f"matmul takes 2-D operands. Fix: reshape to (rows, features) first.")
    return ("matmul_bias" if len(inputs) == 3 else "matmul"), {"transpose": "NN"}


def _add(node, v, inputs):
    a, b = inputs
    if b.ndim == 1 and a.ndim >= 2 and b.shape[0] == a.shape[-1]:
        return "bias_add", {}   # x + b with b along the last axis: the layer's bias
    return "add", {}


def _reduce(op_type):
    def translate(node, v, inputs):
        return op_type, {"axis": node.axes, "keepdims": node.keepdims}
    return translate


def _along_axis(op_type):
    def translate(node, v, inputs):
        return op_type, {"axis": node.axis}
    return translate


# eager op name -> function(node, output Variable, inputs) giving (IR op type, attrs)
CAPTURED = {
    "add": _add, "sub": _same("subtract"), "mul": _same("multiply"), "div": _same("divide"),
    "neg": _same("neg"), "exp": _same("exp"), "log": _same("log"), "tanh": _same("tanh"),
    "sigmoid": _same("sigmoid"), "relu": _same("relu"), "silu": _same("silu"),
    "gelu": _same("gelu"),
    "pow": lambda node, v, inputs: ("pow", {"exponent": node.exponent}),
    "matmul": _matmul, "linear": _matmul,
    "sum": _reduce("sum"), "mean": _reduce("mean"),
    "reshape": lambda node, v, inputs: ("view", {"shape": tuple(v.shape)}),
    "transpose": lambda node, v, inputs: ("transpose", {"axes": node.axes}),
    "softmax": _along_axis("softmax"), "log_softmax": _along_axis("log_softmax"),
    "cross_entropy": _same("cross_entropy"), "mse": _same("mse"),
    "broadcast_to": lambda node, v, inputs: ("broadcast_to", {"shape": tuple(v.shape)}),
}
CAPTURED.update({name: _same(name) for name in (   # mixture of experts (single-output ops)
    "moe_softmax", "moe_sigmoid", "moe_unpermute", "moe_grouped_gemm_gate_up",
    "moe_grouped_gemm_down")})
CAPTURED["moe_topk"] = lambda node, v, inputs: (          # (weights, indices)
    "moe_topk", {"k": node.k}, [v, linked_output(node, "indices")])
CAPTURED["moe_permute"] = lambda node, v, inputs: (       # (x_perm, scatter_indices, expert_offsets)
    "moe_permute", {"num_experts": node.num_experts},
    [v, linked_output(node, "scatter_indices"), linked_output(node, "expert_offsets")])


# -- transformer ops (ops/transformer.py); rstd and lse are outputs only backward reads --------
def _rmsnorm(node, v, inputs):
    return "rmsnorm", {"eps": node.eps}, [v, ("rstd", TensorInfo(v.shape[:-1], v.dtype))]


def _fused_residual_rmsnorm(node, v, inputs):
    residual_out = linked_output(node, "residual_out", ("residual_out", TensorInfo(v.shape, v.dtype)))
    return "fused_residual_rmsnorm", {"eps": node.eps}, [
        residual_out, v, ("rstd", TensorInfo(v.shape[:-1], v.dtype))]


def _attention(node, v, inputs):
    b, t, h, _ = v.shape
    return "attention", {"causal": node.causal}, [v, ("lse", TensorInfo((b, h, t), v.dtype))]


CAPTURED.update({
    "embedding": _same("embedding"), "swiglu": _same("swiglu"), "rope": _same("rope"),
    "fused_lm_head_loss": _same("fused_lm_head_loss"), "rmsnorm": _rmsnorm,
    "fused_residual_rmsnorm": _fused_residual_rmsnorm, "attention": _attention,
})


def _flash_attention(node, v, inputs):
    b, t, h, _ = v.shape
    return "flash_attention", {"causal": node.causal}, [v, ("lse", TensorInfo((b, h, t), v.dtype))]


def _qkv_qk_norm_rope(node, v, inputs):
    rstd = TensorInfo(v.shape[:2] + v.shape[3:4], v.dtype)
    return "qkv_qk_norm_rope", {"eps": node.eps}, [v, ("q_rstd", rstd), ("k_rstd", rstd)]


CAPTURED.update({"flash_attention": _flash_attention, "qkv_qk_norm_rope": _qkv_qk_norm_rope})
