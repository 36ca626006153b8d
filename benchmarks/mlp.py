"""One training step of an MLP 784-256-128-10 (ReLU, cross-entropy, SGD), batch 128, float32.

Measured side by side in one run, one BLAS thread each:
  floor           the same network written by hand in numpy (forward, backward, update)
  minigrad_heap   minigrad with no arena (ordinary numpy arrays)
  minigrad_arena  parameters on a permanent arena, each step inside `with graph.scope():`
  minigrad_arena_copied  the same, with the batch copied onto the graph arena
                  (create_leaf(x) instead of create_leaf(x, copy=False))
  minigrad_aot    the same network ahead of time (minigrad.aot): captured and derived once, each
                  step runs the compiled plan (the batch is copied into its input buffer), then
                  the same SGD update as the floor
  torch           the same step in torch, in a separate process (torch's and OpenBLAS's
                  thread pools fight when they share one) that takes its turn with the others,
                  when torch is installed
The floor and torch read the batch where it is (torch through torch.from_numpy), so heap and
arena do too: create_leaf(x, copy=False). The copied variant shows what placing the batch on
the arena costs (one 400 KB copy per step). Inputs are random (the shapes are what matters
here). The runs take turns in rounds (see rounds.py), each a median of --steps/--rounds steps;
times are medians over rounds, in milliseconds, and each ratio against the floor is the median
of the per-round ratios, with its quartiles.

    python benchmarks/mlp.py [--steps 200] [--rounds 20]
"""
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")   # before numpy loads its BLAS

import argparse  # noqa: E402
import contextlib  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402

import minigrad as mg  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # (when imported by a test)
from rounds import (CLOCK_NAME, PEER_LOOP, Peer, interleave, quartiles,  # noqa: E402
                    ratio_fields, timed)

SIZES = [784, 256, 128, 10]
BATCH = 128
LR = 0.01


def make_data(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], BATCH)
    return x, y


def numpy_params(seed: int = 0):
    model = mg.nn.MLP(SIZES, seed=seed)   # same initial values as the minigrad runs
    return [p.numpy() for p in model.parameters()]


def numpy_step(params, x, y) -> float:
    """The floor: forward, backward and SGD by hand, no autograd bookkeeping at all."""
    W1, b1, W2, b2, W3, b3 = params
    h1 = x @ W1 + b1
    a1 = np.maximum(h1, 0)
    h2 = a1 @ W2 + b2
    a2 = np.maximum(h2, 0)
    logits = a2 @ W3 + b3
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    loss = -log_probs[np.arange(BATCH), y].mean()
    g = np.exp(log_probs)
    g[np.arange(BATCH), y] -= 1
    g /= BATCH
    grads = [None] * 6
    grads[4], grads[5] = a2.T @ g, g.sum(axis=0)
    g = (g @ W3.T) * (h2 > 0)
    grads[2], grads[3] = a1.T @ g, g.sum(axis=0)
    g = (g @ W2.T) * (h1 > 0)
    grads[0], grads[1] = x.T @ g, g.sum(axis=0)
    for p, grad in zip(params, grads):
        p -= LR * grad
    return float(loss)


def minigrad_runner(use_arena: bool, copy_input: bool = False):
    perm = mg.Arena("perm", 4 << 20) if use_arena else None
    graph = mg.Arena("graph", 4 << 20) if use_arena else None
    model = mg.nn.MLP(SIZES, seed=0, arena=perm)
    opt = mg.optim.SGD(model.parameters(), lr=LR)

    def step(x, y) -> float:
        with graph.scope() if use_arena else contextlib.nullcontext():
            inputs = mg.create_leaf(x, name="x", copy=copy_input)
            loss = mg.cross_entropy(model(inputs), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss.item()
    return step


def aot_runner():
    from minigrad import aot
    model = mg.nn.MLP(SIZES, seed=0)
    x, y = make_data()
    forward = aot.capture(lambda x, y: mg.cross_entropy(model(x), y), x, y, params=model)
    executor = aot.Executor(forward, aot.derive_backward_graph(forward), model, x, y)
    pairs = [(p.data, executor[f"d_{p.name}"]) for p in model.parameters()]

    def step(x, y) -> float:
        loss = executor.run(x, y)
        for p, grad in pairs:
            p -= LR * grad
        return float(loss)
    return step


TORCH_SCRIPT = r"""
import sys
import numpy as np, torch
torch.set_num_threads(1)
rng = np.random.default_rng(0)
x = torch.from_numpy(rng.standard_normal((128, 784)).astype(np.float32))   # shared, no copy
y = torch.from_numpy(rng.integers(0, 10, 128))
model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128),
                            torch.nn.ReLU(), torch.nn.Linear(128, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
def step():
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()
for _ in range(10):
    step()
""" + PEER_LOOP + "_serve({})\n"


def torch_peer() -> Peer | None:
    """The torch step in its own process (see rounds.Peer), or None when torch is missing."""
    import importlib.util
    if importlib.util.find_spec("torch") is None:
        return None
    return Peer([sys.executable, "-c", TORCH_SCRIPT], env=os.environ.copy())


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args(argv)
    mg.set_debug(False)
    x, y = make_data()
    params = numpy_params()
    steps = {"floor": lambda a, b: numpy_step(params, a, b), "heap": minigrad_runner(False),
             "arena": minigrad_runner(True), "arena_copied": minigrad_runner(True, True),
             "aot": aot_runner()}
    per_round = max(1, args.steps // args.rounds)
    runs = {name: timed(step, x, y, repeat=per_round) for name, step in steps.items()}
    for step in steps.values():
        for _ in range(10):
            step(x, y)   # warm up caches and allocators
    torch = torch_peer()
    if torch is not None:
        runs["torch"] = lambda: torch.round(per_round)
    times = interleave(runs, args.rounds)   # a slow patch of the machine hits all runs alike
    if torch is not None:
        torch.close()
    ms = {name: quartiles(t)[1] * 1e3 for name, t in times.items()}

    def ratio(name):
        return ratio_fields(f"ratio_{name}", times[name], times["floor"], digits=3)
    line = (f"mlp step ms: floor={ms['floor']:.3f} minigrad_heap={ms['heap']:.3f} "
            f"minigrad_arena={ms['arena']:.3f} {ratio('heap')} {ratio('arena')} "
            f"minigrad_arena_copied={ms['arena_copied']:.3f} {ratio('arena_copied')} "
            f"minigrad_aot={ms['aot']:.3f} {ratio('aot')}")
    line += f" torch={ms['torch']:.3f} {ratio('torch')}" if torch is not None else " torch=n/a"
    print(f"{line} rounds={args.rounds} steps_per_round={per_round} clock={CLOCK_NAME}")


if __name__ == "__main__":
    main()
