"""The document an AotView draws: a forward Graph, the backward Graph derived from it, the
derivation's steps and the memory plan, as plain JSON-ready data (no widget code here).

Every drawn node gets a short id (forward tensors t0.., forward operations o0.., backward
operations b0.., gradient tensors g0..); user names stay in `label` and are only ever text. A
backward node carries `step`, the derivation step that emitted it, so the view can replay the
derivation by hiding what later steps made. Edges: `input` (a tensor an operation reads),
`output` (a tensor it writes), `saved` (a forward tensor a backward operation reads through
"saved.<name>") and `param` (a forward tensor, a parameter, read directly).
"""
from __future__ import annotations

import numpy as np

from .ir import SAVED_PREFIX, Graph, detached_tensors

SCHEMA, VERSION = "minigrad-aot", 1


def _info(graph: Graph, name: str) -> dict:
    info = graph.shape_env.get(name)
    if info is None:
        return {"shape": None, "dtype": None, "nbytes": None}
    return {"shape": [int(n) for n in info.shape], "dtype": np.dtype(info.dtype).name,
            "nbytes": int(info.nbytes)}


def _why_no_grad(forward: Graph, name: str, stop: set, has_grad: bool) -> str | None:
    """Why a forward tensor gets no gradient (None when it gets one), in a student's words."""
    if has_grad:
        return None
    info = forward.shape_env.get(name)
    if info is not None and not np.issubdtype(np.dtype(info.dtype), np.floating):
        return f"{np.dtype(info.dtype).name} is not a differentiable dtype"
    if name in stop:
        return "a stop-gradient tensor (frozen)"
    if name in forward.no_grad:
        return "data: no gradient is wanted for it"
    if name in forward.constants:
        return "a constant"
    return "it does not lead to the loss through differentiable operations"


def _forward_nodes(forward: Graph, backward: Graph, grad_prefix: str, stop: set):
    """Nodes and edges of the forward graph; the map from tensor name to node id."""
    produced = {name for op in backward.operations for name in op.outputs}
    produced |= set(backward.inputs)
    # with accumulate_grads=False a gradient may exist only as pieces d_x_from_<op>
    produced |= {name.split("_from_")[0] for name in produced}
    tensor_id, nodes, edges = {}, [], []

    def tensor(name: str, role: str) -> str:
        if name not in tensor_id:
            tensor_id[name] = f"t{len(tensor_id)}"
            has_grad = grad_prefix + name in produced
            nodes.append({"id": tensor_id[name], "type": "tensor", "graph": "forward",
                          "name": name, "label": name, "role": role, **_info(forward, name),
                          "saved": name in backward.save,
                          "why_no_grad": _why_no_grad(forward, name, stop, has_grad)})
        return tensor_id[name]

    for name in forward.inputs:
        tensor(name, "input")
    for name in forward.params:
        tensor(name, "param")
    for name in forward.constants:
        tensor(name, "constant")
    for k, op in enumerate(forward.operations):
        op_id = f"o{k}"
        reads = [tensor(name, "activation") for name in op.inputs]
        writes = [tensor(name, "output" if name in forward.outputs else "activation")
                  for name in op.outputs]
        needs = any(grad_prefix + name in produced for name in op.inputs)
        nodes.append({"id": op_id, "type": "op", "graph": "forward", "name": op.id,
                      "label": op.type, "op": op.type, "text": op.text(), "attrs": _jsonable(op.attrs),
                      "inputs": reads, "outputs": writes, "needs_grad": needs})
        edges += [{"source": t, "target": op_id, "kind": "input"} for t in reads]
        edges += [{"source": op_id, "target": t, "kind": "output"} for t in writes]
    return nodes, edges, tensor_id


def _jsonable(attrs: dict) -> dict:
    out = {}
    for key, value in attrs.items():
        if isinstance(value, (bool, int, float, str)) or value is None:
            out[str(key)] = value
        elif isinstance(value, (tuple, list)):
            out[str(key)] = [v if isinstance(v, (bool, int, float, str)) else repr(v) for v in value]
        else:
            out[str(key)] = repr(value)
    return out


def _grad_info(forward: Graph, backward: Graph, name: str, grad_prefix: str) -> dict:
    """A gradient has the shape of its tensor: d_x and its pieces d_x_from_<op> are x-shaped."""
    if name in backward.shape_env:
        return _info(backward, name)
    base = name[len(grad_prefix):] if name.startswith(grad_prefix) else name
    return _info(forward, base.split("_from_")[0])


def _backward_nodes(forward: Graph, backward: Graph, tensor_id: dict, op_step: dict,
                    grad_prefix: str):
    """Nodes and edges of the backward graph. op_step: backward operation id -> the derivation
    step that emitted it."""
    grad_id, nodes, edges = {}, [], []
    producer = {name: op.id for op in backward.operations for name in op.outputs}

    def grad(name: str, step: int) -> str:
        if name not in grad_id:
            grad_id[name] = f"g{len(grad_id)}"
            # A piece: one consumer's share of a fan-out gradient, summed later into d_x.
            piece = "_from_" in name or "_accum" in name or not name.startswith(grad_prefix)
            nodes.append({"id": grad_id[name], "type": "tensor", "graph": "backward", "name": name,
                          "label": name, "role": "grad", "piece": piece, "step": step,
                          **_grad_info(forward, backward, name, grad_prefix)})
        return grad_id[name]

    # the seed d_loss appears with the first operation that reads it
    first = min(op_step.values(), default=0)
    for name in backward.inputs:
        grad(name, first)
    for k, op in enumerate(backward.operations):
        op_id, step = f"b{k}", op_step.get(op.id, 0)
        reads, saved_reads = [], []
        for name in op.inputs:
            if name.startswith(SAVED_PREFIX):
                source = name[len(SAVED_PREFIX):]
                saved_reads.append(source)
                if source in tensor_id:
                    edges.append({"source": tensor_id[source], "target": op_id, "kind": "saved"})
                reads.append(tensor_id.get(source))
            elif name in tensor_id and name not in producer and name not in backward.inputs:
                edges.append({"source": tensor_id[name], "target": op_id, "kind": "param"})
                reads.append(tensor_id[name])
            else:
                reads.append(grad(name, step))
                edges.append({"source": grad_id[name], "target": op_id, "kind": "input"})
        writes = [grad(name, step) for name in op.outputs]
        edges += [{"source": op_id, "target": t, "kind": "output"} for t in writes]
        nodes.append({"id": op_id, "type": "op", "graph": "backward", "name": op.id,
                      "label": op.type, "op": op.type, "text": op.text(),
                      "attrs": _jsonable(op.attrs), "inputs": [r for r in reads if r],
                      "outputs": writes, "reads_saved": saved_reads, "step": step})
    return nodes, edges


def _normalize_steps(steps, backward: Graph) -> list:
    """The derivation as [{kind, op (forward operation id or None), rule, emitted (backward
    operation ids), text}]: derive_backward_graph's DerivationSteps (producer map, needs_grad,
    one apply_rule or skip per forward operation, accumulations, required saves). Without
    them, each backward operation is one step."""
    if steps is None:
        steps = [{"kind": "emit", "text": f"emit {op.text()}", "emitted": [op]}
                 for op in backward.operations]
        steps.append({"kind": "required_saves", "text": f"save list: {', '.join(backward.save) or 'empty'}"})
    out = []
    for step in steps:
        get = step.get if isinstance(step, dict) else lambda name, s=step: getattr(s, name, None)
        out.append({"kind": get("kind") or "step", "op": get("forward_op"), "rule": get("rule"),
                    "emitted": [getattr(op, "id", op) for op in (get("emitted") or [])],
                    "text": str(get("text") or get("kind"))})
    return out


def aot_document(forward: Graph, backward: Graph, *, steps=None, plan=None, options=None,
                 title: str | None = None) -> dict:
    """The JSON-ready document of one derivation (see the module docstring)."""
    grad_prefix = getattr(options, "grad_prefix", "d_")
    stop = set(getattr(options, "stop_gradients", ()) or ()) | detached_tensors(forward)
    nodes, edges, tensor_id = _forward_nodes(forward, backward, grad_prefix, stop)
    fwd_op_id = {op.id: f"o{k}" for k, op in enumerate(forward.operations)}
    derivation = _normalize_steps(steps, backward)
    op_step = {}
    for k, step in enumerate(derivation):
        step["op"] = fwd_op_id.get(step["op"], None) if step["op"] is not None else None
        for op_name in step["emitted"]:
            op_step[op_name] = k
    back_nodes, back_edges = _backward_nodes(forward, backward, tensor_id, op_step, grad_prefix)
    back_id = {n["name"]: n["id"] for n in back_nodes if n["type"] == "op"}
    for step in derivation:
        step["emitted"] = [back_id[name] for name in step["emitted"] if name in back_id]
    applied = {step["op"] for step in derivation if step["kind"] == "apply_rule"}
    for node in nodes:
        if node["type"] == "op" and steps is not None:
            node["needs_grad"] = node["id"] in applied
    for node in back_nodes:
        if node["type"] == "op":
            step = derivation[node["step"]]
            node["from"], node["rule"] = step["op"], step["rule"]
            node["kind"] = "accumulate" if step["kind"] == "accumulate" else "rule"
    return {"schema": SCHEMA, "version": VERSION, "title": title,
            "nodes": nodes + back_nodes, "edges": edges + back_edges, "steps": derivation,
            "save": list(backward.save), "forward_text": forward.text(),
            "backward_text": backward.text(),
            "plan": plan_document(plan, {**tensor_id, **{n["name"]: n["id"] for n in back_nodes
                                                          if n["type"] == "tensor"}}),
            "initial_frame": 0}


def plan_document(plan, ids: dict) -> dict | None:
    """A MemoryPlan (plan.py) as the strip under the graphs: one live range per tensor over the
    steps of forward then backward (None without a plan). ids: tensor name -> drawn node id."""
    if plan is None:
        return None
    return {"timeline": list(plan.steps), "backward_start": int(plan.n_forward),
            "ranges": [{"tensor": r.name, "node": ids.get(r.name), "kind": r.kind,
                        "nbytes": int(r.nbytes), "start": int(r.start), "end": int(r.end)}
                       for r in plan.ranges],
            "peak_bytes": int(plan.peak_bytes), "peak_at": int(plan.peak_step),
            "saved_bytes": int(plan.saved_bytes), "policy": getattr(plan, "policy", None)}
