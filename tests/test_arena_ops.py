"""Every op inside an allocator scope: the gradcheck cases of test_ops_gradcheck.py (ALL_CASES) run
inside `with mg.Arena("t", 1 << 16).scope():` and `with mg.Pool("p").scope():`.

For each case: mg.check.gradcheck passes inside the scope, and backward's gradients equal those of
heap mode (same shape, same dtype, np.allclose), with the leaves and the op outputs really placed
on the allocator. The float32 cases of that file also run inside an arena: float32 stays float32.
"""
import numpy as np
import pytest

import minigrad as mg
import test_ops_gradcheck as op_cases   # a module object: pytest does not collect its tests here

ALLOCATORS = [
    pytest.param(lambda: mg.Arena("t", 1 << 16), id="arena"),
    pytest.param(lambda: mg.Pool("p"), id="pool"),
]


def _probe(shape):
    """Fixed weights of mixed sign for every output element (a plain sum would hide errors)."""
    magnitude = np.random.default_rng(7).uniform(0.5, 1.5, shape)
    sign = np.random.default_rng(8).choice([-1.0, 1.0], shape)
    return magnitude * sign


def _forward_and_grads(fn, arrays, probe):
    """Forward values (copied before backward), and each input's gradient (copied)."""
    leaves = [mg.create_leaf(a.copy(), requires_grad=True, name=f"input{k}")
              for k, a in enumerate(arrays)]
    out = fn(*leaves)
    values = out.numpy()
    (out * probe).sum().backward()
    grads = []
    for k, leaf in enumerate(leaves):
        grad = leaf.grad
        assert grad is not None, f"input {k} got no gradient"
        grads.append(np.array(grad, copy=True))
    return values, grads


@pytest.mark.parametrize("make", ALLOCATORS)
@pytest.mark.parametrize("fn, arrays", op_cases.ALL_CASES)
def test_gradcheck_passes_inside_a_scope(make, fn, arrays):
    allocator = make()
    with allocator.scope():
        assert mg.check.gradcheck(fn, *[a.copy() for a in arrays]) is True
        # gradcheck's leaves were created on the allocator of the scope
        assert sum(b.kind == "param" for b in allocator.blocks) >= len(arrays)
    assert allocator.used == 0 and allocator.blocks == []
    assert mg.current_allocator() is None


@pytest.mark.parametrize("make", ALLOCATORS)
@pytest.mark.parametrize("fn, arrays", op_cases.ALL_CASES)
def test_backward_inside_a_scope_matches_heap_mode(make, fn, arrays):
    heap_values = fn(*[mg.create_leaf(a.copy()) for a in arrays]).numpy()
    probe = _probe(heap_values.shape)
    heap_values, heap_grads = _forward_and_grads(fn, arrays, probe)

    allocator = make()
    with allocator.scope():
        values, grads = _forward_and_grads(fn, arrays, probe)
        kinds = [b.kind for b in allocator.blocks]
        assert kinds.count("param") == len(arrays)         # the leaves live on the allocator
        assert "activation" in kinds and "node" in kinds   # and so do the op outputs and nodes
        assert "grad" in kinds                              # and the leaves' gradient buffers
    assert allocator.used == 0 and allocator.blocks == []

    assert values.shape == heap_values.shape and values.dtype == heap_values.dtype
    assert np.allclose(values, heap_values, rtol=1e-12, atol=1e-12)
    for k, (g, h) in enumerate(zip(grads, heap_grads)):
        assert g.shape == h.shape == arrays[k].shape, k
        assert g.dtype == h.dtype, (k, g.dtype, h.dtype)
        assert np.allclose(g, h, rtol=1e-12, atol=1e-12), (k, g, h)


# -------------------------------------------------------------------------------------------------
# float32 stays float32 in arena mode
# -------------------------------------------------------------------------------------------------
def _positive_f32(shape, seed):
    return np.random.default_rng(seed).uniform(0.5, 2.0, shape).astype(np.float32)


@pytest.mark.parametrize("fn", op_cases.F32_UNARY)
def test_float32_stays_float32_in_arena_mode_unary(fn):
    arena = mg.Arena("f32", 1 << 16)
    with arena.scope():
        x = mg.create_leaf(_positive_f32((3, 4), 0), requires_grad=True, name="x")
        op_cases.assert_float32_through_backward(fn, [x])
        assert any(b.kind == "activation" for b in arena.blocks)


@pytest.mark.parametrize("fn, shapes", op_cases.F32_MULTI)
def test_float32_stays_float32_in_arena_mode_multi_input(fn, shapes):
    arena = mg.Arena("f32", 1 << 16)
    with arena.scope():
        leaves = [mg.create_leaf(_positive_f32(s, k), requires_grad=True, name=f"in{k}")
                  for k, s in enumerate(shapes)]
        op_cases.assert_float32_through_backward(fn, leaves)
        assert any(b.kind == "activation" for b in arena.blocks)


def test_float32_mlp_step_in_arena_mode_keeps_every_array_float32():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((16, 12)).astype(np.float32)
    y = rng.integers(0, 4, 16)
    perm, graph = mg.Arena("perm32", 1 << 16), mg.Arena("graph32", 1 << 16)
    model = mg.nn.MLP([12, 8, 4], activation="tanh", seed=0, arena=perm)
    with graph.scope():
        h = model.layers[0](mg.create_leaf(X, name="x"))
        a = model.layers[1](h)
        logits = model.layers[2](a)
        loss = mg.cross_entropy(logits, y)
        for v in (h, a, logits, loss):
            assert v.dtype == np.float32 and v.data.dtype == np.float32
        loss.backward()
        for p in model.parameters():
            assert p.dtype == np.float32 and p.grad.dtype == np.float32
        # float32 everywhere: each activation block holds batch x width x 4 bytes
        sizes = [b.nbytes for b in graph.blocks if b.kind == "activation"]
        assert sizes == [16 * 8 * 4, 16 * 8 * 4, 16 * 4 * 4, 4]


# -- ctx.out: where an op writes its result ----------------------------------------------------

class _Double(mg.Function):
    """z = 2a; records the out= array ctx.out gave forward and backward."""
    name = "double_test_op"
    given: list = []

    @staticmethod
    def forward(ctx, a):
        out = ctx.out(a)
        _Double.given.append(out)
        return np.multiply(a, 2.0, out=out)

    @staticmethod
    def backward(ctx, grad_output):
        out = ctx.out(grad_output)
        _Double.given.append(out)
        return np.multiply(grad_output, 2.0, out=out)


def test_ctx_out_is_none_on_the_heap():
    _Double.given = []
    x = mg.create_leaf([1.0, -2.0, 3.0], requires_grad=True)
    y = _Double.apply(x)
    y.sum().backward()
    assert _Double.given == [None, None]          # numpy allocated both arrays
    assert np.allclose(y.data, [2.0, -4.0, 6.0]) and np.allclose(x.grad, [2.0, 2.0, 2.0])


@pytest.mark.parametrize("make", ALLOCATORS)
def test_ctx_out_is_the_array_on_the_allocator_that_the_op_output_becomes(make):
    _Double.given = []
    allocator = make()
    x = mg.create_leaf(np.array([1.0, -2.0, 3.0]), requires_grad=True)
    with allocator.scope():
        y = _Double.apply(x)
        forward_out = _Double.given[0]
        assert np.shares_memory(y.data, forward_out)  # written in place: no copy onto the arena
        assert np.allclose(y.data, [2.0, -4.0, 6.0])
        y.sum().backward()
        backward_out = _Double.given[1]
        assert backward_out is not None and backward_out.shape == (3,)
        owned = [b.kind for b in allocator.blocks if b.owner == "double_test_op"]
        assert owned.count("activation") == 1 and owned.count("grad") == 1   # both on the ledger
    assert np.allclose(x.grad, [2.0, 2.0, 2.0])


@pytest.mark.parametrize("scope", [pytest.param(None, id="heap"),
                                   pytest.param(lambda: mg.Arena("t", 1 << 12), id="arena")])
def test_ctx_out_refuses_a_misspelt_keyword_on_the_heap_as_on_an_arena(scope):
    class Misspelt(mg.Function):
        name = "misspelt_test_op"

        @staticmethod
        def forward(ctx, a):
            return np.exp(a, out=ctx.out(a, floatng=True))

    x = mg.create_leaf([0.0, 1.0])
    with pytest.raises(TypeError, match="floatng"):
        if scope is None:
            Misspelt.apply(x)
        else:
            with scope().scope():
                Misspelt.apply(x)
