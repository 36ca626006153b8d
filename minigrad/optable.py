"""The op table: one row per op, read by every engine. An op has one key, its name.

    OpSpec(name, function, rule, compilers, capture, cheap, alias, saves, api)

* name       the one key: the eager Function's name (what traces record), the IR op type that
             capture writes and the rule and compilers answer to. ("mul", never "multiply".)
* function   the eager Function subclass (forward and backward side by side), or None for an op
             only the ahead-of-time engine writes (bias_add, identity, ...: see AOT_ONLY).
* rule       the ahead-of-time backward rule: ctx -> [Operation] (aot/rules.py says how).
* compilers  IR op type -> executor compiler, for the op itself and for the backward kernels its
             rule emits ("tanh" and "tanh_backward" both live in tanh's row).
* capture    how aot.capture writes an eager node of this op: (node, output, inputs) ->
             (op type, attrs[, outputs]); SAME means "this name, no attrs"; None: not captured.
* cheap      the memory planner may recompute its output in backward instead of saving it.
* alias      its output is a view of its input (it owns no memory in a memory plan).
* saves      in words, what backward keeps (for readers; the code says it too).
* api        the op is a public function of minigrad.ops (minigrad.ops.__all__ is read here).

A family file (ops/elementwise.py, ...) writes each op whole: the Function, then its rule and
compilers, then one `define(...)` line that enters the row. Files that still keep an op's aot
half apart (aot/rules.py, aot/compile_*.py) `attach(...)` it to the op's row by name. The engines
never list ops: eager looks classes up in minigrad.OPS, aot reads rules(), compilers(),
captured(), cheap() and aliases() below. This module imports nothing from minigrad: it is a floor
every engine can stand on.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

SAME = "same"   # capture writes the eager node as this op, with no attrs


class NotCapturable(ValueError):
    """A capture translation refusing one use of its op (aot.capture raises it as CaptureError)."""


@dataclass
class OpSpec:
    name: str
    function: type | None = None
    rule: Callable | None = None
    compilers: dict = field(default_factory=dict)
    capture: Callable | str | None = None
    cheap: bool = False
    alias: bool = False
    saves: str = ""
    api: bool = True

    def translate(self, node, output, inputs) -> tuple:
        """What capture writes for one eager node of this op: (op type, attrs[, outputs])."""
        if self.capture == SAME:
            return self.name, {}
        return self.capture(node, output, inputs)


TABLE: dict = {}   # name -> OpSpec, filled by the family files as they are imported


def define(function_or_name, **fields) -> OpSpec:
    """Enter an op's row: define(Exp, rule=..., compilers={...}, capture=SAME, cheap=True).
    The first argument is the eager Function (its .name is the key) or, for an op the eager
    engine does not have, the name. A second definition of one name is a bug: refused."""
    if isinstance(function_or_name, str):
        name, function = function_or_name, None
    else:
        name, function = function_or_name.name, function_or_name
    if name in TABLE:
        raise ValueError(f"optable.define: the op '{name}' already has a row. Rule: one op, one "
                         f"row, one key. Fix: attach(...) more fields to it, or pick a new name.")
    TABLE[name] = row = OpSpec(name, function, **fields)
    return row


def attach(name: str, **fields) -> OpSpec:
    """Add fields (a rule, compilers, ...) to the row of an op defined elsewhere; compilers are
    merged. For an op with no row yet (an op only the aot engine has), the row is made."""
    row = TABLE.get(name) or define(name, api=False)
    for key, value in fields.items():
        if key == "compilers":
            row.compilers = {**row.compilers, **value}
        else:
            setattr(row, key, value)
    return row


def rules() -> dict:
    """IR op type -> backward rule (what aot.registry starts from)."""
    return {row.name: row.rule for row in TABLE.values() if row.rule is not None}


def compilers() -> dict:
    """IR op type -> executor compiler, over every row (forward ops and backward kernels)."""
    found: dict = {}
    for row in TABLE.values():
        for op_type, compiler in row.compilers.items():
            if op_type in found and found[op_type] is not compiler:
                raise ValueError(f"optable: two rows compile '{op_type}' ('{row.name}' and "
                                 f"another). Rule: every IR op type has one compiler. Fix: keep "
                                 f"it in one row.")
            found[op_type] = compiler
    return found


def captured() -> dict:
    """eager op name -> its row, for the ops capture can write."""
    return {row.name: row for row in TABLE.values() if row.capture is not None}


def cheap() -> frozenset:
    """Ops whose outputs the memory planner recomputes rather than saves, by default."""
    return frozenset(row.name for row in TABLE.values() if row.cheap)


def aliases() -> frozenset:
    """Ops whose output is a view of their input (no memory of their own)."""
    return frozenset(row.name for row in TABLE.values() if row.alias)


def public_names() -> list:
    """The names minigrad.ops exports, in the order the rows were defined."""
    return [row.name for row in TABLE.values() if row.api and row.function is not None]
