"""The blocks of a tiny decoder-only transformer, on the transformer ops (minigrad.nn has them).

    model = TinyTransformer(vocab=11, dim=32, n_layers=2, n_heads=4, hidden=64, seed=0)
    loss = model(ids, targets)       # ids int (B, T), targets int (B*T,): mean cross-entropy
    loss.backward()

The residual stream is kept as rows, shape (B*T, D): every Linear is then a 2-D matmul, which is
what the ahead-of-time IR takes, so the same model runs on the eager engine and through
minigrad.aot.capture. Only attention sees (B, T, H, Dh). A block, pre-norm as in Llama:

    residual, h = fused_residual_rmsnorm(x, residual)    # residual += x;  h = rmsnorm(residual)
    a = attention(h)
    residual, h = fused_residual_rmsnorm(a, residual)
    x = mlp(h)                                           # SwiGLU, or a mixture of experts

so each addition to the residual stream and the norm after it are one op. The model ends with
one more fused norm and fused_lm_head_loss (the logits are never kept: the rule recomputes
them). Parameters are named after where they live ("blocks.1.attn.q.weight"), so capture,
the views and an optimiser all speak of the same tensors.
"""
from __future__ import annotations

import math

import numpy as np

from .. import ops
from ..errors import DtypeError, MinigradError, ShapeError
from ..modes import no_grad
from .layers import Linear, Module, parameter
from ..eager.variable import Variable, create_leaf

__all__ = ["Embedding", "RMSNorm", "Attention", "SwiGLU", "MoE", "TransformerBlock",
           "TinyTransformer", "name_parameters"]


class TokenIdError(MinigradError, IndexError):
    """Token ids outside the embedding table."""


def _check_int(where: str, label: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ShapeError(f"{where}: {label} must be an integer >= {minimum}, got {value!r}. "
                         f"Fix: e.g. {label}={max(minimum, 4)}.")
    return int(value)


def _rng(seed) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _rows(where: str, x, dim: int):
    """x as (rows, dim): the layout every block reads."""
    shape = tuple(x.shape)
    if len(shape) != 2 or shape[1] != dim:
        raise ShapeError(f"{where}: input of shape {shape}, but the blocks read the residual "
                         f"stream as rows of shape (B*T, {dim}). Fix: reshape (B, T, {dim}) "
                         f"activations with x.reshape(B * T, {dim}) first.")
    return x


class Embedding(Module):
    """y[..., :] = weight[ids[...], :]: one learned row of size dim per token id."""

    def __init__(self, vocab: int, dim: int, *, seed=None, dtype=np.float32, arena=None):
        self.vocab = _check_int("Embedding(vocab, dim)", "vocab", vocab)
        self.dim = _check_int("Embedding(vocab, dim)", "dim", dim)
        weight = _rng(seed).normal(0.0, 1.0, size=(self.vocab, self.dim))
        self.weight = parameter(weight.astype(dtype), "embedding.weight", arena)

    def forward(self, ids):
        data = ids._data if isinstance(ids, Variable) else np.asarray(ids)   # (checks only: not
        # .data, which an aot capture counts as values read out of the graph)
        if data.dtype.kind not in "iu":
            raise DtypeError(f"Embedding: ids of dtype {data.dtype} and shape {data.shape}; ids "
                            f"index the rows of the ({self.vocab}, {self.dim}) table, so they "
                            f"must be integers. Fix: ids.astype(np.int64).")
        if data.size and (data.min() < 0 or data.max() >= self.vocab):
            raise TokenIdError(f"Embedding: ids of shape {data.shape} hold values in "
                             f"[{data.min()}, {data.max()}], but the table has {self.vocab} rows "
                             f"(ids 0..{self.vocab - 1}). Fix: a larger vocab, or map the ids.")
        return ops.embedding(ids, self.weight)

    def __repr__(self) -> str:
        return f"Embedding({self.vocab}, {self.dim})"


class RMSNorm(Module):
    """y = x / sqrt(mean(x^2) + eps) * weight over the last axis; with a residual, the fused form
    (residual + x, rmsnorm(residual + x))."""

    def __init__(self, dim: int, eps: float = 1e-6, *, dtype=np.float32, arena=None):
        self.dim = _check_int("RMSNorm(dim)", "dim", dim)
        if not eps > 0:
            raise ShapeError(f"RMSNorm(eps={eps!r}): eps must be positive; it keeps 1/sqrt(.) "
                             f"finite on a row of zeros. Fix: eps=1e-6.")
        self.eps = float(eps)
        self.weight = parameter(np.ones(self.dim, dtype), "rmsnorm.weight", arena)

    def forward(self, x, residual=None):
        if tuple(x.shape)[-1:] != (self.dim,):
            raise ShapeError(f"RMSNorm({self.dim}): input of shape {tuple(x.shape)}; the norm "
                             f"runs over the last axis, which must have size {self.dim}. Fix: "
                             f"RMSNorm({tuple(x.shape)[-1] if x.shape else 1}) or the right input.")
        if residual is None:
            return ops.rmsnorm(x, self.weight, eps=self.eps)
        if tuple(residual.shape) != tuple(x.shape):
            raise ShapeError(f"RMSNorm({self.dim}): residual of shape {tuple(residual.shape)} "
                             f"and x of shape {tuple(x.shape)}; residual + x needs equal shapes. "
                             f"Fix: pass the residual stream the block read.")
        return ops.fused_residual_rmsnorm(x, residual, self.weight, eps=self.eps)

    def __repr__(self) -> str:
        return f"RMSNorm({self.dim})"


class Attention(Module):
    """Causal multi-head self-attention with rope: o(attention(rope(q x), rope(k x), v x))."""

    def __init__(self, dim: int, n_heads: int, *, seed=None, dtype=np.float32, arena=None,
                 rope_base: float = 10000.0):
        self.dim = _check_int("Attention(dim, n_heads)", "dim", dim)
        self.n_heads = _check_int("Attention(dim, n_heads)", "n_heads", n_heads)
        if dim % n_heads or (dim // n_heads) % 2:
            raise ShapeError(f"Attention(dim={dim}, n_heads={n_heads}): each head gets dim / "
                             f"n_heads features, and rope rotates them in pairs, so dim / n_heads "
                             f"must be an even integer. Fix: e.g. dim=32, n_heads=4 (8 per head).")
        self.head_dim = dim // n_heads
        rng = _rng(seed)
        self.q, self.k, self.v, self.o = (Linear(dim, dim, bias=False, seed=rng, dtype=dtype,
                                                 arena=arena) for _ in range(4))
        # data, not a parameter, named "rope_freqs": aot gives it no gradient by that name too
        self.freqs = ops.rope_freqs(self.head_dim, base=rope_base, dtype=dtype)

    def forward(self, x, seq_len: int, position_ids=None):
        x = _rows("Attention", x, self.dim)
        seq_len = _check_int("Attention(x, seq_len)", "seq_len", seq_len)   # rows / 0 is no batch
        rows = x.shape[0]
        if rows % seq_len:
            raise ShapeError(f"Attention: {rows} rows of the residual stream cannot be split into "
                             f"sequences of seq_len={seq_len}. Fix: rows = batch * seq_len.")
        shape = (rows // seq_len, seq_len, self.n_heads, self.head_dim)
        if position_ids is None:
            position_ids = create_leaf(np.arange(seq_len), name="position_ids")
        q = ops.rope(self.q(x).reshape(shape), self.freqs, position_ids)
        k = ops.rope(self.k(x).reshape(shape), self.freqs, position_ids)
        v = self.v(x).reshape(shape)
        # (named, so that a drawing's attention reads its parents as q, k, v, not "rope, rope")
        q.name, k.name, v.name = "q", "k", "v"
        out = ops.attention(q, k, v, causal=True)
        return self.o(out.reshape(rows, self.dim))

    def __repr__(self) -> str:
        return f"Attention({self.dim}, n_heads={self.n_heads})"


class SwiGLU(Module):
    """down(silu(gate) * up) with (gate, up) = halves of gate_up(x): the Llama MLP."""

    def __init__(self, dim: int, hidden: int, *, seed=None, dtype=np.float32, arena=None):
        self.dim = _check_int("SwiGLU(dim, hidden)", "dim", dim)
        self.hidden = _check_int("SwiGLU(dim, hidden)", "hidden", hidden)
        rng = _rng(seed)
        self.gate_up = Linear(dim, 2 * hidden, bias=False, seed=rng, dtype=dtype, arena=arena)
        self.down = Linear(hidden, dim, bias=False, seed=rng, dtype=dtype, arena=arena)

    def forward(self, x):
        x = _rows("SwiGLU", x, self.dim)
        return self.down(ops.swiglu(self.gate_up(x)))

    def __repr__(self) -> str:
        return f"SwiGLU({self.dim}, hidden={self.hidden})"


class MoE(Module):
    """A mixture of SwiGLU experts: each row goes to its top-k experts (by a learned router) and
    comes back as the routing-weighted sum of their outputs."""

    def __init__(self, dim: int, hidden: int, n_experts: int, k: int = 2, *, seed=None,
                 dtype=np.float32, arena=None):
        where = "MoE(dim, hidden, n_experts, k)"
        self.dim, self.hidden = _check_int(where, "dim", dim), _check_int(where, "hidden", hidden)
        self.n_experts = _check_int(where, "n_experts", n_experts)
        self.k = _check_int(where, "k", k)
        if self.k > self.n_experts:
            raise ShapeError(f"{where}: k={k} experts per row out of n_experts={n_experts}; a row "
                             f"cannot use more experts than exist. Fix: k <= n_experts.")
        rng = _rng(seed)
        self.router = Linear(dim, n_experts, bias=False, seed=rng, dtype=dtype, arena=arena)
        bound_up, bound_down = math.sqrt(6.0 / dim), math.sqrt(6.0 / hidden)
        self.gate_up_weight = parameter(
            rng.uniform(-bound_up, bound_up, (n_experts, dim, 2 * hidden)).astype(dtype),
            "experts.gate_up.weight", arena)
        self.down_weight = parameter(
            rng.uniform(-bound_down, bound_down, (n_experts, hidden, dim)).astype(dtype),
            "experts.down.weight", arena)

    def forward(self, x):
        x = _rows("MoE", x, self.dim)
        probs = ops.moe_softmax(self.router(x))
        weights, indices = ops.moe_topk(probs, self.k)
        x_perm, scatter_indices, expert_offsets = ops.moe_permute(x, indices, self.n_experts)
        h = ops.swiglu(ops.moe_grouped_gemm_gate_up(x_perm, self.gate_up_weight, expert_offsets))
        expert_out = ops.moe_grouped_gemm_down(h, self.down_weight, expert_offsets)
        return ops.moe_unpermute(expert_out, weights, scatter_indices)

    def __repr__(self) -> str:
        return f"MoE({self.dim}, hidden={self.hidden}, n_experts={self.n_experts}, k={self.k})"


class TransformerBlock(Module):
    """(x, residual) -> (mlp(h2), residual2): residual += x, h1 = norm; residual += attn(h1),
    h2 = norm. With residual None (the first block) x itself is the residual stream."""

    def __init__(self, dim: int, n_heads: int, hidden: int, *, n_experts: int = 0, k: int = 2,
                 seed=None, dtype=np.float32, arena=None):
        rng = _rng(seed)
        self.attn_norm = RMSNorm(dim, dtype=dtype, arena=arena)
        self.attn = Attention(dim, n_heads, seed=rng, dtype=dtype, arena=arena)
        self.mlp_norm = RMSNorm(dim, dtype=dtype, arena=arena)
        self.mlp = (MoE(dim, hidden, n_experts, k, seed=rng, dtype=dtype, arena=arena)
                    if n_experts else SwiGLU(dim, hidden, seed=rng, dtype=dtype, arena=arena))

    def forward(self, x, residual=None, *, seq_len: int, position_ids=None):
        if residual is None:
            residual, h = x, self.attn_norm(x)
        else:
            residual, h = self.attn_norm(x, residual)
        a = self.attn(h, seq_len, position_ids)
        residual, h = self.mlp_norm(a, residual)
        return self.mlp(h), residual


class TinyTransformer(Module):
    """Token ids (B, T) -> mean next-token cross-entropy: embedding, n_layers blocks, a final
    fused norm and fused_lm_head_loss. `logits(ids)` gives the scores for evaluation."""

    def __init__(self, vocab: int, dim: int, n_layers: int, n_heads: int, hidden: int, *,
                 n_experts: int = 0, k: int = 2, seed=0, dtype=np.float32, arena=None):
        where = "TinyTransformer(vocab, dim, n_layers, n_heads, hidden)"
        self.vocab, self.dim = _check_int(where, "vocab", vocab), _check_int(where, "dim", dim)
        self.n_layers = _check_int(where, "n_layers", n_layers)
        self.n_heads = _check_int(where, "n_heads", n_heads)
        self.hidden = _check_int(where, "hidden", hidden)
        self.n_experts, self.k = int(n_experts), int(k)
        rng = _rng(seed)
        self.embed = Embedding(vocab, dim, seed=rng, dtype=dtype, arena=arena)
        self.blocks = [TransformerBlock(dim, n_heads, hidden, n_experts=n_experts, k=k, seed=rng,
                                        dtype=dtype, arena=arena) for _ in range(n_layers)]
        self.norm = RMSNorm(dim, dtype=dtype, arena=arena)
        head = rng.normal(0.0, 1.0 / math.sqrt(dim), size=(dim, vocab)).astype(dtype)
        self.lm_head = parameter(head, "lm_head", arena)
        for blk in self.blocks[1:]:   # one rotary table for all layers: one constant in aot
            blk.attn.freqs = self.blocks[0].attn.freqs
        name_parameters(self)

    def hidden_states(self, ids):
        """The last norm's output, rows (B*T, dim), for ids (B, T)."""
        shape = tuple(ids.shape)
        if len(shape) != 2:
            raise ShapeError(f"TinyTransformer: ids of shape {shape}; the model reads a batch of "
                             f"sequences, shape (B, T). Fix: ids[None] for one sequence.")
        batch, seq_len = shape
        if seq_len == 0:
            raise ShapeError(f"TinyTransformer: ids of shape {shape} hold sequences of length 0. "
                             f"Rule: each sequence has at least one position (the loss is a mean "
                             f"over positions, and attention splits rows into sequences). Fix: "
                             f"skip empty batches, or pass ids of shape (B, T) with T >= 1.")
        position_ids = create_leaf(np.arange(seq_len), name="position_ids")
        x = self.embed(ids).reshape(batch * seq_len, self.dim)
        residual = None
        for blk in self.blocks:
            x, residual = blk(x, residual, seq_len=seq_len, position_ids=position_ids)
        return self.norm(x, residual)[1]

    def forward(self, ids, targets):
        rows = int(np.prod(tuple(ids.shape)))
        if tuple(targets.shape) != (rows,):
            raise ShapeError(f"TinyTransformer: ids of shape {tuple(ids.shape)} and targets of "
                             f"shape {tuple(targets.shape)}; the loss reads one target per "
                             f"position, flattened row after row, shape ({rows},). Fix: "
                             f"targets.reshape(-1) before the call.")
        h = self.hidden_states(ids)
        return ops.fused_lm_head_loss(h, self.lm_head, targets)

    def logits(self, ids) -> np.ndarray:
        """Scores (B*T, vocab) as a numpy array, without a graph (evaluation)."""
        with no_grad():
            h = self.hidden_states(ids)
        return h.data @ self.lm_head.data

    def __repr__(self) -> str:
        moe = f", n_experts={self.n_experts}, k={self.k}" if self.n_experts else ""
        return (f"TinyTransformer(vocab={self.vocab}, dim={self.dim}, n_layers={self.n_layers}, "
                f"n_heads={self.n_heads}, hidden={self.hidden}{moe})")


def name_parameters(module: Module, prefix: str = "") -> None:
    """Name every parameter after its path of attributes ("blocks.0.attn.q.weight")."""
    stack = [(module, prefix)]
    while stack:
        obj, path = stack.pop()
        items = (vars(obj).items() if isinstance(obj, Module) else obj.items()
                 if isinstance(obj, dict) else ((str(i), v) for i, v in enumerate(obj)))
        for attr, value in items:
            where = f"{path}.{attr}" if path else attr
            if isinstance(value, Variable) and value.requires_grad and value.is_leaf:
                value.name = where
            elif isinstance(value, (Module, list, tuple, dict)):
                stack.append((value, where))
