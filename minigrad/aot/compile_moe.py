"""The executor's compilers for the mixture-of-experts ops (kernels.py's MoE section).

Each compiler runs its kernel once on the example values (that allocates the output buffer) and
returns the call that rewrites the buffer on every run. Index arrays (scatter_indices,
expert_offsets) are buffers like any other: the grouped matmuls read the offsets of this run.
"""
from __future__ import annotations

import numpy as np

from .. import kernels
from ..ops.moe import check_expert_range, check_offsets, check_scatter
from ..kernels import activation_compiler, along_axis_compiler
from ..kernels import plan_call as _call, run_calls as _run
from ..optable import attach


# Index tensors may be fed to a plan as data, new on every run: the calls that read them check
# them first (a few comparisons on E+1 or N*K integers), with the eager ops' messages.
def _checked_gemm(op: str):
    def run(x, weight, expert_offsets, out):
        check_offsets(op, x, expert_offsets)
        return kernels.moe_grouped_gemm(x, weight, expert_offsets, out)
    return run


def _checked_permute(indices, num_experts, out_scatter, out_offsets):
    check_expert_range(indices, num_experts)
    return kernels.moe_permute(indices, num_experts, out_scatter, out_offsets)


def _grouped_gemm(op: str):
    checked = _checked_gemm(op)

    def compile_(x, weight, expert_offsets, **attrs):
        out = np.empty((x.shape[0], weight.shape[2]), np.result_type(x, weight))
        return _call(checked, x, weight, expert_offsets, out)
    return compile_


def _grouped_gemm_backward_x(grad_output, weight, expert_offsets, **attrs):
    out = np.empty((grad_output.shape[0], weight.shape[1]), np.result_type(grad_output, weight))
    return _call(kernels.moe_grouped_gemm_backward_x, grad_output, weight, expert_offsets, out)


def _grouped_gemm_backward_weight(grad_output, x, expert_offsets, **attrs):
    out = np.empty((expert_offsets.size - 1, x.shape[1], grad_output.shape[1]),
                   np.result_type(grad_output, x))
    return _call(kernels.moe_grouped_gemm_backward_weight, grad_output, x, expert_offsets, out)


def _checked_unpermute(expert_out, routing_weights, scatter_indices, out):
    check_scatter(scatter_indices)
    return kernels.moe_unpermute(expert_out, routing_weights, scatter_indices, out)


def _unpermute(expert_out, routing_weights, scatter_indices, **attrs):
    out = np.empty((routing_weights.shape[0], expert_out.shape[1]),
                   np.result_type(expert_out, routing_weights))
    return _call(_checked_unpermute, expert_out, routing_weights, scatter_indices, out)


def _unpermute_backward_expert_out(grad_output, routing_weights, scatter_indices, **attrs):
    out = np.empty((scatter_indices.size, grad_output.shape[1]),
                   np.result_type(grad_output, routing_weights))
    return _call(kernels.moe_unpermute_backward_expert_out, grad_output, routing_weights,
                 scatter_indices, out)


def _unpermute_backward_weights(grad_output, expert_out, scatter_indices, **attrs):
    out = np.empty((grad_output.shape[0], scatter_indices.size // max(grad_output.shape[0], 1)),
                   np.result_type(grad_output, expert_out))
    return _call(kernels.moe_unpermute_backward_weights, grad_output, expert_out, scatter_indices,
                 out)


def _topk(probs, k=None, **attrs):
    """Two outputs: (weights, indices), each buffer a call argument of its own."""
    shape = probs.shape[:-1] + (k,)
    out = (np.empty(shape, probs.dtype), np.empty(shape, np.int64))
    return out, _run([(kernels.moe_topk, (probs, k, *out))])


def _topk_backward(grad_weights, probs, indices, **attrs):
    return _call(kernels.moe_topk_backward, grad_weights, indices, probs.shape[-1],
                 np.zeros(probs.shape, np.result_type(grad_weights, probs)))


def _permute(x, indices, num_experts=None, **attrs):
    """Three outputs: (x_perm, scatter_indices, expert_offsets); indices first, then the rows."""
    index_out = (np.empty(indices.size, np.int64), np.empty(num_experts + 1, np.int64))
    x_perm = np.empty((indices.size, x.shape[1]), x.dtype)
    return (x_perm, *index_out), _run([(_checked_permute, (indices, num_experts, *index_out)),
                                       (kernels.moe_permute_rows, (x, index_out[0], x_perm))])


def _permute_backward(grad_x_perm, scatter_indices, n_tokens=None, **attrs):
    return _call(kernels.moe_permute_backward, grad_x_perm, scatter_indices, n_tokens,
                 np.empty((n_tokens, grad_x_perm.shape[1]), grad_x_perm.dtype))


# Each op's compilers enter its row of the op table (the backward kernels with the op whose rule
# emits them; both grouped matmuls' rules emit the same two).
for name, compilers in {
    "moe_topk": {"moe_topk": _topk, "moe_topk_backward": _topk_backward},
    "moe_permute": {"moe_permute": _permute, "moe_permute_backward": _permute_backward},
    "moe_softmax": {"moe_softmax": along_axis_compiler(kernels.softmax)},
    "moe_sigmoid": {"moe_sigmoid": activation_compiler(kernels.sigmoid)},
    "moe_grouped_gemm_gate_up": {
        "moe_grouped_gemm_gate_up": _grouped_gemm("moe_grouped_gemm_gate_up"),
        "moe_grouped_gemm_backward_x": _grouped_gemm_backward_x,
        "moe_grouped_gemm_backward_weight": _grouped_gemm_backward_weight},
    "moe_grouped_gemm_down": {"moe_grouped_gemm_down": _grouped_gemm("moe_grouped_gemm_down")},
    "moe_unpermute": {
        "moe_unpermute": _unpermute,
        "moe_unpermute_backward_expert_out": _unpermute_backward_expert_out,
        "moe_unpermute_backward_weights": _unpermute_backward_weights},
}.items():
    attach(name, compilers=compilers)
