"""Compare a computed JSON document with a pinned one: everything exact except floating-point
numbers, which agree within a tolerance chosen by the dtype they belong to.

Why not bit for bit: BLAS and numpy's SIMD loops sum in an order that depends on the processor, so
a float32 result may differ in its last bits from one x86-64 machine to another. Everything else
(structure, ids, kinds, order, shapes, dtypes, names, integers, strings, booleans, nulls) is
computed without rounding and must match exactly.

`first_difference(expected, actual)` returns None or a message naming the JSON path of the first
difference and both values; `assert_same_document` raises AssertionError with that message.
"""
from __future__ import annotations

import math

# (rtol, atol) per dtype: a float value v matches the pinned e when |v - e| <= atol + rtol * |e|.
# float32 has about 7 significant digits, so 1e-5 leaves room for a different summation order of
# a few hundred terms; float64 has about 16, so 1e-12. atol covers values that cancel to near 0
# (a sum of n terms of size m that cancels keeps an error of about n * m * eps).
TOLERANCES = {
    "float16": (1e-3, 1e-4),
    "float32": (1e-5, 1e-6),
    "float64": (1e-12, 1e-12),
}
# Floats whose dtype the document does not say (there are none in today's traces; an op's ctx
# could hold a Python constant): the loosest tolerance of the float dtypes the engine computes in,
# float32's, so that a legitimate platform difference can never fail the comparison.
UNKNOWN_DTYPE = "float32"


def tolerance(dtype: str | None) -> tuple[float, float]:
    """(rtol, atol) for a float of this dtype; integer and bool dtypes are exact (0, 0)."""
    if dtype is None:
        return TOLERANCES[UNKNOWN_DTYPE]
    if dtype.startswith(("int", "uint", "bool")):
        return 0.0, 0.0
    return TOLERANCES.get(dtype, TOLERANCES[UNKNOWN_DTYPE])


def floats_close(expected: float, actual: float, dtype: str | None) -> bool:
    rtol, atol = tolerance(dtype)
    return math.isclose(actual, expected, rel_tol=0.0, abs_tol=atol + rtol * abs(expected))


def trace_dtypes(doc: dict) -> dict:
    """id -> dtype for a trace document: a variable's own dtype, an op's output's dtype."""
    dtypes = {n["id"]: n["dtype"] for n in doc.get("nodes", ()) if "dtype" in n}
    for n in doc.get("nodes", ()):
        if n.get("type") == "op" and n.get("output") in dtypes:
            dtypes[n["id"]] = dtypes[n["output"]]
    return dtypes


def owner_dtype(item: dict, dtypes: dict) -> str | None:
    """The dtype of the array whose values an object (node or event) carries, if it says."""
    if item.get("type") == "variable" and "dtype" in item:
        return item["dtype"]
    for key in ("variable", "node"):   # an event's grad belongs to its variable, else its op
        if item.get(key) in dtypes:
            return dtypes[item[key]]
    return None


def first_difference(expected, actual, path: str = "$", dtype: str | None = None,
                     dtypes: dict | None = None) -> str | None:
    """The first place where actual differs from expected, as a message; None if they match."""
    if isinstance(expected, dict) and "nodes" in expected:
        dtypes = trace_dtypes(expected)   # each trace document names its own ids
    if isinstance(expected, float) and isinstance(actual, float):
        if floats_close(expected, actual, dtype):
            return None
        rtol, atol = tolerance(dtype)
        return (f"{path}: pinned {expected!r}, computed {actual!r}, further apart than the "
                f"{dtype or 'unknown (so ' + UNKNOWN_DTYPE + ')'} tolerance "
                f"(rtol {rtol:g}, atol {atol:g})")
    if type(expected) is not type(actual):
        return f"{path}: pinned {expected!r} ({type(expected).__name__}), " \
               f"computed {actual!r} ({type(actual).__name__})"
    if isinstance(expected, dict):
        return _dict_difference(expected, actual, path, dtype, dtypes or {})
    if isinstance(expected, list):
        return _list_difference(expected, actual, path, dtype, dtypes or {})
    if expected != actual:
        return f"{path}: pinned {expected!r}, computed {actual!r}"
    return None


def _dict_difference(expected: dict, actual: dict, path, dtype, dtypes) -> str | None:
    if list(expected) != list(actual):
        return f"{path}: pinned keys {list(expected)}, computed keys {list(actual)}"
    dtype = owner_dtype(expected, dtypes) or dtype
    for key in expected:
        found = first_difference(expected[key], actual[key], f"{path}.{key}", dtype, dtypes)
        if found:
            return found
    return None


def _list_difference(expected: list, actual: list, path, dtype, dtypes) -> str | None:
    if len(expected) != len(actual):
        return f"{path}: pinned {len(expected)} items, computed {len(actual)}"
    for i, (e, a) in enumerate(zip(expected, actual)):
        found = first_difference(e, a, f"{path}[{i}]", dtype, dtypes)
        if found:
            return found
    return None


def assert_same_document(expected, actual, what: str = "document") -> None:
    found = first_difference(expected, actual)
    assert found is None, f"{what}: first difference at {found}"
