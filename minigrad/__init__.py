"""minigrad: a small reverse-mode autodiff engine to learn from, one step of backward at a time.

    import minigrad as mg
    w = mg.create_leaf([1.0, -2.0], requires_grad=True, name="w")
    x = mg.create_leaf([3.0, 4.0], name="x")
    loss = (w * x).tanh().sum()
    loss.backward()
    w.grad
"""
from . import check, errors
from .arena import Arena, Block, Pool, StaleVariableError, current_allocator
from .eager.engine import (Step, accumulate_grad, backward, backward_groups, backward_steps,
                           topo_order)
from .eager.function import AccumulateGrad, Function, live_nodes, register
from .eager.higher import grad
from .modes import is_debug, is_grad_enabled, no_grad, set_debug
from .ops import gelu, silu
from .ops import abs  # noqa: A004 - the op's name, as numpy's np.abs
from .ops import (add, broadcast_to, concat, cross_entropy, div, exp, getitem, linear, log,
                  log_softmax, matmul, max, mean, mse, mul, neg, pow, relu, reshape, sigmoid,
                  softmax, stack, sub, sum, tanh, transpose)
from .trace import record, trace_of
from .eager.variable import OPS, Variable, create_leaf

__version__ = "0.1.0"

__all__ = [
    "Variable", "create_leaf", "Function", "register", "AccumulateGrad", "OPS",
    "Arena", "Pool", "Block", "StaleVariableError", "current_allocator",
    "backward", "grad", "backward_steps", "backward_groups", "Step", "accumulate_grad", "topo_order",
    "record", "trace_of", "live_nodes",
    "no_grad", "is_grad_enabled", "set_debug", "is_debug", "check", "errors",
    "data", "nn", "optim",
    "add", "sub", "mul", "div", "neg", "pow", "exp", "log", "tanh", "sigmoid", "relu",
    "matmul", "linear", "sum", "mean", "max", "reshape", "transpose", "broadcast_to",
    "concat", "stack", "getitem", "softmax", "log_softmax", "cross_entropy", "mse",
    "silu", "gelu", "abs",
]

from . import data, nn, optim  # noqa: E402  (layers, optimisers, datasets, on the API above)
from .modes import name_scope  # noqa: E402
__all__ += ["name_scope"]
from . import tape  # noqa: E402  (the slot tape: an engine beside the eager one)

from .checkpointing import CheckpointError, checkpoint  # noqa: E402  (save vs recompute)
__all__ += ["checkpoint", "CheckpointError"]

from .ops import (moe_grouped_gemm_down, moe_grouped_gemm_gate_up, moe_permute,  # noqa: E402
                  moe_sigmoid, moe_softmax, moe_topk, moe_unpermute)
__all__ += ["moe_softmax", "moe_sigmoid", "moe_topk", "moe_permute", "moe_unpermute",
            "moe_grouped_gemm_gate_up", "moe_grouped_gemm_down"]
from .ops import (attention, embedding, fused_lm_head_loss, fused_residual_rmsnorm,  # noqa: E402
                  rmsnorm, rope, rope_freqs, swiglu)
__all__ += ["embedding", "rmsnorm", "fused_residual_rmsnorm", "swiglu", "rope", "rope_freqs",
            "attention", "fused_lm_head_loss"]
from .ops import flash_attention, qkv_qk_norm_rope  # noqa: E402
__all__ += ["flash_attention", "qkv_qk_norm_rope"]
