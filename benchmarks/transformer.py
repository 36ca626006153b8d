"""One training step of the tiny transformer (minigrad.nn.TinyTransformer), eager, aot and torch.

Sizes: vocab V=64, model dim D=64, 2 layers, 4 heads (head dim 16), SwiGLU hidden F=128,
sequence T=32, batch B=16 (N = B*T = 512 rows), float32. With --moe, each block's MLP is a
mixture of 4 SwiGLU experts (hidden 64, top-2 routing; minigrad only, torch has no such op).
One step = forward, backward and a plain SGD update (p -= lr * grad) of every parameter.

Measured side by side in one run, one BLAS thread each:
  eager   minigrad's eager engine (a graph built and consumed every step)
  aot     minigrad.aot: captured and derived once, each step runs the compiled plan
  torch   the same model, same math (rms_norm, rotary halves, causal scaled-dot-product
          attention, SwiGLU, cross-entropy), from the same initial parameters, in torch 2.13 CPU,
          in a separate process (torch's and OpenBLAS's thread pools fight when they share one),
          asked for one round of steps at a time so that the three runs are interleaved
The first loss of each is printed: they must agree (same model, same data). The runs take turns
in rounds (see rounds.py), each a median of --steps/--rounds steps; times are medians over rounds,
in milliseconds, and the ratios eager/torch and aot/torch (targets: <= 1.5 and <= 1.2) are
medians of per-round ratios, with their quartiles.
Then the aot memory plan of the step: peak activation bytes under save-all, and under
recompute of the norms, rope and swiglu outputs (re-run in backward instead of kept).

torch is looked up in this interpreter, or in the one given with --torch-python; without it
the torch column is skipped with a message (torch is never a dependency of minigrad).

    python benchmarks/transformer.py [--steps 100] [--rounds 10] [--moe] [--torch-python PATH]
"""
from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")   # before numpy loads its BLAS

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

import numpy as np  # noqa: E402

import minigrad as mg  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # (when imported by a test)
from rounds import (CLOCK_NAME, PEER_LOOP, Peer, interleave, quartiles,  # noqa: E402
                    ratio_fields, timed)

SIZES = dict(vocab=64, dim=64, n_layers=2, n_heads=4, hidden=128)
MOE_SIZES = dict(vocab=64, dim=64, n_layers=2, n_heads=4, hidden=64, n_experts=4, k=2)
BATCH, SEQ = 16, 32
LR = 0.01


def make_data(vocab: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, size=(BATCH, SEQ))
    return ids, np.roll(ids, -1, axis=1).reshape(-1)   # next token (wrapping): any targets do


def eager_runner(sizes: dict):
    model = mg.nn.TinyTransformer(**sizes, seed=0)
    params = model.parameters()

    def step(ids, targets) -> float:
        loss = model(ids, targets)
        loss.backward()
        for p in params:
            p.data -= LR * p.grad
            p.grad = None
        return loss.item()
    return step


def aot_parts(sizes: dict):
    from minigrad import aot
    model = mg.nn.TinyTransformer(**sizes, seed=0)
    ids, targets = make_data(sizes["vocab"])
    forward = aot.capture(model, ids, targets, params=model, input_names=["ids", "targets"])
    backward = aot.derive_backward_graph(forward)
    return model, forward, backward


def aot_runner(sizes: dict):
    from minigrad import aot
    model, forward, backward = aot_parts(sizes)
    ids, targets = make_data(sizes["vocab"])
    executor = aot.Executor(forward, backward, model, ids, targets)
    pairs = [(p.data, executor[f"d_{p.name}"]) for p in model.parameters()]

    def step(ids, targets) -> float:
        loss = executor.run(ids, targets)
        for data, grad in pairs:
            data -= LR * grad
        return float(loss)
    return step


TORCH_SCRIPT = r"""
import json, sys
import numpy as np, torch
import torch.nn.functional as F
torch.set_num_threads(1)
path, lr, sizes = sys.argv[1], float(sys.argv[2]), json.loads(sys.argv[3])
saved = np.load(path)
P = {k[2:]: torch.tensor(saved[k], requires_grad=True) for k in saved.files if k.startswith("p:")}
ids, targets = torch.from_numpy(saved["ids"]), torch.from_numpy(saved["targets"])
freqs = torch.from_numpy(saved["freqs"])
B, T = ids.shape
D, H = sizes["dim"], sizes["n_heads"]
Dh = D // H
angle = torch.arange(T, dtype=torch.float32)[:, None] * freqs[None, :]
cos, sin = angle.cos()[None, :, None, :], angle.sin()[None, :, None, :]

def rope(x):                                    # rotate the pairs (x[..., :Dh/2], x[..., Dh/2:])
    x1, x2 = x[..., :Dh // 2], x[..., Dh // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)

def norm(x, w):
    return F.rms_norm(x, (D,), w, eps=1e-6)

def attention(x, pre):
    q, k, v = (x @ P[f"{pre}.{n}.weight"] for n in "qkv")
    q, k, v = (t.reshape(B, T, H, Dh) for t in (q, k, v))
    q, k = rope(q), rope(k)
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                         is_causal=True)
    return out.transpose(1, 2).reshape(B * T, D) @ P[f"{pre}.o.weight"]

def swiglu(x, pre):
    gate, up = (x @ P[f"{pre}.gate_up.weight"]).chunk(2, dim=-1)
    return (F.silu(gate) * up) @ P[f"{pre}.down.weight"]

def loss_fn():
    x = P["embed.weight"][ids].reshape(B * T, D)
    residual = None
    for i in range(sizes["n_layers"]):
        pre = f"blocks.{i}"
        residual = x if residual is None else residual + x
        a = attention(norm(residual, P[f"{pre}.attn_norm.weight"]), f"{pre}.attn")
        residual = residual + a
        x = swiglu(norm(residual, P[f"{pre}.mlp_norm.weight"]), f"{pre}.mlp")
    h = norm(residual + x, P["norm.weight"])
    return F.cross_entropy(h @ P["lm_head"], targets)

def step():
    loss = loss_fn()
    loss.backward()
    with torch.no_grad():
        for p in P.values():
            p -= lr * p.grad
            p.grad = None
    return loss.item()

first_loss = step()
for _ in range(5):
    step()
""" + PEER_LOOP + "_serve({'first_loss': first_loss})\n"   # one round per request (rounds.Peer)


def torch_python(given: str | None) -> str | None:
    """An interpreter that can import torch: the one given, else this one, else None."""
    python = given or sys.executable
    probe = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                           capture_output=True, text=True)
    return python if probe.returncode == 0 else None


class TorchReference(Peer):
    """The torch process (rounds.Peer): started with the same initial parameters and data as
    eager and aot; `first_loss`, then `round(steps)` gives the median of `steps` steps."""

    def __init__(self, python: str, sizes: dict):
        model = mg.nn.TinyTransformer(**sizes, seed=0)     # the same initial values as eager, aot
        ids, targets = make_data(sizes["vocab"])
        arrays = {f"p:{p.name}": p.numpy() for p in model.parameters()}
        arrays.update(ids=ids, targets=targets, freqs=model.blocks[0].attn.freqs.numpy())
        self._tmp = tempfile.TemporaryDirectory()
        path = os.path.join(self._tmp.name, "model.npz")
        np.savez(path, **arrays)
        super().__init__([python, "-c", TORCH_SCRIPT, path, str(LR), json.dumps(sizes)],
                         env=os.environ.copy())
        self.first_loss = self.hello["first_loss"]

    def close(self) -> None:
        super().close()
        self._tmp.cleanup()


# What the recompute plan re-runs in backward: the cheap ops (norms, rope, swiglu) whose outputs
# backward reads; matmuls and attention stay saved. (plan_memory's default list, the saves of
# elementwise ops, is empty for this model: its elementwise work is inside the fused ops.)
RECOMPUTED_OPS = ("rmsnorm", "fused_residual_rmsnorm", "rope", "swiglu")


def recompute_list(forward, backward) -> list:
    return [t for t in backward.save if forward.producer_of(t) is not None
            and forward.producer_of(t).type in RECOMPUTED_OPS]


def plan_bytes(sizes: dict) -> dict:
    from minigrad import aot
    _, forward, backward = aot_parts(sizes)
    save_all = aot.plan_memory(forward, backward)
    recompute = aot.plan_memory(forward, backward, policy="recompute",
                                recompute=recompute_list(forward, backward))
    return {"save_all_peak": save_all.peak_bytes, "save_all_saved": save_all.saved_bytes,
            "recompute_peak": recompute.peak_bytes, "recompute_saved": recompute.saved_bytes,
            "recompute_extra_ops": len(recompute.backward.operations) - len(backward.operations)}


def same_loss(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-4 * abs(b)     # float32, sums in another order


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--moe", action="store_true", help="MoE MLPs (no torch reference)")
    parser.add_argument("--torch-python", default=None,
                        help="a Python interpreter with torch 2.13 (default: this one)")
    args = parser.parse_args(argv)
    mg.set_debug(False)
    sizes = MOE_SIZES if args.moe else SIZES
    label = "transformer_moe" if args.moe else "transformer"
    ids, targets = make_data(sizes["vocab"])
    runs = {"eager": eager_runner(sizes), "aot": aot_runner(sizes)}
    first = {name: step(ids, targets) for name, step in runs.items()}
    if not same_loss(first["aot"], first["eager"]):
        raise SystemExit(f"eager and aot disagree on the first loss: {first}")
    python = None if args.moe else torch_python(args.torch_python)
    torch = TorchReference(python, sizes) if python else None
    if torch is not None and not same_loss(torch.first_loss, first["eager"]):
        raise SystemExit(f"torch computes another model: first loss {torch.first_loss} against "
                         f"eager's {first['eager']}")
    for step in runs.values():
        for _ in range(5):
            step(ids, targets)
    # The runs take turns (torch's process too) so that a slow patch of the machine hits them alike.
    per_round = max(1, args.steps // args.rounds)
    runs = {name: timed(step, ids, targets, repeat=per_round) for name, step in runs.items()}
    if torch is not None:
        runs["torch"] = lambda: torch.round(per_round)
    times = interleave(runs, args.rounds)
    if torch is not None:
        torch.close()
    ms = {name: quartiles(t)[1] * 1e3 for name, t in times.items()}
    print(f"{label} sizes: {sizes} batch={BATCH} seq={SEQ} float32, one BLAS thread")
    line = (f"{label} step ms: eager={ms['eager']:.2f} aot={ms['aot']:.2f} "
            f"{ratio_fields('ratio_eager_aot', times['eager'], times['aot'])}")
    losses = f"first loss: eager={first['eager']:.6f} aot={first['aot']:.6f}"
    if torch is None:
        print(line)
        print(losses)
        print("torch: skipped (" + ("no MoE reference" if args.moe else
              "torch is not installed here; pip install torch==2.13.0, or pass --torch-python")
              + ")")
    else:
        print(f"{line} torch={ms['torch']:.2f} "
              f"{ratio_fields('ratio_eager_torch', times['eager'], times['torch'])} "
              f"(target <= 1.5) "
              f"{ratio_fields('ratio_aot_torch', times['aot'], times['torch'])} (target <= 1.2) "
              f"rounds={args.rounds} clock={CLOCK_NAME}")
        print(f"{losses} torch={torch.first_loss:.6f}")
    plan = plan_bytes(sizes)
    print(f"{label} aot plan peak bytes: save_all={plan['save_all_peak']:,} "
          f"recompute={plan['recompute_peak']:,} "
          f"ratio={plan['recompute_peak'] / plan['save_all_peak']:.2f}; saved bytes: "
          f"save_all={plan['save_all_saved']:,} recompute={plan['recompute_saved']:,} "
          f"(+{plan['recompute_extra_ops']} backward ops)")


if __name__ == "__main__":
    main()
