"""derive_backward_graph: the backward Graph of a forward Graph, written once, before any value exists.

The five steps of the source design, each one short function below:
  1. producer map          which operation writes each tensor (inputs and params: nobody)
  2. needs_grad            tensors on a path from a differentiable source to the loss
  3. reverse processing    walk the operations from the loss back, let each op's rule write its ops
                           (operations whose outputs need no gradient are never emitted: DCE)
  4. accumulation          a tensor read by several operations gets pieces d_x_from_<op>,
                           summed into one d_x
  5. required saves        the forward tensors backward reads through "saved.<name>"
`derive_backward_graph(..., steps=True)` also returns the derivation as a list of DerivationStep.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ..errors import BackwardError
from ..gcpause import gc_paused
from .ir import Graph, Operation, detached_tensors, is_saved, unsaved
from .rules import BackwardRuleContext, BackwardRuleRegistry, DeriveError, registry as default_registry

EXTERNAL = -1   # the producer of inputs, params and constants: they come from outside the graph
# Index-like tensors have no gradient even when stored as floats (the source design's list).
INDEX_NAME = re.compile(r"(rope_freqs|scatter_indices|routing_indices|gather_indices|"
                        r"expert_offsets|position_ids)$")


@dataclass
class DeriveBackwardOptions:
    loss_name: str = "loss"            # the tensor to differentiate
    auto_save: bool = True             # save list = the saved. references of the rules (+ extra)
    extra_saves: tuple = ()            # forward tensors to keep anyway (to inspect, or to plan)
    accumulate_grads: bool = True      # sum fan-out pieces into one d_x (False: keep the pieces)
    grad_prefix: str = "d_"            # the gradient of x is named grad_prefix + x
    stop_gradients: tuple = ()         # tensors (frozen params, detached values) with no gradient
    create_graph: bool = False         # refused: a derived backward is not differentiated again

    def __post_init__(self):
        if self.create_graph:
            raise BackwardError(
                "DeriveBackwardOptions(create_graph=True): the ahead-of-time engine has no "
                "create_graph. Rule: it derives one backward graph from one rule per forward op, "
                "and the ops that graph is made of (tanh_backward, matmul with transposes, "
                "sum_to_shape, ...) have no rules of their own, so a derived gradient cannot be "
                "differentiated again. Fix: take higher-order gradients with the eager engine, "
                "mg.grad(..., create_graph=True).")


@dataclass
class DerivationStep:
    """One step of the derivation, for printing and for AotView's replay."""
    kind: str             # producer_map | needs_grad | apply_rule | skip | accumulate | required_saves
    text: str             # one sentence a student can read
    forward_op: str | None = None          # the forward operation's id (apply_rule, skip)
    rule: str | None = None                # the rule's function name (apply_rule)
    emitted: list = field(default_factory=list)   # Operations added to the backward graph
    tensors: list = field(default_factory=list)   # the tensor names the step is about


@gc_paused()   # (a build of records and no cycle: see gcpause.py)
def derive_backward_graph(forward: Graph, options: DeriveBackwardOptions | None = None, *,
                          registry: BackwardRuleRegistry | None = None, steps: bool = False):
    """The backward Graph of forward (and, with steps=True, the list of DerivationStep)."""
    opts = options or DeriveBackwardOptions()
    rules = registry or default_registry
    log: list = []
    producer = build_producer_map(forward, opts, log)
    needs = propagate_needs_grad(forward, opts, producer, log)
    backward = process_in_reverse(forward, opts, needs, rules, log)
    required = compute_required_saves(backward)
    backward.save = _save_list(forward, opts, required)
    log.append(DerivationStep("required_saves", f"backward reads {len(required)} forward tensors "
                              f"through saved.: {', '.join(required) or 'none'}; save list: "
                              f"{', '.join(backward.save) or 'empty'}", tensors=list(backward.save)))
    return (backward, log) if steps else backward


def build_producer_map(forward: Graph, opts, log: list) -> dict:
    """Step 1: tensor -> index of the operation that writes it (EXTERNAL for inputs and params)."""
    producer = {name: EXTERNAL for name in (*forward.inputs, *forward.params, *forward.constants)}
    for i, op in enumerate(forward.operations):
        for t in op.outputs:
            if t in producer:
                raise DeriveError(f"tensor '{t}' is written twice ({op.id} and before). Rule: an IR "
                                  f"graph assigns each name once. Fix: give {op.id}'s output a new name.")
            producer[t] = i
    _check_gradient_names(producer, opts.grad_prefix)
    if opts.loss_name not in producer:
        raise DeriveError(f"loss_name '{opts.loss_name}' is not a tensor of the forward graph "
                          f"(outputs: {forward.outputs}). Fix: DeriveBackwardOptions(loss_name=...).")
    info = forward.shape_env.get(opts.loss_name)
    if info is not None and int(np.prod(info.shape)) != 1:
        raise DeriveError(f"loss '{opts.loss_name}' has shape {info.shape}. Rule: backward starts "
                          f"from a scalar (d_loss = 1). Fix: reduce it first, e.g. .sum() or .mean().")
    for name in (*opts.stop_gradients, *opts.extra_saves):
        if name not in producer:
            raise DeriveError(f"'{name}' (in stop_gradients or extra_saves) is not a tensor of the "
                              f"forward graph. Fix: use one of {sorted(producer)}.")
    log.append(DerivationStep("producer_map", f"{len(forward.operations)} operations write "
                              f"{len(producer) - len(forward.inputs) - len(forward.params) - len(forward.constants)} "
                              f"tensors; inputs and params come from outside", tensors=list(producer)))
    return producer


def _check_gradient_names(tensors: dict, prefix: str) -> None:
    """The gradient of t is named prefix + t: no forward tensor may already have that name
    (a parameter "d_loss" would be read as the loss's gradient, or overwritten by it)."""
    for t in tensors:
        if prefix + t in tensors:
            raise DeriveError(f"the forward graph has a tensor '{t}' and a tensor '{prefix + t}', "
                              f"the name of {t}'s gradient. Rule: no forward tensor is named like "
                              f"a gradient ('{prefix}' + another tensor's name). Fix: rename "
                              f"'{prefix + t}' (Variable.name, input_names or the params dict), "
                              f"or derive with DeriveBackwardOptions(grad_prefix=...) of another "
                              f"prefix.")


def is_differentiable(forward: Graph, name: str, stopped: set) -> bool:
    """Floats only, no index tensors, nothing on the stop-gradient list."""
    info = forward.shape_env.get(name)
    if info is not None and np.dtype(info.dtype).kind != "f":
        return False
    return name not in stopped and not INDEX_NAME.search(name)


def propagate_needs_grad(forward: Graph, opts, producer: dict, log: list) -> set:
    """Step 2: from the loss back (work queue), intersected with what depends on a source."""
    stopped = set(opts.stop_gradients) | set(forward.no_grad) | set(forward.constants) | \
        detached_tensors(forward)
    if opts.loss_name in stopped:
        raise _stopped_loss(forward, opts)
    diff = {t for t in producer if is_differentiable(forward, t, stopped)}
    reaches_loss, queue = {opts.loss_name} & diff, [opts.loss_name]
    while queue:
        index = producer[queue.pop()]
        if index == EXTERNAL:
            continue
        for t in forward.operations[index].inputs:
            if t in diff and t not in reaches_loss:
                reaches_loss.add(t)
                queue.append(t)
    depends = {t for t in (*forward.inputs, *forward.params) if t in diff}
    for op in forward.operations:   # forward order: a source upstream means a gradient is wanted
        if any(t in depends for t in op.inputs):
            depends.update(t for t in op.outputs if t in diff)
    needs = reaches_loss & depends
    skipped = sorted(t for t in producer if t not in diff)
    log.append(DerivationStep("needs_grad", f"{len(needs)} tensors need a gradient; no gradient "
                              f"for {', '.join(skipped) or 'none'} (integer, index, stopped or "
                              f"constant)", tensors=sorted(needs)))
    return needs


def _stopped_loss(forward: Graph, opts) -> DeriveError:
    """A loss that stops the gradient itself: like eager's backward() on a value that does not
    require grad, refused (the walk back from it would start at a tensor with no gradient)."""
    loss = opts.loss_name
    what = "a detached value (stop_gradient: loss.detach() in the captured function)" \
        if loss in detached_tensors(forward) else "a constant, a data input or in stop_gradients"
    return DeriveError(f"loss '{loss}' is {what}, so no gradient flows back from it. Rule: "
                       f"backward starts from a loss computed with gradients (eager refuses "
                       f"backward() on it too). Fix: return the loss itself, not loss.detach(), "
                       f"or derive from another output (DeriveBackwardOptions(loss_name=...)).")


def process_in_reverse(forward: Graph, opts, needs: set, rules, log: list) -> Graph:
    """Steps 3 and 4: rules from the loss back, fan-out pieces summed as they arrive."""
    emitted, expected = _contributions(forward, needs)
    grads = _Gradients(forward, opts, expected, log)
    readable = _readable(forward)
    for op in reversed(forward.operations):
        if op.id not in emitted:   # dead code, or a path no gradient flows along
            why = "no input needs a gradient" if any(t in needs for t in op.outputs) else \
                  "its outputs do not reach the loss (or need no gradient)"
            log.append(DerivationStep("skip", f"{op.id} ({op.type}): nothing emitted, {why}",
                                      forward_op=op.id, tensors=list(op.outputs)))
            continue
        d_outputs = [grads.final(t, op) if t in needs else None for t in op.outputs]
        d_inputs = [grads.piece_name(t, op, i) if t in needs else None
                    for i, t in enumerate(op.inputs)]
        rule = rules.rule_for(op)
        ctx = BackwardRuleContext(op, d_outputs, d_inputs, forward, grads.counter, readable[1])
        ops = list(rule(ctx))
        grads.backward.shape_env.update(ctx.new_shapes)
        _check_rule_output(op, rule, ops, d_inputs, readable, grads.known)
        grads.backward.operations += ops
        written = [n for n in d_inputs if n]
        log.append(DerivationStep("apply_rule", f"{op.id} ({op.type}): rule {rule.__name__} "
                                  f"emitted {len(ops)} op(s) for {', '.join(written)}",
                                  forward_op=op.id, rule=rule.__name__, emitted=ops, tensors=written))
        for t, name in zip(op.inputs, d_inputs):
            if name is not None:
                grads.add_piece(t, name)
    return grads.finish(needs)


def _contributions(forward: Graph, needs: set) -> tuple:
    """The ops backward runs a rule for, and how many gradient pieces each tensor will receive."""
    emitted = {op.id for op in forward.operations
               if any(t in needs for t in op.outputs) and any(t in needs for t in op.inputs)}
    expected: dict = {}
    for op in forward.operations:
        if op.id in emitted:
            for t in op.inputs:
                if t in needs:
                    expected[t] = expected.get(t, 0) + 1
    return emitted, expected


class _Gradients:
    """The backward graph being written, and each tensor's gradient so far (name, pieces)."""

    def __init__(self, forward: Graph, opts, expected: dict, log: list):
        self.forward, self.opts, self.expected, self.log = forward, opts, expected, log
        d_loss = opts.grad_prefix + opts.loss_name
        self.backward = Graph(inputs=[d_loss], name="backward", shape_env=dict(forward.shape_env))
        self.backward.shape_env[d_loss] = forward.shape_env.get(opts.loss_name)
        self.grad_of = {opts.loss_name: d_loss}   # tensor -> its (current) gradient's name
        self.pieces: dict = {}
        self.counter = [0]                        # the op counter, shared with the rules
        self.known = {d_loss}                     # backward tensors written so far

    def piece_name(self, t: str, op: Operation, i: int) -> str:
        """d_t when t has one consumer; d_t_from_<op> for each piece of a fan-out."""
        if self.expected[t] == 1:
            return self.opts.grad_prefix + t
        twice = op.inputs.count(t) > 1
        return f"{self.opts.grad_prefix}{t}_from_{op.id}" + (f"_{i}" if twice else "")

    def add_piece(self, t: str, name: str) -> None:
        """Step 4: the second and later pieces of d_t are added to the running sum as they arrive."""
        self.backward.shape_env[name] = self.forward.shape_env.get(t)
        got = self.pieces.setdefault(t, [])
        got.append(name)
        if len(got) == 1:
            self.grad_of[t] = name
            return
        if not self.opts.accumulate_grads:
            return
        p = self.opts.grad_prefix
        total = p + t if len(got) == self.expected[t] else f"{p}{t}_accum{len(got) - 1}"
        self.counter[0] += 1
        acc = Operation(f"accumulate_{self.counter[0]}", "add", (self.grad_of[t], name), (total,))
        self.backward.operations.append(acc)
        self.backward.shape_env[total] = self.backward.shape_env.get(name)
        self.known.add(total)
        self.grad_of[t] = total
        self.log.append(DerivationStep("accumulate", f"{t} is read by {self.expected[t]} operations: "
                                       f"{total} = {acc.inputs[0]} + {name}",
                                       emitted=[acc], tensors=[t, total]))

    def final(self, t: str, op: Operation) -> str:
        """The whole gradient of t, which op's rule is about to read."""
        if self.expected.get(t, 1) > 1 and not self.opts.accumulate_grads:
            raise DeriveError(f"{op.id} ({op.type}) needs the gradient of its output '{t}', which is "
                              f"read by {self.expected[t]} operations; with accumulate_grads=False "
                              f"its pieces {self.pieces.get(t)} are never summed. Fix: "
                              f"accumulate_grads=True (pieces can stay separate only for parameters "
                              f"and inputs).")
        return self.grad_of[t]

    def finish(self, needs: set) -> Graph:
        """Outputs: each param's and input's gradient (its pieces, when they are not summed)."""
        b, f = self.backward, self.forward
        for t in (*f.params, *f.inputs):
            if t in needs:
                unsummed = self.expected.get(t, 0) > 1 and not self.opts.accumulate_grads
                b.outputs += list(self.pieces[t]) if unsummed else [self.grad_of[t]]
        read = {t for o in b.operations for t in o.inputs}
        b.params = [t for t in f.params if t in read]
        b.constants = {k: v for k, v in f.constants.items() if k in read}
        return b


def _readable(forward: Graph) -> tuple:
    """(forward tensors a rule may read saved, tensors it may read directly)."""
    activations = {t for o in forward.operations for t in o.outputs} | set(forward.inputs)
    return activations, set(forward.params) | set(forward.constants)


def _check_rule_output(op, rule, ops, d_inputs, readable_sets, known: set) -> None:
    """Unknown names, None names, unsaved activations and names written twice are bugs of the
    rule: say which, and the fix."""
    name = getattr(rule, "__name__", repr(rule))
    forward_tensors, readable = readable_sets
    for b in ops:
        if not isinstance(b, Operation):
            raise DeriveError(f"rule {name} for {op.id} ({op.type}) returned {b!r}, not an "
                              f"Operation. Fix: build operations with ctx.op(type, inputs, outputs).")
        _check_names_are_strings(f"rule {name} for {op.id} ({op.type})", op, b, d_inputs)
        for t in b.inputs:
            if t in known or t in readable or (is_saved(t) and unsaved(t) in forward_tensors):
                continue
            if t in forward_tensors:
                raise DeriveError(f"rule {name} for {op.id} ({op.type}): backward op {b.id} reads "
                                  f"forward activation '{t}' directly. Rule: activations reach "
                                  f"backward only through saves. Fix: read saved_ref('{t}') "
                                  f"(\"saved.{t}\") or ctx.read('{t}').")
            raise DeriveError(f"rule {name} for {op.id} ({op.type}): backward op {b.id} reads "
                              f"unknown tensor '{t}'. Readable: the output gradients "
                              f"ctx.d_outputs, "
                              f"earlier outputs of the rule, parameters, and saved.<forward "
                              f"tensor>. Fix: check the name's spelling in {b.text()}.")
        for t in b.outputs:
            if t in known or t in forward_tensors or t in readable:
                raise DeriveError(f"rule {name} for {op.id} ({op.type}): backward op {b.id} writes "
                                  f"'{t}', which already names a forward or backward tensor. Rule: "
                                  f"a graph writes each name once. Fix: name intermediates with "
                                  f"ctx.temp(label, like=...); write input i's gradient to "
                                  f"ctx.d_inputs[i].")
        known.update(b.outputs)
    missing = [n for n in d_inputs if n is not None and n not in known]
    if missing:
        raise DeriveError(f"rule {name} for {op.id} ({op.type}) did not write {missing}. Rule: a "
                          f"rule writes every ctx.d_inputs[i] that is not None. Fix: emit an op "
                          f"with that output (or check ctx.needs_grad(i) before skipping it).")


def _check_names_are_strings(where: str, op, b, d_inputs) -> None:
    """None where a tensor name belongs: the rule used the gradient of a tensor that needs none."""
    no_grad = ", ".join(f"{i} ('{t}')" for i, (t, d) in enumerate(zip(op.inputs, d_inputs)) if d is None)
    because = (f"ctx.d_inputs[i] is None for an input that needs no gradient, here input "
               f"{no_grad}" if no_grad else "every input of this op needs a gradient, so the "
               "name came from elsewhere in the rule (ctx.d_outputs[j] is None for an output "
               "that needs none)")
    for side, names in (("writes", b.outputs), ("reads", b.inputs)):
        bad = [t for t in names if not isinstance(t, str)]
        if bad:
            raise DeriveError(f"{where}: backward op {b.id} ({b.type}) {side} a tensor named "
                              f"{bad[0]!r} ({b.text()}): {because}. Rule: a rule emits nothing "
                              f"for an input that needs no gradient. Fix: check ctx.needs_grad(i) "
                              f"before emitting the op that writes or reads ctx.d_inputs[i].")


def compute_required_saves(backward: Graph) -> list:
    """Step 5: forward tensors read through "saved.", unique, in order of first reference."""
    seen: dict = {}
    for op in backward.operations:
        for t in op.inputs:
            if is_saved(t):
                seen.setdefault(unsaved(t), None)
    return list(seen)


def _save_list(forward: Graph, opts, required: list) -> list:
    chosen = list(required) if opts.auto_save else []
    for t in opts.extra_saves:
        if t not in chosen:
            chosen.append(t)
    return chosen


def dead_code_elimination(forward: Graph, keep=None) -> Graph:
    """A copy of forward without the operations whose outputs reach none of keep (default outputs)."""
    live = set(keep or forward.outputs)
    kept = []
    for op in reversed(forward.operations):
        if any(t in live for t in op.outputs):
            kept.append(op)
            live.update(op.inputs)
    return Graph(inputs=list(forward.inputs), params=list(forward.params), operations=kept[::-1],
                 outputs=list(forward.outputs), shape_env=dict(forward.shape_env),
                 constants=dict(forward.constants), no_grad=set(forward.no_grad), name=forward.name)
