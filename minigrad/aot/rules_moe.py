"""Backward rules of the mixture-of-experts ops (each saves what its rule lists).

Index tensors (indices, scatter_indices, expert_offsets) never get a gradient: they are
integers, and derive also skips them by name (derive.INDEX_NAME). A rule reads them through
ctx.read like any forward tensor, so they appear in the save list when backward needs them.
"""
from __future__ import annotations

from .rules import rule, saved_ref


@rule("moe_softmax")
def moe_softmax_rule(ctx):
    """probs = softmax(logits) per token: d_logits = probs * (d_probs - sum(d_probs * probs));
    saves probs."""
    return [ctx.op("softmax_backward", [ctx.d_output, saved_ref(ctx.fwd_op.outputs[0])],
                   [ctx.d_inputs[0]], axis=-1)]


@rule("moe_sigmoid")
def moe_sigmoid_rule(ctx):
    """probs = sigmoid(logits): d_logits = d_probs * probs * (1 - probs); saves probs."""
    return [ctx.op("sigmoid_backward", [ctx.d_output, saved_ref(ctx.fwd_op.outputs[0])],
                   [ctx.d_inputs[0]])]


@rule("moe_topk")
def moe_topk_rule(ctx):
    """(weights, indices) = topk(probs): d_probs = zeros, d_weights[n, j] scattered to column
    indices[n, j] of row n; saves probs (for d_probs' shape) and indices."""
    probs = ctx.fwd_op.inputs[0]
    indices = ctx.fwd_op.outputs[1]
    return [ctx.op("moe_topk_backward", [ctx.d_outputs[0], ctx.read(probs), ctx.read(indices)],
                   [ctx.d_inputs[0]])]


@rule("moe_permute")
def moe_permute_rule(ctx):
    """x_perm[s[n*K+j]] = x[n]: d_x[n] = sum_j d_x_perm[s[n*K+j]] (the inverse permutation, the K
    copies summed); saves scatter_indices."""
    x = ctx.fwd_op.inputs[0]
    scatter = ctx.fwd_op.outputs[1]
    return [ctx.op("moe_permute_backward", [ctx.d_outputs[0], ctx.read(scatter)], [ctx.d_inputs[0]],
                   n_tokens=ctx.shape(x)[0])]


@rule("moe_grouped_gemm_gate_up", "moe_grouped_gemm_down")
def moe_grouped_gemm_rule(ctx):
    """out[rows of e] = x[rows of e] @ W[e]: d_x = d_out @ W[e]^T, d_W[e] = x^T @ d_out per expert;
    saves x, W (when it is an activation) and expert_offsets, the index the rows are grouped by."""
    x, weight, offsets = ctx.fwd_op.inputs
    ops = []
    if ctx.needs_grad(0):
        ops.append(ctx.op("moe_grouped_gemm_backward_x",
                          [ctx.d_output, ctx.read(weight), ctx.read(offsets)], [ctx.d_inputs[0]]))
    if ctx.needs_grad(1):
        ops.append(ctx.op("moe_grouped_gemm_backward_weight",
                          [ctx.d_output, ctx.read(x), ctx.read(offsets)], [ctx.d_inputs[1]]))
    return ops


@rule("moe_unpermute")
def moe_unpermute_rule(ctx):
    """out[n] = sum_j w[n, j] rows[s[n*K+j]]: d_rows[s[n*K+j]] = w[n, j] d_out[n],
    d_w[n, j] = <d_out[n], rows[s[n*K+j]]>; saves expert_out, routing_weights, scatter_indices."""
    expert_out, weights, scatter = ctx.fwd_op.inputs
    ops = []
    if ctx.needs_grad(0):
        ops.append(ctx.op("moe_unpermute_backward_expert_out",
                          [ctx.d_output, ctx.read(weights), ctx.read(scatter)], [ctx.d_inputs[0]]))
    if ctx.needs_grad(1):
        ops.append(ctx.op("moe_unpermute_backward_weights",
                          [ctx.d_output, ctx.read(expert_out), ctx.read(scatter)],
                          [ctx.d_inputs[1]]))
    return ops
