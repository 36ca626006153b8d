"""The IR of ahead-of-time autodiff: a Graph of named tensors and the Operations between them.

Tensors are plain strings ("x", "layer0.weight", "relu_2", "d_relu_2", "saved.x"); an Operation
reads some names and writes others. A forward Graph has inputs (data fed each run), params
(weights), operations in execution order and outputs (the loss). A backward Graph, made by
derive_backward_graph, has inputs ["d_loss"], outputs (the gradients) and `save`: the forward
tensors its operations read through "saved.<name>". `str(graph)` prints one line per operation,
in the spirit of a jaxpr.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SAVED_PREFIX = "saved."


@dataclass
class Operation:
    """outputs = type(inputs; attrs), with an id unique in its graph."""
    id: str
    type: str
    inputs: tuple
    outputs: tuple
    attrs: dict = field(default_factory=dict)

    def text(self) -> str:
        attrs = "".join(f" {k}={v!r}" for k, v in self.attrs.items())
        outputs, inputs = ", ".join(map(str, self.outputs)), ", ".join(map(str, self.inputs))
        return f"{outputs} = {self.type}({inputs}{';' if attrs else ''}{attrs})"


@dataclass(frozen=True)
class TensorInfo:
    """What the planner and the executor need to know of a tensor before any value exists."""
    shape: tuple
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


@dataclass
class Graph:
    """A static graph: who reads and writes which named tensor, with a shape/dtype environment."""
    inputs: list = field(default_factory=list)
    params: list = field(default_factory=list)
    operations: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    save: list = field(default_factory=list)          # backward graphs: forward tensors read via saved.
    shape_env: dict = field(default_factory=dict)     # name -> TensorInfo
    constants: dict = field(default_factory=dict)     # name -> ndarray folded in at capture time
    no_grad: set = field(default_factory=set)         # inputs that are data (no gradient wanted)
    name: str = "forward"

    def producer_of(self, tensor: str):
        """The operation that writes tensor, or None for inputs, params and constants."""
        for op in self.operations:
            if tensor in op.outputs:
                return op
        return None

    def consumers_of(self, tensor: str) -> list:
        return [op for op in self.operations if tensor in op.inputs]

    def text(self) -> str:
        """One line per operation, with the shapes of inputs and outputs (a jaxpr-like reading)."""
        def typed(name: str) -> str:
            info = self.shape_env.get(name.removeprefix(SAVED_PREFIX))
            return f"{name}:{np.dtype(info.dtype).name}{list(info.shape)}" if info else name
        lines = [f"{self.name} graph"]
        if self.inputs:
            lines.append("  inputs:  " + ", ".join(typed(n) + (" (data)" if n in self.no_grad else "")
                                                  for n in self.inputs))
        if self.params:
            lines.append("  params:  " + ", ".join(typed(n) for n in self.params))
        if self.constants:
            lines.append("  consts:  " + ", ".join(typed(n) for n in self.constants))
        for op in self.operations:
            lines.append(f"  {op.text()}")
        lines.append("  outputs: " + ", ".join(self.outputs))
        if self.save:
            lines.append("  save:    " + ", ".join(self.save))
        return "\n".join(lines)

    __str__ = text

    def _repr_pretty_(self, printer, cycle) -> None:   # IPython shows the text form
        printer.text(self.text())


def detached_tensors(graph: Graph) -> set:
    """The outputs of stop_gradient operations (x.detach() in a captured function): no gradient."""
    return {t for op in graph.operations if op.type == "stop_gradient" for t in op.outputs}


def is_saved(name: str) -> bool:
    return name.startswith(SAVED_PREFIX)


def saved_name_of(name: str) -> str:
    """"x" -> "saved.x" (what rules.saved_ref returns; here for modules below the rules)."""
    return SAVED_PREFIX + name


def unsaved(name: str) -> str:
    """"saved.x" -> "x" (names without the prefix come back unchanged)."""
    return name.removeprefix(SAVED_PREFIX)
