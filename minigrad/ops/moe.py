"""Mixture-of-experts ops: routing, top-k, permute to expert order, grouped matmuls, unpermute.

A token x[n] is sent to K of E experts. The router gives probabilities (moe_softmax or
moe_sigmoid), moe_topk picks the K largest (weights, indices), moe_permute copies each token K
times into expert order (x_perm, rows of expert e at expert_offsets[e]:expert_offsets[e+1]),
the grouped matmuls run one weight matrix per expert on its rows, and moe_unpermute sums each
token's K expert outputs, weighted by its routing weights. Math: kernels.py, shared with aot.

Several outputs. moe_topk and moe_permute return a float tensor and integer tensors (indices;
scatter_indices, expert_offsets). Integer outputs carry no gradient, so the eager engine keeps
its one-Variable-per-node rule: the integer outputs are computed first (kernels.moe_topk,
kernels.moe_permute) and wrapped as plain data Variables; the node that makes the float output
takes them as inputs (data, no gradient) and saves what its backward reads. link_outputs
(ops/multi.py) marks them as outputs of that node, so capture writes one IR operation
moe_topk(probs) -> (weights, indices), moe_permute(x, indices) -> (x_perm, scatter_indices,
expert_offsets).
"""
from __future__ import annotations

import numpy as np

from .. import kernels
from ..errors import DtypeError, ShapeError
from ..eager.function import Function, register
from ..eager.variable import Variable
from .multi import link_outputs, linked_output
from ..optable import SAME, define


@register("moe_softmax")
class MoeSoftmax(Function):
    """probs = softmax(logits) over the E experts of each token; saves probs."""
    grad_text = ("probs * (grad_output - sum(grad_output * probs))",)
    input_names = ("logits",)

    @staticmethod
    def forward(ctx, logits):
        _check_float("moe_softmax", "logits", logits, ndim=2, shape_text="(N, E)")
        probs = kernels.softmax(logits, -1, out=ctx.out(logits))
        ctx.save_for_backward(probs)
        return probs

    @staticmethod
    def backward(ctx, grad_output):
        (probs,) = ctx.saved_tensors
        return kernels.softmax_backward(probs, grad_output, -1)


@register("moe_sigmoid")
class MoeSigmoid(Function):
    """probs = 1 / (1 + exp(-logits)), each expert scored on its own; saves probs."""
    grad_text = ("grad_output * probs * (1 - probs)",)
    input_names = ("logits",)

    @staticmethod
    def forward(ctx, logits):
        _check_float("moe_sigmoid", "logits", logits, ndim=2, shape_text="(N, E)")
        probs = kernels.sigmoid(logits, out=ctx.out(logits))
        ctx.save_for_backward(probs)
        return probs

    @staticmethod
    def backward(ctx, grad_output):
        (probs,) = ctx.saved_tensors
        return kernels.sigmoid_backward(probs, grad_output)


@register("moe_topk")
class MoeTopk(Function):
    """weights[n, j] = probs[n, indices[n, j]]; d_probs = d_weights scattered to the chosen ones."""
    grad_text = ("grad_output scattered to the selected experts, zero elsewhere",
                 "none (expert indices)")
    input_names = ("probs", "indices")
    shape_rule = "indices (N, K) holds column numbers of probs (N, E)"
    shape_fix = "call mg.moe_topk(probs, k), which makes the indices"

    @staticmethod
    def forward(ctx, probs, indices):
        ctx.k = indices.shape[-1]
        ctx.save_for_backward(probs, indices)
        return np.take_along_axis(probs, indices, axis=-1)

    @staticmethod
    def backward(ctx, grad_output):
        probs, indices = ctx.saved_tensors
        return kernels.moe_topk_backward(grad_output, indices, probs.shape[-1]), None


@register("moe_permute")
class MoePermute(Function):
    """x_perm[s[n*K + j]] = x[n]; d_x[n] = sum_j d_x_perm[s[n*K + j]] (s = scatter_indices)."""
    grad_text = ("the rows of grad_output read back through scatter_indices, the K copies summed",
                 "none (expert indices)", "none (scatter indices)", "none (expert offsets)")
    input_names = ("x", "indices", "scatter_indices", "expert_offsets")
    shape_rule = "scatter_indices (N*K,) is a permutation of the rows of x repeated K times"
    shape_fix = "call mg.moe_permute(x, indices, num_experts), which makes the index tensors"

    @staticmethod
    def forward(ctx, x, indices, scatter_indices, expert_offsets):
        ctx.save_for_backward(scatter_indices)
        ctx.n_tokens, ctx.num_experts = x.shape[0], expert_offsets.size - 1
        return kernels.moe_permute_rows(x, scatter_indices)

    @staticmethod
    def backward(ctx, grad_output):
        (scatter_indices,) = ctx.saved_tensors
        d_x = kernels.moe_permute_backward(grad_output, scatter_indices, ctx.n_tokens)
        return d_x, None, None, None


@register("moe_unpermute")
class MoeUnpermute(Function):
    """out[n] = sum_j w[n,j] y[s[nK+j]]; d_y[s[nK+j]] = w[n,j] g[n], d_w[n,j] = <g[n], y[s[nK+j]]>."""
    grad_text = ("routing_weights[n, j] * grad_output[n], placed at row scatter_indices[n*K + j]",
                 "<grad_output[n], expert_out[scatter_indices[n*K + j]]>", "none (scatter indices)")
    input_names = ("expert_out", "routing_weights", "scatter_indices")

    @staticmethod
    def forward(ctx, expert_out, routing_weights, scatter_indices):
        _check_unpermute(expert_out, routing_weights, scatter_indices)
        ctx.save_for_backward(expert_out, routing_weights, scatter_indices)
        return kernels.moe_unpermute(expert_out, routing_weights, scatter_indices)

    @staticmethod
    def backward(ctx, grad_output):
        expert_out, routing_weights, scatter_indices = ctx.saved_tensors
        need_rows, need_weights = ctx.needs_input_grad[:2]
        d_rows = kernels.moe_unpermute_backward_expert_out(
            grad_output, routing_weights, scatter_indices) if need_rows else None
        d_weights = None
        if need_weights:   # out= tells K, also with no tokens
            d_weights = kernels.moe_unpermute_backward_weights(
                grad_output, expert_out, scatter_indices,
                np.empty(routing_weights.shape, np.result_type(grad_output, expert_out)))
        return d_rows, d_weights, None


class _GroupedGemm(Function):
    """out[rows of e] = x[rows of e] @ W[e]; d_x = d_out @ W[e]^T, d_W[e] = x^T d_out (each e)."""
    grad_text = ("grad_output[rows of e] @ weight[e]^T", "x[rows of e]^T @ grad_output[rows of e]",
                 "none (expert offsets)")
    input_names = ("x", "weight", "expert_offsets")

    @classmethod
    def forward(cls, ctx, x, weight, expert_offsets):
        _check_grouped_gemm(cls.name, x, weight, expert_offsets)
        ctx.save_for_backward(x, weight, expert_offsets)
        return kernels.moe_grouped_gemm(x, weight, expert_offsets)

    @staticmethod
    def backward(ctx, grad_output):
        x, weight, expert_offsets = ctx.saved_tensors
        need_x, need_weight = ctx.needs_input_grad[:2]
        d_x = kernels.moe_grouped_gemm_backward_x(grad_output, weight, expert_offsets) \
            if need_x else None
        d_weight = kernels.moe_grouped_gemm_backward_weight(grad_output, x, expert_offsets) \
            if need_weight else None
        return d_x, d_weight, None


@register("moe_grouped_gemm_gate_up")
class MoeGroupedGemmGateUp(_GroupedGemm):
    """gate_up[rows of e] = x_perm[rows of e] @ W[e], W (E, D, 2F); saves x, W, offsets."""


@register("moe_grouped_gemm_down")
class MoeGroupedGemmDown(_GroupedGemm):
    """out[rows of e] = h[rows of e] @ weight[e], weight (E, F, D); saves h, weight, offsets."""


# -- the functions students call ------------------------------------------------------------------
def moe_softmax(logits):
    return MoeSoftmax.apply(logits)


def moe_sigmoid(logits):
    return MoeSigmoid.apply(logits)


def moe_topk(probs, k: int):
    """(weights (N, K), indices (N, K) int64): the K largest probabilities of each token, largest
    first; equal probabilities go to the lower expert index (deterministic)."""
    data = _data(probs)
    _check_float("moe_topk", "probs", data, ndim=2, shape_text="(N, E)")
    _check_k(data.shape, k)
    indices = Variable(kernels.moe_topk(data, k)[1])
    weights = MoeTopk.apply(probs, indices)
    link_outputs(weights, indices=indices)
    return weights, indices


def moe_permute(x, indices, num_experts: int):
    """(x_perm (N*K, D), scatter_indices (N*K,), expert_offsets (E+1,)): every token copied once
    per chosen expert, rows grouped by expert, token order kept within an expert."""
    x_data, index_data = _data(x), _data(indices)
    _check_permute(x_data, index_data, num_experts)
    scatter_indices, expert_offsets = (Variable(a) for a in
                                       kernels.moe_permute(index_data, num_experts))
    x_perm = MoePermute.apply(x, indices, scatter_indices, expert_offsets)
    link_outputs(x_perm, scatter_indices=scatter_indices, expert_offsets=expert_offsets)
    return x_perm, scatter_indices, expert_offsets


def moe_unpermute(expert_out, routing_weights, scatter_indices):
    return MoeUnpermute.apply(expert_out, routing_weights, scatter_indices)


def moe_grouped_gemm_gate_up(x_perm, weight, expert_offsets):
    return MoeGroupedGemmGateUp.apply(x_perm, weight, expert_offsets)


def moe_grouped_gemm_down(h, weight, expert_offsets):
    return MoeGroupedGemmDown.apply(h, weight, expert_offsets)


# -- checks: each names the op, the shapes, the rule and the fix ---------------------------------
def _data(x) -> np.ndarray:
    return x._data if isinstance(x, Variable) else np.asarray(x)


def _check_float(op: str, what: str, a: np.ndarray, ndim: int, shape_text: str) -> None:
    if a.dtype.kind != "f":
        raise DtypeError(f"{op}: {what} has dtype {a.dtype}, shape {a.shape}. Rule: {what} "
                         f"{shape_text} is a float array. Fix: {what}.astype(np.float32) "
                         f"(or float64).")
    if a.ndim != ndim:
        raise ShapeError(f"{op}: {what} has shape {a.shape}. Rule: {what} has shape "
                         f"{shape_text}. Fix: reshape the tokens to one row each, e.g. "
                         f"x.reshape(-1, x.shape[-1]).")


def _check_index(op: str, what: str, a: np.ndarray, shape: tuple, shape_text: str) -> None:
    if a.dtype.kind not in "iu":
        raise DtypeError(f"{op}: {what} has dtype {a.dtype}, shape {a.shape}. Rule: {what} is an "
                         f"integer index array (it carries no gradient). Fix: pass the integer "
                         f"tensor the previous MoE op returned, or {what}.astype(np.int64).")
    if a.shape != shape:
        raise ShapeError(f"{op}: {what} has shape {a.shape}, expected {shape}. Rule: {what} has "
                         f"shape {shape_text}, made for these tokens. Fix: pass the {what} the "
                         f"previous MoE op returned for them (same N, K and E).")


def _check_k(shape: tuple, k) -> None:
    n, experts = shape
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= experts:
        raise ShapeError(f"moe_topk: k={k!r} for probs of shape {shape}. Rule: 1 <= k <= E = "
                         f"{experts}, an int, not a bool (each token picks k distinct experts). "
                         f"Fix: choose k in 1..{experts}, or route over more experts.")


def _check_permute(x: np.ndarray, indices: np.ndarray, num_experts) -> None:
    _check_float("moe_permute", "x", x, ndim=2, shape_text="(N, D)")
    if indices.ndim != 2 or indices.shape[0] != x.shape[0]:
        raise ShapeError(f"moe_permute: x {x.shape} and indices {indices.shape}. Rule: indices has "
                         f"shape (N, K) with N = x.shape[0] = {x.shape[0]}. Fix: pass the indices "
                         f"moe_topk returned for these tokens.")
    _check_index("moe_permute", "indices", indices, indices.shape, "(N, K)")
    if not isinstance(num_experts, (int, np.integer)) or num_experts < 1:
        raise ShapeError(f"moe_permute: num_experts={num_experts!r}. Rule: a positive int E. "
                         f"Fix: pass the number of experts the router scores.")
    check_expert_range(indices, num_experts)


def check_expert_range(indices: np.ndarray, num_experts: int) -> None:
    """Every index names one of the experts (also checked on each run of an aot plan)."""
    if indices.size and (indices.min() < 0 or indices.max() >= num_experts):
        raise ShapeError(f"moe_permute: indices (shape {indices.shape}) hold values in "
                         f"[{indices.min()}, {indices.max()}]. Rule: 0 <= index < num_experts = "
                         f"{num_experts}. Fix: pass num_experts = the router's E (and indices "
                         f"made for that many experts).")


def _check_unpermute(expert_out, routing_weights, scatter_indices) -> None:
    _check_float("moe_unpermute", "expert_out", expert_out, ndim=2, shape_text="(N*K, D)")
    _check_float("moe_unpermute", "routing_weights", routing_weights, ndim=2, shape_text="(N, K)")
    rows = routing_weights.shape[0] * routing_weights.shape[1]
    if expert_out.shape[0] != rows:
        raise ShapeError(f"moe_unpermute: expert_out {expert_out.shape} and routing_weights "
                         f"{routing_weights.shape}. Rule: expert_out has N*K = {rows} rows, one "
                         f"per (token, chosen expert). Fix: pass the output of the grouped "
                         f"matmuls on moe_permute's x_perm, and moe_topk's weights.")
    _check_index("moe_unpermute", "scatter_indices", scatter_indices, (rows,), "(N*K,)")
    check_scatter(scatter_indices)


def check_scatter(scatter_indices: np.ndarray) -> None:
    """scatter_indices is a permutation of 0..N*K-1 (also checked on each run of an aot plan).
    A repeated row would be summed twice in forward but written once in backward (an
    assignment), and a row never named would get uninitialised memory as its gradient."""
    rows = scatter_indices.size
    if rows == 0:
        return
    if scatter_indices.min() >= 0 and scatter_indices.max() < rows and \
            np.all(np.bincount(scatter_indices, minlength=rows) == 1):
        return
    inside = scatter_indices[(scatter_indices >= 0) & (scatter_indices < rows)]
    counts = np.bincount(inside, minlength=rows)
    what = (f"values outside [0, {rows})" if inside.size < rows
            else f"row {int(np.flatnonzero(counts > 1)[0])} {int(counts.max())} times and row "
                 f"{int(np.flatnonzero(counts == 0)[0])} never")
    raise ShapeError(f"moe_unpermute: scatter_indices of shape {scatter_indices.shape} hold "
                     f"{what}. Rule: scatter_indices is a permutation of 0..N*K-1 = "
                     f"0..{rows - 1}, one expert-output row per (token, slot); a repeated row "
                     f"would get only one of its gradients, a missing row none. Fix: pass the "
                     f"scatter_indices moe_permute returned.")


def _check_grouped_gemm(op: str, x, weight, expert_offsets) -> None:
    _check_float(op, "x", x, ndim=2, shape_text="(rows, D_in)")
    _check_float(op, "weight", weight, ndim=3, shape_text="(E, D_in, D_out)")
    if x.shape[1] != weight.shape[1]:
        raise ShapeError(f"{op}: x {x.shape} and weight {weight.shape}. Rule: x's features "
                         f"x.shape[1] = weight.shape[1] (weight is (E, D_in, D_out)). Fix: use the "
                         f"weight of this layer, or reshape x to (rows, {weight.shape[1]}).")
    experts = weight.shape[0]
    _check_index(op, "expert_offsets", expert_offsets, (experts + 1,), "(E+1,)")
    check_offsets(op, x, expert_offsets)


def check_offsets(op: str, x: np.ndarray, expert_offsets: np.ndarray) -> None:
    """The offsets cut x's rows into E blocks (also checked on each run of an aot plan)."""
    rows = x.shape[0]
    if expert_offsets[0] != 0 or expert_offsets[-1] != rows or np.any(np.diff(expert_offsets) < 0):
        raise ShapeError(f"{op}: expert_offsets {expert_offsets.tolist()} for x of shape "
                         f"{x.shape}. Rule: offsets start at 0, never decrease, and end at "
                         f"x.shape[0] = {rows}. Fix: pass the expert_offsets moe_permute returned.")


# -- rows of the op table: how capture writes each op (its rule and compilers are still kept in
# aot/rules_moe.py and aot/compile_moe.py, which attach them to these rows).
define(MoeSoftmax, capture=SAME, saves="probs")
define(MoeSigmoid, capture=SAME, saves="probs")
define(MoeTopk, saves="probs and indices",
       capture=lambda node, v, inputs: (   # (weights, indices)
           "moe_topk", {"k": node.k}, [v, linked_output(node, "indices")]))
define(MoePermute, saves="scatter_indices",
       capture=lambda node, v, inputs: (   # (x_perm, scatter_indices, expert_offsets)
           "moe_permute", {"num_experts": node.num_experts},
           [v, linked_output(node, "scatter_indices"), linked_output(node, "expert_offsets")]))
define(MoeUnpermute, capture=SAME, saves="expert_out, routing weights and scatter_indices")
define(MoeGroupedGemmGateUp, capture=SAME, saves="x and expert_offsets")
define(MoeGroupedGemmDown, capture=SAME, saves="x and expert_offsets")
