"""The eager engine: each op builds its node as it runs, and backward walks the nodes.

    variable.py  Variable, the one user-facing value type, and create_leaf
    function.py  Function, the base class of every op and the graph node it leaves behind
    engine.py    accumulate_grad and backward's two schedulers (topological, pending counts)
    higher.py    mg.grad and create_graph: the gradient computation recorded, to differentiate again
    steps.py     the records backward_steps() yields, one per step of backward
    readonly.py  the guard that keeps saved arrays as forward saw them
    guards.py    the engine's rules, checked, with the error messages that name the fix

The ops live in minigrad/ops (they import this package; it never imports them), the memory the
nodes sit on in minigrad/arena.py.
"""
# (each file by its name: mg.eager.engine.run_pending is what lesson 04 prints)
from . import engine, function, guards, higher, readonly, steps, variable  # noqa: F401
