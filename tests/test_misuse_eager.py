"""The eager engine under misuse: what backward reads is what forward saw, memory that goes stale
says so, and numpy's protocols are answered or refused with a clear error (issue 24)."""
import contextlib
import gc
import sys
import threading

import numpy as np
import pytest

import minigrad as mg
from minigrad import errors
from minigrad.arena import BUFFER_OWNERS, ScopeError, StaleVariableError, is_allocator_buffer


@contextlib.contextmanager
def thread_switches_often():
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


def param(values, **kwargs):
    return mg.create_leaf(np.array(values, dtype=np.float64), requires_grad=True, **kwargs)


def guard_of(output):
    """The saved-array guard of the node that made output (None when nothing is guarded)."""
    return output.grad_fn._locked


# --- saved arrays that a user can reach through other arrays (item 2) ---------------------------

def _base_write(X, view):
    X[0, 0] = 100.0


def _other_view_write(X, view):
    other = X[0:2]
    other[0, 0] = 100.0


def _own_view_write(X, view):
    view[0, 0] = 100.0   # the view itself is not locked (its owner X is)


@pytest.mark.parametrize("write", [_base_write, _other_view_write, _own_view_write],
                         ids=["base", "other-view", "the-view"])
def test_saved_view_changed_through_shared_memory_is_refused_at_backward(write):
    X = np.arange(32.0).reshape(8, 4)                 # itself a view of an arange
    batch = X[0:4]
    W = param(np.ones((4, 2)), name="W")
    x = mg.create_leaf(batch, copy=False, name="batch")
    loss = (x @ W).sum()
    try:
        write(X, batch)
    except ValueError:                                 # refused at the write: also fine
        loss.backward()
        return
    with pytest.raises(errors.InplaceError) as excinfo:
        loss.backward()
    text = str(excinfo.value)
    assert "matmul" in text and "'batch'" in text and "(4, 4)" in text and "Fix" in text


def test_arange_reshape_leaf_written_after_forward_is_refused_at_backward():
    a = np.arange(6.0).reshape(2, 3)
    x = mg.create_leaf(a, copy=False, name="a")
    w = param([1.0, 2.0, 3.0], name="w")
    loss = (x * w).sum()
    a[1, 2] = -50.0
    with pytest.raises(errors.InplaceError, match=r"mul.*'a'"):
        loss.backward()


def test_parameter_data_replaced_by_a_view_is_guarded():
    buf = np.array([1.0, 2.0, 3.0, 4.0])
    alias = buf[0:2]
    w = param([0.0, 0.0, 0.0], name="w")
    w.data = buf[:3]
    x = mg.create_leaf(np.array([5.0, 6.0, 7.0]), requires_grad=True)
    loss = (x * w).sum()
    with pytest.raises(ValueError):                    # buf owns the memory: locked
        buf[0] = 9.0
    alias[0] = 9.0                                     # a view made before the lock
    with pytest.raises(errors.InplaceError, match=r"mul.*'w'"):
        loss.backward()


def test_view_of_a_parameter_made_before_forward_cannot_change_what_backward_reads():
    w = param([1.0, 2.0, 3.0], name="w")
    row = w.data[0:2]                                  # writable, made before the lock
    x = param([4.0, 5.0, 6.0], name="x")
    loss = (x * w).sum()
    row[0] = 10.0
    with pytest.raises(errors.InplaceError, match="'w'"):
        loss.backward()


def test_view_of_an_arena_parameter_made_before_forward_is_guarded():
    perm = mg.Arena("perm-view", 1 << 14)
    w = param([1.0, 2.0, 3.0], name="w", arena=perm)
    alias = w.data[:]                                  # shares arena memory, not the Variable
    x = param([4.0, 5.0, 6.0], name="x")
    loss = (x * w).sum()
    with pytest.raises(ValueError):                    # the parameter itself is locked
        w.data[0] = 7.0
    alias[0] = 7.0
    with pytest.raises(errors.InplaceError, match="'w'"):
        loss.backward()


def test_unaliased_parameter_is_locked_without_a_copy():
    # The cost rule: a parameter nothing else refers to needs no snapshot (x * x included).
    w = param([1.0, 2.0, 3.0], name="w")
    y = w * w
    loss = (y * mg.create_leaf(np.ones(3))).sum()
    assert guard_of(y) is not None and guard_of(y).snapshots == ()
    with pytest.raises(ValueError):
        w.data[0] = 5.0
    loss.backward()
    np.testing.assert_allclose(w.grad, [2.0, 4.0, 6.0])
    w.data[0] = 5.0                                    # consumed: writable again


@pytest.mark.parametrize("where", ["arena", "pool"])
def test_unaliased_parameter_on_an_allocator_is_locked_without_a_copy(where):
    # The same cost rule for a parameter whose memory is an allocator's: its views refer to it
    # (not to the allocator's buffer), so its reference count proves that none exists.
    allocator = mg.Arena("perm-lock", 1 << 14) if where == "arena" else mg.Pool("perm-lock")
    w = param([1.0, 2.0, 3.0], name="w", arena=allocator)
    assert w.data[1:].base is w.data
    loss = (w * mg.create_leaf(np.ones(3))).sum()
    assert guard_of(loss.grad_fn.inputs[0]).snapshots == ()
    with pytest.raises(ValueError):
        w.data[0] = 5.0
    loss.backward()
    np.testing.assert_allclose(w.grad, [1.0, 1.0, 1.0])
    w.data[0] = 5.0                                    # consumed: writable again
    alias = w.data[:]                                  # a view made before the next forward
    loss = (w * mg.create_leaf(np.ones(3))).sum()
    assert len(guard_of(loss.grad_fn.inputs[0]).snapshots) == 1
    alias[0] = 7.0
    with pytest.raises(errors.InplaceError, match="'w'"):
        loss.backward()


def test_parameter_used_again_in_one_graph_shares_its_lock():
    # The training loop's shortcut (readonly._locks_held): a parameter that a live node of the
    # graph locked already is guarded by that same lock, with no copy, in every later op.
    w = param([1.0, 2.0, 3.0], name="w")
    h = param([0.5, -1.0, 2.0]).tanh()                # (an op output: not a user array)
    for _ in range(3):
        h = (h * w).tanh()
    muls = [v for v in _outputs_up_to(h) if v.grad_fn.name == "mul"]
    locks = {id(lock) for v in muls for lock in getattr(guard_of(v), "locks", [guard_of(v)])}
    assert len(muls) == 3 and len(locks) == 1          # (the first op took it, the others share)
    assert all(guard_of(v).snapshots == () for v in muls)
    assert sum(type(guard_of(v)).__name__ == "ArrayLock" for v in muls) == 2
    view = w.data[1:]                                  # made while locked: read-only too
    with pytest.raises(ValueError):
        view[0] = 9.0
    with pytest.raises(ValueError):
        w.data[0] = 9.0
    h.sum().backward()
    w.data[0] = 9.0                                    # consumed: writable again


def _outputs_up_to(output):
    seen, stack = [], [output]
    while stack:
        v = stack.pop()
        if v.grad_fn is not None and all(v is not s for s in seen):
            seen.append(v)
            stack.extend(v.grad_fn.inputs)
    return seen


DECLINED = {"batch held by name", "view of a batch"}


@pytest.mark.parametrize("case", ["parameter twice", "x * x", "batch held by name",
                                  "view of a batch", "arena parameter"])
def test_the_shortcut_guards_as_the_general_path_does(case):
    # _locks_held either declines (None: an alias may exist, or memory it cannot judge) or gives
    # the very locks the general path (_user_arrays + SavedGuard) gives, with no snapshot.
    from minigrad.eager import readonly
    allocator = mg.Arena("perm-shortcut", 1 << 14) if case == "arena parameter" else None
    w = param([1.0, 2.0, 3.0], name="w", arena=allocator)
    batch = np.ones(4)
    x = {"parameter twice": param([4.0, 5.0, 6.0]), "x * x": w,
         "batch held by name": mg.create_leaf(batch[:3], copy=True),
         "view of a batch": mg.create_leaf(batch[1:], copy=False),
         "arena parameter": param([4.0, 5.0, 6.0])}[case]
    if case == "batch held by name":
        held_by_name = x._data                          # noqa: F841 (the alias that matters)
    keep = w * x                                        # the first locks, taken the general way
    inputs, saved = (w, x), (w._data, x._data)
    user = [w._data] if x is w else [w._data, x._data]
    shortcut = readonly._locks_held(saved, user)
    general = readonly.SavedGuard(readonly._user_arrays(saved, inputs, user))
    if case in DECLINED:
        assert shortcut is None
    else:
        assert {id(lock) for lock in shortcut} == {id(lock) for lock in general.locks}
        assert general.snapshots == ()
    del keep


def test_batch_held_by_name_gets_a_snapshot_and_is_writable_after_backward():
    batch = np.ones((3, 2))
    W = param(np.ones((2, 1)))
    out = mg.create_leaf(batch, copy=False) @ W
    assert len(guard_of(out).snapshots) == 1
    out.sum().backward()
    batch[0, 0] = 5.0
    np.testing.assert_allclose(W.grad, [[3.0], [3.0]])


@pytest.mark.parametrize("where", ["pool", "arena"])
def test_saved_view_guard_holds_inside_allocator_scopes(where):
    allocator = mg.Pool("guard-pool") if where == "pool" else mg.Arena("guard-arena", 1 << 16)
    X = np.arange(12.0).reshape(3, 4)
    W = param(np.ones((4, 2)), name="W")
    with allocator.scope():
        x = mg.create_leaf(X[0:2], copy=False, name="rows")
        loss = ((x @ W).tanh()).sum()
        X.reshape(-1)[0] = 1.0                         # through a view of the base
        with pytest.raises(errors.InplaceError, match="'rows'"):
            loss.backward()


@pytest.mark.parametrize("stepping", [False, True])
def test_checkpoint_input_changed_after_forward_is_refused_before_the_recompute(stepping):
    X = np.arange(8.0).reshape(2, 4)
    W = param(np.ones((4, 4)) * 0.1, name="W")
    x = mg.create_leaf(X[0:1], copy=False, name="x")
    h = mg.checkpoint(lambda a, w: (a @ w).tanh(), x, W)
    loss = h.sum()
    X[0, 1] = 50.0
    with pytest.raises(errors.InplaceError, match=r"checkpoint.*'x'"):
        if stepping:
            for _ in mg.backward_steps(loss):
                pass
        else:
            loss.backward()


# --- arrays whose .base is not an ndarray (crash before) ----------------------------------------

def _constants(tmp_path):
    base = np.arange(6.0)
    mm = np.memmap(tmp_path / "c.dat", dtype=np.float64, mode="w+", shape=(4,))
    mm[:] = [1.0, 2.0, 3.0, 4.0]
    return {
        "sliding_window_view": np.lib.stride_tricks.sliding_window_view(base, 4)[1],
        "as_strided": np.lib.stride_tricks.as_strided(base, shape=(4,), strides=(8,)),
        "frombuffer-bytes": np.frombuffer(np.array([1.0, 2.0, 3.0, 4.0]).tobytes()),
        "frombuffer-bytearray": np.frombuffer(bytearray(np.array([1.0, 2.0, 3.0, 4.0]).tobytes())),
        "memmap": mm,
    }


@pytest.mark.parametrize("kind", ["sliding_window_view", "as_strided", "frombuffer-bytes",
                                  "frombuffer-bytearray", "memmap"])
def test_constant_with_a_non_ndarray_base_is_saved_and_guarded(kind, tmp_path):
    const = _constants(tmp_path)[kind]
    expected = np.array(const, dtype=np.float64)
    w = param([1.0, 1.0, 1.0, 1.0], name="w")
    (w * const).sum().backward()
    np.testing.assert_allclose(w.grad, expected)
    if const.flags.writeable:                          # writable memory: a later write is caught
        w.zero_grad()
        loss = (w * const).sum()
        const[0] = 99.0
        with pytest.raises(errors.InplaceError):
            loss.backward()


def test_threads_sharing_one_copy_false_array_keep_the_lock_table_consistent():
    shared = np.linspace(-1.0, 1.0, 64).reshape(16, 4)
    failures = []

    def train(seed):
        try:
            W = mg.create_leaf(np.random.default_rng(seed).standard_normal((4, 3)),
                               requires_grad=True)
            for _ in range(200):
                W.zero_grad()
                (mg.create_leaf(shared, copy=False) @ W).sum().backward()
                np.testing.assert_allclose(W.grad, np.repeat(shared.sum(0)[:, None], 3, 1))
        except Exception as exc:   # noqa: BLE001  (reported below, with its type)
            failures.append(exc)

    with thread_switches_often():
        threads = [threading.Thread(target=train, args=(s,)) for s in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert failures == []
    assert shared.flags.writeable                      # every lock was given back


def test_two_threads_backward_into_one_shared_parameter_lose_no_update():
    # numpy lets go of the GIL inside a large np.add: two backwards summing into one parameter's
    # .grad at once read-modified-wrote it over each other (a few of 2e6 entries lost a 1).
    n, rounds = 2_000_000, 10
    w = mg.create_leaf(np.ones(n), requires_grad=True)
    x = mg.create_leaf(np.ones(n))
    start = threading.Barrier(2)

    def train():
        for _ in range(rounds):
            loss = (w * x).sum()
            start.wait()                                   # both backwards at the same moment
            loss.backward()

    threads = [threading.Thread(target=train) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert int((w.grad != 2 * rounds).sum()) == 0


def test_a_lock_taken_in_the_window_before_the_last_one_ends_hands_the_flag_over():
    # Another thread can take an array's lock between its last holder letting go and that lock's
    # unlock running: the new lock must keep the array read-only (the old unlock leaves it alone)
    # and give back the flag the array had before the first lock. The window is made by hand.
    from minigrad.eager import readonly
    w = param([1.0, 2.0], name="w")
    array = w.data
    first = readonly._take(array, True)
    assert not array.flags.writeable
    ending = readonly.ArrayLock()                    # a lock whose unlock has not run yet
    window = readonly._Held(ending, None)
    window.array, window.was_writeable, window.enough = array, True, True
    readonly._held[id(array)] = window
    del first                                          # its unlock finds itself replaced
    assert not array.flags.writeable
    del ending                                         # dead, still listed: the window
    y = w * w                                          # takes the lock over
    assert readonly._held[id(array)] is not window and not array.flags.writeable
    with pytest.raises(ValueError):
        w.data[0] = 5.0
    y.sum().backward()
    assert array.flags.writeable and id(array) not in readonly._held
    np.testing.assert_allclose(w.grad, [2.0, 4.0])


# --- Variables that share an allocator's memory go stale with it (item 3) ------------------------

@pytest.mark.parametrize("make", ["detach", "create_leaf"])
@pytest.mark.parametrize("where", ["arena", "pool"])
def test_shared_variable_of_allocator_memory_goes_stale_with_its_scope(make, where):
    allocator = mg.Arena("stale-share", 1 << 14) if where == "arena" else mg.Pool("stale-share")
    w = param([1.0, 2.0, 3.0])
    with allocator.scope():
        h = w * 2.0
        kept = h.detach() if make == "detach" else mg.create_leaf(h, copy=False)
    with allocator.scope():
        (w * 7.0) + 1.0                                # the memory is reused
        with pytest.raises(StaleVariableError):
            kept.data
        with pytest.raises(StaleVariableError):
            kept + 1.0


# --- an array taken out of a scope keeps its values ----------------------------------------------

def _allocator(where, name):
    return mg.Arena(name, 1 << 12) if where == "arena" else mg.Pool(name)


@pytest.mark.parametrize("where", ["arena", "pool"])
def test_arrays_taken_from_variables_in_a_scope_keep_their_values_after_it(where):
    # The Variables go stale; arrays taken from them (.data, a slice of it, a leaf's .grad, a
    # no_grad output) are plain numpy and used to show the next batch's numbers.
    allocator = _allocator(where, "kept")
    w = param([1.0, 1.0, 1.0])
    data, slices, grads, evaluated = [], [], [], []
    for k in range(4):
        with allocator.scope():
            x = mg.create_leaf(np.full(3, float(k)), requires_grad=True)
            y = x * x * w
            data.append(y.data)
            slices.append(y.data[1:])
            y.sum().backward()
            grads.append(x.grad)
            with mg.no_grad():
                evaluated.append((x * 10.0).data)
    for k in range(4):
        np.testing.assert_allclose(data[k], np.full(3, k * k), err_msg=f"batch {k}")
        np.testing.assert_allclose(slices[k], np.full(2, k * k))
        np.testing.assert_allclose(grads[k], np.full(3, 2.0 * k))
        np.testing.assert_allclose(evaluated[k], np.full(3, 10.0 * k))
    with pytest.raises(StaleVariableError):
        y.data


@pytest.mark.parametrize("where", ["arena", "pool"])
def test_memory_is_reused_once_nothing_taken_from_it_is_held(where):
    allocator = _allocator(where, "reuse")
    for k in range(6):
        with allocator.scope():
            y = mg.create_leaf(np.full(3, float(k))) * 2.0
            held = y.data                                  # still bound when the scope ends
            assert held[0] == 2.0 * k
        if k == 0:
            first = allocator.capacity
    assert allocator.capacity <= 2 * first                 # let go of a step later: reused
    capacity = allocator.capacity
    arena_chunk = getattr(allocator, "_chunks", [None])[0]
    for k in range(6):
        with allocator.scope():
            total = float((mg.create_leaf(np.full(3, float(k))) * 2.0).data.sum())  # a float only
            assert total == pytest.approx(6.0 * k)
    assert allocator.capacity == capacity                  # a pool took no new buffer,
    assert getattr(allocator, "_chunks", [None])[0] is arena_chunk   # an arena kept its chunk


def test_a_parameter_on_its_own_arena_hands_out_its_array_itself():
    # (no scope takes it back: .data is the array the optimiser updates, views refer to it)
    perm = mg.Arena("perm-own", 1 << 12)
    w = param([1.0, 2.0, 3.0], arena=perm)
    assert w.data is w.data and w.data[1:].base is w.data
    with perm.scope():
        h = mg.create_leaf(np.ones(3), arena=perm)
        assert h.data is not h.data                        # made inside a scope: remembered


# --- the index of x[index] is copied (item 4) --------------------------------------------------

@pytest.mark.parametrize("kind", ["array", "list", "variable"])
def test_index_changed_after_forward_does_not_move_the_gradient(kind):
    x = param([1.0, 2.0, 3.0, 4.0])
    raw = np.array([0, 2, 2])
    index = {"array": raw, "list": [0, 2, 2], "variable": mg.create_leaf(raw, copy=False)}[kind]
    loss = (x[index] * mg.create_leaf(np.array([1.0, 10.0, 100.0]))).sum()
    if kind == "list":
        index[0] = 3
    else:
        raw[0] = 3
    loss.backward()
    np.testing.assert_allclose(x.grad, [1.0, 0.0, 110.0, 0.0])


# --- the allocator buffer registry forgets dead arenas (item 6) --------------------------------

def test_buffer_registry_forgets_a_dead_arena_and_its_id_is_a_user_array_again():
    arena = mg.Arena("short-lived", 1 << 12)
    raw = arena._chunks[0].base
    dead = id(raw)
    assert is_allocator_buffer(raw)
    del arena, raw
    gc.collect()
    assert dead not in BUFFER_OWNERS
    # Try to get a user array at the dead id; where CPython reuses it, it must be guarded.
    for _ in range(2000):
        X = np.arange(8.0).reshape(2, 4).base
        if id(X) == dead:
            assert not is_allocator_buffer(X)
            x = mg.create_leaf(X[0:4], copy=False, name="reused")
            loss = (x * param([1.0, 1.0, 1.0, 1.0])).sum()
            with pytest.raises(ValueError):            # the user's owner array is locked
                X[0] = 5.0
            loss.backward()
            break


# --- w.data = and w.grad = (items 7, 8 and the unclear .grad = 0.0) ----------------------------

@pytest.mark.parametrize("where", ["heap", "perm-arena"])
def test_data_of_another_shape_starts_a_new_gradient(where):
    w = param([1.0, 2.0], arena=mg.Arena("perm-shape", 1 << 12) if where == "perm-arena" else None)
    (w * 3.0).sum().backward()
    w.data = np.array([1.0, 2.0, 3.0])
    assert w.grad is None
    (w * 2.0).sum().backward()
    np.testing.assert_allclose(w.grad, [2.0, 2.0, 2.0])
    w.zero_grad()
    (w * 5.0).sum().backward()
    np.testing.assert_allclose(w.grad, [5.0, 5.0, 5.0])


def test_data_of_another_shape_is_refused_while_a_graph_saved_the_old_one():
    w = param(np.ones((2, 3)), name="w")
    loss = (w * mg.create_leaf(np.arange(6.0).reshape(2, 3))).sum()
    with pytest.raises(errors.InplaceError, match=r"\(3,\).*'w'.*backward"):
        w.data = np.ones(3)
    loss.backward()                                    # the graph is consumed: now it may
    w.data = np.ones(3)
    assert w.shape == (3,) and w.grad is None


@pytest.mark.parametrize("new_shape", [(1,), (3,)])
def test_data_of_another_shape_is_refused_while_a_graph_that_saved_nothing_of_it_lives(new_shape):
    # add saves nothing, so the saved-array table could not tell: w.data = np.ones(1) was
    # accepted, and backward summed the old (2,) gradient into the new shape, [2.0]
    w = param([1.0, 2.0], name="w")
    loss = (w + np.array([1.0, 1.0])).sum()
    with pytest.raises(errors.InplaceError, match=rf"shape \({new_shape[0]},\) on Variable 'w'.*"
                       r"will send it a gradient.*old shape \(2,\).*Fix: run backward"):
        w.data = np.ones(new_shape)
    loss.backward()
    np.testing.assert_allclose(w.grad, [1.0, 1.0])
    w.data = np.ones(new_shape)                        # the graph is consumed: now it may
    assert w.shape == new_shape and w.grad is None


def test_data_of_the_same_shape_keeps_the_gradient_buffer():
    w = param([1.0, 2.0])
    (w * 3.0).sum().backward()
    buffer = id(w.grad)   # (an id, not the array: a kept array is never written again, below)
    w.data = np.array([4.0, 5.0])
    w.zero_grad()
    (w * 2.0).sum().backward()
    assert id(w.grad) == buffer                        # zero_grad's promise: no new array


@pytest.mark.parametrize("where", ["heap", "perm-arena"])
def test_a_gradient_kept_from_grad_keeps_its_values_after_zero_grad_and_the_next_backward(where):
    # history.append(w.grad) held one array, rewritten by every backward: [last, last, last]
    w = param([1.0, 2.0], arena=mg.Arena("perm-kept", 1 << 12) if where == "perm-arena" else None)
    opt = mg.optim.SGD([w], lr=0.1)
    history = []
    for _ in range(3):
        opt.zero_grad()
        (w * w).sum().backward()
        history.append(w.grad)
        opt.step()
    np.testing.assert_allclose(history, [[2.0, 4.0], [1.6, 3.2], [1.28, 2.56]])
    ids = [id(w.grad)]   # nothing kept any more: the array is reused again
    for _ in range(2):
        opt.zero_grad()
        (w * w).sum().backward()
        ids.append(id(w.grad))
        opt.step()
    assert ids[1] == ids[2]


@pytest.mark.parametrize("where", ["heap", "perm-arena"])
def test_grad_set_to_none_never_writes_into_an_array_taken_before(where):
    w = param([1.0, 2.0], arena=mg.Arena("perm-none", 1 << 12) if where == "perm-arena" else None)
    (w * 3.0).sum().backward()
    kept = w.grad
    w.grad = None
    (w * 5.0).sum().backward()
    np.testing.assert_allclose(kept, [3.0, 3.0])
    np.testing.assert_allclose(w.grad, [5.0, 5.0])


def test_grad_assigned_is_copied_so_backward_does_not_write_into_the_users_array():
    w = param([1.0, 2.0])
    mine = np.array([1.0, 1.0])
    w.grad = mine
    (w * 3.0).sum().backward()
    np.testing.assert_allclose(w.grad, [4.0, 4.0])
    np.testing.assert_allclose(mine, [1.0, 1.0])


@pytest.mark.parametrize("value, error", [(0.0, errors.ShapeError), (np.ones(3), errors.ShapeError),
                                          ("abc", errors.DtypeError)])
def test_grad_must_have_the_data_shape(value, error):
    w = param([1.0, 2.0], name="w")
    with pytest.raises(error) as excinfo:
        w.grad = value
    assert ".grad" in str(excinfo.value) and "'w'" in str(excinfo.value)
    assert w.grad is None


# --- truth values (item 10) --------------------------------------------------------------------

def test_truth_value_follows_numpy():
    assert not mg.create_leaf(np.array([0.0]))
    assert mg.create_leaf(np.array([2.0]))
    assert not mg.create_leaf(np.array(0.0))
    with pytest.raises(errors.ShapeError, match="ambiguous"):
        bool(mg.create_leaf(np.array([1.0, 2.0])))
    with pytest.raises(ValueError):
        bool(mg.create_leaf(np.zeros((0,))))


# --- numpy's protocols ------------------------------------------------------------------------

def test_ndarray_power_variable_is_differentiable():
    base = np.array([2.0, 3.0])
    x = param([1.5, 0.5])
    y = base ** x
    np.testing.assert_allclose(y.data, base ** np.array([1.5, 0.5]))
    y.sum().backward()
    np.testing.assert_allclose(x.grad, np.log(base) * base ** np.array([1.5, 0.5]))


@pytest.mark.parametrize("base", [0.0, -2.0, np.array([2.0, -1.0])])
def test_non_positive_base_of_a_variable_power_names_the_rule(base):
    x = param([1.0, 2.0])
    with pytest.raises(errors.DomainError) as excinfo:
        base ** x
    assert "pow" in str(excinfo.value) and "base > 0" in str(excinfo.value)


def test_numpy_array_protocol_is_refused_pointing_at_data_and_numpy():
    x = param([1.0, 2.0])
    for convert in (np.asarray, np.array, np.exp, lambda v: np.concatenate([v, v])):
        with pytest.raises(errors.ConversionError) as excinfo:
            convert(x)
        assert ".data" in str(excinfo.value) and ".numpy()" in str(excinfo.value)
    with pytest.raises(TypeError):
        np.ones(2) < x


def test_ndarray_operators_with_a_variable_still_build_the_graph():
    a = np.array([1.0, 2.0])
    x = param([3.0, 4.0])
    loss = (a + x) * (a - x) / (a * 2.0)
    loss.sum().backward()
    np.testing.assert_allclose(x.grad, -2.0 * np.array([3.0, 4.0]) / (a * 2.0))
    m = np.array([[1.0, 2.0], [3.0, 4.0]])
    v = param([[1.0], [1.0]])
    (m @ v).sum().backward()
    np.testing.assert_allclose(v.grad, m.sum(0)[:, None])


# --- scopes end innermost first ----------------------------------------------------------------

def test_scopes_exited_out_of_order_raise_and_leave_the_thread_consistent():
    outer_arena, inner_arena = mg.Arena("outer", 1 << 12), mg.Arena("inner", 1 << 12)
    outer, inner = outer_arena.scope(), inner_arena.scope()
    outer.__enter__()
    inner.__enter__()
    with pytest.raises(ScopeError) as excinfo:
        outer.__exit__(None, None, None)
    assert "'outer'" in str(excinfo.value) and "'inner'" in str(excinfo.value)
    assert mg.arena.current_allocator() is inner_arena
    inner.__exit__(None, None, None)
    outer.__exit__(None, None, None)
    assert mg.arena.current_allocator() is None
    with pytest.raises(ScopeError, match="not open"):
        outer.__exit__(None, None, None)


@pytest.mark.parametrize("compare", [lambda x, y: x == 0, lambda x, y: x != 0, lambda x, y: 0 == x,
                                     lambda x, y: x == np.zeros(3), lambda x, y: x == y,
                                     lambda x, y: x < y, lambda x, y: x >= 1.0],
                         ids=["x == 0", "x != 0", "0 == x", "x == array", "x == y", "x < y",
                              "x >= 1.0"])
def test_comparing_a_variable_is_refused_not_read_as_identity(compare):
    # Python's own == would compare identity: `x * (x == 0)` gave zeros with no word.
    x, y = param([0.0, 1.0, 2.0], name="x"), param([0.0, 1.0, 2.0], name="y")
    with pytest.raises(errors.ConversionError, match=r"not compared.*Fix: compare the arrays"):
        compare(x, y)
    np.testing.assert_array_equal(x.data == 0, [True, False, False])   # the fix works


def test_variables_still_work_as_keys_and_by_identity():
    import weakref
    x, y = param([1.0]), param([1.0])
    table, weak = {x: 1, y: 2}, weakref.WeakKeyDictionary({x: 1})
    assert table[x] == 1 and table[y] == 2 and weak.get(x) == 1 and weak.get(y) is None
    assert x in [x] and [x, x].count(x) == 2 and x == x and not (x != x)
    out = x @ x                                # (one input twice: counted by identity)
    out.backward()
    np.testing.assert_allclose(x.grad, [2.0])
