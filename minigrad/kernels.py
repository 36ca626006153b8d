"""Plain numpy math shared by the ops' forward/backward (and, later, other executors).

No Variables here: arrays in, arrays out.
"""
from __future__ import annotations

import numpy as np


def sum_to_shape(grad: np.ndarray, shape: tuple) -> np.ndarray:
    """Undo numpy broadcasting: sum grad over the axes that broadcasting added or stretched.

    A gradient that flowed back through `a + b` with a (3,) and b (5, 3) has shape (5, 3); the part
    that belongs to a is the sum over the leading axis. Returns None when grad cannot be reduced to
    shape (the caller reports it with context).
    """
    if grad.shape == shape:
        return grad
    extra = grad.ndim - len(shape)
    if extra < 0:
        return None
    if extra:
        grad = grad.sum(axis=tuple(range(extra)))
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    if stretched:
        grad = grad.sum(axis=stretched, keepdims=True)
    return grad if grad.shape == shape else None


def result_shape(like: tuple) -> tuple:
    """numpy's broadcast shape of the operands, without its general machinery when shapes agree."""
    first = like[0]
    if type(first) is np.ndarray:
        shape = first.shape
        if len(like) == 1 or (len(like) == 2 and type(like[1]) is np.ndarray
                              and like[1].shape == shape):
            return shape
    return np.broadcast_shapes(*[np.shape(a) for a in like])


def result_dtype(like: tuple) -> np.dtype:
    """numpy's result dtype of the operands (the common case: arrays of one dtype)."""
    first = like[0]
    if type(first) is np.ndarray:
        dtype = first.dtype
        if len(like) == 1 or (len(like) == 2 and type(like[1]) is np.ndarray
                              and like[1].dtype is dtype):
            return dtype
    return np.result_type(*like)


def empty_result(*like, shape=None) -> np.ndarray:
    """A new array for a result of the operands `like`: their broadcast shape (or `shape`) and
    numpy's promotion of their dtypes, as numpy would give the op's result."""
    return np.empty(result_shape(like) if shape is None else shape, result_dtype(like))


def permutation(axes, ndim: int) -> tuple:
    """transpose's axes as a permutation of range(ndim): None reverses the axes, and a negative
    axis counts from the end (-1 is ndim - 1). Both the eager op and the aot rule invert this
    normal form: inverting (1, 0, -1) as written would put -1 first and permute the wrong axes."""
    if axes is None:
        return tuple(range(ndim - 1, -1, -1))
    normal = tuple(int(a) + ndim if int(a) < 0 else int(a) for a in axes)
    if sorted(normal) != list(range(ndim)):
        raise ValueError(f"axes {tuple(axes)} are not a permutation of the {ndim} axes")
    return normal


def inverse_permutation(axes, ndim: int) -> tuple:
    """The axes that undo transpose(axes): dx = dy.transpose(inverse_permutation(axes, x.ndim))."""
    return tuple(int(i) for i in np.argsort(permutation(axes, ndim)))


def floating(x: np.ndarray) -> np.ndarray:
    """x itself when it holds floats, else x as float64 (numpy's rule for exp of integers)."""
    return x if x.dtype.kind == "f" else x.astype(np.float64)


def softmax(x: np.ndarray, axis: int, out=None) -> np.ndarray:
    """exp(x - max) / sum(exp(x - max)): subtracting the max keeps exp from overflowing."""
    x = floating(x)
    y = as_array(np.subtract(x, x.max(axis=axis, keepdims=True), out=out))   # 0-d: one element
    np.exp(y, out=y)
    y /= y.sum(axis=axis, keepdims=True)
    return y


def log_softmax(x: np.ndarray, axis: int, out=None) -> np.ndarray:
    """x - logsumexp(x), computed stably."""
    x = floating(x)
    y = as_array(np.subtract(x, x.max(axis=axis, keepdims=True), out=out))
    y -= np.log(np.exp(y).sum(axis=axis, keepdims=True))
    return y


def softmax_backward(y: np.ndarray, grad_output: np.ndarray, axis: int, out=None) -> np.ndarray:
    """d softmax: y * (g - sum(g * y))."""
    grad = as_array(np.multiply(grad_output, y, out=out))   # 0-d: written in place below
    total = grad.sum(axis=axis, keepdims=True)
    np.subtract(grad_output, total, out=grad)
    grad *= y
    return grad


def log_softmax_backward(y: np.ndarray, grad_output: np.ndarray, axis: int, out=None) -> np.ndarray:
    """d log_softmax: g - softmax(x) * sum(g), with softmax(x) = exp(y)."""
    grad = as_array(np.exp(y, out=out))
    grad *= grad_output.sum(axis=axis, keepdims=True)
    np.subtract(grad_output, grad, out=grad)
    return grad


def max_backward(x: np.ndarray, y_keepdims: np.ndarray, grad_keepdims: np.ndarray, axis) -> np.ndarray:
    """Route the gradient to the maxima; ties share it equally so the gradient sums to grad_output."""
    mask = x == y_keepdims
    return mask * (grad_keepdims / mask.sum(axis=axis, keepdims=True, dtype=grad_keepdims.dtype))


def matmul_shape(a: np.ndarray, b: np.ndarray) -> tuple:
    """The shape of a @ b (numpy's rules: 1-D promotion, broadcast batch axes)."""
    if a.ndim == 2 and b.ndim == 2:
        return (a.shape[0], b.shape[1])
    a_shape = (1,) + a.shape if a.ndim == 1 else a.shape
    b_shape = b.shape + (1,) if b.ndim == 1 else b.shape
    batch = np.broadcast_shapes(a_shape[:-2], b_shape[:-2])
    shape = batch + (a_shape[-2], b_shape[-1])
    if a.ndim == 1:
        shape = shape[:-2] + shape[-1:]
    if b.ndim == 1:
        shape = shape[:-1]
    return shape


def matmul_backward(a: np.ndarray, b: np.ndarray, grad_output: np.ndarray, need_a: bool,
                    need_b: bool, buffer):
    """dA = G @ B^T, dB = A^T @ G, with numpy's 1-D promotion rules undone.

    buffer(i, shape, dtype) gives the out= array for input i (0: a, 1: b) in the plain 2-D case,
    or None (numpy allocates). The results keep any broadcast batch axes; accumulate_grad sums
    them away.
    """
    g = grad_output
    if a.ndim == 2 and b.ndim == 2:   # the common case (layers), written straight into buffers
        grad_a = np.matmul(g, b.T, out=buffer(0, a.shape, result_dtype((g, b)))) if need_a else None
        grad_b = np.matmul(a.T, g, out=buffer(1, b.shape, result_dtype((a, g)))) if need_b else None
        return grad_a, grad_b
    a2 = a[None, :] if a.ndim == 1 else a            # (n,) acts as a row (1, n)
    b2 = b[:, None] if b.ndim == 1 else b            # (n,) acts as a column (n, 1)
    g = np.reshape(g, matmul_shape(a2, b2))          # put back the axes 1-D promotion dropped
    grad_a = grad_b = None
    if need_a:
        grad_a = g @ np.swapaxes(b2, -1, -2)
        if a.ndim == 1:
            grad_a = grad_a[..., 0, :]
    if need_b:
        grad_b = np.swapaxes(a2, -1, -2) @ g
        if b.ndim == 1:
            grad_b = grad_b[..., 0]
    return grad_a, grad_b


# -- activations shared by the eager ops and the aot executor ----------------------------------
# Each takes out= (a preallocated array, or None to allocate) so that a compiled plan can write
# into its own buffers; the math is the same either way.

def as_array(result) -> np.ndarray:
    """A ufunc gives a 0-d result back as a numpy scalar, which no out= accepts (the next in-place
    step, or an aot plan's buffer): keep it a 0-d array."""
    return result if isinstance(result, np.ndarray) else np.asarray(result)


def averaged_count(in_size: int, out_size: int) -> int:
    """How many inputs each output of a mean averages. 0 for an empty batch, so that its mean is
    0 / 0 = nan, as numpy's (an empty output averages nothing: 1 keeps the division harmless)."""
    return in_size // out_size if out_size else 1


def divide_total(total, count: int, out=None, dtype=None) -> np.ndarray:
    """total / count in total's dtype (or dtype). Dtype stated because numpy 1.x promotes a float32
    scalar divided by a Python int to float64 (value-based casting; numpy 2 keeps float32, NEP 50)."""
    dtype = np.result_type(total) if dtype is None else np.dtype(dtype)
    if dtype != np.float16:
        return np.divide(total, count, out=out, dtype=dtype)
    # float16: a count over 65504 is inf there (x / inf = 0), so divide in float32 and round once
    quotient = as_array(np.divide(total, count, dtype=np.float32))
    if out is None:
        return quotient.astype(np.float16)
    np.copyto(out, quotient, casting="same_kind")
    return out


def mean_total(values: np.ndarray, count: int, out=None) -> np.ndarray:
    """sum(values) / count in values' dtype; float16 is summed in float32 (its largest value is
    65504), as numpy's mean does."""
    if values.dtype != np.float16:
        return divide_total(np.add.reduce(values, axis=None), count, out=out)
    return divide_total(np.add.reduce(values, axis=None, dtype=np.float32), count, out=out,
                        dtype=np.float16)


def tanh_backward(y: np.ndarray, grad_output: np.ndarray, out=None) -> np.ndarray:
    """d tanh: g * (1 - y^2), from the output y, in g's dtype.

    (Not g - (g y) y, which is the same number but nan for g = inf at y = 0, where this is inf.
    out is passed by position: on tiny arrays a keyword costs as much as the arithmetic, and a
    compiled aot plan calls this once per tanh.)
    """
    grad = as_array(np.multiply(y, y, out, dtype=grad_output.dtype))
    np.subtract(1.0, grad, grad)
    return np.multiply(grad, grad_output, grad)


def abs_backward(x: np.ndarray, grad_output: np.ndarray, out=None) -> np.ndarray:
    """d |x|: g sign(x) (0 where x = 0)."""
    return np.multiply(grad_output, np.sign(x), out=out)


def relu_backward(x: np.ndarray, grad_output: np.ndarray, out=None) -> np.ndarray:
    """d relu: g where x > 0, else 0."""
    return np.multiply(grad_output, x > 0, out=out)


def sigmoid(x: np.ndarray, out=None) -> np.ndarray:
    """1 / (1 + e^-x). e^-|x| is at most 1, so nothing overflows (e^800 would): for x >= 0 it is
    the formula, for x < 0 the same value written as e^x / (1 + e^x) (which keeps e^-710 instead
    of rounding 1 / (1 + e^710) to 0)."""
    e = np.exp(-np.abs(x))
    # The numerator, 1 for x >= 0 and e below, as a maximum (e <= 1): np.where with a scalar
    # took more instructions than the rest of the kernel together. NaN stays NaN.
    y = as_array(np.maximum(e, x >= 0, out=out, dtype=e.dtype))
    e += 1.0
    return np.divide(y, e, out=y)


def sigmoid_backward(y: np.ndarray, grad_output: np.ndarray, out=None) -> np.ndarray:
    """d sigmoid: g * y * (1 - y), from the output y, in g's dtype."""
    grad = as_array(np.subtract(1.0, y, out=out, dtype=grad_output.dtype))
    grad *= y
    grad *= grad_output
    return grad


def silu(x: np.ndarray, out=None) -> np.ndarray:
    """x * sigmoid(x) (also called swish)."""
    y = sigmoid(x, out=out)
    y *= x
    return y


def silu_backward(x: np.ndarray, grad_output: np.ndarray, out=None) -> np.ndarray:
    """d silu: g * s * (1 + x (1 - s)), s = sigmoid(x)."""
    s = sigmoid(x)
    grad = np.subtract(1.0, s, out=out)
    grad *= x
    grad += 1.0
    grad *= s
    grad *= grad_output
    return grad


GELU_C = float(np.sqrt(2.0 / np.pi))   # the tanh approximation of GELU (as in GPT-2)
GELU_A = 0.044715


def gelu(x: np.ndarray, out=None) -> np.ndarray:
    """0.5 x (1 + tanh(c (x + a x^3))), c = sqrt(2/pi), a = 0.044715 (tanh approximation)."""
    t = np.tanh(GELU_C * (x + GELU_A * x * x * x))
    y = np.add(1.0, t, out=out)
    y *= 0.5   # (before x: 2x would overflow near float's largest values)
    y *= x
    return y


def gelu_backward(x: np.ndarray, grad_output: np.ndarray, out=None) -> np.ndarray:
    """d gelu: 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 a x^2), t = tanh(c (x + a x^3))."""
    x2 = x * x
    t = np.tanh(GELU_C * (x + GELU_A * x2 * x))
    grad = as_array(np.multiply(t, t, out=out))
    np.subtract(1.0, grad, out=grad)
    grad *= x * GELU_C * (1.0 + 3.0 * GELU_A * x2)
    grad += 1.0 + t
    grad *= 0.5
    grad *= grad_output
    return grad


def cross_entropy(logits: np.ndarray, targets: np.ndarray, out=None) -> np.ndarray:
    """-mean_i log softmax(logits_i)[t_i], as a 0-d array (written into out when given)."""
    log_probs = log_softmax(logits, 1)
    picked = log_probs[np.arange(logits.shape[0]), targets]
    return mean_total(picked, -logits.shape[0], out=out)


def cross_entropy_backward(logits: np.ndarray, targets: np.ndarray, grad_output: np.ndarray,
                           out=None) -> np.ndarray:
    """d cross_entropy / d logits: (softmax(logits) - onehot(t)) / N * g."""
    n = logits.shape[0]
    scale = divide_total(grad_output, n)
    grad = softmax(logits, 1, out=out)
    grad *= scale
    grad[np.arange(n), targets] -= scale
    return grad


def pow_backward(x: np.ndarray, exponent, grad_output: np.ndarray, out=None) -> np.ndarray:
    """d x^p: g * p * x^(p-1); for p = 0 that is 0 everywhere (x^0 = 1 is constant), also at
    x = 0, where the formula would give 0 * 0^-1 = nan."""
    if exponent == 0:
        grad = out if out is not None else empty_result(x, grad_output)
        grad.fill(0)
        return grad
    dtype = np.result_type(x.dtype, grad_output.dtype)   # (explicit dtypes: see divide_total)
    grad = np.power(x, exponent - 1, out=out, dtype=dtype)
    grad = np.multiply(grad, exponent, out=out, dtype=dtype)
    return np.multiply(grad, grad_output, out=out, dtype=dtype)


def relu(x: np.ndarray, out=None) -> np.ndarray:
    """max(x, 0)."""
    return np.maximum(x, 0, out=out)


def mse(pred: np.ndarray, target: np.ndarray, out=None) -> np.ndarray:
    """mean((pred - target)^2), as a 0-d array (written into out when given)."""
    diff = pred - target
    if diff.dtype == np.float16:   # summed in float32, as numpy's mean (eager's) does for float16
        return mean_total(diff * diff, diff.size, out=out)
    return divide_total(np.vdot(diff, diff), diff.size, out=out)


def mse_backward(pred: np.ndarray, target: np.ndarray, grad_output: np.ndarray, out=None) -> np.ndarray:
    """d mse / d pred: 2 (pred - target) / n * g (the target's gradient is its negative)."""
    grad = np.subtract(pred, target, out=out)
    grad *= divide_total(2.0 * grad_output, grad.size)
    return grad


# --- mixture of experts ---
# Routing (softmax or sigmoid over E experts, top-k), the permutation that groups the N*K token
# copies by expert, one matmul per expert, and the weighted sum back. Index arrays are int64.

def moe_topk(probs: np.ndarray, k: int, out_weights=None, out_indices=None) -> tuple:
    """(weights, indices): the k largest probabilities of each row, largest first.

    Ties are broken by the lower expert index (a stable sort of -probs), so the choice is the same
    on every run and on every machine. The out buffers are separate arguments (not a tuple): the
    aot placement re-points every array argument of a call.
    """
    indices = np.argsort(-probs, axis=-1, kind="stable")[..., :k]
    weights = np.take_along_axis(probs, indices, axis=-1)
    if out_weights is None:
        return weights, indices
    np.copyto(out_weights, weights)
    np.copyto(out_indices, indices)
    return out_weights, out_indices


def moe_topk_backward(grad_weights: np.ndarray, indices: np.ndarray, num_experts: int,
                      out=None) -> np.ndarray:
    """d_probs: zero, except grad_weights scattered to the selected experts of each row."""
    grad = np.zeros(indices.shape[:-1] + (num_experts,), grad_weights.dtype) if out is None else out
    if out is not None:
        grad.fill(0)
    np.put_along_axis(grad, indices, grad_weights, axis=-1)   # a row's k indices are distinct
    return grad


def moe_permute(indices: np.ndarray, num_experts: int, out_scatter=None, out_offsets=None) -> tuple:
    """(scatter_indices, expert_offsets) of the N*K copies (token n, slot j), flat a = n*K + j.

    Rows are grouped by expert and, within an expert, keep token order (a stable sort).
    scatter_indices[a] is the permuted row of copy a; expert e owns rows
    expert_offsets[e]:expert_offsets[e+1]. out_*: optional int64 buffers.
    """
    flat = indices.reshape(-1)
    order = np.argsort(flat, kind="stable")            # permuted row r holds copy order[r]
    scatter_indices = np.empty(flat.size, np.int64) if out_scatter is None else out_scatter
    expert_offsets = np.empty(num_experts + 1, np.int64) if out_offsets is None else out_offsets
    scatter_indices[order] = np.arange(order.size)     # the inverse permutation
    expert_offsets[0] = 0
    np.cumsum(np.bincount(flat, minlength=num_experts), out=expert_offsets[1:])
    return scatter_indices, expert_offsets


def per_token(rows: np.ndarray, n_tokens: int, k: int | None = None) -> np.ndarray:
    """The N*K permuted rows (N*K, D) as (N, K, D), token n's K copies together. (Sizes spelled
    out: with no tokens, reshape cannot infer K or D from a -1.)"""
    if k is None:
        k = rows.shape[0] // n_tokens if n_tokens else 0
    return rows.reshape(n_tokens, k, rows.shape[1])


def moe_permute_rows(x: np.ndarray, scatter_indices: np.ndarray, out=None) -> np.ndarray:
    """x_perm[scatter_indices[n*K + j]] = x[n]: each token copied K times, grouped by expert."""
    k = scatter_indices.size // max(x.shape[0], 1)
    x_perm = np.empty((scatter_indices.size, x.shape[1]), x.dtype) if out is None else out
    x_perm[scatter_indices] = np.repeat(x, k, axis=0)
    return x_perm


def moe_permute_backward(grad_x_perm: np.ndarray, scatter_indices: np.ndarray, n_tokens: int,
                         out=None) -> np.ndarray:
    """d_x[n] = sum_j d_x_perm[scatter_indices[n*K + j]]: the inverse permutation, copies summed."""
    d = grad_x_perm.shape[1]
    copies = per_token(grad_x_perm[scatter_indices], n_tokens)
    return np.add.reduce(copies, axis=1, out=out)


def moe_unpermute(expert_out: np.ndarray, routing_weights: np.ndarray,
                  scatter_indices: np.ndarray, out=None) -> np.ndarray:
    """out[n] = sum_j routing_weights[n, j] * expert_out[scatter_indices[n*K + j]]."""
    n, k = routing_weights.shape
    rows = per_token(expert_out[scatter_indices], n, k)
    return np.einsum("nk,nkd->nd", routing_weights, rows, out=out)


def moe_unpermute_backward_expert_out(grad_output: np.ndarray, routing_weights: np.ndarray,
                                      scatter_indices: np.ndarray, out=None) -> np.ndarray:
    """d_expert_out[scatter_indices[n*K + j]] = routing_weights[n, j] * d_out[n]."""
    n, k = routing_weights.shape
    grad = empty_result(grad_output, routing_weights, shape=(n * k, grad_output.shape[1])) \
        if out is None else out
    spread = routing_weights[:, :, None] * grad_output[:, None, :]   # (N, K, D): slot j of token n
    grad[scatter_indices] = spread.reshape(n * k, grad_output.shape[1])
    return grad


def moe_unpermute_backward_weights(grad_output: np.ndarray, expert_out: np.ndarray,
                                   scatter_indices: np.ndarray, out=None) -> np.ndarray:
    """d_routing_weights[n, j] = <d_out[n], expert_out[scatter_indices[n*K + j]]> (with no
    tokens, K is read from out: pass it)."""
    n = grad_output.shape[0]
    rows = per_token(expert_out[scatter_indices], n, None if out is None else out.shape[-1])
    return np.einsum("nkd,nd->nk", rows, grad_output, out=out)


def moe_grouped_gemm(x: np.ndarray, weight: np.ndarray, expert_offsets: np.ndarray,
                     out=None) -> np.ndarray:
    """out[rows of e] = x[rows of e] @ weight[e]; rows of e: expert_offsets[e]:expert_offsets[e+1]."""
    dtype = np.result_type(x, weight)
    out = np.empty((x.shape[0], weight.shape[2]), dtype) if out is None else out
    for e in range(weight.shape[0]):   # one matmul per expert (E is small)
        lo, hi = expert_offsets[e], expert_offsets[e + 1]
        np.matmul(x[lo:hi], weight[e], out=out[lo:hi])
    return out


def moe_grouped_gemm_backward_x(grad_output: np.ndarray, weight: np.ndarray,
                                expert_offsets: np.ndarray, out=None) -> np.ndarray:
    """d_x[rows of e] = d_out[rows of e] @ weight[e]^T."""
    grad = empty_result(grad_output, weight, shape=(grad_output.shape[0], weight.shape[1])) \
        if out is None else out
    for e in range(weight.shape[0]):
        lo, hi = expert_offsets[e], expert_offsets[e + 1]
        np.matmul(grad_output[lo:hi], weight[e].T, out=grad[lo:hi])
    return grad


def moe_grouped_gemm_backward_weight(grad_output: np.ndarray, x: np.ndarray,
                                     expert_offsets: np.ndarray, out=None) -> np.ndarray:
    """d_weight[e] = x[rows of e]^T @ d_out[rows of e] (zero for an expert with no rows)."""
    experts = expert_offsets.size - 1
    grad = empty_result(grad_output, x, shape=(experts, x.shape[1], grad_output.shape[1])) \
        if out is None else out
    for e in range(experts):
        lo, hi = expert_offsets[e], expert_offsets[e + 1]
        np.matmul(x[lo:hi].T, grad_output[lo:hi], out=grad[e])
    return grad
# --- transformer ops ---
# Shared by minigrad/ops/transformer.py (eager) and minigrad/aot (compiled plans). Each takes
# out buffers (None: allocate) so a plan can write into its own memory.

def rmsnorm(x: np.ndarray, weight: np.ndarray, eps: float, out=None, rstd=None) -> tuple:
    """y = x * rstd * weight, rstd = 1 / sqrt(mean(x^2, last axis) + eps) (rstd has x.shape[:-1]
    and x's dtype; y has numpy's promotion of x and weight, on the heap as on an arena)."""
    rstd = rms_reciprocal(x, eps, rstd)
    if out is None:
        out = empty_result(x, weight, shape=x.shape)
    y = np.multiply(x, rstd[..., None], out=out)
    y *= weight
    return y, rstd


def rms_reciprocal(x: np.ndarray, eps: float, out=None) -> np.ndarray:
    """1 / sqrt(mean(x^2, last axis) + eps), summed in float32 at least: in float16 x^2 overflows
    once |x| > 256, and the row would get rstd = 1/inf = 0 (y = 0 instead of +-1)."""
    wide = x if x.dtype.itemsize >= 4 else x.astype(np.float32)
    ms = as_array(np.einsum("...d,...d->...", wide, wide,   # sum of squares, no x^2 temporary
                            out=out if wide is x else None))
    ms /= x.shape[-1]
    ms += eps
    np.sqrt(ms, out=ms)
    np.divide(1.0, ms, out=ms)
    if ms.dtype == x.dtype:
        return ms
    if out is None:
        return ms.astype(x.dtype)
    np.copyto(out, ms)
    return out


def rmsnorm_backward(x: np.ndarray, weight: np.ndarray, rstd: np.ndarray, grad_output: np.ndarray,
                     out=None, d_weight=None, need_weight: bool = True) -> tuple:
    """xhat = x rstd, gh = dy w: dx = rstd (gh - xhat mean(gh xhat)), d_weight = sum(dy xhat)."""
    return rmsnorm_backward_xhat(x * rstd[..., None], weight, rstd, grad_output, out, d_weight,
                                 need_weight)


def rmsnorm_backward_xhat(xhat: np.ndarray, weight: np.ndarray, rstd: np.ndarray,
                          grad_output: np.ndarray, out=None, d_weight=None,
                          need_weight: bool = True) -> tuple:
    """rmsnorm_backward from xhat = x rstd (a scratch array: it is overwritten)."""
    r = rstd[..., None]
    if need_weight:
        d = xhat.shape[-1]
        d_weight = np.einsum("nd,nd->d", grad_output.reshape(-1, d), xhat.reshape(-1, d),
                             out=d_weight)
    gh = np.multiply(grad_output, weight, out=out)
    dot = np.einsum("...d,...d->...", gh, xhat)[..., None]
    dot /= xhat.shape[-1]
    xhat *= dot
    gh -= xhat
    gh *= r
    return gh, (d_weight if need_weight else None)


def embedding(ids: np.ndarray, weight: np.ndarray, out=None) -> np.ndarray:
    """y[..., :] = weight[ids[...], :] (a row lookup)."""
    return np.take(weight, ids, axis=0, out=out)


def embedding_backward(ids: np.ndarray, grad_output: np.ndarray, num_embeddings: int,
                       out=None) -> np.ndarray:
    """d_weight[v] = sum of the gradient rows of the positions whose id is v (a scatter-add).

    Plainly: np.add.at(d_weight, ids, rows). Faster: sort the rows by id and sum each run of
    equal ids with one np.add.reduceat call (a few times quicker than np.add.at)."""
    dim = grad_output.shape[-1]
    d_weight = np.zeros((num_embeddings, dim), grad_output.dtype) if out is None else out
    if out is not None:
        d_weight.fill(0)
    flat = ids.reshape(-1)
    if flat.size == 0:
        return d_weight
    order = np.argsort(flat, kind="stable")
    sorted_ids = flat[order]
    starts = np.flatnonzero(np.concatenate(([True], sorted_ids[1:] != sorted_ids[:-1])))
    rows = grad_output.reshape(-1, dim)[order]
    d_weight[sorted_ids[starts]] = np.add.reduceat(rows, starts, axis=0)
    return d_weight


def swiglu(gate_up: np.ndarray, out=None) -> np.ndarray:
    """y = silu(gate) * up, gate and up the two halves of the last axis."""
    f = gate_up.shape[-1] // 2
    y = silu(gate_up[..., :f], out=out)
    y *= gate_up[..., f:]
    return y


def swiglu_backward(gate_up: np.ndarray, grad_output: np.ndarray, out=None) -> np.ndarray:
    """s = sigmoid(gate): d_up = dy gate s, d_gate = dy up s (1 + gate (1 - s)), side by side."""
    f = gate_up.shape[-1] // 2
    gate, up = gate_up[..., :f], gate_up[..., f:]
    d = empty_result(gate_up, grad_output, shape=gate_up.shape) if out is None else out
    d_gate, d_up = d[..., :f], d[..., f:]
    s = sigmoid(gate)
    np.multiply(gate, s, out=d_up)                  # silu(gate)
    np.subtract(1.0, s, out=d_gate)
    d_gate *= gate
    d_gate += 1.0
    d_gate *= s                                     # silu'(gate)
    d_gate *= up
    d_gate *= grad_output
    d_up *= grad_output
    return d


def rope_freqs(head_dim: int, base: float = 10000.0, dtype=np.float64) -> np.ndarray:
    """freqs[i] = base^(-2i / head_dim), i < head_dim / 2: pair i turns by pos * freqs[i]."""
    return (base ** (-np.arange(0, head_dim // 2, dtype=np.float64) * 2.0 / head_dim)).astype(dtype)


def rope(x: np.ndarray, freqs: np.ndarray, position_ids: np.ndarray, out=None,
         sign: float = 1.0) -> np.ndarray:
    """Turn each pair (x[..., i], x[..., i + Dh/2]) of x (B, T, H, Dh) by the angle pos * freqs[i]
    (sign=-1: the inverse turn, which is rope's backward).

    Plainly: y1 = x1 cos - x2 sin, y2 = x1 sin + x2 cos, with x1, x2 the two halves. Written as
    y = x * [cos, cos] + swap(x) * [-sin, sin] over all heads at once, (B, T, H*Dh), so that each
    numpy call runs long contiguous rows instead of Dh/2-element pieces."""
    if out is not None and not out.flags.c_contiguous:   # the rows below are views of out
        out[...] = rope(x, freqs, position_ids, None, sign)
        return out
    b, t, heads, dim = x.shape
    half = dim // 2
    angle = np.multiply.outer(position_ids.astype(np.float64), freqs.astype(np.float64))
    cos, sin = np.cos(angle), np.sin(angle) * sign
    cos = np.tile(np.concatenate([cos, cos], -1).astype(x.dtype), heads)     # (T | B T, H*Dh)
    sin = np.tile(np.concatenate([-sin, sin], -1).astype(x.dtype), heads)
    swap = np.arange(heads * dim).reshape(heads, 2, half)[:, ::-1].reshape(-1)   # halves swapped
    rows = x.reshape(b, t, heads * dim)
    y = np.empty(x.shape, x.dtype) if out is None else out
    flat = y.reshape(b, t, heads * dim)
    np.multiply(rows, cos, out=flat)
    swapped = np.take(rows, swap, axis=-1)
    swapped *= sin
    flat += swapped
    return y


_CAUSAL_BIAS: dict = {}   # (T, dtype) -> the mask below, made once per size


def _causal_bias(t: int, dtype) -> np.ndarray:
    """0 on and below the diagonal, -inf above: a query sees itself and earlier keys only."""
    key = (t, np.dtype(dtype))
    if key not in _CAUSAL_BIAS:
        bias = np.triu(np.full((t, t), -np.inf, dtype), 1)
        bias.flags.writeable = False
        _CAUSAL_BIAS[key] = bias
    return _CAUSAL_BIAS[key]


def _blocks(t: int, causal: bool) -> list:
    """Query rows in blocks (start, stop, keys): with a causal mask, rows start..stop-1 see keys
    0..stop-1 only, so blocks skip most of the masked upper triangle (4 blocks compute 10/16 of
    the T x T scores). Short sequences, or no mask: one block, every key."""
    if t == 0:
        return []                  # no query rows: nothing to compute (out and lse are empty)
    if not causal or t < 64:
        return [(0, t, t)]
    edges = [t * i // 4 for i in range(5)]
    return [(a, b, b) for a, b in zip(edges[:-1], edges[1:])]


def _scratch(buffer, shape: tuple, dtype) -> np.ndarray | None:
    """A contiguous (B, H, rows, keys) view at the start of a scratch buffer, or None (allocate)."""
    if buffer is None:
        return None
    size = int(np.prod(shape))
    return buffer.reshape(-1)[:size].reshape(shape) if buffer.dtype == dtype else None


def _scores(qs: np.ndarray, k: np.ndarray, block: tuple, causal: bool, out=None) -> np.ndarray:
    """s = (q / sqrt(Dh)) k^T for the block's rows and keys (B, H, rows, keys), -inf above the
    diagonal if causal. (qs is q already scaled: a (T, Dh) pass instead of a (T, T) one.)"""
    start, stop, keys = block
    shape = (qs.shape[0], qs.shape[2], stop - start, keys)
    s = np.matmul(qs[:, start:stop].transpose(0, 2, 1, 3), k[:, :keys].transpose(0, 2, 3, 1),
                  out=_scratch(out, shape, np.result_type(qs, k)))
    if causal:
        s += _causal_bias(qs.shape[1], s.dtype)[start:stop, :keys]
    return s


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool = True, out=None,
              lse=None, scores=None) -> tuple:
    """out = softmax(q k^T / sqrt(Dh) [+ causal mask]) v per head, q k v (B, T, H, Dh); also
    lse (B, H, T), the log-sum-exp of each score row: backward rebuilds the probabilities from it.
    scores: an optional (B, H, T, T) scratch buffer (a compiled plan's), used and forgotten.
    Plainly, for one block of all rows: e = exp(s - max), out = (e v) / sum(e), lse = log sum(e) + max."""
    qs = np.multiply(q, 1.0 / np.sqrt(q.shape[-1]), dtype=q.dtype)
    o = empty_result(q, v, shape=q.shape) if out is None else out
    lse = empty_result(q, k, shape=(q.shape[0], q.shape[2], q.shape[1])) if lse is None else lse
    for start, stop, keys in _blocks(q.shape[1], causal):
        s = _scores(qs, k, (start, stop, keys), causal, scores)
        m = s.max(axis=-1, keepdims=True)
        s -= m
        np.exp(s, out=s)                                                # s now holds e
        total = s.sum(axis=-1, keepdims=True)
        rows = lse[:, :, start:stop]
        np.log(total[..., 0], out=rows)
        rows += m[..., 0]
        oh = o[:, start:stop].transpose(0, 2, 1, 3)
        np.matmul(s, v[:, :keys].transpose(0, 2, 1, 3), out=oh)         # e v, then / total:
        oh /= total                                                     # (rows, Dh), not (T, T)
    return o, lse


def attention_backward(q: np.ndarray, k: np.ndarray, v: np.ndarray, o: np.ndarray,
                       lse: np.ndarray, grad_output: np.ndarray, causal: bool = True,
                       dq=None, dk=None, dv=None, scores=None, ds=None) -> tuple:
    """p = exp(q k^T / sqrt(Dh) - lse) recomputed; dv = p^T do, dp = do v^T,
    ds = p (dp - rowsum(do * o)), dq = ds k / sqrt(Dh), dk = ds^T q / sqrt(Dh).
    Block by block of query rows (see _blocks): dk and dv sum what each block sends them."""
    scale = 1.0 / np.sqrt(q.shape[-1])
    qs = np.multiply(q, scale, dtype=q.dtype)
    dq = np.empty(q.shape, q.dtype) if dq is None else dq
    dk = np.empty(k.shape, k.dtype) if dk is None else dk
    dv = np.empty(v.shape, v.dtype) if dv is None else dv
    dkh, dvh = dk.transpose(0, 2, 1, 3), dv.transpose(0, 2, 1, 3)
    blocks = _blocks(q.shape[1], causal)
    if len(blocks) > 1:
        dk.fill(0)
        dv.fill(0)
    row = np.einsum("bthd,bthd->bht", grad_output, o)                 # rowsum(dp p) = rowsum(do o)
    for start, stop, keys in blocks:
        p = _scores(qs, k, (start, stop, keys), causal, scores)
        p -= lse[:, :, start:stop, None]
        np.exp(p, out=p)
        goh = grad_output[:, start:stop].transpose(0, 2, 1, 3)
        dp = np.matmul(goh, v[:, :keys].transpose(0, 2, 3, 1),
                       out=_scratch(ds, p.shape, np.result_type(grad_output, v)))
        dp -= row[:, :, start:stop, None]
        dp *= p                                                         # dp now holds ds
        np.matmul(dp, k[:, :keys].transpose(0, 2, 1, 3), out=dq[:, start:stop].transpose(0, 2, 1, 3))
        if len(blocks) == 1:
            np.matmul(p.transpose(0, 1, 3, 2), goh, out=dvh)
            np.matmul(dp.transpose(0, 1, 3, 2), qs[:, start:stop].transpose(0, 2, 1, 3), out=dkh)
        else:
            dvh[:, :, :keys] += np.matmul(p.transpose(0, 1, 3, 2), goh)
            dkh[:, :, :keys] += np.matmul(dp.transpose(0, 1, 3, 2), qs[:, start:stop].transpose(0, 2, 1, 3))
    dq *= scale
    return dq, dk, dv


def lm_head_loss(x: np.ndarray, weight: np.ndarray, targets: np.ndarray, out=None) -> np.ndarray:
    """mean cross-entropy of the logits x @ weight (N, V) against targets (the logits are not kept)."""
    return cross_entropy(x @ weight, targets, out=out)


def lm_head_loss_backward(x: np.ndarray, weight: np.ndarray, targets: np.ndarray,
                          grad_output: np.ndarray, d_x=None, d_weight=None, need_x: bool = True,
                          need_weight: bool = True) -> tuple:
    """d_logits = (softmax(x W) - onehot(t)) / N * g, recomputed; d_x = d_logits W^T,
    d_weight = x^T d_logits."""
    d_logits = cross_entropy_backward(x @ weight, targets, grad_output)
    d_x = np.matmul(d_logits, weight.T, out=d_x) if need_x else None
    d_weight = np.matmul(x.T, d_logits, out=d_weight) if need_weight else None
    return d_x, d_weight


def fused_residual_rmsnorm(x: np.ndarray, residual: np.ndarray, weight: np.ndarray, eps: float,
                           residual_out=None, out=None, rstd=None) -> tuple:
    """residual_out = residual + x, (y, rstd) = rmsnorm(residual_out)."""
    residual_out = np.add(residual, x, out=residual_out)
    y, rstd = rmsnorm(residual_out, weight, eps, out=out, rstd=rstd)
    return residual_out, y, rstd


def fused_residual_rmsnorm_backward(residual_out: np.ndarray, weight: np.ndarray, rstd: np.ndarray,
                                    grad_output: np.ndarray, out=None, d_weight=None,
                                    d_residual_out=None) -> tuple:
    """d(x + residual) = rmsnorm's dx at residual_out, plus residual_out's own gradient if any;
    x and residual both receive it."""
    d_sum, d_weight = rmsnorm_backward(residual_out, weight, rstd, grad_output, out, d_weight)
    if d_residual_out is not None:
        d_sum += d_residual_out
    return d_sum, d_weight


def flash_attention(qkv: np.ndarray, causal: bool = True, out=None, lse=None, scores=None) -> tuple:
    """attention on the q, k, v views qkv[:, :, 0 | 1 | 2] of the packed (B, T, 3, H, Dh) input."""
    return attention(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], causal, out, lse, scores)


def flash_attention_backward(qkv: np.ndarray, o: np.ndarray, lse: np.ndarray,
                             grad_output: np.ndarray, causal: bool = True, d_qkv=None,
                             scores=None, ds=None) -> np.ndarray:
    """attention_backward writing dq, dk, dv straight into the views of one packed d_qkv."""
    d_qkv = empty_result(qkv, grad_output, shape=qkv.shape) if d_qkv is None else d_qkv
    attention_backward(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], o, lse, grad_output, causal,
                       d_qkv[:, :, 0], d_qkv[:, :, 1], d_qkv[:, :, 2], scores, ds)
    return d_qkv


def qkv_qk_norm_rope(qkv: np.ndarray, q_weight: np.ndarray, k_weight: np.ndarray,
                     freqs: np.ndarray, position_ids: np.ndarray, eps: float, out=None,
                     q_rstd=None, k_rstd=None) -> tuple:
    """q, k of qkv (B, T, 3, H, Dh) rmsnorm-ed over Dh with their weights, then turned by rope;
    v copied. Returns (qkv_out, q_rstd, k_rstd), the rstds (B, T, H)."""
    out = empty_result(qkv, q_weight, k_weight, shape=qkv.shape) if out is None else out
    rstds = []
    for j, weight, rstd in ((0, q_weight, q_rstd), (1, k_weight, k_rstd)):
        y, rstd = rmsnorm(qkv[:, :, j], weight, eps, rstd=rstd)
        rope(y, freqs, position_ids, out[:, :, j])
        rstds.append(rstd)
    out[:, :, 2] = qkv[:, :, 2]
    return out, rstds[0], rstds[1]


def qkv_qk_norm_rope_backward(qkv_out: np.ndarray, q_weight: np.ndarray, k_weight: np.ndarray,
                              q_rstd: np.ndarray, k_rstd: np.ndarray, freqs: np.ndarray,
                              position_ids: np.ndarray, grad_output: np.ndarray, d_qkv=None,
                              d_q_weight=None, d_k_weight=None) -> tuple:
    """For q and k: xhat = rope^-1(out) / w (so w has no zeros), g = rope^-1(dy), then rmsnorm's
    backward at xhat; dv = dy's v part. Returns (d_qkv, d_q_weight, d_k_weight)."""
    d_qkv = empty_result(qkv_out, grad_output, shape=qkv_out.shape) if d_qkv is None else d_qkv
    d_weights = []
    for j, weight, rstd, d_weight in ((0, q_weight, q_rstd, d_q_weight),
                                      (1, k_weight, k_rstd, d_k_weight)):
        xhat = rope(qkv_out[:, :, j], freqs, position_ids, None, -1.0)   # the turn undone ...
        xhat /= weight                                                   # ... and the scale
        g = rope(grad_output[:, :, j], freqs, position_ids, None, -1.0)
        d_x, d_weight = rmsnorm_backward_xhat(xhat, weight, rstd, g, g, d_weight)
        d_qkv[:, :, j] = d_x
        d_weights.append(d_weight)
    d_qkv[:, :, 2] = grad_output[:, :, 2]
    return d_qkv, d_weights[0], d_weights[1]


# --- how an ahead-of-time plan calls a kernel (the compilers in each op's row use these) ---
# A compiler takes (input arrays, attrs) and returns (output buffer, [(fn, args)]): it computes
# its result once (that allocates the buffer) and returns the calls that recompute it into the
# same buffer on every run. An op with several outputs returns a tuple of buffers.

def plan_call(fn, *args):
    """Run fn(*args) once (its last arg is the out buffer) and return the buffer and the call.
    numpy returns a 0-d result as a scalar (np.add of two 0-d arrays is a float64), which no out=
    accepts and no later run would see change: buffers come from as_array or empty_result."""
    fn(*args)
    return args[-1], [(fn, args)]


def run_calls(calls: list) -> list:
    """Run the calls once (the compile-time result) and return them for the plan."""
    for fn, args in calls:
        fn(*args)
    return calls


def ufunc_compiler(ufunc):
    """The compiler of an op that is one numpy ufunc of its inputs (add, exp, ...)."""
    def compile_(*arrays, **attrs):
        return plan_call(ufunc, *arrays, as_array(ufunc(*arrays)))
    return compile_


def activation_compiler(kernel):
    """The compiler of kernel(x, out) (relu, sigmoid, silu, ...)."""
    def compile_(x, **attrs):
        return plan_call(kernel, x, empty_result(x))
    return compile_


def grad_compiler(kernel):
    """Backward kernels take (forward tensor, grad_output, out); rules list the gradient first."""
    def compile_(grad_output, x, **attrs):
        return plan_call(kernel, x, grad_output, empty_result(x, grad_output))
    return compile_


def along_axis_compiler(kernel):
    """The compiler of kernel(x, axis, out) (softmax, log_softmax)."""
    def compile_(x, axis=-1, **attrs):
        return plan_call(kernel, x, axis, kernel(x, axis))
    return compile_
