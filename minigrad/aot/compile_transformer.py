"""The executor's compilers for the transformer ops (kernels.py's transformer section).

Each compiler allocates its output buffers, runs the kernel once into them, and returns the call
that rewrites them on every run. Ops with several outputs (rmsnorm -> y, rstd; attention -> out,
lse; the backward ops' input gradients) return a tuple of buffers, one per IR output.
"""
from __future__ import annotations

import numpy as np

from .. import kernels
from ..ops.transformer import check_ids, check_qk_norm_weights, check_targets
from ..kernels import plan_call as _call
from ..optable import attach


def _calls(fn, args, outputs: tuple):
    """Run fn(*args) once (it writes into outputs, which are among args) and keep the call."""
    fn(*args)
    return outputs, [(fn, args)]


def _empty(shape, *like) -> np.ndarray:
    return np.empty(shape, np.result_type(*like))


# ids and targets may be new data on every run: the calls that read them check them each time,
# with the eager ops' messages (numpy's own IndexError would not say which op or how to fix it).
def _checked_embedding(weight, ids, out):
    check_ids(ids, weight)
    np.take(weight, ids, 0, out)


def _checked_lm_head_loss(x, weight, targets, out):
    check_targets(targets, weight)
    kernels.lm_head_loss(x, weight, targets, out)


def _embedding(ids, weight, **attrs):
    return _call(_checked_embedding, weight, ids, _empty(ids.shape + weight.shape[1:], weight))


def _embedding_backward(grad_output, ids, num_embeddings=None, **attrs):
    out = _empty((num_embeddings, grad_output.shape[-1]), grad_output)
    return _call(kernels.embedding_backward, ids, grad_output, num_embeddings, out)


def _rmsnorm(x, weight, eps=1e-6, **attrs):
    y, rstd = _empty(x.shape, x, weight), _empty(x.shape[:-1], x)
    return _calls(kernels.rmsnorm, (x, weight, eps, y, rstd), (y, rstd))


def _rmsnorm_backward(grad_output, x, weight, rstd, **attrs):
    d_x, d_weight = _empty(x.shape, grad_output, x), _empty(weight.shape, grad_output, x)
    return _calls(kernels.rmsnorm_backward, (x, weight, rstd, grad_output, d_x, d_weight),
                  (d_x, d_weight))


def _fused_residual_rmsnorm(x, residual, weight, eps=1e-6, **attrs):
    residual_out = _empty(np.broadcast_shapes(x.shape, residual.shape), x, residual)
    y, rstd = _empty(residual_out.shape, residual_out, weight), _empty(residual_out.shape[:-1], x)
    return _calls(kernels.fused_residual_rmsnorm, (x, residual, weight, eps, residual_out, y, rstd),
                  (residual_out, y, rstd))


def _fused_residual_rmsnorm_backward(grad_output, residual_out, weight, rstd, *d_residual_out,
                                     **attrs):
    d_sum, d_weight = _empty(residual_out.shape, grad_output), _empty(weight.shape, grad_output)
    return _calls(kernels.fused_residual_rmsnorm_backward,
                  (residual_out, weight, rstd, grad_output, d_sum, d_weight, *d_residual_out),
                  (d_sum, d_weight))


def _swiglu(gate_up, **attrs):
    return _call(kernels.swiglu, gate_up, _empty(gate_up.shape[:-1] + (gate_up.shape[-1] // 2,),
                                                 gate_up))


def _swiglu_backward(grad_output, gate_up, **attrs):
    return _call(kernels.swiglu_backward, gate_up, grad_output, _empty(gate_up.shape, gate_up,
                                                                       grad_output))


def _rope(x, freqs, position_ids, **attrs):
    return _call(kernels.rope, x, freqs, position_ids, _empty(x.shape, x))


def _rope_backward(grad_output, freqs, position_ids, **attrs):
    """The inverse turn: rope with the angles negated (sign=-1)."""
    out = _empty(grad_output.shape, grad_output)
    return _calls(kernels.rope, (grad_output, freqs, position_ids, out, -1.0), out)


def _scratch(q, k) -> np.ndarray:
    """The (B, H, T, T) scores, a buffer of the plan (placement shares it once the call is done)."""
    return _empty((q.shape[0], q.shape[2], q.shape[1], k.shape[1]), q, k)


def _attention(q, k, v, causal=True, **attrs):
    out, lse = _empty(q.shape, q, v), _empty((q.shape[0], q.shape[2], q.shape[1]), q, k)
    return _calls(kernels.attention, (q, k, v, causal, out, lse, _scratch(q, k)), (out, lse))


def _attention_backward(grad_output, q, k, v, out, lse, causal=True, **attrs):
    dq, dk, dv = (_empty(a.shape, a, grad_output) for a in (q, k, v))
    return _calls(kernels.attention_backward, (q, k, v, out, lse, grad_output, causal, dq, dk, dv,
                                               _scratch(q, k), _scratch(q, k)), (dq, dk, dv))


def _lm_head_loss(x, weight, targets, **attrs):
    return _call(_checked_lm_head_loss, x, weight, targets, _empty((), x, weight))


def _lm_head_loss_backward(grad_output, x, weight, targets, **attrs):
    d_x, d_weight = _empty(x.shape, x, weight), _empty(weight.shape, x, weight)
    return _calls(kernels.lm_head_loss_backward, (x, weight, targets, grad_output, d_x, d_weight),
                  (d_x, d_weight))


def _packed_scratch(qkv) -> np.ndarray:
    """The (B, H, T, T) scores of the packed qkv (B, T, 3, H, Dh)."""
    return _empty((qkv.shape[0], qkv.shape[3], qkv.shape[1], qkv.shape[1]), qkv)


def _flash_attention(qkv, causal=True, **attrs):
    b, t, _, h, dh = qkv.shape
    out, lse = _empty((b, t, h, dh), qkv), _empty((b, h, t), qkv)
    return _calls(kernels.flash_attention, (qkv, causal, out, lse, _packed_scratch(qkv)), (out, lse))


def _flash_attention_backward(grad_output, out, lse, qkv, causal=True, **attrs):
    d_qkv = _empty(qkv.shape, qkv, grad_output)
    return _calls(kernels.flash_attention_backward,
                  (qkv, out, lse, grad_output, causal, d_qkv, _packed_scratch(qkv),
                   _packed_scratch(qkv)), d_qkv)


# The norm weights are parameters, new on every step: the calls check them each run (a zero
# would make the backward divide by zero), with the eager op's message.
def _checked_qkv_qk_norm_rope(qkv, q_weight, k_weight, *args):
    check_qk_norm_weights(q_weight, k_weight)
    kernels.qkv_qk_norm_rope(qkv, q_weight, k_weight, *args)


def _checked_qkv_qk_norm_rope_backward(qkv_out, q_weight, k_weight, *args):
    check_qk_norm_weights(q_weight, k_weight)
    kernels.qkv_qk_norm_rope_backward(qkv_out, q_weight, k_weight, *args)


def _qkv_qk_norm_rope(qkv, q_weight, k_weight, freqs, position_ids, eps=1e-6, **attrs):
    out = _empty(qkv.shape, qkv, q_weight, k_weight)
    q_rstd, k_rstd = (_empty(qkv.shape[:2] + qkv.shape[3:4], qkv) for _ in range(2))
    return _calls(_checked_qkv_qk_norm_rope, (qkv, q_weight, k_weight, freqs, position_ids, eps,
                                              out, q_rstd, k_rstd), (out, q_rstd, k_rstd))


def _qkv_qk_norm_rope_backward(grad_output, qkv_out, q_weight, k_weight, q_rstd, k_rstd, freqs,
                               position_ids, **attrs):
    d_qkv = _empty(qkv_out.shape, qkv_out, grad_output)
    d_q_weight, d_k_weight = (_empty(w.shape, qkv_out, grad_output) for w in (q_weight, k_weight))
    return _calls(_checked_qkv_qk_norm_rope_backward,
                  (qkv_out, q_weight, k_weight, q_rstd, k_rstd, freqs, position_ids, grad_output,
                   d_qkv, d_q_weight, d_k_weight), (d_qkv, d_q_weight, d_k_weight))


# Each op's compilers (its forward and its backward kernel) enter its row of the op table.
for name, compilers in {
    "embedding": {"embedding": _embedding, "embedding_backward": _embedding_backward},
    "rmsnorm": {"rmsnorm": _rmsnorm, "rmsnorm_backward": _rmsnorm_backward},
    "fused_residual_rmsnorm": {"fused_residual_rmsnorm": _fused_residual_rmsnorm,
                               "fused_residual_rmsnorm_backward": _fused_residual_rmsnorm_backward},
    "swiglu": {"swiglu": _swiglu, "swiglu_backward": _swiglu_backward},
    "rope": {"rope": _rope, "rope_backward": _rope_backward},
    "attention": {"attention": _attention, "attention_backward": _attention_backward},
    "fused_lm_head_loss": {"fused_lm_head_loss": _lm_head_loss,
                           "fused_lm_head_loss_backward": _lm_head_loss_backward},
    "flash_attention": {"flash_attention": _flash_attention,
                        "flash_attention_backward": _flash_attention_backward},
    "qkv_qk_norm_rope": {"qkv_qk_norm_rope": _qkv_qk_norm_rope,
                         "qkv_qk_norm_rope_backward": _qkv_qk_norm_rope_backward},
}.items():
    attach(name, compilers=compilers)
