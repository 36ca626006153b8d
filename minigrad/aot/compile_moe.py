"""The executor's compilers for the mixture-of-experts ops (kernels.py's MoE section).

Each compiler runs its kernel once on the example values (that allocates the output buffer) and
returns the call that rewrites the buffer on every run. Index arrays (scatter_indices,
expert_offsets) are buffers like any other: the grouped matmuls read the offsets of this run.
"""
from __future__ import annotations

import numpy as np

from .. import kernels
from .execute import _activation, _along_axis, _call


def _grouped_gemm(x, weight, expert_offsets, **attrs):
    out = np.empty((x.shape[0], weight.shape[2]), np.result_type(x, weight))
    return _call(kernels.moe_grouped_gemm, x, weight, expert_offsets, out)


def _grouped_gemm_backward_x(grad_output, weight, expert_offsets, **attrs):
    out = np.empty((grad_output.shape[0], weight.shape[1]), np.result_type(grad_output, weight))
    return _call(kernels.moe_grouped_gemm_backward_x, grad_output, weight, expert_offsets, out)


def _grouped_gemm_backward_weight(grad_output, x, expert_offsets, **attrs):
    out = np.empty((expert_offsets.size - 1, x.shape[1], grad_output.shape[1]),
                   np.result_type(grad_output, x))
    return _call(kernels.moe_grouped_gemm_backward_weight, grad_output, x, expert_offsets, out)


def _unpermute(expert_out, routing_weights, scatter_indices, **attrs):
    out = np.empty((routing_weights.shape[0], expert_out.shape[1]),
                   np.result_type(expert_out, routing_weights))
    return _call(kernels.moe_unpermute, expert_out, routing_weights, scatter_indices, out)


def _unpermute_backward_expert_out(grad_output, routing_weights, scatter_indices, **attrs):
    out = np.empty((scatter_indices.size, grad_output.shape[1]),
                   np.result_type(grad_output, routing_weights))
    return _call(kernels.moe_unpermute_backward_expert_out, grad_output, routing_weights,
                 scatter_indices, out)


def _unpermute_backward_weights(grad_output, expert_out, scatter_indices, **attrs):
    out = np.empty((grad_output.shape[0], scatter_indices.size // max(grad_output.shape[0], 1)),
                   np.result_type(grad_output, expert_out))
    return _call(kernels.moe_unpermute_backward_weights, grad_output, expert_out, scatter_indices, out)


MOE_COMPILERS = {
    "moe_softmax": _along_axis(kernels.softmax),
    "moe_sigmoid": _activation(kernels.sigmoid),
    "moe_grouped_gemm_gate_up": _grouped_gemm, "moe_grouped_gemm_down": _grouped_gemm,
    "moe_grouped_gemm_backward_x": _grouped_gemm_backward_x,
    "moe_grouped_gemm_backward_weight": _grouped_gemm_backward_weight,
    "moe_unpermute": _unpermute,
    "moe_unpermute_backward_expert_out": _unpermute_backward_expert_out,
    "moe_unpermute_backward_weights": _unpermute_backward_weights,
}
