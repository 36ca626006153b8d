"""The memory layer: Arena (bump allocator), Pool (size classes, early freeing), their ledgers,
stale-variable errors, the documented training loop's steady state, threads, and leaks.

Expected byte counts are worked out here from shapes, dtypes and the documented rules (64-byte
alignment, chunks that double, power-of-two size classes of at least 64 bytes, node records of
32 + 8 * (inputs + saved) bytes), never read back from the allocator under test.
"""
import contextlib
import gc
import itertools
import sys
import threading
import tracemalloc

import numpy as np
import pytest

import minigrad as mg

ALIGN = 64


def up(n):
    """n rounded up to the next multiple of the 64-byte alignment."""
    return -(-n // ALIGN) * ALIGN


def size_class(nbytes):
    """The Pool's size class: the next power of two, at least 64 bytes."""
    size = 1
    while size < nbytes:
        size *= 2
    return max(ALIGN, size)


def address(array):
    return array.__array_interface__["data"][0]


@pytest.fixture(scope="module")
def digits():
    return mg.data.digits_split()


def train_documented_loop(X, y, sizes, *, epochs, seed=0, lr=0.1, momentum=0.0):
    """The arena training loop as documented (SGD, batch 64, one graph scope per batch)."""
    perm = mg.Arena("perm", 1 << 20)
    graph = mg.Arena("graph", 1 << 20)
    model = mg.nn.MLP(sizes, seed=seed, arena=perm)
    opt = mg.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    losses = []
    for epoch in range(epochs):
        for xb, yb in mg.data.batches(X, y, 64, seed=epoch):
            with graph.scope():
                x = mg.create_leaf(xb, name="x")
                loss = mg.cross_entropy(model(x), yb)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
    return model, perm, graph, losses


# =================================================================================================
# Arena basics
# =================================================================================================
ALLOCS = [((1,), np.uint8), ((3,), np.float32), ((5, 3), np.float64), ((7,), np.int16),
          ((2, 2, 2), np.complex128), ((), np.float32), ((13,), np.bool_), ((4, 9), np.float32)]


def test_arrays_are_aligned_writable_disjoint_and_of_the_requested_shape():
    arena = mg.Arena("align", 1 << 12)
    arrays = [arena.alloc(shape, dtype) for shape, dtype in ALLOCS]
    for (shape, dtype), array in zip(ALLOCS, arrays):
        assert array.shape == shape and array.dtype == np.dtype(dtype)
        assert address(array) % ALIGN == 0, (shape, dtype, address(array) % ALIGN)
        assert array.flags.writeable and array.flags.c_contiguous
    for block in arena.blocks:
        assert block.offset % ALIGN == 0
    for a, b in itertools.combinations(arrays, 2):
        assert not np.shares_memory(a, b)


@pytest.mark.parametrize("capacity, sizes", [
    (1 << 12, [3000, 3000, 10, 20, 9000, 5]),     # chunk sizes 4096, 8192, 16384: all multiples of 64
    (1000, [600, 600, 3, 5, 7]),                  # first chunk of 1000 bytes: chunk 2 starts at 1000
    (256, [200, 2401, 3, 5000, 9]),               # a 2401-byte chunk made for one large request
], ids=["aligned-capacity", "capacity-1000", "odd-sized-large-request"])
def test_alignment_holds_in_every_chunk_the_arena_grows(capacity, sizes):
    # "64-byte aligned" is a promise about every array alloc returns, whatever capacity_bytes was
    # passed and whatever sizes were requested before.
    arena = mg.Arena("grow-align", capacity)
    misaligned = []
    for n in sizes:
        array = arena.alloc((n,), np.uint8)
        if address(array) % ALIGN:
            misaligned.append((n, arena.blocks[-1].offset, address(array) % ALIGN))
    assert misaligned == [], ("arrays (size, ledger offset, address % 64) not 64-byte aligned: "
                              f"{misaligned}")


def test_used_high_water_and_capacity_arithmetic():
    arena = mg.Arena("arith", 1024)
    assert (arena.used, arena.high_water, arena.capacity, arena.blocks) == (0, 0, 1024, [])
    arena.alloc((3,), np.float32)                          # bytes 0..12
    assert (arena.used, arena.high_water) == (12, 12)
    arena.alloc((5,), np.float64)                          # padded to 64: bytes 64..104
    assert (arena.used, arena.high_water) == (up(12) + 40, up(12) + 40)
    mark = arena.mark()
    assert mark == 104
    arena.alloc((10,), np.uint8)                           # bytes 128..138
    assert (arena.used, arena.high_water) == (up(104) + 10, up(104) + 10)
    arena.pop_to(mark)
    assert (arena.used, arena.high_water) == (104, 138)    # high water remembers the peak
    arena.alloc((1,), np.int8)                             # bytes 128..129
    assert (arena.used, arena.high_water) == (129, 138)
    assert arena.capacity == 1024                          # nothing grew


def test_ledger_records_offsets_sizes_kinds_and_owners_in_address_order():
    arena = mg.Arena("ledger", 4096)
    arena.alloc((4, 4), np.float32, kind="input", owner="x")
    arena.alloc((3,), np.float64, kind="param", owner="w")
    arena.alloc((2, 5), np.float32)                        # default kind, no owner
    arena.alloc((40,), np.uint8, kind="node", owner="mul")
    arena.alloc((3,), np.float64, kind="grad", owner="w.grad")
    arena.alloc((2, 5), np.float32, kind="saved", owner="cross_entropy")
    expected, top = [], 0
    for nbytes, kind, owner in [(64, "input", "x"), (24, "param", "w"), (40, "activation", None),
                                (40, "node", "mul"), (24, "grad", "w.grad"),
                                (40, "saved", "cross_entropy")]:
        offset = up(top)
        expected.append({"offset": offset, "nbytes": nbytes, "kind": kind, "owner": owner,
                         "alive": True})
        top = offset + nbytes
    assert [b.as_dict() for b in arena.blocks] == expected
    assert [(b.offset, b.nbytes, b.kind, b.owner, b.alive) for b in arena.blocks] == \
        [tuple(d.values()) for d in expected]
    assert arena.used == top
    assert {b.kind for b in arena.blocks} == {"input", "param", "activation", "node", "grad", "saved"}


def test_pop_to_kills_blocks_above_the_mark_and_drops_them_from_the_ledger():
    arena = mg.Arena("pop", 4096)
    keep = arena.alloc((8,), np.float64, owner="keep")
    keep[:] = np.arange(8)
    kept_block = arena.blocks[-1]
    mark = arena.mark()
    arena.alloc((8,), np.float64, owner="a")
    arena.alloc((8,), np.float64, owner="b")
    popped = arena.blocks[1:]
    arena.pop_to(mark)
    assert arena.blocks == [kept_block] and kept_block.alive
    assert all(not b.alive for b in popped)
    assert arena.used == mark
    again = arena.alloc((8,), np.float64, owner="again")   # reuses the popped bytes
    assert arena.blocks[-1].offset == popped[0].offset
    again[:] = -1.0
    np.testing.assert_array_equal(keep, np.arange(8))
    arena.pop_to(0)
    assert arena.blocks == [] and arena.used == 0 and not kept_block.alive


@pytest.mark.parametrize("bad", [1, 1000, -1])
def test_pop_to_above_the_top_or_negative_raises(bad):
    arena = mg.Arena("bad-mark", 1024)
    arena.alloc((3,), np.uint8)                            # top = 3
    with pytest.raises(ValueError, match="bad-mark"):
        arena.pop_to(arena.mark() + bad if bad > 0 else bad)
    assert arena.used == 3 and len(arena.blocks) == 1 and arena.blocks[0].alive


def test_nested_scopes_pop_innermost_first_and_restore_the_current_allocator():
    outer, other = mg.Arena("outer", 4096), mg.Arena("other", 4096)
    assert mg.current_allocator() is None
    with outer.scope() as entered:
        assert entered is outer and mg.current_allocator() is outer
        a = mg.create_leaf(np.ones(3), name="a")
        with outer.scope():
            b = mg.create_leaf(np.ones(3), name="b")
            assert len(outer.blocks) == 2
        assert mg.current_allocator() is outer
        assert [blk.owner for blk in outer.blocks] == ["a"]
        assert a.numpy().sum() == 3.0
        with pytest.raises(mg.StaleVariableError):
            b.numpy()
        with other.scope():
            assert mg.current_allocator() is other
            c = mg.create_leaf(np.ones(3), name="c")
            assert [blk.owner for blk in other.blocks] == ["c"]
            assert [blk.owner for blk in outer.blocks] == ["a"]
        assert mg.current_allocator() is outer
        with pytest.raises(mg.StaleVariableError):
            c.numpy()
        a.numpy()
        with pytest.raises(RuntimeError, match="boom"):   # an exception still pops the scope
            with outer.scope():
                mg.create_leaf(np.ones(3), name="d")
                raise RuntimeError("boom")
        assert [blk.owner for blk in outer.blocks] == ["a"]
        assert mg.current_allocator() is outer
    assert mg.current_allocator() is None
    assert outer.used == 0 and outer.blocks == [] and other.used == 0
    with pytest.raises(mg.StaleVariableError):
        a.numpy()


def test_growth_adds_chunks_and_keeps_earlier_arrays_valid_and_intact():
    arena = mg.Arena("grow", 256)
    a = arena.alloc((32,), np.float64)                     # fills the 256-byte chunk exactly
    a[:] = np.arange(32) * 1.5
    assert arena.capacity == 256
    b = arena.alloc((10,), np.float32)                     # new chunk of 2 * 256
    b[:] = -np.arange(10)
    assert arena.capacity == 256 + 512
    assert arena.blocks[-1].offset == 256
    c = arena.alloc((300,), np.float64)                    # 2400 B > 2 * 512: a chunk of 2400
    c[:] = 7.0
    assert arena.capacity == 256 + 512 + 2400
    assert arena.blocks[-1].offset == 768
    assert arena.used == 768 + 2400
    assert arena.high_water == 768 + 2400
    d = arena.alloc((2,), np.float64)                      # 2400-byte chunk is full: 2 * 2400
    d[:] = 3.0
    assert arena.capacity == 256 + 512 + 2400 + 4800
    np.testing.assert_array_equal(a, np.arange(32) * 1.5)
    np.testing.assert_array_equal(b, -np.arange(10, dtype=np.float32))
    np.testing.assert_array_equal(c, np.full(300, 7.0))
    np.testing.assert_array_equal(d, [3.0, 3.0])
    for x, y in itertools.combinations([a, b, c, d], 2):
        assert not np.shares_memory(x, y)
    # Popping and allocating the same sequence again reuses the chunks: no growth, same offsets.
    offsets = [blk.offset for blk in arena.blocks]
    capacity = arena.capacity
    arena.pop_to(0)
    for shape, dtype in [((32,), np.float64), ((10,), np.float32), ((300,), np.float64),
                         ((2,), np.float64)]:
        arena.alloc(shape, dtype)
    assert [blk.offset for blk in arena.blocks] == offsets
    assert arena.capacity == capacity


def test_growth_of_a_training_graph_beyond_the_first_chunk_gives_the_heap_result():
    # A graph arena far too small for one step grows; results equal heap mode exactly.
    rng = np.random.default_rng(3)
    X = rng.standard_normal((32, 20)).astype(np.float32)
    y = rng.integers(0, 5, 32)
    heap_model = mg.nn.MLP([20, 30, 5], seed=1)
    loss = mg.cross_entropy(heap_model(X), y)
    loss.backward()
    heap = [p.grad.copy() for p in heap_model.parameters()], loss.item()
    small = mg.Arena("small", 128)
    model = mg.nn.MLP([20, 30, 5], seed=1)
    with small.scope():
        loss = mg.cross_entropy(model(mg.create_leaf(X, name="x")), y)
        loss.backward()
        grads, value = [p.grad.copy() for p in model.parameters()], loss.item()
        assert small.capacity > 128
    assert value == heap[1]
    for g, h in zip(grads, heap[0]):
        np.testing.assert_array_equal(g, h)


# =================================================================================================
# Stale use after pop
# =================================================================================================
def _stale_setup():
    arena = mg.Arena("batch-arena", 4096)
    with arena.scope():
        x = mg.create_leaf(np.array([1.0, 2.0, 3.0]), name="xin")
        w = mg.create_leaf(np.array([0.5, -1.0, 2.0]), requires_grad=True, name="wpar")
        loss = (x * w).sum()
        loss.name = "lossvar"
        loss.backward()
        assert w.grad is not None                           # fine inside the scope
    return {"xin": x, "wpar": w, "lossvar": loss}


ACCESS_PATHS = [
    pytest.param("xin", lambda v: v + 1.0, id="op-add"),
    pytest.param("xin", lambda v: mg.tanh(v), id="op-tanh"),
    pytest.param("xin", lambda v: v.data, id="data"),
    pytest.param("xin", lambda v: v.numpy(), id="numpy"),
    pytest.param("lossvar", lambda v: v.item(), id="item"),
    pytest.param("lossvar", lambda v: v.backward(), id="backward"),
    pytest.param("wpar", lambda v: v.grad, id="grad"),
    pytest.param("wpar", lambda v: v.data, id="param-data"),
]


@pytest.mark.parametrize("name, access", ACCESS_PATHS)
def test_using_a_popped_variable_raises_stale_error_naming_variable_arena_and_fix(name, access):
    variables = _stale_setup()
    with pytest.raises(mg.StaleVariableError) as info:
        access(variables[name])
    message = str(info.value)
    assert f"'{name}'" in message, message
    assert "'batch-arena'" in message, message
    assert "Fix" in message and (".numpy()" in message or ".item()" in message), message
    assert isinstance(info.value, mg.errors.MinigradError)


def test_backward_steps_continued_after_the_scope_ended_raise_stale_error():
    arena = mg.Arena("stepping", 4096)
    w = mg.create_leaf(np.array([0.1, 0.2, 0.3]), requires_grad=True, name="w")
    with arena.scope():
        loss = ((w * 2.0).tanh() * w).sum()
        steps = mg.backward_steps(loss)
        next(steps)                                        # "start"
        next(steps)                                        # the sum node runs
    with pytest.raises(mg.StaleVariableError) as info:
        list(steps)
    message = str(info.value)
    assert "'stepping'" in message and "backward" in message and "Fix" in message, message


def test_backward_on_a_graph_whose_arena_was_popped_raises_stale_error():
    # The loss lives on `top` (still alive); the graph below it lived on `below`, popped out of
    # order. backward must refuse to read the graph's saved tensors from reclaimed memory.
    below, top = mg.Arena("below", 4096), mg.Arena("top", 4096)
    w = mg.create_leaf(np.array([0.1, 0.2, 0.3]), requires_grad=True, name="w")
    with below.scope():
        h = (w * 3.0).tanh()
        with top.scope():
            loss = (h * h).sum()
            below.pop_to(0)
            with pytest.raises(mg.StaleVariableError) as info:
                loss.backward()
    message = str(info.value)
    assert "'below'" in message and "Fix" in message, message


def test_parameter_created_by_mistake_inside_the_batch_scope_is_caught_on_the_next_step(digits):
    X, y, _, _ = digits
    graph = mg.Arena("graph-mistake", 1 << 20)
    model = opt = None
    batches = mg.data.batches(X, y, 64, seed=0)
    xb, yb = next(batches)
    with graph.scope():
        model = mg.nn.MLP([64, 16, 10], seed=0)           # mistake: no arena=perm, inside scope
        opt = mg.optim.SGD(model.parameters(), lr=0.1)
        loss = mg.cross_entropy(model(mg.create_leaf(xb, name="x")), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()                                        # the first step works
    xb, yb = next(batches)
    with pytest.raises(mg.StaleVariableError) as info:
        with graph.scope():
            loss = mg.cross_entropy(model(mg.create_leaf(xb, name="x")), yb)
    message = str(info.value)
    assert "'layer0.weight'" in message and "'graph-mistake'" in message, message
    assert "create parameters outside the batch scope" in message, message
    assert graph.used == 0 and graph.blocks == []


def test_parameters_on_a_perm_arena_survive_scopes(digits):
    X, y, _, _ = digits
    model, perm, graph, losses = train_documented_loop(X[:256], y[:256], [64, 16, 10], epochs=2)
    assert mg.current_allocator() is None
    assert graph.blocks == [] and graph.used == 0
    for p in model.parameters():
        assert p.data.flags.writeable                      # readable, writable, alive
        assert p.grad is not None and p.grad.shape == p.shape
        assert np.all(np.isfinite(p.numpy()))
    kinds = [(b.owner, b.kind, b.alive) for b in perm.blocks]
    assert kinds == [(f"layer{i}.{part}{suffix}", kind, True)
                     for i in range(2) for part in ("weight", "bias")
                     for suffix, kind in (("", "param"), (".grad", "grad"))]
    fresh = mg.nn.MLP([64, 16, 10], seed=0)
    assert not np.array_equal(model.parameters()[0].numpy(), fresh.parameters()[0].numpy())
    assert losses[-1] < losses[0]


# =================================================================================================
# Steady state and the ledger of one step
# =================================================================================================
def test_steady_state_no_growth_after_the_first_step(digits):
    X, y, _, _ = digits
    perm, graph = mg.Arena("perm-steady", 1 << 20), mg.Arena("graph-steady", 1 << 20)
    model = mg.nn.MLP([64, 64, 10], seed=0, arena=perm)
    params = model.parameters()
    opt = mg.optim.SGD(params, lr=0.1, momentum=0.9)
    perm_after_init = (perm.used, perm.capacity, len(perm.blocks))
    stream = itertools.chain.from_iterable(mg.data.batches(X, y, 64, seed=e) for e in range(3))
    history = []
    grad_addresses = None
    for step, (xb, yb) in zip(range(50), stream):          # 50 steps: crosses an epoch boundary
        with graph.scope():
            x = mg.create_leaf(xb, name="x")
            loss = mg.cross_entropy(model(x), yb)
            opt.zero_grad()
            assert all(p.grad is None for p in params)
            loss.backward()
            opt.step()
            loss.item()
        assert graph.blocks == [] and graph.used == 0
        addresses = [address(p.grad) for p in params]
        if grad_addresses is None:
            grad_addresses = addresses
        assert addresses == grad_addresses                 # zero_grad kept the buffers
        history.append((perm.used, perm.capacity, len(perm.blocks), graph.high_water,
                        graph.capacity))
    assert history[0][:3] == perm_after_init
    assert all(h == history[0] for h in history), sorted(set(history))
    assert graph.high_water > 0


def test_ledger_of_one_step_matches_the_tensor_sizes(digits):
    X, y, _, _ = digits
    B, n_in, n_hidden, n_out, f32 = 16, 64, 32, 10, 4
    perm, graph = mg.Arena("perm-ledger", 1 << 20), mg.Arena("graph-ledger", 1 << 20)
    model = mg.nn.MLP([n_in, n_hidden, n_out], seed=0, arena=perm)
    opt = mg.optim.SGD(model.parameters(), lr=0.1)

    assert [(b.owner, b.kind, b.nbytes) for b in perm.blocks] == [
        ("layer0.weight", "param", n_in * n_hidden * f32),
        ("layer0.weight.grad", "grad", n_in * n_hidden * f32),
        ("layer0.bias", "param", n_hidden * f32), ("layer0.bias.grad", "grad", n_hidden * f32),
        ("layer1.weight", "param", n_hidden * n_out * f32),
        ("layer1.weight.grad", "grad", n_hidden * n_out * f32),
        ("layer1.bias", "param", n_out * f32), ("layer1.bias.grad", "grad", n_out * f32)]

    def node(inputs, saved):
        return 32 + 8 * (inputs + saved)

    perm_before = (perm.used, len(perm.blocks))
    with graph.scope():
        x = mg.create_leaf(X[:B], name="x")
        loss = mg.cross_entropy(model(x), y[:B])
        forward = [(b.kind, b.owner, b.nbytes) for b in graph.blocks]
        assert forward == [
            ("input", "x", B * n_in * f32),
            ("activation", "linear", B * n_hidden * f32),     # a linear layer: batch*out*itemsize
            ("node", "linear", node(3, 2)),                   # x, W, b in; x, W saved
            ("activation", "relu", B * n_hidden * f32),
            ("node", "relu", node(1, 1)),
            ("activation", "linear", B * n_out * f32),
            ("node", "linear", node(3, 2)),
            ("saved", "cross_entropy", B * n_out * f32),      # the probabilities, for backward
            ("activation", "cross_entropy", f32),             # the scalar loss
            ("node", "cross_entropy", node(2, 2)),            # logits, targets in; probs, targets
        ]
        opt.zero_grad()
        loss.backward()
        blocks = list(graph.blocks)
        assert [(b.kind, b.owner, b.nbytes) for b in blocks[:len(forward)]] == forward
        grads = blocks[len(forward):]
        assert grads and all(b.kind == "grad" for b in grads)
        grad_sizes = sorted(b.nbytes for b in grads)
        # The gradients backward must materialise on the graph arena: dL/dlogits and dL/dh
        # (flowing into relu). Weight gradients may go there or straight into the parameters'
        # .grad buffers on perm; either way perm does not grow.
        for needed in (B * n_out * f32, B * n_hidden * f32):
            assert needed in grad_sizes, (needed, grad_sizes)
        assert (perm.used, len(perm.blocks)) == perm_before
        for p in model.parameters():
            assert p.grad is not None and p.grad.shape == p.shape and p.grad.dtype == np.float32
        # Every grad block is the size of a tensor of this graph (float32 or a bool mask).
        tensor_sizes = {B * n_out, B * n_hidden, n_hidden * n_out, n_in * n_hidden, n_out,
                        n_hidden, B * n_in}
        allowed = {n * f32 for n in tensor_sizes} | tensor_sizes
        assert set(grad_sizes) <= allowed, (grad_sizes, sorted(allowed))
        # Ledger consistency: address order, no overlap, padding below 64 bytes per block.
        ends = 0
        for b in blocks:
            assert b.offset >= ends and b.offset % ALIGN == 0 and b.alive
            ends = b.offset + b.nbytes
        total = sum(b.nbytes for b in blocks)
        assert graph.used == ends
        assert total <= graph.used < total + ALIGN * len(blocks)
        assert {b.kind for b in blocks} == {"input", "activation", "node", "saved", "grad"}
        opt.step()
        loss.item()
    assert graph.blocks == []


# =================================================================================================
# Read-only guard for saved arrays also holds for arena memory
# =================================================================================================
@pytest.mark.parametrize("where", ["heap", "perm-arena"])
def test_saved_parameter_is_read_only_while_its_graph_lives(where):
    # README: while a graph lives, the arrays it saved for backward are read-only, so an
    # optimiser step before backward is refused instead of silently changing the gradient.
    perm = mg.Arena("perm-ro", 1 << 16) if where == "perm-arena" else None
    graph = mg.Arena("graph-ro", 1 << 16)
    model = mg.nn.MLP([4, 3, 2], seed=0, arena=perm)
    opt = mg.optim.SGD(model.parameters(), lr=0.1)
    X, y = np.ones((5, 4), np.float32), np.zeros(5, np.int64)
    mg.cross_entropy(model(X), y).backward()               # every parameter has a gradient
    before = [p.numpy() for p in model.parameters()]
    with graph.scope():
        loss = mg.cross_entropy(model(mg.create_leaf(X, name="x")), y)
        with pytest.raises(mg.errors.InplaceError):
            opt.step()                                     # the graph saved layer0.weight
        with pytest.raises(ValueError):
            model.parameters()[0].data[0, 0] = 5.0
        for p, b in zip(model.parameters(), before):
            np.testing.assert_array_equal(p.numpy(), b)
        loss.backward()
        opt.step()                                         # allowed once backward consumed it


@pytest.mark.parametrize("make", [mg.Arena, mg.Pool], ids=["arena", "pool"])
@pytest.mark.parametrize("update", ["optimiser", "w.data -= 0.1"])
def test_a_popped_graph_unlocks_what_it_saved_even_while_its_loss_is_kept(make, update):
    # An evaluation loss kept past its scope (no backward) must not keep the parameters
    # read-only: the popped graph can never run backward, so its locks go at the pop.
    graph = make("graph-eval", 1 << 16) if make is mg.Arena else make("graph-eval")
    model = mg.nn.MLP([4, 3, 2], seed=0)
    opt = mg.optim.SGD(model.parameters(), lr=0.1)
    X, y = np.ones((5, 4), np.float32), np.zeros(5, np.int64)
    mg.cross_entropy(model(X), y).backward()
    w = model.parameters()[0]
    with graph.scope():
        val = mg.cross_entropy(model(mg.create_leaf(X, name="x")), y)
        with pytest.raises(ValueError, match="read-only"):
            w.data[0, 0] -= 0.1                            # inside the scope: still guarded
    before = w.numpy()
    if update == "optimiser":
        opt.step()
        np.testing.assert_allclose(w.numpy(), before - 0.1 * w.grad)
    else:
        w.data -= 0.1
        np.testing.assert_allclose(w.numpy(), before - 0.1)
    with pytest.raises(mg.StaleVariableError):
        val.backward()                                     # the popped graph cannot run
    assert val is not None


@pytest.mark.parametrize("make", [mg.Arena, mg.Pool], ids=["arena", "pool"])
@pytest.mark.parametrize("end", ["backward, then a step in the scope", "popped without backward"])
def test_a_parameter_saved_by_two_nodes_is_writable_again_when_its_graph_is_done(make, end):
    # Tied weights: w is saved by both muls. Whichever way the graph ends (backward consumes it,
    # or the scope pops it while its output is kept) both nodes and their records on the
    # allocator let go of w's lock, so the optimiser may write it.
    graph = make("graph-tied", 1 << 16) if make is mg.Arena else make("graph-tied")
    w = mg.create_leaf(np.array([1.0, 2.0, 3.0]), requires_grad=True, name="w")
    opt = mg.optim.SGD([w], lr=0.1)
    with graph.scope():
        out = ((mg.create_leaf(np.ones(3)) * w) * w).sum()
        with pytest.raises(ValueError, match="read-only"):
            w.data[0] = 5.0                                # saved by a live graph: guarded
        if end.startswith("backward"):
            out.backward()
            opt.step()
            np.testing.assert_allclose(w.numpy(), [1.0, 2.0, 3.0] - 0.1 * 2 * np.array([1, 2, 3]))
    if end.startswith("popped"):
        w.data[0] = 5.0                                    # the popped graph can never run
        assert out is not None


# =================================================================================================
# Threads
# =================================================================================================
def _train_thread_job(X, y, sizes, seed, epochs, barrier=None):
    perm = mg.Arena(f"perm-t{seed}", 1 << 20)
    graph = mg.Arena(f"graph-t{seed}", 1 << 20)
    model = mg.nn.MLP(sizes, seed=seed, arena=perm)
    opt = mg.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    if barrier is not None:
        barrier.wait()
    losses = []
    for epoch in range(epochs):
        for xb, yb in mg.data.batches(X, y, 64, seed=epoch + seed):
            with graph.scope():
                assert mg.current_allocator() is graph
                loss = mg.cross_entropy(model(mg.create_leaf(xb, name="x")), yb)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
            assert mg.current_allocator() is None
    return [p.numpy() for p in model.parameters()], losses


def test_two_threads_train_side_by_side_exactly_as_one_after_the_other(digits):
    X, y, _, _ = digits
    jobs = [([64, 64, 10], 1), ([64, 32, 10], 2)]
    sequential = [_train_thread_job(X, y, sizes, seed, 4) for sizes, seed in jobs]

    results, errors = [None, None], []
    barrier = threading.Barrier(2)

    def run(i, sizes, seed):
        try:
            results[i] = _train_thread_job(X, y, sizes, seed, 4, barrier)
        except BaseException as exc:                       # reported below, not swallowed
            errors.append(exc)
            barrier.abort()

    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)                            # switch threads as often as possible
    try:
        threads = [threading.Thread(target=run, args=(i, s, seed))
                   for i, (s, seed) in enumerate(jobs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(previous)
    assert not errors, errors
    for (seq_params, seq_losses), (thr_params, thr_losses) in zip(sequential, results):
        assert len(seq_params) == len(thr_params) == 4
        for a, b in zip(seq_params, thr_params):
            assert np.array_equal(a, b)
        assert seq_losses == thr_losses


def test_current_allocator_is_per_thread():
    arena = mg.Arena("main-thread", 4096)
    seen = {}
    inside, done = threading.Event(), threading.Event()

    def heap_thread():
        try:
            inside.wait(10)
            seen["allocator"] = mg.current_allocator()
            leaf = mg.create_leaf(np.ones(4), requires_grad=True, name="t")
            out = (leaf * 2.0).sum()
            out.backward()
            seen["values"] = (out.item(), leaf.grad.copy())
            seen["leaf_block"] = leaf._block
            seen["leaf"] = leaf
        except BaseException as exc:                       # reported by the main thread
            seen["error"] = exc
        finally:
            done.set()

    thread = threading.Thread(target=heap_thread)
    thread.start()
    with arena.scope():
        x = mg.create_leaf(np.ones(3), name="main-x")
        blocks_before = [(b.owner, b.nbytes) for b in arena.blocks]
        inside.set()
        assert done.wait(10)
        assert "error" not in seen, seen.get("error")
        assert [(b.owner, b.nbytes) for b in arena.blocks] == blocks_before   # nothing from the thread
        assert mg.current_allocator() is arena
    thread.join()
    assert seen["allocator"] is None
    assert seen["leaf_block"] is None                      # heap
    np.testing.assert_array_equal(seen["leaf"].numpy(), np.ones(4))   # not stale: main's pop
    assert seen["values"][0] == 8.0
    np.testing.assert_array_equal(seen["values"][1], np.full(4, 2.0))
    with pytest.raises(mg.StaleVariableError):
        x.numpy()

    # And the other way round: a thread inside its scope, the main thread on the heap.
    other = mg.Arena("worker-thread", 4096)
    entered, release = threading.Event(), threading.Event()

    def scoped_thread():
        with other.scope():
            mg.create_leaf(np.ones(5), name="worker-x")
            entered.set()
            release.wait(10)

    thread = threading.Thread(target=scoped_thread)
    thread.start()
    assert entered.wait(10)
    assert mg.current_allocator() is None
    mine = mg.create_leaf(np.ones(2), name="main-heap")
    assert mine._block is None
    assert [b.owner for b in other.blocks] == ["worker-x"]
    release.set()
    thread.join()
    assert other.blocks == []
    np.testing.assert_array_equal(mine.numpy(), [1.0, 1.0])


# =================================================================================================
# Pool
# =================================================================================================
def test_pool_reuses_a_freed_block_of_the_same_size_class():
    pool = mg.Pool("reuse")
    a = pool.alloc((10,), np.float32)                      # 40 B -> class 64
    block_a = pool.blocks[-1]
    pool.alloc((100,), np.float32)                         # 400 B -> class 512
    block_b = pool.blocks[-1]
    assert (block_a.offset, block_a.nbytes, block_b.offset, block_b.nbytes) == (0, 64, 64, 512)
    assert (pool.used, pool.capacity, pool.high_water) == (576, 576, 576)
    a_address = address(a)
    pool.free(block_a)
    assert not block_a.alive and block_a in pool.blocks    # freed blocks stay in the ledger
    assert (pool.used, pool.capacity, pool.high_water) == (512, 576, 576)
    c = pool.alloc((16,), np.float32)                      # 64 B: the same class as a
    block_c = pool.blocks[-1]
    assert block_c.offset == block_a.offset and address(c) == a_address
    assert (pool.used, pool.capacity) == (576, 576)
    pool.free(block_b)
    pool.alloc((100,), np.uint8)                           # class 128: no free block of that size
    assert pool.blocks[-1].offset == 576 and pool.capacity == 576 + 128
    pool.free(block_c)
    pool.free(block_c)                                     # freeing twice is harmless
    assert pool.used == 128


@pytest.mark.parametrize("nbytes", [0, 1, 63, 64, 65, 128, 129, 1000, 1024, 1025, 70000])
def test_pool_size_classes_are_powers_of_two_of_at_least_64_bytes(nbytes):
    pool = mg.Pool("classes")
    array = pool.alloc((nbytes,), np.uint8)
    block = pool.blocks[-1]
    assert array.shape == (nbytes,)
    assert block.nbytes == size_class(nbytes)
    assert pool.used == pool.capacity == pool.high_water == size_class(nbytes)
    assert address(array) % ALIGN == 0


def test_pool_scope_keeps_freed_blocks_in_the_ledger_until_it_ends():
    pool = mg.Pool("pool-scope")
    before = pool.alloc((4,), np.float64, owner="before")
    with pool.scope():
        assert mg.current_allocator() is pool
        pool.alloc((4,), np.float64, owner="in1")
        pool.alloc((300,), np.float32, owner="in2")
        pool.free(pool.blocks[1])
        assert [(b.owner, b.alive) for b in pool.blocks] == \
            [("before", True), ("in1", False), ("in2", True)]
        assert pool.used == 64 + 2048
    assert [(b.owner, b.alive) for b in pool.blocks] == [("before", True)]
    assert pool.used == 64 and pool.capacity == 64 + 64 + 2048
    before[:] = 1.0
    with pool.scope():
        pool.alloc((300,), np.float32)                     # reuses the freed 2048-byte block
        pool.alloc((3,), np.float64)
    assert pool.capacity == 64 + 64 + 2048


def _deep_mlp_step(allocator, sizes, X, y):
    """One SGD training step of an MLP made on the heap, inside allocator's scope (None: heap).

    Returns the gradients (copied before the update), the loss and the updated parameters."""
    model = mg.nn.MLP(sizes, seed=0)
    opt = mg.optim.SGD(model.parameters(), lr=0.01)
    with allocator.scope() if allocator is not None else contextlib.nullcontext():
        loss = mg.cross_entropy(model(mg.create_leaf(X, name="x")), y)
        opt.zero_grad()
        loss.backward()
        grads = [p.grad.copy() for p in model.parameters()]
        opt.step()
        value = loss.item()
    return grads, value, [p.numpy() for p in model.parameters()]


def test_pool_frees_early_so_its_peak_is_below_the_arena_peak_with_identical_gradients():
    width, depth, batch = 256, 16, 64
    sizes = [width] * (depth + 1) + [10]                   # 16 hidden layers, then 10 classes
    rng = np.random.default_rng(0)
    X = rng.standard_normal((batch, width)).astype(np.float32)
    y = rng.integers(0, 10, batch)
    heap_grads, heap_loss, heap_params = _deep_mlp_step(None, sizes, X, y)
    arena, pool = mg.Arena("deep-arena", 1 << 20), mg.Pool("deep-pool")
    arena_grads, arena_loss, arena_params = _deep_mlp_step(arena, sizes, X, y)
    pool_grads, pool_loss, pool_params = _deep_mlp_step(pool, sizes, X, y)
    print(f"16-layer peak bytes: arena={arena.high_water} pool={pool.high_water} "
          f"ratio={pool.high_water / arena.high_water:.3f}")
    assert pool.high_water < arena.high_water
    # The arena keeps every activation, node record and gradient of the step: at least the
    # activations (two per hidden layer, batch x width float32).
    assert arena.high_water >= 2 * depth * batch * width * 4
    assert arena_loss == heap_loss == pool_loss
    assert len(heap_grads) == 2 * (depth + 1)
    for h, a, p in zip(heap_grads, arena_grads, pool_grads):
        assert np.array_equal(a, h) and np.array_equal(p, h)
    for h, a, p in zip(heap_params, arena_params, pool_params):
        assert np.array_equal(a, h) and np.array_equal(p, h)
    assert pool.used == 0 and pool.blocks == []


def test_pool_backward_keeps_leaf_data_and_gradients_readable():
    # Use counts free saved *intermediate* tensors early; a leaf is not an intermediate: its
    # gradient (and data) must be readable after backward, inside the scope, as in arena mode.
    with mg.Pool("leaf-pool").scope():
        a = mg.create_leaf(np.array([1.0, 2.0, 3.0]), requires_grad=True, name="a")
        b = mg.create_leaf(np.array([4.0, 5.0, 6.0]), requires_grad=True, name="b")
        x = mg.create_leaf(np.array([1.0, -1.0, 0.5]), name="x")
        (a * b * x).sum().backward()
        np.testing.assert_array_equal(a.grad, [4.0, -5.0, 3.0])
        np.testing.assert_array_equal(b.grad, [1.0, -2.0, 1.5])
        np.testing.assert_array_equal(x.numpy(), [1.0, -1.0, 0.5])


def test_parameters_made_on_a_pool_survive_backward_in_its_scope_and_train_like_heap():
    # create_leaf(..., arena=pool) outside the scope is the Pool version of a perm arena: the
    # scope's pop_to only frees blocks made after its mark, so backward must not free them either
    # (neither the parameter values nor the .grad buffers backward writes into).
    X = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
    y = np.arange(8) % 3
    heap_model = mg.nn.MLP([4, 5, 3], seed=0)
    heap_opt = mg.optim.SGD(heap_model.parameters(), lr=0.1)
    pool = mg.Pool("perm-and-graph")
    model = mg.nn.MLP([4, 5, 3], seed=0, arena=pool)
    opt = mg.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        heap_opt.zero_grad()
        mg.cross_entropy(heap_model(X), y).backward()
        with pool.scope():
            loss = mg.cross_entropy(model(mg.create_leaf(X, name="x")), y)
            opt.zero_grad()
            loss.backward()
            for p, h in zip(model.parameters(), heap_model.parameters()):
                np.testing.assert_allclose(p.grad, h.grad, rtol=1e-6, atol=1e-7,
                                           err_msg=p.name)
            opt.step()
        heap_opt.step()
    assert all(b.alive for b in pool.blocks)               # only the parameters and their grads
    for p, h in zip(model.parameters(), heap_model.parameters()):
        np.testing.assert_allclose(p.numpy(), h.numpy(), rtol=1e-6, atol=1e-7)


# =================================================================================================
# Memory stays flat; kept-alive graphs show up in live_nodes()
# =================================================================================================
def test_traced_memory_is_flat_over_300_arena_training_steps(digits):
    X, y, _, _ = digits
    perm, graph = mg.Arena("perm-flat", 1 << 20), mg.Arena("graph-flat", 1 << 20)
    model = mg.nn.MLP([64, 64, 10], seed=0, arena=perm)
    opt = mg.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    # The batches are drawn before measuring: the shuffling permutation a batch generator holds
    # (10 KB) would otherwise be counted or not depending on where in an epoch we stop.
    stream = iter(list(itertools.islice(itertools.chain.from_iterable(
        mg.data.batches(X, y, 64, seed=e) for e in itertools.count()), 1200)))
    last = np.zeros(1)

    def step():
        xb, yb = next(stream)
        with graph.scope():
            loss = mg.cross_entropy(model(mg.create_leaf(xb, name="x")), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            last[0] = loss.item()

    was_tracing = tracemalloc.is_tracing()
    for _ in range(300):                                   # warm-up: optimiser state, caches
        step()
    if not was_tracing:
        tracemalloc.start()
    try:
        for _ in range(600):                               # warm-up under tracing too
            step()
        gc.collect()
        start = tracemalloc.get_traced_memory()[0]
        for _ in range(300):
            step()
        gc.collect()
        growth = tracemalloc.get_traced_memory()[0] - start
    finally:
        if not was_tracing:
            tracemalloc.stop()
    # Bound: 64 bytes per step, 19,200 bytes over 300 steps. Anything a step makes and leaks is
    # bigger than that: a Variable, a numpy array header or a ledger Block is about 100 bytes, a
    # graph node about 400 with its attributes, and the smallest array buffer of this step is the
    # 4-byte loss plus its header; the step's activations are kilobytes. So one leaked object per
    # step would add >= 30,000 bytes. What remains below the bound is the interpreter's and
    # numpy's own caches settling (a few kilobytes, shrinking as they fill).
    print(f"traced memory growth over 300 arena steps: {growth} bytes")
    assert growth < 300 * 64, growth
    assert graph.used == 0 and graph.capacity == 1 << 20
    assert np.isfinite(last[0])


def test_keeping_losses_alive_grows_live_nodes_and_item_keeps_them_at_zero():
    rng = np.random.default_rng(0)
    W = mg.create_leaf(rng.normal(size=(8, 8)) * 0.3, requires_grad=True, name="W")
    U = mg.create_leaf(rng.normal(size=(4, 8)) * 0.3, requires_grad=True, name="U")
    xs = rng.normal(size=(120, 2, 4))
    gc.collect()
    baseline = mg.live_nodes()

    # The leak: summing the Variable losses keeps every step's graph alive.
    h = mg.create_leaf(np.zeros((2, 8)), name="h0")
    total = 0.0
    counts = []
    for t in range(120):
        h = (xs[t] @ U + h @ W).tanh()                     # matmul, matmul, add, tanh
        loss = (h * h).mean()                              # mul, mean
        total = total + loss                               # add: 7 recorded nodes per step
        if (t + 1) % 30 == 0:
            counts.append(mg.live_nodes() - baseline)
    print(f"live nodes after 30/60/90/120 steps without .item(): {counts}")
    assert counts == [7 * 30, 7 * 60, 7 * 90, 7 * 120]
    del h, loss, total
    gc.collect()
    assert mg.live_nodes() == baseline                     # dropped graphs are gone

    # The correct loop: backward each step, keep a float, carry the state as data.
    graph = mg.Arena("rnn-graph", 1 << 16)
    state = np.zeros((2, 8))
    losses, between = [], []
    for t in range(120):
        with graph.scope():
            h = (xs[t] @ U + mg.create_leaf(state, name="h") @ W).tanh()
            loss = (h * h).mean()
            W.zero_grad()
            U.zero_grad()
            loss.backward()
            losses.append(loss.item())
            state = h.numpy()
        if t % 10 == 9:   # (each count walks the whole heap: a leak would only grow between them)
            between.append(mg.live_nodes() - baseline)
    assert between == [0] * 12
    assert len(losses) == 120 and all(np.isfinite(losses))


# =================================================================================================
# The documented loop learns digits
# =================================================================================================
def _readme_loop(X, y):
    """README's "Training, one arena per batch" loop, verbatim."""
    perm, graph = mg.Arena("perm", 1 << 20), mg.Arena("graph", 1 << 20)
    model = mg.nn.MLP([64, 64, 10], seed=0, arena=perm)
    opt = mg.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for epoch in range(30):
        for xb, yb in mg.data.batches(X, y, 32, seed=epoch):
            with graph.scope():
                loss = mg.cross_entropy(model(mg.create_leaf(xb)), yb)
                opt.zero_grad(); loss.backward(); opt.step()   # noqa: E702
                losses.append(loss.item())
    return model, perm, graph, losses


@pytest.mark.parametrize("loop", ["sgd-batch64-100-epochs", "readme-adam-batch32-30-epochs"])
def test_documented_arena_loop_reaches_95_percent_on_digits(digits, loop):
    X, y, X_test, y_test = digits
    if loop.startswith("sgd"):
        model, perm, graph, losses = train_documented_loop(X, y, [64, 64, 10], epochs=100)
    else:
        model, perm, graph, losses = _readme_loop(X, y)
    with mg.no_grad():
        predictions = model(mg.create_leaf(X_test)).numpy().argmax(axis=1)
    accuracy = float((predictions == y_test).mean())
    print(f"digits test accuracy, {loop}, arena mode: {accuracy:.4f}")
    assert accuracy >= 0.95
    assert graph.blocks == [] and graph.used == 0
    assert np.mean(losses[-20:]) < np.mean(losses[:20])
