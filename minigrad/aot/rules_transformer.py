"""Backward rules of the transformer ops (each saves what its rule lists).

A backward op that writes several input gradients (rmsnorm_backward -> d_x, d_weight) writes a
throwaway temp for an input that needs none: one kernel call computes them together anyway.
Integer inputs (ids, position_ids, targets) and rope_freqs never get a gradient (dtype, name).
"""
from __future__ import annotations

from .rules import rule, saved_ref


@rule("embedding")
def embedding_rule(ctx):
    """y = weight[ids]: d_weight = dy rows scatter-added at ids; saves ids."""
    ids, weight = ctx.fwd_op.inputs
    if not ctx.needs_grad(1):
        return []
    return [ctx.op("embedding_backward", [ctx.d_output, ctx.read(ids)], [ctx.d_inputs[1]],
                   num_embeddings=ctx.shape(weight)[0])]


@rule("rmsnorm")
def rmsnorm_rule(ctx):
    """(y, rstd) = rmsnorm(x, w): d_x, d_w = rmsnorm_backward(dy, x, w, rstd); saves x, rstd."""
    x, weight = ctx.fwd_op.inputs
    rstd = ctx.fwd_op.outputs[1]
    return [ctx.op("rmsnorm_backward", [ctx.d_output, ctx.read(x), ctx.read(weight), saved_ref(rstd)],
                   ctx.grads_or_temps(0, 1))]


@rule("fused_residual_rmsnorm")
def fused_residual_rmsnorm_rule(ctx):
    """(r, y, rstd) = (x + res, rmsnorm(r)): d_x = d_res = dr + rmsnorm's dx, d_w from dy;
    saves residual_out, rstd."""
    x, residual, weight = ctx.fwd_op.inputs
    residual_out, y, rstd = ctx.fwd_op.outputs
    d_residual_out, d_y = ctx.d_outputs[0], ctx.d_outputs[1]
    wanted = [i for i in (0, 1) if ctx.needs_grad(i)]
    if d_y is None:   # only residual_out reaches the loss: it passes straight through
        ops = [op for i in wanted for op in ctx.to_input_shape(i, "identity", [d_residual_out])]
        if ctx.needs_grad(2):
            ops.append(ctx.op("zeros", [], [ctx.d_inputs[2]], shape=ctx.shape(weight),
                              dtype=str(ctx.shape_env[weight].dtype)))
        return ops
    # d_sum has residual_out's shape; an operand that was broadcast (a (1, D) residual) gets it
    # summed back to its own shape
    full = [i for i in wanted if ctx.shape(ctx.fwd_op.inputs[i]) == ctx.shape(residual_out)][:1]
    d_sum = ctx.d_inputs[full[0]] if full else \
        ctx.temp("d_residual_sum" if wanted else "unused_d_sum", like=residual_out)
    extra = [d_residual_out] if d_residual_out is not None else []
    ops = [ctx.op("fused_residual_rmsnorm_backward",
                  [d_y, saved_ref(residual_out), ctx.read(weight), saved_ref(rstd), *extra],
                  [d_sum, ctx.grads_or_temps(2)[0]])]
    ops += [op for i in wanted if i not in full for op in ctx.to_input_shape(i, "identity", [d_sum])]
    return ops


@rule("swiglu")
def swiglu_rule(ctx):
    """y = silu(gate) up: d_gate_up = (dy up silu'(gate), dy silu(gate)); saves gate_up."""
    return [ctx.op("swiglu_backward", [ctx.d_output, ctx.read(ctx.fwd_op.inputs[0])],
                   [ctx.d_inputs[0]])]


@rule("rope")
def rope_rule(ctx):
    """y = x turned by pos * freqs: dx = dy turned back; saves freqs, position_ids."""
    x, freqs, position_ids = ctx.fwd_op.inputs
    return [ctx.op("rope_backward", [ctx.d_output, ctx.read(freqs), ctx.read(position_ids)],
                   [ctx.d_inputs[0]])]


@rule("attention")
def attention_rule(ctx):
    """(out, lse) = attention(q, k, v): dq, dk, dv with p rebuilt from lse; saves q, k, v, out, lse."""
    q, k, v = ctx.fwd_op.inputs
    out, lse = ctx.fwd_op.outputs
    return [ctx.op("attention_backward", [ctx.d_output, ctx.read(q), ctx.read(k), ctx.read(v),
                                          saved_ref(out), saved_ref(lse)],
                   ctx.grads_or_temps(0, 1, 2), causal=ctx.fwd_op.attrs.get("causal", True))]


@rule("fused_lm_head_loss")
def fused_lm_head_loss_rule(ctx):
    """L = CE(x W, t): d_logits recomputed, d_x = d_logits W^T, d_W = x^T d_logits; saves x, weight."""
    x, weight, targets = ctx.fwd_op.inputs
    return [ctx.op("fused_lm_head_loss_backward",
                   [ctx.d_output, ctx.read(x), ctx.read(weight), ctx.read(targets)],
                   ctx.grads_or_temps(0, 1))]


@rule("flash_attention")
def flash_attention_rule(ctx):
    """(out, lse) = attention(views of qkv): d_qkv packed; saves out, lse, qkv."""
    (qkv,) = ctx.fwd_op.inputs
    out, lse = ctx.fwd_op.outputs
    return [ctx.op("flash_attention_backward",
                   [ctx.d_output, saved_ref(out), saved_ref(lse), ctx.read(qkv)], [ctx.d_inputs[0]],
                   causal=ctx.fwd_op.attrs.get("causal", True))]


@rule("qkv_qk_norm_rope")
def qkv_qk_norm_rope_rule(ctx):
    """(qkv_out, q_rstd, k_rstd): xhat = rope^-1(out) / w, then rmsnorm backward for q and k;
    saves qkv_out, q_rstd, k_rstd (weights, freqs and positions are read like parameters)."""
    qkv, q_weight, k_weight, freqs, position_ids = ctx.fwd_op.inputs
    qkv_out, q_rstd, k_rstd = ctx.fwd_op.outputs
    return [ctx.op("qkv_qk_norm_rope_backward",
                   [ctx.d_output, saved_ref(qkv_out), ctx.read(q_weight), ctx.read(k_weight),
                    saved_ref(q_rstd), saved_ref(k_rstd), ctx.read(freqs), ctx.read(position_ids)],
                   ctx.grads_or_temps(0, 1, 2))]
