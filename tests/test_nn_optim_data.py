"""nn (Module, Linear, MLP), optim (SGD, Adam) and data (moons, spirals, digits, batches)."""
import time

import numpy as np
import pytest

import minigrad as mg
from minigrad import data, nn, optim
from minigrad.errors import InplaceError


# -- nn --------------------------------------------------------------------------------------------
def test_mlp_parameters_order_and_count():
    model = nn.MLP([64, 32, 10], seed=0)
    params = model.parameters()
    assert [p.name for p in params] == ["layer0.weight", "layer0.bias",
                                        "layer1.weight", "layer1.bias"]
    assert [p.shape for p in params] == [(64, 32), (32,), (32, 10), (10,)]
    assert sum(p.size for p in params) == 64 * 32 + 32 + 32 * 10 + 10
    assert all(p.requires_grad and p.is_leaf and p.dtype == np.float32 for p in params)
    assert [type(m).__name__ for m in model.layers] == ["Linear", "ReLU", "Linear"]
    assert [id(p) for p in params] == [id(p) for p in model.parameters()]   # stable


def test_parameters_found_in_lists_tuples_and_shared_once():
    shared = nn.Linear(3, 3, seed=0)

    class Net(nn.Module):
        def __init__(self):
            self.first = nn.Linear(2, 3, seed=1, name="first")
            self.blocks = [shared, (nn.Tanh(), shared)]       # shared twice: counted once
            self.scale = mg.create_leaf([2.0], requires_grad=True, name="scale")
            self.data = mg.create_leaf([1.0, 2.0], name="not a parameter")

        def forward(self, x):
            return self.blocks[1][1](self.blocks[1][0](self.blocks[0](self.first(x)))) * self.scale

    net = Net()
    assert [p.name for p in net.parameters()] == ["first.weight", "first.bias", "linear.weight",
                                                  "linear.bias", "scale"]
    net(np.ones((4, 2), np.float32)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    net.eval()
    assert not net.training and not shared.training and not net.blocks[1][0].training
    net.train()
    assert net.training and shared.training


def test_parameters_found_in_a_dict_of_layers_are_trained():
    # a dict attribute was skipped: its layers' parameters never reached the optimiser
    class Net(nn.Module):
        def __init__(self):
            self.heads = {"a": nn.Linear(2, 2, seed=0, name="a"), "b": [nn.Linear(2, 2, seed=1)]}
            self.out = nn.Linear(2, 1, seed=2, name="out")

        def forward(self, x):
            return self.out(self.heads["a"](x) + self.heads["b"][0](x))

    net = Net()
    assert [p.name for p in net.parameters()] == ["a.weight", "a.bias", "linear.weight",
                                                  "linear.bias", "out.weight", "out.bias"]
    assert len(net.modules()) == 4
    before = [p.data.copy() for p in net.parameters()]
    opt = optim.SGD(net.parameters(), lr=0.1)
    net(np.ones((3, 2), np.float32)).sum().backward()
    opt.step()
    assert all(not np.array_equal(p.data, b) for p, b in zip(net.parameters(), before))
    from minigrad.nn.transformer import name_parameters
    name_parameters(net)
    assert [p.name for p in net.parameters()] == ["heads.a.weight", "heads.a.bias",
                                                  "heads.b.0.weight", "heads.b.0.bias",
                                                  "out.weight", "out.bias"]
    from minigrad.nn.layers import scope_name
    net.heads["c"] = nn.Tanh()
    assert scope_name(net.heads["c"], net) == "heads.c"   # where a trace says it ran


def test_linear_shapes_init_and_no_bias():
    layer = nn.Linear(5, 3, seed=0)
    assert layer.weight.shape == (5, 3) and layer.bias.shape == (3,)
    assert np.abs(layer.weight.data).max() <= np.sqrt(6 / 5)
    assert np.all(layer.bias.data == 0)
    assert layer(np.ones((7, 5), np.float32)).shape == (7, 3)
    assert nn.Linear(5, 3, bias=False).parameters()[0].shape == (5, 3)
    assert len(nn.Linear(5, 3, bias=False).parameters()) == 1
    # Same seed, same weights; a Generator is drawn from.
    assert np.array_equal(nn.Linear(5, 3, seed=4).weight.data, nn.Linear(5, 3, seed=4).weight.data)
    rng = np.random.default_rng(0)
    assert not np.array_equal(nn.Linear(5, 3, seed=rng).weight.data,
                              nn.Linear(5, 3, seed=rng).weight.data)


def test_linear_gradcheck_float64():
    layer = nn.Linear(4, 3, seed=0, dtype=np.float64)
    x = np.random.default_rng(1).standard_normal((5, 4))

    def f(x, weight, bias):
        layer.weight, layer.bias = weight, bias
        return layer(x)

    assert mg.check.gradcheck(f, x, layer.weight, layer.bias)


def test_mlp_tanh_gradcheck_float64():
    model = nn.MLP([3, 4, 2], activation="tanh", seed=0, dtype=np.float64)
    x = np.random.default_rng(1).standard_normal((6, 3))

    def f(x, *params):
        for layer, (w, b) in zip(model.layers[::2], zip(params[::2], params[1::2])):
            layer.weight, layer.bias = w, b
        return mg.cross_entropy(model(x), np.array([0, 1, 1, 0, 1, 0]))

    assert mg.check.gradcheck(f, x, *model.parameters())


def test_nn_errors_name_the_rule():
    with pytest.raises(ValueError, match="activation must be one of"):
        nn.MLP([2, 2], activation="gelu")
    with pytest.raises(ValueError, match="at least two"):
        nn.MLP([2])
    with pytest.raises(ValueError, match="positive integer"):
        nn.Linear(0, 3)
    with pytest.raises(TypeError, match="float dtype"):
        nn.Linear(2, 3, dtype=np.int64)


# -- optim: reference values from plain numpy ------------------------------------------------------
def _tiny_problem():
    rng = np.random.default_rng(3)
    x, t, w0 = rng.standard_normal((4, 3)), rng.standard_normal((4, 2)), rng.standard_normal((3, 2))
    return x, t, w0


def _mse_grad(x, t, w):
    """d/dw mean((x w - t)^2) = 2 x^T (x w - t) / (number of elements)."""
    return 2 * x.T @ (x @ w - t) / t.size


def _run(opt_class, steps, **kwargs):
    x, t, w0 = _tiny_problem()
    w = mg.create_leaf(w0, requires_grad=True, name="w")
    opt = opt_class([w], **kwargs)
    history = []
    for _ in range(steps):
        opt.zero_grad()
        mg.mse(x @ w, t).backward()
        opt.step()
        history.append(w.data.copy())
    return history


def test_sgd_momentum_matches_numpy():
    x, t, w = _tiny_problem()
    lr, mu, velocity = 0.1, 0.9, np.zeros_like(w)
    expected = []
    for _ in range(3):
        velocity = mu * velocity + _mse_grad(x, t, w)
        w = w - lr * velocity
        expected.append(w)
    got = _run(optim.SGD, 3, lr=lr, momentum=mu)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)
    plain = _run(optim.SGD, 1, lr=lr)[0]
    np.testing.assert_allclose(plain, _tiny_problem()[2] - lr * _mse_grad(*_tiny_problem()),
                               rtol=1e-12)


def test_adam_matches_numpy():
    x, t, w = _tiny_problem()
    lr, b1, b2, eps = 0.05, 0.8, 0.99, 1e-8
    m, v = np.zeros_like(w), np.zeros_like(w)
    expected = []
    for step in range(1, 4):
        g = _mse_grad(x, t, w)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat, v_hat = m / (1 - b1 ** step), v / (1 - b2 ** step)
        w = w - lr * m_hat / (np.sqrt(v_hat) + eps)
        expected.append(w)
    got = _run(optim.Adam, 3, lr=lr, betas=(b1, b2), eps=eps)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12)


def test_adam_on_float16_parameters_matches_float64_to_float16_precision():
    """In float16, eps = 1e-8 is 0: an element with a zero gradient stepped by 0 / 0 = nan, and
    g^2 of a 1e-4 gradient was 0, so it stepped by m / eps (a huge step)."""
    def run(dtype):
        w = mg.create_leaf(np.array([1.0, 2.0, 3.0], dtype), requires_grad=True)
        opt = optim.Adam([w], lr=0.01)
        for _ in range(3):
            opt.zero_grad()
            (w * np.array([1.0, 0.0, 1e-4], dtype)).sum().backward()
            opt.step()
        return w.data
    half = run(np.float16)
    assert half.dtype == np.float16
    np.testing.assert_allclose(half.astype(np.float64), run(np.float64), rtol=1e-3)


def test_updates_in_place_with_state_allocated_once():
    model = nn.MLP([2, 8, 2], seed=0)
    X, y = data.moons(32)
    for opt in (optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                optim.SGD(model.parameters(), lr=0.1),
                optim.Adam(model.parameters(), lr=1e-2)):
        arrays = [p.data for p in model.parameters()]
        buffers = None
        for _ in range(3):
            opt.zero_grad()
            mg.cross_entropy(model(X), y).backward()
            opt.step()
            now = [id(a) for s in opt.state for a in s.values() if isinstance(a, np.ndarray)]
            buffers = buffers or now
            assert now == buffers                                  # same state buffers
        assert all(p.data is a for p, a in zip(model.parameters(), arrays))   # same param arrays


def test_parameters_without_grad_are_skipped():
    a = mg.create_leaf([1.0, 2.0], requires_grad=True)
    b = mg.create_leaf([3.0], requires_grad=True)
    opt = optim.Adam([a, b], lr=0.1)
    (a * a).sum().backward()
    opt.step()
    assert np.array_equal(b.data, [3.0]) and opt.state[1] is None
    assert np.all(a.data < [1.0, 2.0])


@pytest.mark.parametrize("make", [lambda p: optim.SGD(p, lr=0.5, momentum=0.9),
                                  lambda p: optim.Adam(p, lr=0.02)], ids=["sgd", "adam"])
def test_optimisers_reduce_moons_loss(make):
    X, y = data.moons(200, noise=0.1, seed=0)
    model = nn.MLP([2, 16, 16, 2], seed=0)
    opt = make(model.parameters())
    losses = []
    for _ in range(300):
        opt.zero_grad()
        loss = mg.cross_entropy(model(X), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.2 * losses[0], (losses[0], losses[-1])
    with mg.no_grad():
        assert (model(X).data.argmax(1) == y).mean() > 0.95


def test_step_with_a_live_graph_holding_a_parameter_is_a_clear_error():
    X, y = data.moons(16)
    model = nn.MLP([2, 4, 2], seed=0)
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    mg.cross_entropy(model(X), y).backward()
    kept = mg.cross_entropy(model(X), y)          # evaluation without no_grad: graph stays alive
    before = [p.data.copy() for p in model.parameters()]
    with pytest.raises(InplaceError) as info:
        opt.step()
    message = str(info.value)
    for words in ("layer0.weight", "still alive", "no_grad()", "loss.item()", "backward"):
        assert words in message
    assert all(np.array_equal(p.data, b) for p, b in zip(model.parameters(), before))
    assert all(s is None for s in opt.state)      # a refused step leaves no half-made state
    del kept                                      # the graph goes, and the lock with it
    opt.step()
    assert not np.array_equal(model.parameters()[0].data, before[0])


@pytest.mark.parametrize("make", [lambda ps: mg.optim.SGD(ps, lr=0.1, momentum=0.9),
                                  lambda ps: mg.optim.Adam(ps, lr=0.1),
                                  lambda ps: mg.optim.SGD(ps, lr=0.1)])
@pytest.mark.parametrize("new_shape", [(3,), (1,)])
def test_step_after_a_parameter_changed_shape_names_the_rule(make, new_shape):
    # was numpy's "operands could not be broadcast together" from inside the update
    w = mg.create_leaf(np.array([1.0, 2.0]), requires_grad=True, name="w")
    opt = make([w])
    (w * w).sum().backward()
    opt.step()
    w.data = np.ones(new_shape)
    opt.zero_grad()
    (w * w).sum().backward()
    with pytest.raises(mg.errors.ShapeError, match=rf"step\(\): parameter 'w' has shape "
                       rf"\({new_shape[0]},\), but the state .* has shape \(2,\).*Fix: make a new optimiser"):
        opt.step()
    np.testing.assert_allclose(w.data, np.ones(new_shape))   # refused before any change


def test_optimiser_argument_errors():
    with pytest.raises(ValueError, match="no parameters"):
        optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="does not require grad"):
        optim.Adam([mg.create_leaf([1.0])])
    w = mg.create_leaf([1.0], requires_grad=True)
    with pytest.raises(TypeError, match="made by an op"):
        optim.SGD([w * 2], lr=0.1)
    with pytest.raises(ValueError, match="learning rate"):
        optim.SGD([w], lr=-1)


def _step_without_backward(opt, w):
    opt.step()


def _zero_grad_between_backward_and_step(opt, w):
    (w * w).sum().backward()
    opt.zero_grad()
    opt.step()


def _layer_replaced_after_the_optimiser(opt, w):
    layer = nn.Linear(2, 1, seed=0, dtype=np.float64)
    opt = optim.SGD(layer.parameters(), lr=0.1)
    layer.weight = mg.create_leaf(np.ones((2, 1)), requires_grad=True)
    layer.bias = mg.create_leaf(np.zeros(1), requires_grad=True)
    layer(mg.create_leaf(np.ones((3, 2)))).sum().backward()
    opt.step()


@pytest.mark.parametrize("make", [lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
                                  lambda ps: optim.Adam(ps, lr=0.1)], ids=["sgd", "adam"])
@pytest.mark.parametrize("misuse", [_step_without_backward, _zero_grad_between_backward_and_step,
                                    _layer_replaced_after_the_optimiser])
def test_a_step_with_no_gradient_at_all_is_refused(make, misuse):
    """Every parameter was skipped and step() changed nothing: training stood still silently."""
    w = mg.create_leaf(np.array([1.0, 2.0]), requires_grad=True, name="w")
    opt = make([w])
    with pytest.raises(mg.errors.BackwardError, match=r"step\(\): none of its \d parameters? has "
                       r"a gradient.*Rule: step\(\) follows a backward\(\).*Fix: call "
                       r"loss.backward\(\) before opt.step\(\).*make the optimiser again"):
        misuse(opt, w)
    np.testing.assert_array_equal(w.data, [1.0, 2.0])


@pytest.mark.parametrize("lr", [np.float32(0.5), np.float64(0.5), np.int64(1), 1, 0.5])
def test_a_learning_rate_may_be_any_python_or_numpy_number(lr):
    # np.float32(0.5) and np.int64(1) were refused as "not a positive number"
    w = mg.create_leaf(np.array([1.0, 2.0]), requires_grad=True)
    opt = optim.SGD([w], lr=lr)
    (w * w).sum().backward()
    opt.step()
    np.testing.assert_allclose(w.data, np.array([1.0, 2.0]) * (1 - 2 * float(lr)))


@pytest.mark.parametrize("lr, error, words", [
    (float("inf"), ValueError, "finite positive"), (float("nan"), ValueError, "finite positive"),
    (0, ValueError, "finite positive"), (True, mg.errors.DtypeError, "is a bool"),
    (np.array(0.1), mg.errors.DtypeError, "is a ndarray"),
    (mg.create_leaf(0.1), mg.errors.DtypeError, "is a Variable")])
def test_a_learning_rate_that_is_not_a_finite_positive_number_is_refused(lr, error, words):
    # lr=inf was accepted (every parameter inf or nan after one step), lr=True read as 1.0
    w = mg.create_leaf(np.array([1.0]), requires_grad=True)
    with pytest.raises(error, match=rf"SGD\(lr=.*{words}.*Fix: e.g. lr=0.01"):
        optim.SGD([w], lr=lr)


def test_step_on_a_parameter_given_a_read_only_array_says_so():
    # was: "it is saved by a graph that is still alive", with no graph in sight
    w = mg.create_leaf(np.array([1.0, 2.0]), requires_grad=True, name="w")
    opt = optim.SGD([w], lr=0.1)
    w.data = (w * 3.0).data                 # an op output's .data is read-only
    (w * w).sum().backward()
    with pytest.raises(InplaceError, match=r"parameter 'w' .* its array is read-only, and no "
                       r"graph holds it.*Fix: give it a writable copy, w.data = np.array"):
        opt.step()


@pytest.mark.skipif(not hasattr(mg, "Arena"), reason="minigrad.Arena not available")
def test_parameters_on_an_arena_train_in_a_scope():
    params, graph = mg.Arena("params"), mg.Arena("graph")
    model = nn.MLP([2, 8, 2], seed=0, arena=params)
    assert sum(b.kind == "param" for b in params.blocks) == 4
    X, y = data.moons(64)
    opt = optim.Adam(model.parameters(), lr=0.02)
    losses = []
    for _ in range(100):
        with graph.scope():
            opt.zero_grad()
            loss = mg.cross_entropy(model(X), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    assert graph.used == 0 and losses[-1] < 0.5 * losses[0]


# -- data ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make, n, classes", [(lambda s: data.moons(50, seed=s), 50, 2),
                                              (lambda s: data.spirals(30, 4, seed=s), 120, 4)],
                         ids=["moons", "spirals"])
def test_toy_data_shapes_and_determinism(make, n, classes):
    X, y = make(0)
    assert X.shape == (n, 2) and X.dtype == np.float32
    assert y.shape == (n,) and y.dtype == np.int64
    assert np.array_equal(np.bincount(y), np.full(classes, n // classes))
    assert np.all(np.isfinite(X)) and np.abs(X).max() < 3
    X2, y2 = make(0)
    assert np.array_equal(X, X2) and np.array_equal(y, y2)
    assert not np.array_equal(X, make(1)[0])


def test_digits():
    X, y = data.digits()
    assert X.shape == (1797, 64) and X.dtype == np.float32
    assert y.shape == (1797,) and y.dtype == np.int64
    assert X.min() == 0.0 and X.max() == 1.0
    assert np.array_equal(np.unique(X * 16), np.arange(17))      # pixel counts 0..16 over 16
    counts = np.bincount(y)
    assert len(counts) == 10 and np.all((170 <= counts) & (counts <= 190))
    means = np.stack([X[y == k].mean(axis=0) for k in range(10)])
    assert np.abs(means[0] - means[1]).sum() > 5                  # a 0 does not look like a 1
    zero = means[0].reshape(8, 8)
    assert zero[3:5, 3:5].mean() < zero[3:5, 1].mean()              # a 0 has an empty middle


def test_digits_split():
    X_train, y_train, X_test, y_test = data.digits_split(test_fraction=0.25, seed=0)
    assert X_train.shape == (1348, 64) and X_test.shape == (449, 64)
    assert len(y_train) == 1348 and len(y_test) == 449
    assert set(np.unique(y_test)) == set(range(10))
    X, _ = data.digits()
    rows = {r.tobytes() for r in X}
    assert {r.tobytes() for r in X_test} <= rows
    again = data.digits_split(test_fraction=0.25, seed=0)
    assert np.array_equal(again[2], X_test)
    assert not np.array_equal(data.digits_split(seed=1)[2], X_test)
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        data.digits_split(test_fraction=1.0)


def test_batches_cover_every_row_once():
    X = np.arange(23, dtype=np.float32).reshape(23, 1)
    y = np.arange(23)
    for shuffle in (False, True):
        seen = [(xb, yb) for xb, yb in data.batches(X, y, 5, shuffle=shuffle)]
        assert [len(yb) for _, yb in seen] == [5, 5, 5, 5, 3]
        rows = np.concatenate([yb for _, yb in seen])
        assert np.array_equal(np.sort(rows), y)
        assert all(np.array_equal(xb[:, 0], yb) for xb, yb in seen)   # X and y stay paired
        assert np.array_equal(rows, y) != shuffle
    order = lambda seed: np.concatenate([yb for _, yb in data.batches(X, y, 4, seed=seed)])
    assert np.array_equal(order(7), order(7))                      # an int seed repeats
    rng = np.random.default_rng(7)
    assert not np.array_equal(order(rng), order(rng))              # a Generator moves on
    with pytest.raises(ValueError, match="same length"):
        next(data.batches(X, y[:-1], 4))


# -- the key test: a real dataset -----------------------------------------------------------------
def test_mlp_learns_digits_to_95_percent():
    X_train, y_train, X_test, y_test = data.digits_split(test_fraction=0.25, seed=0)
    start = time.perf_counter()
    model = nn.MLP([64, 64, 10], seed=0)
    opt = optim.Adam(model.parameters(), lr=3e-3)
    rng = np.random.default_rng(0)
    for epoch in range(30):
        for xb, yb in data.batches(X_train, y_train, 32, seed=rng):
            opt.zero_grad()
            loss = mg.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
    seconds = time.perf_counter() - start
    model.eval()
    with mg.no_grad():
        accuracy = (model(X_test).data.argmax(axis=1) == y_test).mean()
    print(f"\ndigits: MLP([64, 64, 10]), Adam lr=3e-3, batch 32, 30 epochs: "
          f"test accuracy {accuracy:.4f} ({len(y_test)} images), training {seconds:.2f} s")
    assert accuracy >= 0.95
