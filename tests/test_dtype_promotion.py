"""float32 in, float32 out, with every numpy that pyproject.toml accepts: numpy 1.x promotes a
float32 scalar combined with a Python number to float64 (value-based casting), numpy 2 does not
(NEP 50). `make test` runs this file, and the other engine tests, with the oldest numpy too."""
import importlib.util
import pathlib
import re

import numpy as np
import pytest

import minigrad as mg
from minigrad import kernels
from test_ops_gradcheck import F32_MULTI, F32_UNARY

rng = np.random.default_rng(0)
LOGITS = rng.normal(size=(5, 4)).astype(np.float32)
TARGETS = np.array([0, 3, 1, 1, 2])


@pytest.mark.parametrize("loss", [
    pytest.param(lambda: kernels.cross_entropy(LOGITS, TARGETS), id="cross_entropy"),
    pytest.param(lambda: kernels.mse(LOGITS, LOGITS[::-1].copy()), id="mse"),
    pytest.param(lambda: kernels.lm_head_loss(LOGITS, np.eye(4, 3, dtype=np.float32), TARGETS % 3),
                 id="lm_head_loss"),
    pytest.param(lambda: kernels.divide_total(np.float32(3.0), -8), id="divide_total"),
])
def test_scalar_losses_keep_float32_without_an_out_buffer(loss):
    assert np.result_type(loss()) == np.float32


def test_the_float32_loss_is_the_float64_one_rounded():
    value = kernels.cross_entropy(LOGITS, TARGETS)
    exact = kernels.cross_entropy(LOGITS.astype(np.float64), TARGETS)
    assert np.result_type(exact) == np.float64
    assert abs(float(value) - float(exact)) <= 1e-6 * abs(float(exact))


@pytest.mark.parametrize("make_loss", [
    pytest.param(lambda x: mg.cross_entropy(x, TARGETS), id="cross_entropy"),
    pytest.param(lambda x: mg.mse(x, mg.create_leaf(LOGITS[::-1].copy())), id="mse"),
    pytest.param(lambda x: mg.fused_lm_head_loss(x, mg.create_leaf(np.eye(4, 3, dtype=np.float32)),
                                                 TARGETS % 3), id="fused_lm_head_loss"),
])
def test_eager_losses_and_their_grads_stay_float32(make_loss):
    x = mg.create_leaf(LOGITS, requires_grad=True)
    loss = make_loss(x)
    assert loss.dtype == np.float32 and loss.data.dtype == np.float32
    loss.backward()
    assert x.grad.dtype == np.float32


# Every op of the float32 lists in test_ops_gradcheck, also on 0-d inputs (numpy 1.x treats a
# 0-d array like a scalar, so `z * (1 - z)` or `g / n` turn float32 into float64 there), and
# reduced by sum, mean and max: the output, the loss and every gradient backward passes on stay
# float32.
REDUCTIONS = {"itself": lambda out: out, "sum": lambda out: out.sum(),
              "mean": lambda out: out.mean(), "max": lambda out: out.max()}


def _float32_leaves(shapes):
    return [mg.create_leaf(np.full(s, 1.5, np.float32), requires_grad=True) for s in shapes]


def _dtypes_off_float32(fn, shapes) -> list:
    found, ran = [], 0
    for reduction, reduce in REDUCTIONS.items():
        leaves = _float32_leaves(shapes)
        try:
            out = fn(*leaves)
        except mg.errors.MinigradError:
            return ["(refused)"]   # e.g. reshape(4, 3) of a 0-d input: not a dtype question
        loss = reduce(out)
        if loss.shape != ():
            continue
        ran += 1
        found += [f"{reduction}: output {v.dtype}" for v in (out, loss) if v.dtype != np.float32]
        for step in mg.backward_steps(loss):
            grad = getattr(step, "grad", None)
            if grad is not None and np.result_type(grad) != np.float32:
                found.append(f"{reduction}: {step.kind} {step.node.name} grad {np.result_type(grad)}")
        found += [f"{reduction}: leaf grad {x.grad.dtype}" for x in leaves if x.grad.dtype != np.float32]
    return found if ran else ["(no scalar loss)"]


@pytest.mark.parametrize("fn", [pytest.param(p, id=p.id) for p in F32_UNARY])
@pytest.mark.parametrize("shape", [(), (3, 4)], ids=["0-d", "3x4"])
def test_unary_ops_keep_float32_on_0d_and_reduced(fn, shape):
    found = _dtypes_off_float32(fn.values[0], [shape])
    assert found == [] or (shape == () and found == ["(refused)"]), found


@pytest.mark.parametrize("case", [pytest.param(p, id=p.id) for p in F32_MULTI])
def test_multi_input_ops_keep_float32_on_0d_and_reduced(case):
    fn, shapes = case.values
    assert _dtypes_off_float32(fn, shapes) == []
    zero_d = _dtypes_off_float32(fn, [()] * len(shapes))
    assert zero_d in ([], ["(refused)"]), zero_d


ON_A_SCALAR = {
    "pow": lambda x: x.sum() ** 2, "sigmoid": lambda x: x.sum().sigmoid(),
    "relu": lambda x: x.sum().relu(), "tanh": lambda x: x.sum().tanh(),
    "mean": lambda x: x.sum().mean(), "div": lambda x: 1.0 / x.sum(),
    "chain": lambda x: ((x.sum() ** 2).sigmoid() + x.mean().tanh() * 0.5).relu(),
}


@pytest.mark.parametrize("fn", ON_A_SCALAR.values(), ids=ON_A_SCALAR.keys())
def test_the_aot_executor_keeps_float32_on_0d_values(fn):
    from minigrad import aot
    x = np.full((3, 4), 0.3, np.float32)
    forward = aot.capture(fn, mg.create_leaf(x.copy(), requires_grad=True, name="x"))
    executor = aot.Executor(forward, aot.derive_backward_graph(forward), None, x)
    assert np.result_type(executor.run(x)) == np.float32
    assert executor.grads()["d_x"].dtype == np.float32


ROOT = pathlib.Path(__file__).resolve().parents[1]


def _make_variable(name: str) -> str:
    """A `NAME := value` of the Makefile, continuation lines joined."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8").replace("\\\n", " ")
    return re.search(rf"^{name}\s*:?=\s*(.*)$", text, flags=re.M).group(1).strip()


def _oldest_numpy_tool():
    spec = importlib.util.spec_from_file_location("oldest_numpy", ROOT / "tools" / "oldest_numpy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.oldest_numpy


def test_make_test_runs_the_oldest_numpy_that_pyproject_accepts():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    bound = re.search(r'"numpy>=([0-9.]+)', text).group(1)
    oldest = _oldest_numpy_tool()
    for python in ((3, 10), (3, 11), (3, 12)):
        assert oldest(python).split(".")[:2] == bound.split(".")[:2], \
            f"pyproject.toml says numpy>={bound}; on Python {python} make test-oldest takes {oldest(python)}"
    assert oldest((3, 13)) == "2.1.0" and oldest((3, 14)) == "2.3.2"   # no numpy 1.26 wheels there
    assert "tools/oldest_numpy.py" in _make_variable("OLDEST_NUMPY")
    assert "test-oldest" in re.search(r"^test:.*?\n\n", (ROOT / "Makefile").read_text(encoding="utf-8"),
                                      flags=re.S | re.M).group(0)


def test_the_files_left_out_of_the_oldest_numpy_run_exist():
    for path in _make_variable("NEEDS_JUPYTER").split():
        assert (ROOT / path).exists(), f"Makefile NEEDS_JUPYTER lists {path}, which is gone"
