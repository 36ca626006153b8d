"""Ops with several outputs, in both engines, on a toy op written here: sincos(x) -> (sin x, cos x,
sign), sign an integer output. Eager: a node for sin, a node of its own for cos (linked), sign as
plain data; capture must see ONE IR operation with three outputs, and the executor, derive,
plan, placement and the AotView document must handle every output."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import aot, optable
from minigrad.aot.document import aot_document
from minigrad.eager.function import Function
from minigrad.ops.multi import link_outputs, linked_output, primary_of
from minigrad.eager.variable import OPS, Variable

RNG = np.random.default_rng(7)
# A several-output op makes its index outputs from its inputs' .data (sincos's sign, pick's
# indices); the plan recomputes them, so capture must not warn of those reads.
pytestmark = pytest.mark.filterwarnings("error::minigrad.aot.capture.CaptureWarning")


class ToySin(Function):
    """z = sin(x) (the main output of sincos); dz/dx = cos x."""
    name = "toy_sincos"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return np.sin(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return (grad_output * np.cos(x),)


class ToyCos(Function):
    """z = cos(x) (sincos's second output, a node of its own); dz/dx = -sin x."""
    name = "toy_cos_part"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return np.cos(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return (-grad_output * np.sin(x),)


def sincos(x):
    s, c = ToySin.apply(x), ToyCos.apply(x)
    sign = Variable((np.asarray(x.data) > 0).astype(np.int64))
    link_outputs(s, cos=c, sign=sign)
    return s, c, sign


def _translate(node, v, inputs):
    return "toy_sincos", {}, [v, linked_output(node, "cos", ("cos", v.shape, v.dtype)),
                              linked_output(node, "sign", ("sign", v.shape, np.int64))]


def _compile(x, **attrs):
    s, c, sign = np.sin(x), np.cos(x), np.empty(x.shape, np.int64)

    def run(x, s, c, sign):
        np.sin(x, out=s)
        np.cos(x, out=c)
        np.greater(x, 0, out=sign, casting="unsafe")
    run(x, s, c, sign)
    return (s, c, sign), [(run, (x, s, c, sign))]


def _rule(ctx):
    """d x = d_sin * cos x - d_cos * sin x, each term only when its output needs a gradient."""
    x = ctx.read(ctx.fwd_op.inputs[0])
    d_sin, d_cos = ctx.d_outputs[:2]
    ops, terms = [], []
    if d_sin is not None:
        terms.append(ctx.temp("d_from_sin", like=ctx.fwd_op.inputs[0]))
        ops.append(ctx.op("toy_sin_grad", [d_sin, x], [terms[-1]]))
    if d_cos is not None:
        terms.append(ctx.temp("d_from_cos", like=ctx.fwd_op.inputs[0]))
        ops.append(ctx.op("toy_cos_grad", [d_cos, x], [terms[-1]]))
    if len(terms) == 1:
        ops.append(ctx.op("identity", terms, [ctx.d_inputs[0]]))
    else:
        ops.append(ctx.op("add", terms, [ctx.d_inputs[0]]))
    return ops


def _grad_compiler(fn):
    def compile_(g, x, **attrs):
        out = np.empty_like(x)

        def run(g, x, out):
            np.multiply(g, fn(x), out=out)
        run(g, x, out)
        return out, [(run, (g, x, out))]
    return compile_


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(OPS, "toy_sincos", ToySin)
    monkeypatch.setitem(optable.TABLE, "toy_sincos", optable.OpSpec(
        "toy_sincos", ToySin, capture=_translate, compilers={
            "toy_sincos": _compile, "toy_sin_grad": _grad_compiler(np.cos),
            "toy_cos_grad": _grad_compiler(lambda x: -np.sin(x))}))
    rules = aot.registry.copy()
    rules.register_rule("toy_sincos", _rule)
    return rules


W = RNG.normal(size=(3, 4))
LOSSES = {
    "both": lambda x: ((sincos(x)[0] * W).sum() + (sincos_c(x) * 2.0).sum()),
    "sin-only": lambda x: (sincos(x)[0] * W).sum(),
    "cos-only": lambda x: (sincos(x)[1] * W).sum(),
    "both-one-call": lambda x: _both(x),
}


def sincos_c(x):
    return sincos(x)[1]


def _both(x):
    s, c, sign = sincos(x)
    return (s * c * W).sum()


def _eager(fn, x):
    leaf = mg.create_leaf(x, requires_grad=True, name="x")
    loss = fn(leaf)
    loss.backward()
    return loss.item(), leaf.grad


def _aot(fn, x, rules):
    forward = aot.capture(fn, mg.create_leaf(x, requires_grad=True, name="x"))
    backward = aot.derive_backward_graph(forward, registry=rules)
    run = aot.Executor(forward, backward, None, x)
    return float(run.run(x)), run.grads()["d_x"].copy(), forward, backward


@pytest.mark.parametrize("case", list(LOSSES))
def test_eager_and_aot_agree_for_every_combination_of_outputs(toy, case):
    x = RNG.normal(size=(3, 4))
    loss, grad = _eager(LOSSES[case], x)
    aot_loss, aot_grad, forward, _ = _aot(LOSSES[case], x, toy)
    assert aot_loss == pytest.approx(loss, rel=1e-12)
    np.testing.assert_allclose(aot_grad, grad, rtol=1e-12)
    s, c = np.sin(x), np.cos(x)   # by hand: d/dx of the losses
    want = {"both": W * c - 2.0 * s, "sin-only": W * c, "cos-only": -W * s,
            "both-one-call": W * (c * c - s * s)}[case]
    np.testing.assert_allclose(grad, want, rtol=1e-12)


def test_capture_makes_one_operation_with_three_outputs(toy):
    def fn(x):
        s, c, sign = sincos(x)
        return (s * c * sign).sum()   # the integer output read as data by a later op
    forward = aot.capture(fn, mg.create_leaf(RNG.normal(size=(3, 4)), requires_grad=True, name="x"))
    ops = [op for op in forward.operations if op.type == "toy_sincos"]
    assert len(ops) == 1 and len(forward.operations) == 4, forward.text()
    (op,) = ops
    assert op.inputs == ("x",)
    assert len(op.outputs) == 3 and op.outputs[1:] == (f"{op.outputs[0]}.cos", f"{op.outputs[0]}.sign")
    assert forward.shape_env[op.outputs[2]].dtype == np.int64
    consumers = [o for o in forward.operations if o.type == "mul"]
    assert {t for o in consumers for t in o.inputs} >= set(op.outputs)   # all three are read
    backward = aot.derive_backward_graph(forward, registry=toy)
    assert backward.outputs == ["d_x"]
    assert f"d_{op.outputs[2]}" not in {t for o in backward.operations for t in o.outputs}


def test_integer_output_never_gets_a_gradient_and_the_unused_output_is_fine(toy):
    x = RNG.normal(size=(3, 4))

    def fn(x):
        s, c, sign = sincos(x)
        return (s * sign).sum()
    loss, grad = _eager(fn, x)
    aot_loss, aot_grad, forward, backward = _aot(fn, x, toy)
    np.testing.assert_allclose(aot_grad, grad, rtol=1e-12)
    np.testing.assert_allclose(grad, np.cos(x) * (x > 0), rtol=1e-12)


def test_links_are_weak_and_absent_without_a_graph():
    x = mg.create_leaf(RNG.normal(size=3), requires_grad=True)
    s, c, sign = sincos(x)
    assert primary_of(c)[0] is s and primary_of(sign) == (s, "sign")
    assert linked_output(s.grad_fn, "cos") is c
    del c
    import gc
    gc.collect()
    assert linked_output(s.grad_fn, "cos") is None   # capture then names it from its label
    with mg.no_grad():
        s2, c2, _ = sincos(x)
    assert primary_of(c2) is None and s2.grad_fn is None


def test_executor_placement_plan_and_document_see_every_output(toy):
    x = RNG.normal(size=(3, 4))
    forward = aot.capture(_both, mg.create_leaf(x, requires_grad=True, name="x"))
    backward = aot.derive_backward_graph(forward, registry=toy)
    op = next(o for o in forward.operations if o.type == "toy_sincos")
    for share in (True, False):
        run = aot.Executor(forward, backward, None, x, share_buffers=share)
        run.run(x)
        np.testing.assert_allclose(run.grads()["d_x"], W * (np.cos(x) ** 2 - np.sin(x) ** 2))
    run = aot.Executor(forward, backward, None, x, share_buffers=False)
    run.run(x)
    np.testing.assert_array_equal(run[op.outputs[1]], np.cos(x))
    np.testing.assert_array_equal(run[op.outputs[2]], (x > 0).astype(np.int64))
    plan = aot.plan_memory(forward, backward)
    ranged = {r.name for r in plan.ranges}
    assert set(op.outputs) <= ranged
    recompute = aot.plan_memory(forward, backward, policy="recompute", recompute=[op.outputs[0]])
    again = [o for o in recompute.backward.operations if o.type == "toy_sincos"]
    assert len(again) == 1 and again[0].outputs == tuple("recomputed." + t for t in op.outputs)
    run = aot.Executor(forward, recompute.backward, None, x)
    run.run(x)
    np.testing.assert_allclose(run.grads()["d_x"], W * (np.cos(x) ** 2 - np.sin(x) ** 2))
    document = aot_document(forward, backward, plan=plan)
    node = next(n for n in document["nodes"] if n.get("op") == "toy_sincos" and n["graph"] == "forward")
    assert len(node["outputs"]) == 3
    labels = {n["id"]: n["label"] for n in document["nodes"]}
    assert [labels[i] for i in node["outputs"]] == list(op.outputs)


def test_a_compiler_returning_too_few_outputs_is_named(toy, monkeypatch):
    monkeypatch.setitem(optable.TABLE["toy_sincos"].compilers, "toy_sincos", lambda x, **a: ((np.sin(x), np.cos(x)), []))
    x = RNG.normal(size=(3, 4))
    forward = aot.capture(_both, mg.create_leaf(x, requires_grad=True, name="x"))
    with pytest.raises(aot.ExecuteError, match=r"toy_sincos.*2 arrays for the 3 outputs.*tuple of 3"):
        aot.Executor(forward, None, None, x)


class ToyPick(Function):
    """z[n] = x[n, idx[n]] with idx = argmax computed first and handed to the node (an integer
    output that is also an input of the main node, as moe_topk does)."""
    name = "toy_pick"

    @staticmethod
    def forward(ctx, x, idx):
        ctx.save_for_backward(idx)
        ctx.width = x.shape[1]
        return np.take_along_axis(x, idx[:, None], 1)[:, 0]

    @staticmethod
    def backward(ctx, grad_output):
        (idx,) = ctx.saved_tensors
        d = np.zeros((len(idx), ctx.width))
        d[np.arange(len(idx)), idx] = grad_output
        return d, None


def pick(x):
    idx = Variable(np.argmax(x.data, axis=1))
    picked = ToyPick.apply(x, idx)
    link_outputs(picked, indices=idx)
    return picked, idx


def test_an_integer_output_that_is_also_an_input_of_the_main_node(monkeypatch):
    monkeypatch.setitem(OPS, "toy_pick", ToyPick)
    monkeypatch.setitem(optable.TABLE, "toy_pick", optable.OpSpec("toy_pick", ToyPick, capture=lambda node, v, inputs: (
        "toy_pick", {}, [v, linked_output(node, "indices", ("indices", v.shape, np.int64))])))
    x = RNG.normal(size=(4, 3))

    def fn(x):
        picked, idx = pick(x)
        return (picked * idx * idx).sum()   # the indices feed a later op too
    forward = aot.capture(fn, mg.create_leaf(x, requires_grad=True, name="x"))
    (op,) = [o for o in forward.operations if o.type == "toy_pick"]
    assert op.inputs == ("x",) and op.outputs[1] == f"{op.outputs[0]}.indices"
    assert [o.type for o in forward.operations] == ["toy_pick", "mul", "mul", "sum"]
    assert not forward.constants, forward.text()   # the indices are an output, not a folded constant

