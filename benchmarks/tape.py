"""One training step of a scalar MLP 2-16-16-1 on 32 two-moons points, on three engines.

Every scalar is its own value, as in micrograd: a neuron is b + w0*x0 + w1*x1 + ..., ReLU on the
hidden layers; the loss is micrograd's demo loss (mean hinge loss max(0, 1 - y*score) plus
1e-4 * sum of squared parameters); the step is forward, backward and SGD (lr 0.05). Same data,
same initial weights, same loss on

  micrograd  the PyPI package `micrograd` (pip install micrograd==0.1.0, in the bench extra)
  eager      minigrad's eager engine, every scalar a 0-d Variable
  tape       minigrad.tape.Tape through its int fast path: ops are tape methods on int slots,
             backward dispatches on op codes with everything bound to locals
  tape_plain the same tape recorded through tape.apply (the rule looked up in rules.RULES) and
             undone by backward(plain=True) (the rules called one by one): the plain idea, shown
             so that the fast path's trick is seen to pay

The three engines compute the same loss and gradients (checked before timing). Medians over
rounds, in milliseconds: the engines take turns, one step each per round (see rounds.py), and
each ratio is the median of the per-round ratios, with its quartiles. Then the
memory of TensorTape: the pool's peak during one backward with use-count freeing, against keeping
everything (retain=True).

    python benchmarks/tape.py [--repeats 15]
"""
from __future__ import annotations

import argparse
import gc
import operator
import os
import sys

import numpy as np

import minigrad as mg
from minigrad.tape import Tape, TensorTape

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # (when imported by a test)
from rounds import CLOCK_NAME, clock, interleave, quartiles, ratio_fields  # noqa: E402

SIZES = [2, 16, 16, 1]
N_POINTS, LR, ALPHA = 32, 0.05, 1e-4


def make_problem(seed: int = 0):
    """32 two-moons points with labels -1/+1, and initial weights (one flat list of floats)."""
    x, y = mg.data.moons(N_POINTS, noise=0.1, seed=seed)
    labels = [2.0 * float(v) - 1.0 for v in y]
    rng = np.random.default_rng(seed)
    weights = []
    for n_in, n_out in zip(SIZES, SIZES[1:]):
        for _ in range(n_out):
            weights += rng.uniform(-1, 1, n_in).tolist() + [0.0]   # w..., then b
    return x.tolist(), labels, weights


def layout():
    """For each layer: (n_in, n_out, relu?), and the neurons' offsets into the weight list."""
    layers, offset = [], 0
    for k, (n_in, n_out) in enumerate(zip(SIZES, SIZES[1:])):
        layers.append((n_in, n_out, k < len(SIZES) - 2, offset))
        offset += n_out * (n_in + 1)
    return layers


LAYERS = layout()


# -- the network, once, for every engine: ops passed in ----------------------------------------
def network_loss(params, xs, ys, add, mul, relu, const):
    """micrograd's demo loss of the MLP; params are the engine's values, const(x) makes one."""
    losses = []
    for (x0, x1), y in zip(xs, ys):
        h = [const(x0), const(x1)]
        for n_in, n_out, nonlin, offset in LAYERS:
            out = []
            for j in range(n_out):
                base = offset + j * (n_in + 1)
                act = params[base + n_in]                       # b, then + w_i * x_i
                for i in range(n_in):
                    act = add(act, mul(params[base + i], h[i]))
                out.append(relu(act) if nonlin else act)
            h = out
        losses.append(relu(add(const(1.0), mul(const(-y), h[0]))))
    total = losses[0]
    for loss in losses[1:]:
        total = add(total, loss)
    squares = mul(params[0], params[0])
    for p in params[1:]:
        squares = add(squares, mul(p, p))
    return add(mul(total, const(1.0 / len(losses))), mul(const(ALPHA), squares))


def sgd(weights: list, grads) -> None:
    for k, grad in enumerate(grads):
        weights[k] -= LR * float(grad)


# -- the tape: fast path (int slots, tape methods) and plain path (tape.apply, plain backward) ---
def tape_step(tape: Tape, weights: list, xs, ys) -> float:
    tape.reset()
    params = [tape.var(w).index for w in weights]
    loss = network_loss(params, xs, ys, tape.add, tape.mul, tape.relu,
                        lambda x: tape.const(x).index)
    tape.backward(loss)
    sgd(weights, [tape.grads[p] for p in params])
    return tape.values[loss]


def tape_plain_step(tape: Tape, weights: list, xs, ys) -> float:
    tape.reset()
    apply = tape.apply
    params = [tape.var(w).index for w in weights]
    loss = network_loss(params, xs, ys, lambda a, b: apply("add", a, b),
                        lambda a, b: apply("mul", a, b), lambda a: apply("relu", a),
                        lambda x: tape.const(x).index)
    tape.backward(loss, plain=True)
    sgd(weights, [tape.grads[p] for p in params])
    return tape.values[loss]


# -- micrograd and minigrad's eager engine: value objects with operators -----------------------
def micrograd_step(weights: list, xs, ys) -> float:
    from micrograd.engine import Value
    params = [Value(w) for w in weights]
    loss = network_loss(params, xs, ys, operator.add, operator.mul, Value.relu, Value)
    loss.backward()
    sgd(weights, [p.grad for p in params])
    return loss.data


def eager_step(weights: list, xs, ys) -> float:
    def const(x):
        return mg.create_leaf(np.array(x))
    params = [mg.create_leaf(np.array(w), requires_grad=True) for w in weights]
    loss = network_loss(params, xs, ys, operator.add, operator.mul, mg.relu, const)
    loss.backward()
    sgd(weights, [p.grad for p in params])
    return float(loss.data)


# -- measuring ---------------------------------------------------------------------------------
def step_runs(steps: dict, weights, xs, ys) -> dict:
    """Runs for rounds.interleave: each times one step from the same starting weights.

    micrograd's values form reference cycles (each keeps a closure over itself), which only the
    garbage collector frees, whenever it next runs: often in another engine's turn. So the heap
    is collected, untimed, before each turn. That leaves part of micrograd's own collection
    untimed: its figure is, if anything, flattered."""
    def run(step):
        def one() -> float:
            w = list(weights)             # every step starts from the same weights
            gc.collect()                  # (untimed) the last engine's cycles are not this one's
            start = clock()
            step(w, xs, ys)
            return clock() - start
        return one
    return {name: run(step) for name, step in steps.items()}


def check_same_step(weights, xs, ys, have_micrograd: bool) -> None:
    """The engines must agree on the loss and on the updated weights before being timed."""
    runs = {"tape": lambda w: tape_step(Tape(), w, xs, ys),
            "tape_plain": lambda w: tape_plain_step(Tape(), w, xs, ys),
            "eager": lambda w: eager_step(w, xs, ys)}
    if have_micrograd:
        runs["micrograd"] = lambda w: micrograd_step(w, xs, ys)
    results = {}
    for name, run in runs.items():
        w = list(weights)
        results[name] = (run(w), w)
    loss, w = results["tape"]
    for name, (other_loss, other_w) in results.items():
        if not (np.isclose(other_loss, loss, rtol=1e-9) and np.allclose(other_w, w, rtol=1e-9)):
            raise AssertionError(f"{name} and tape disagree: loss {other_loss} vs {loss}")


def tensor_tape_peaks(width: int = 256, depth: int = 8) -> tuple[int, int]:
    """Pool peak (bytes) of one forward + backward of a tanh chain on a TensorTape, freeing
    values and grads by use count, then keeping everything (retain=True)."""
    peaks = []
    for retain in (False, True):
        tape = TensorTape()
        h = tape.var(np.linspace(-1.0, 1.0, width * width).reshape(width, width), name="x")
        for _ in range(depth):
            h = (h * 0.9 + 0.1).tanh()
        tape.backward(h, retain=retain)
        peaks.append(tape.pool.high_water)
    return peaks[0], peaks[1]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args(argv)
    xs, ys, weights = make_problem()
    try:
        import micrograd.engine  # noqa: F401
        have_micrograd = True
    except ImportError:
        have_micrograd = False
        print("micrograd is not installed (pip install micrograd==0.1.0): its figure is missing",
              file=sys.stderr)
    check_same_step(weights, xs, ys, have_micrograd)
    tape, plain_tape = Tape(), Tape()
    steps = {"tape": lambda w, x, y: tape_step(tape, w, x, y),
             "tape_plain": lambda w, x, y: tape_plain_step(plain_tape, w, x, y),
             "eager": eager_step}
    if have_micrograd:
        steps["micrograd"] = micrograd_step
    times = interleave(step_runs(steps, weights, xs, ys), args.repeats)
    nan = [float("nan")] * args.repeats
    times.setdefault("micrograd", nan)
    m, e, t, p = (quartiles(times[k])[1] * 1e3
                  for k in ("micrograd", "eager", "tape", "tape_plain"))
    print(f"tape step ms: micrograd={m:.1f} eager={e:.1f} tape={t:.1f} "
          f"{ratio_fields('speedup', times['micrograd'], times['tape'], digits=1)} "
          f"{ratio_fields('eager_to_micrograd', times['eager'], times['micrograd'])} "
          f"rounds={args.repeats} clock={CLOCK_NAME}")
    print(f"tape fast path vs plain (apply + backward(plain=True)): plain={p:.1f} ms "
          f"fast={t:.1f} ms "
          f"{ratio_fields('ratio', times['tape_plain'], times['tape'], digits=1)}")
    print(f"tape ops per step: {len(tape.instrs)} instructions, {len(tape.values)} slots "
          f"(gc was {'on' if gc.isenabled() else 'off'})")
    freed, kept = tensor_tape_peaks()
    print(f"tensor tape peak bytes (tanh chain, 8 layers of 256x256 float64): keep-everything="
          f"{kept} use-count-freeing={freed} ratio={kept / freed:.2f}")


if __name__ == "__main__":
    main()
