"""Lesson 10's check_multiply_rule on right and wrong rules: it passes the right one and reports
each wrong one as FAIL with the case, the library's message and a hint (it never raises)."""
from minigrad.ops.elementwise import mul_rule as right   # the library's own rule
from minigrad.exercises.lesson10 import check_multiply_rule


def without_needs_grad(ctx):
    """Writes both gradients, also for the data input x that needs none."""
    a, b = ctx.fwd_op.inputs
    return [*ctx.to_input_shape(0, "mul", [ctx.d_output, ctx.read(b)]),
            *ctx.to_input_shape(1, "mul", [ctx.d_output, ctx.read(a)])]


def with_matmul(ctx):
    """The wrong op: fails when the plan is compiled (shapes), not at derivation."""
    a, b = ctx.fwd_op.inputs
    return [ctx.op("matmul", [ctx.d_output, ctx.read(x)], [d])
            for i, (x, d) in enumerate(zip((b, a), ctx.d_inputs)) if ctx.needs_grad(i)]


def test_the_right_rule_passes(capsys):
    assert check_multiply_rule(right) is True
    assert capsys.readouterr().out.startswith("PASS check_multiply_rule: 4 captured graphs")


def test_a_rule_ignoring_needs_grad_fails_at_derivation_with_the_hint(capsys):
    assert check_multiply_rule(without_needs_grad) is False
    out = capsys.readouterr().out
    assert out.startswith("FAIL check_multiply_rule: x * V2 where x is data")
    assert "DeriveError" in out and "writes a tensor named None" in out and "input 0 ('x')" in out
    assert "hint: write every ctx.d_inputs[i] whose ctx.needs_grad(i) is true" in out


def test_a_rule_emitting_the_wrong_op_fails_instead_of_raising(capsys):
    assert check_multiply_rule(with_matmul) is False
    out = capsys.readouterr().out
    assert out.startswith("FAIL check_multiply_rule: tanh(x @ W) * V")
    assert "running the derived backward graph failed: ValueError" in out
    assert "d_tanh_1 = matmul(d_mul_2, V)" in out
