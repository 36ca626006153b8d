"""The ops, one small Function subclass each; importing this package fills minigrad.OPS."""
from .activations import gelu, silu
from .elementwise import add, div, exp, log, mul, neg, pow, relu, sigmoid, sub, tanh
from .linalg import linear, matmul
from .loss import cross_entropy, log_softmax, mse, softmax
from .reduce import max, mean, sum
from .shape import broadcast_to, concat, getitem, reshape, stack, transpose

__all__ = ["add", "sub", "mul", "div", "neg", "pow", "exp", "log", "tanh", "sigmoid", "relu",
           "matmul", "linear", "sum", "mean", "max", "reshape", "transpose", "broadcast_to",
           "concat", "stack", "getitem", "softmax", "log_softmax", "cross_entropy", "mse",
           "silu", "gelu"]
from .moe import (moe_grouped_gemm_down, moe_grouped_gemm_gate_up, moe_permute, moe_sigmoid,  # noqa: E402
                  moe_softmax, moe_topk, moe_unpermute)
__all__ += ["moe_softmax", "moe_sigmoid", "moe_topk", "moe_permute", "moe_unpermute",
            "moe_grouped_gemm_gate_up", "moe_grouped_gemm_down"]
from .transformer import (attention, embedding, fused_lm_head_loss, fused_residual_rmsnorm,  # noqa: E402
                          rmsnorm, rope, rope_freqs, swiglu)
__all__ += ["embedding", "rmsnorm", "fused_residual_rmsnorm", "swiglu", "rope", "rope_freqs",
            "attention", "fused_lm_head_loss"]
from .transformer import flash_attention, qkv_qk_norm_rope  # noqa: E402
__all__ += ["flash_attention", "qkv_qk_norm_rope"]
