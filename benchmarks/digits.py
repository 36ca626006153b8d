"""Time to train the README's digits model: MLP 64-64-10, Adam, batch 32, 30 epochs, arena mode.

Prints the test accuracy and the training time (the test suite asserts the accuracy; the time
lives here). Target: at least 95% in under 10 s on a 2-core machine.

    python benchmarks/digits.py
"""
from __future__ import annotations

import time

import minigrad as mg


def train(epochs: int = 30) -> float:
    X_train, y_train, X_test, y_test = mg.data.digits_split()
    perm, graph = mg.Arena("perm", 1 << 20), mg.Arena("graph", 1 << 20)
    model = mg.nn.MLP([64, 64, 10], seed=0, arena=perm)
    opt = mg.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(epochs):
        for xb, yb in mg.data.batches(X_train, y_train, 32, seed=epoch):
            with graph.scope():
                loss = mg.cross_entropy(model(mg.create_leaf(xb)), yb)
                opt.zero_grad()
                loss.backward()
                opt.step()
    with mg.no_grad():
        return float((model(mg.create_leaf(X_test)).numpy().argmax(1) == y_test).mean())


def main() -> None:
    mg.set_debug(False)
    start = time.perf_counter()
    accuracy = train()
    seconds = time.perf_counter() - start
    print(f"digits: test_accuracy={accuracy:.4f} train_seconds={seconds:.2f} "
          f"(target >= 0.95 in < 10 s)")


if __name__ == "__main__":
    main()
