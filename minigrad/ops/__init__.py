"""The ops, each one whole in its family's file: the eager Function (forward and backward), its
aot rule and compilers, its row of the op table (minigrad/optable.py). Importing this package
fills the table and minigrad.OPS; __all__ is read from the table's rows."""
from .. import optable
from .activations import gelu, silu
from .elementwise import abs, add, div, exp, log, mul, neg, pow, relu, sigmoid, sub, tanh
from .linalg import linear, matmul
from .loss import cross_entropy, log_softmax, mse, softmax
from .moe import (moe_grouped_gemm_down, moe_grouped_gemm_gate_up, moe_permute, moe_sigmoid,
                  moe_softmax, moe_topk, moe_unpermute)
from .reduce import max, mean, sum
from .shape import broadcast_to, concat, getitem, reshape, stack, transpose
from .transformer import (attention, embedding, flash_attention, fused_lm_head_loss,
                          fused_residual_rmsnorm, qkv_qk_norm_rope, rmsnorm, rope, rope_freqs,
                          swiglu)

__all__ = optable.public_names() + ["rope_freqs"]   # (rope_freqs: a helper, not an op)
