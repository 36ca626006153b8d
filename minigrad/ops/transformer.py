"""The ops of a transformer: embedding, rmsnorm, fused residual + rmsnorm, swiglu, rope, causal
attention (also on a packed qkv: flash_attention), QK-norm + rope on a packed qkv, and the fused
LM-head loss. Their math lives in kernels.py, shared with minigrad.aot.

Each saves what its ahead-of-time rule saves (tests check it): rmsnorm x and rstd, attention q,
k, v, out and lse (the probabilities are rebuilt from lse in backward: no T x T matrix is kept),
and so on. Integer inputs (ids, position_ids, targets) get no gradient.

Several outputs (ops/multi.py). rmsnorm's rstd and attention's lse are arrays only backward
reads: they are saved tensors of the op's node, and outputs of its IR operation in aot.
fused_residual_rmsnorm returns two differentiable Variables: residual_out = x + residual is an
ordinary add node, y the fused node (parents x, residual, weight) that takes residual_out's array
instead of adding again; since backward is linear in the output gradients, the two nodes'
gradients summed at x and residual are the fused op's. link_outputs makes capture write them as
ONE operation fused_residual_rmsnorm -> (residual_out, y, rstd).
"""
from __future__ import annotations

import numpy as np

from .. import kernels
from ..errors import DtypeError, MinigradError, ShapeError
from ..eager.function import Function, register
from ..eager.variable import OPS, Variable
from .multi import link_outputs, linked_output
from ..optable import SAME, define


class NormWeightError(MinigradError, ValueError):
    """qkv_qk_norm_rope met a norm weight with a zero: its backward cannot divide by it."""


@register("embedding")
class Embedding(Function):
    """y = weight[ids]; d_weight[v] = sum of the rows of dy whose id is v (ids saved)."""
    grad_text = ("none (token ids)", "grad_output rows added into the rows ids picked")
    input_names = ("ids", "weight")

    @staticmethod
    def forward(ctx, ids, weight):
        _check_embedding(ids, weight)
        ctx.num_embeddings = weight.shape[0]
        ctx.save_for_backward(ids)
        return kernels.embedding(ids, weight, out=ctx.out(
            shape=ids.shape + weight.shape[1:], dtype=weight.dtype))

    @staticmethod
    def backward(ctx, grad_output):
        (ids,) = ctx.saved_tensors
        shape = (ctx.num_embeddings, grad_output.shape[-1])
        return None, kernels.embedding_backward(ids, grad_output, ctx.num_embeddings,
                                                out=ctx.grad_buffer(1, shape, grad_output.dtype))


@register("rmsnorm")
class RMSNorm(Function):
    """y = x rstd w, rstd = 1/sqrt(mean(x^2)+eps); dx = rstd (g w - xhat mean(g w xhat)); saves x, rstd."""
    grad_text = ("rstd * (g w - xhat * mean(g w xhat)), xhat = x rstd", "sum(grad_output * xhat)")
    input_names = ("x", "weight")

    @staticmethod
    def forward(ctx, x, weight, eps=1e-6):
        _check_norm("rmsnorm", x, weight)
        rstd = _saved_buffer(ctx, x.shape[:-1], x)   # (asked first: the output's buffer is the last)
        y, rstd = kernels.rmsnorm(x, weight, eps, out=ctx.out(x, weight), rstd=rstd)
        ctx.save_for_backward(x, rstd, weight)   # weight: see _rmsnorm_grads
        ctx.eps = eps
        return y

    @staticmethod
    def backward(ctx, grad_output):
        x, rstd, weight = ctx.saved_tensors
        return _rmsnorm_grads(ctx, x, weight, rstd, grad_output, 1)


@register("fused_residual_rmsnorm")
class FusedResidualRMSNorm(Function):
    """y = rmsnorm(r) with r = x + residual given; dx = d_residual = rmsnorm's dx (r, rstd saved)."""
    grad_text = ("rmsnorm backward at residual_out", "rmsnorm backward at residual_out",
                 "sum(grad_output * xhat)")
    input_names = ("x", "residual", "weight")

    @staticmethod
    def forward(ctx, x, residual, weight, residual_out=None, eps=1e-6):
        if residual_out is None:   # applied directly; mg.fused_residual_rmsnorm hands the add's array
            residual_out = residual + x
        rstd = _saved_buffer(ctx, residual_out.shape[:-1], residual_out)
        y, rstd = kernels.rmsnorm(residual_out, weight, eps,
                                  out=ctx.out(residual_out, weight), rstd=rstd)
        ctx.save_for_backward(residual_out, rstd, weight)
        ctx.eps = eps
        return y

    @staticmethod
    def backward(ctx, grad_output):
        residual_out, rstd, weight = ctx.saved_tensors
        d_sum, d_weight = _rmsnorm_grads(ctx, residual_out, weight, rstd, grad_output, 2)
        return d_sum, d_sum, d_weight


@register("swiglu")
class SwiGLU(Function):
    """y = silu(gate) up (halves of gate_up); d_gate = g up silu'(gate), d_up = g silu(gate); saves gate_up."""
    grad_text = ("(grad_output * up * silu'(gate), grad_output * silu(gate))",)
    input_names = ("gate_up",)

    @staticmethod
    def forward(ctx, gate_up):
        if gate_up.ndim < 1 or gate_up.shape[-1] % 2:
            raise ShapeError(f"swiglu: gate_up of shape {gate_up.shape} has an odd last axis. Rule: "
                             f"its last axis holds gate and up side by side (2F). Fix: make the "
                             f"projection before swiglu produce 2F features.")
        ctx.save_for_backward(gate_up)
        return kernels.swiglu(gate_up, out=ctx.out(
            shape=gate_up.shape[:-1] + (gate_up.shape[-1] // 2,), dtype=gate_up.dtype))

    @staticmethod
    def backward(ctx, grad_output):
        (gate_up,) = ctx.saved_tensors
        d_gate_up = ctx.out(shape=gate_up.shape, dtype=np.result_type(gate_up, grad_output))
        return (kernels.swiglu_backward(gate_up, grad_output, out=d_gate_up),)


@register("rope")
class RoPE(Function):
    """y = pairs (x_i, x_{i+Dh/2}) turned by pos freqs[i]; dx = g turned back; saves freqs, position_ids."""
    grad_text = ("grad_output turned by -pos * freqs", "none (fixed frequencies)",
                 "none (positions)")
    input_names = ("x", "freqs", "position_ids")

    @staticmethod
    def forward(ctx, x, freqs, position_ids):
        _check_rope(x, freqs, position_ids, ctx.inputs[1].requires_grad)
        ctx.save_for_backward(freqs, position_ids)
        return kernels.rope(x, freqs, position_ids, out=ctx.out(x))

    @staticmethod
    def backward(ctx, grad_output):
        freqs, position_ids = ctx.saved_tensors
        out = ctx.out(grad_output)
        return kernels.rope(grad_output, freqs, position_ids, out, -1.0), None, None


@register("attention")
class Attention(Function):
    """out = softmax(q k^T / sqrt(Dh), causal) v; backward rebuilds p from lse; saves q, k, v, out, lse."""
    grad_text = ("ds k / sqrt(Dh)", "ds^T q / sqrt(Dh)", "p^T grad_output")
    input_names = ("q", "k", "v")

    @staticmethod
    def forward(ctx, q, k, v, causal=True):
        _check_attention(q, k, v)
        lse = _saved_buffer(ctx, (q.shape[0], q.shape[2], q.shape[1]), q)
        out, lse = kernels.attention(q, k, v, causal, out=ctx.out(q, v), lse=lse)
        ctx.causal = causal
        ctx.save_for_backward(q, k, v, out, lse)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = (ctx.out(a, grad_output) for a in (q, k, v))
        return kernels.attention_backward(q, k, v, out, lse, grad_output, ctx.causal, dq, dk, dv)


@register("flash_attention")
class FlashAttention(Function):
    """out = attention(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]); d_qkv packed; saves out, lse, qkv."""
    grad_text = ("(ds k, ds^T q) / sqrt(Dh) and p^T grad_output, packed as d_qkv",)
    input_names = ("qkv",)

    @staticmethod
    def forward(ctx, qkv, causal=True):
        _check_packed("flash_attention", qkv)
        b, t, _, h, dh = qkv.shape
        lse = _saved_buffer(ctx, (b, h, t), qkv)
        out, lse = kernels.flash_attention(qkv, causal, out=ctx.out(
            shape=(b, t, h, dh), dtype=qkv.dtype), lse=lse)
        ctx.causal = causal
        ctx.save_for_backward(out, lse, qkv)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        out, lse, qkv = ctx.saved_tensors
        d_qkv = ctx.out(shape=qkv.shape, dtype=np.result_type(qkv, grad_output))
        return (kernels.flash_attention_backward(qkv, out, lse, grad_output, ctx.causal, d_qkv),)


@register("qkv_qk_norm_rope")
class QKVQKNormRoPE(Function):
    """q, k -> rope(rmsnorm(., w)), v kept; backward: xhat = rope^-1(out) / w; saves out, q/k rstd."""
    grad_text = ("rope^-1, then rmsnorm backward for q and k; grad_output for v",
                 "sum(grad_q xhat_q)", "sum(grad_k xhat_k)", "none (fixed frequencies)",
                 "none (positions)")
    input_names = ("qkv", "q_norm_weight", "k_norm_weight", "freqs", "position_ids")

    @staticmethod
    def forward(ctx, qkv, q_weight, k_weight, freqs, position_ids, eps=1e-6):
        _check_packed("qkv_qk_norm_rope", qkv)
        _check_qk_norm_weights(qkv, q_weight, k_weight)
        _check_rope(qkv[:, :, 0], freqs, position_ids, ctx.inputs[3].requires_grad,
                    "qkv_qk_norm_rope")
        rstd_shape = qkv.shape[:2] + qkv.shape[3:4]
        q_rstd, k_rstd = (_saved_buffer(ctx, rstd_shape, qkv) for _ in range(2))
        out, q_rstd, k_rstd = kernels.qkv_qk_norm_rope(
            qkv, q_weight, k_weight, freqs, position_ids, eps, ctx.out(
                shape=qkv.shape, dtype=np.result_type(qkv, q_weight, k_weight)), q_rstd, k_rstd)
        ctx.eps = eps
        # + the weights, freqs and positions: see _rmsnorm_grads
        ctx.save_for_backward(out, q_rstd, k_rstd, q_weight, k_weight, freqs, position_ids)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        qkv_out, q_rstd, k_rstd, q_weight, k_weight, freqs, position_ids = ctx.saved_tensors
        check_qk_norm_weights(q_weight, k_weight)   # (saved arrays are guarded; cheap to be sure)
        dtype = np.result_type(qkv_out, grad_output)
        need = ctx.needs_input_grad
        d_qkv = ctx.out(shape=qkv_out.shape, dtype=dtype)
        d_q_weight, d_k_weight = (ctx.grad_buffer(i, q_weight.shape, dtype) if need[i] else None
                                  for i in (1, 2))
        d_qkv, d_q_weight, d_k_weight = kernels.qkv_qk_norm_rope_backward(
            qkv_out, q_weight, k_weight, q_rstd, k_rstd, freqs, position_ids, grad_output, d_qkv,
            d_q_weight, d_k_weight)
        return (d_qkv, d_q_weight if need[1] else None, d_k_weight if need[2] else None, None, None)


@register("fused_lm_head_loss")
class FusedLMHeadLoss(Function):
    """L = mean CE(x W, t); d_logits = (softmax(x W) - onehot) / N, dx = d_logits W^T, dW = x^T d_logits."""
    grad_text = ("d_logits @ weight^T", "x^T @ d_logits", "none (class indices)")
    input_names = ("x", "weight", "targets")

    @staticmethod
    def forward(ctx, x, weight, targets):
        _check_lm_head(x, weight, targets)
        ctx.save_for_backward(x, weight, targets)   # the logits (N, V) are never kept
        return kernels.lm_head_loss(x, weight, targets, out=ctx.out(
            shape=(), dtype=np.result_type(x, weight)))

    @staticmethod
    def backward(ctx, grad_output):
        x, weight, targets = ctx.saved_tensors
        need = ctx.needs_input_grad
        dtype = np.result_type(x, weight, grad_output)
        d_x = ctx.out(shape=x.shape, dtype=dtype) if need[0] else None
        d_weight = ctx.grad_buffer(1, weight.shape, dtype) if need[1] else None
        d_x, d_weight = kernels.lm_head_loss_backward(x, weight, targets, grad_output, d_x, d_weight,
                                                      need[0], need[1])
        return d_x, d_weight, None


def _saved_buffer(ctx, shape: tuple, like: np.ndarray):
    """Where a second output only backward reads (rstd, lse) goes: the scope's arena or pool, or None."""
    return ctx.out(shape=shape, dtype=like.dtype, kind="saved")


def _rmsnorm_grads(ctx, x, weight, rstd, grad_output, weight_index: int) -> tuple:
    """rmsnorm's (dx, d_weight), d_weight straight into the parameter's .grad when it can be.

    The weight comes from the saved tensors. aot plans read a parameter directly (it lives for
    the whole run); in eager a user or an optimiser can change it
    between forward and backward, so the node saves it (a reference, no copy) and the engine's
    saved-array guard refuses the change instead of giving a dx of another weight."""
    need = ctx.needs_input_grad[weight_index]
    dtype = np.result_type(grad_output, x)
    d_weight = ctx.grad_buffer(weight_index, weight.shape, dtype) if need else None
    d_x = ctx.out(grad_output, x)
    return kernels.rmsnorm_backward(x, weight, rstd, grad_output, d_x, d_weight, need)


# -- the functions users call -------------------------------------------------------------------
def embedding(ids, weight):
    return Embedding.apply(ids, weight)


def rmsnorm(x, weight, eps: float = 1e-6):
    return RMSNorm.apply(x, weight, eps=eps)


def fused_residual_rmsnorm(x, residual, weight, eps: float = 1e-6) -> tuple:
    """(residual_out, y): residual_out = residual + x, y = rmsnorm(residual_out) (one op in aot)."""
    residual_out = OPS["add"].apply(x, residual)
    _check_norm("fused_residual_rmsnorm", residual_out._data, _array(weight), (x, residual))
    y = FusedResidualRMSNorm.apply(x, residual, weight, residual_out=residual_out._data, eps=eps)
    link_outputs(y, residual_out=residual_out)
    return residual_out, y


def swiglu(gate_up):
    return SwiGLU.apply(gate_up)


def rope(x, freqs, position_ids):
    return RoPE.apply(x, freqs, position_ids)


def rope_freqs(head_dim: int, base: float = 10000.0, dtype=np.float64) -> Variable:
    """The fixed RoPE frequencies (head_dim/2,), named "rope_freqs" (data: never a gradient)."""
    if head_dim <= 0 or head_dim % 2:
        raise ShapeError(f"rope_freqs: head_dim={head_dim}. Rule: rope turns pairs of features, so "
                         f"the head dimension is even. Fix: choose an even head_dim.")
    return Variable(kernels.rope_freqs(head_dim, base, dtype), name="rope_freqs")


def attention(q, k, v, causal: bool = True):
    return Attention.apply(q, k, v, causal=_check_causal("attention", causal))


def flash_attention(qkv, causal: bool = True):
    """attention(q, k, v) with q, k, v packed in one (B, T, 3, H, Dh) array, as a fused QKV
    projection makes them: same values, same gradients (d_qkv packed the same way). A real flash
    kernel tiles the scores in on-chip memory; here numpy goes through blocks of query rows."""
    return FlashAttention.apply(qkv, causal=_check_causal("flash_attention", causal))


def _check_causal(op: str, causal) -> bool:
    """causal is a flag (a mask array was numpy's "truth value is ambiguous"; "False", a string,
    was true and masked)."""
    if not isinstance(causal, (bool, np.bool_)):
        shown = (f"an array of shape {causal.shape}" if isinstance(causal, np.ndarray)
                 else f"{causal!r} ({type(causal).__name__})")
        raise DtypeError(f"{op}: causal is {shown}. Rule: causal is "
                         f"True (each query sees itself and earlier keys) or False (every key); "
                         f"{op} takes no mask array. Fix: causal=True or causal=False; for another "
                         f"mask, add a large negative number to the scores with your own ops.")
    return bool(causal)


def qkv_qk_norm_rope(qkv, q_norm_weight, k_norm_weight, freqs, position_ids, eps: float = 1e-6):
    """q and k of the packed qkv rmsnorm-ed per head (weights (Dh,)) then turned by rope; v kept.
    Backward divides by the weights: they must have no zero (checked, with the fix)."""
    return QKVQKNormRoPE.apply(qkv, q_norm_weight, k_norm_weight, freqs, position_ids, eps=eps)


def fused_lm_head_loss(x, weight, targets):
    return FusedLMHeadLoss.apply(x, weight, targets)


# -- checks: each names the op, the shapes, the rule and the fix --------------------------------
def _array(x) -> np.ndarray:
    return x._data if isinstance(x, Variable) else np.asarray(x)


def _check_float(op: str, name: str, a: np.ndarray) -> None:
    if a.dtype.kind != "f":
        raise DtypeError(f"{op}: {name} has dtype {a.dtype} (shape {a.shape}). Rule: {name} is "
                         f"differentiable data, a float array. Fix: {name}.astype(np.float32) or "
                         f"np.float64.")


def _check_int(op: str, name: str, a: np.ndarray) -> None:
    if a.dtype.kind not in "iu":
        raise DtypeError(f"{op}: {name} has dtype {a.dtype} (shape {a.shape}). Rule: {name} are "
                         f"integer indices, never differentiated. Fix: {name}.astype(np.int64).")


def _check_norm(op: str, x: np.ndarray, weight: np.ndarray, operands=None) -> None:
    _check_float(op, "x", x)
    _check_float(op, "weight", weight)
    if x.ndim < 1 or weight.shape != x.shape[-1:]:
        shapes = (f"x and residual of shapes {_array(operands[0]).shape} and "
                  f"{_array(operands[1]).shape}" if operands else f"x of shape {x.shape}")
        raise ShapeError(f"{op}: {shapes} and weight of shape {weight.shape}. Rule: "
                         f"the norm runs over the last axis and weight has one scale per feature, "
                         f"shape ({x.shape[-1] if x.ndim else 'D'},). Fix: pass a weight of shape "
                         f"x.shape[-1:].")


def _check_embedding(ids: np.ndarray, weight: np.ndarray) -> None:
    _check_int("embedding", "ids", ids)
    _check_float("embedding", "weight", weight)
    if weight.ndim != 2:
        raise ShapeError(f"embedding: weight of shape {weight.shape} (ids {ids.shape}). Rule: the "
                         f"table is (V, D), one row per token. Fix: weight of shape (vocab, dim).")
    check_ids(ids, weight)


def check_ids(ids: np.ndarray, weight: np.ndarray) -> None:
    """Token ids inside the table (also run by aot plans, whose ids are new on every run)."""
    if ids.size and (ids.min() < 0 or ids.max() >= weight.shape[0]):
        raise ShapeError(f"embedding: ids in [{ids.min()}, {ids.max()}] for a table of shape "
                         f"{weight.shape}. Rule: 0 <= id < V = {weight.shape[0]}. Fix: map tokens "
                         f"into the vocabulary, or enlarge the table.")


def _check_rope(x: np.ndarray, freqs: np.ndarray, pos: np.ndarray, freqs_grad: bool,
                op: str = "rope") -> None:
    _check_float(op, "x", x)
    _check_float(op, "freqs", freqs)
    _check_int(op, "position_ids", pos)
    if x.ndim != 4 or x.shape[-1] % 2 or freqs.shape != (x.shape[-1] // 2,) or \
            pos.shape not in ((x.shape[1],), x.shape[:2]):
        raise ShapeError(f"{op}: x {x.shape}, freqs {freqs.shape}, position_ids {pos.shape}. Rule: "
                         f"x is (B, T, H, Dh) with Dh even, freqs (Dh/2,), position_ids (T,) or "
                         f"(B, T). Fix: reshape x to (batch, seq, heads, head_dim) and use "
                         f"mg.rope_freqs(head_dim).")
    if freqs_grad:
        raise DtypeError(f"{op}: freqs {freqs.shape} requires grad. Rule: the frequencies are fixed "
                         f"constants, never differentiated. Fix: pass mg.rope_freqs(head_dim), "
                         f"or a Variable with requires_grad=False; as an input of aot.capture, "
                         f"name it 'rope_freqs' (input_names=...).")


def _check_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
    for name, a in (("q", q), ("k", k), ("v", v)):
        _check_float("attention", name, a)
    if q.ndim != 4 or q.shape != k.shape or q.shape != v.shape:
        raise ShapeError(f"attention: q {q.shape}, k {k.shape}, v {v.shape}. Rule: q, k and v are "
                         f"(B, T, H, Dh), all the same shape. Fix: reshape each projection to "
                         f"(batch, seq, heads, head_dim).")


def _check_packed(op: str, qkv: np.ndarray) -> None:
    _check_float(op, "qkv", qkv)
    if qkv.ndim != 5 or qkv.shape[2] != 3:
        raise ShapeError(f"{op}: qkv of shape {qkv.shape}. Rule: qkv packs q, k and v as "
                         f"(B, T, 3, H, Dh). Fix: reshape the fused projection's output "
                         f"(B, T, 3*H*Dh) to (batch, seq, 3, heads, head_dim).")


def _check_qk_norm_weights(qkv: np.ndarray, q_weight: np.ndarray, k_weight: np.ndarray) -> None:
    for name, w in (("q_norm_weight", q_weight), ("k_norm_weight", k_weight)):
        _check_float("qkv_qk_norm_rope", name, w)
        if w.shape != qkv.shape[-1:]:
            raise ShapeError(f"qkv_qk_norm_rope: {name} of shape {w.shape} for qkv {qkv.shape}. "
                             f"Rule: q and k are normalised per head over Dh, one scale per "
                             f"feature, shape ({qkv.shape[-1]},). Fix: a weight of shape "
                             f"qkv.shape[-1:].")
    check_qk_norm_weights(q_weight, k_weight)


def check_qk_norm_weights(q_weight: np.ndarray, k_weight: np.ndarray) -> None:
    """No zero in the norm weights: backward divides qkv_out by them (also run by aot plans)."""
    for name, w in (("q_norm_weight", q_weight), ("k_norm_weight", k_weight)):
        if not np.all(w):
            raise NormWeightError(
                f"qkv_qk_norm_rope: {name} of shape {w.shape} has zeros at "
                f"{np.flatnonzero(w == 0).tolist()}. Rule: backward keeps only qkv_out and the "
                f"rstds, and recovers the normalised q, k by dividing by the weight, so no weight "
                f"may be 0. Fix: keep the weights nonzero (they start at 1), or use mg.rmsnorm and "
                f"mg.rope separately, which save their inputs.")


def _check_lm_head(x: np.ndarray, weight: np.ndarray, targets: np.ndarray) -> None:
    _check_float("fused_lm_head_loss", "x", x)
    _check_float("fused_lm_head_loss", "weight", weight)
    _check_int("fused_lm_head_loss", "targets", targets)
    if x.ndim != 2 or weight.ndim != 2 or x.shape[1] != weight.shape[0] or \
            targets.shape != (x.shape[0],):
        raise ShapeError(f"fused_lm_head_loss: x {x.shape}, weight {weight.shape}, targets "
                         f"{targets.shape}. Rule: x (N, D), weight (D, V), targets (N,). Fix: "
                         f"flatten batch and sequence first, x.reshape(-1, D), targets.reshape(-1).")
    check_targets(targets, weight)


def check_targets(targets: np.ndarray, weight: np.ndarray) -> None:
    """Class targets inside the vocabulary (also run by aot plans on every run)."""
    if targets.size and (targets.min() < 0 or targets.max() >= weight.shape[1]):
        raise ShapeError(f"fused_lm_head_loss: targets in [{targets.min()}, {targets.max()}] for "
                         f"V = {weight.shape[1]} classes (weight {weight.shape}). Rule: 0 <= t < V. "
                         f"Fix: targets must be token ids of the vocabulary.")


# -- rows of the op table: how capture writes each op (its rule and compilers are still kept in
# aot/rules_transformer.py and aot/compile_transformer.py, which attach them to these rows).
# rstd, lse: outputs only backward reads, given as (label, shape, dtype).
def _capture_rmsnorm(node, v, inputs):
    return "rmsnorm", {"eps": node.eps}, [v, ("rstd", v.shape[:-1], v.dtype)]


def _capture_fused_residual_rmsnorm(node, v, inputs):
    residual_out = linked_output(node, "residual_out", ("residual_out", v.shape, v.dtype))
    return "fused_residual_rmsnorm", {"eps": node.eps}, [
        residual_out, v, ("rstd", v.shape[:-1], v.dtype)]


def _capture_attention(node, v, inputs):
    b, t, h, _ = v.shape
    return node.name, {"causal": node.causal}, [v, ("lse", (b, h, t), v.dtype)]


def _capture_qkv_qk_norm_rope(node, v, inputs):
    rstd_shape = v.shape[:2] + v.shape[3:4]
    return "qkv_qk_norm_rope", {"eps": node.eps}, [v, ("q_rstd", rstd_shape, v.dtype),
                                                   ("k_rstd", rstd_shape, v.dtype)]


define(Embedding, capture=SAME, saves="the ids")
define(RMSNorm, capture=_capture_rmsnorm, cheap=True, saves="x, weight and rstd")
define(FusedResidualRMSNorm, capture=_capture_fused_residual_rmsnorm, cheap=True,
       saves="the sum, weight and rstd")
define(SwiGLU, capture=SAME, cheap=True, saves="gate_up")
define(RoPE, capture=SAME, cheap=True, saves="nothing (freqs and positions are read)")
define(Attention, capture=_capture_attention, saves="q, k, v, the output and lse")
define(FlashAttention, capture=_capture_attention, saves="qkv, the output and lse")
define(QKVQKNormRoPE, capture=_capture_qkv_qk_norm_rope, saves="qkv_out, q_rstd and k_rstd")
define(FusedLMHeadLoss, capture=SAME, saves="x, weight and targets")
