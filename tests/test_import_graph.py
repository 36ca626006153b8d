"""The import graph of minigrad/: no cycles, and no layer importing a layer above it.

The graph is read from the source with `ast` (nothing is imported), so a test failure names the
file and line of the import. Imports at module level run when the module is imported; imports
inside a function run when it is called. Both are listed, separately: a cycle of module-level
imports is what breaks `import` (or forces the order of lines in __init__), a cycle that needs a
function-level import to close is the same knot, hidden.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "minigrad"

# The layers, lowest first. A module may import its own layer and the layers below it, never one
# above: the base knows no Variable, the eager engine knows no op, ops know no model, the other
# engines and the trace recorder sit on the eager engine and its ops, the package's public API
# gathers them, and the widgets read the engine's documents (the engine never imports widgets).
LAYERS = [
    ("base", ["minigrad.errors", "minigrad.names", "minigrad.modes", "minigrad.kernels", "minigrad.optable",
              "minigrad.arena", "minigrad.gcpause"]),
    ("eager engine", ["minigrad.eager"]),
    ("ops and checks on them", ["minigrad.ops", "minigrad.check", "minigrad.checkpointing"]),
    ("models", ["minigrad.nn", "minigrad.optim", "minigrad.data", "minigrad.datasets"]),
    ("engines beside eager, traces", ["minigrad.tape", "minigrad.aot", "minigrad.trace"]),
    ("public API, exercises", ["minigrad", "minigrad.exercises"]),
    ("widgets", ["minigrad.widgets"]),
]


class Import(NamedTuple):
    source: str        # the importing module
    target: str        # the imported module (a name imported from a module counts as the module)
    line: int
    in_function: bool  # inside a function body: runs when called, not when imported
    name: str = ""     # the name imported from target ("" for the module itself)

    def __str__(self):
        where = "function-level" if self.in_function else "module-level"
        return f"{self.source} -> {self.target} ({where}, line {self.line})"


def module_names(package_dir: Path = PACKAGE_DIR) -> dict:
    """Dotted module name -> source path, for every .py file of the package."""
    names = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def imports_of(module: str, path: Path, modules: dict) -> list:
    """The package-internal imports one module makes, each resolved to a module of the package."""
    is_package = path.name == "__init__.py"
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                       ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    target = _longest_module(alias.name, modules)
                    if target:
                        found.append(Import(module, target, child.lineno, in_function))
            elif isinstance(child, ast.ImportFrom):
                base = _resolve(module, is_package, child.level, child.module)
                for alias in child.names:
                    is_module = f"{base}.{alias.name}" in modules
                    target = f"{base}.{alias.name}" if is_module else _longest_module(base, modules)
                    if target:
                        found.append(Import(module, target, child.lineno, in_function,
                                            "" if is_module else alias.name))
            visit(child, nested)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), False)
    return found


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    if level == 0:
        return name or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    base = package[:len(package) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _longest_module(name: str, modules: dict) -> str | None:
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return None


def layer_of(module: str) -> int | None:
    best, best_len = None, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            inside = module.startswith(prefix + ".") and "." in prefix   # (the root: only itself)
            if (module == prefix or inside) and len(prefix) > best_len:
                best, best_len = index, len(prefix)
    return best


def all_imports(package_dir: Path = PACKAGE_DIR) -> list:
    """Every import of the package, one per (source, target, level), at its first line."""
    modules, seen = module_names(package_dir), {}
    for module, path in modules.items():
        for imp in imports_of(module, path, modules):
            if imp.target != imp.source:
                seen.setdefault((imp.source, imp.target, imp.in_function), imp)
    return list(seen.values())


def find_cycle(edges) -> list | None:
    """One cycle of the directed graph (as the list of its imports), or None."""
    graph = {}
    for edge in edges:
        graph.setdefault(edge.source, []).append(edge)
    state, stack = {}, []   # state: 1 on the current path, 2 done

    for start in sorted(graph):
        if state.get(start):
            continue
        state[start] = 1
        stack = [(start, iter(graph.get(start, [])), None)]
        while stack:
            node, children, via = stack[-1]
            edge = next(children, None)
            if edge is None:
                state[node] = 2
                stack.pop()
                continue
            if state.get(edge.target) == 1:   # back to a module on the path: a cycle
                path = [entry[2] for entry in stack[1:]] + [edge]
                first = next(i for i, e in enumerate(path) if e.source == edge.target)
                return path[first:]
            if not state.get(edge.target):
                state[edge.target] = 1
                stack.append((edge.target, iter(graph.get(edge.target, [])), edge))
    return None


# -- the graph reader itself, on a small made-up package --------------------------------------
def test_reader_resolves_relative_imports_and_finds_a_cycle(tmp_path):
    pkg = tmp_path / "minigrad"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .a import f\n")
    (pkg / "a.py").write_text("from .sub import b\n\ndef f():\n    from . import c\n")
    (pkg / "c.py").write_text("import numpy\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("from ..a import f\nfrom .. import c\n")
    imports = all_imports(pkg)
    edges = {(e.source, e.target, e.in_function) for e in imports}
    assert edges == {("minigrad", "minigrad.a", False), ("minigrad.a", "minigrad.sub.b", False),
                     ("minigrad.a", "minigrad.c", True), ("minigrad.sub.b", "minigrad.a", False),
                     ("minigrad.sub.b", "minigrad.c", False)}
    cycle = find_cycle(e for e in imports if not e.in_function)
    assert {(e.source, e.target) for e in cycle} == {("minigrad.a", "minigrad.sub.b"),
                                                     ("minigrad.sub.b", "minigrad.a")}
    assert find_cycle([e for e in imports if e.source != "minigrad.sub.b"]) is None


# -- the package ---------------------------------------------------------------------------------
def test_no_cycle_of_module_level_imports():
    cycle = find_cycle([e for e in all_imports() if not e.in_function])
    assert cycle is None, ("a cycle of module-level imports: " + "; ".join(map(str, cycle))
                           + ". Fix: move what both need into a module below both.")


def test_no_cycle_even_through_function_level_imports():
    """A function-level import that closes a cycle only hides it (and runs on every call)."""
    cycle = find_cycle(all_imports())
    assert cycle is None, ("a cycle closed by a function-level import: "
                           + "; ".join(map(str, cycle))
                           + ". Fix: move what both need into a module below both.")


def test_every_module_has_a_layer():
    unplaced = [m for m in module_names() if layer_of(m) is None]
    assert not unplaced, f"modules in no layer: {unplaced}. Fix: add them to LAYERS in this test."


@pytest.mark.parametrize("in_function", [False, True], ids=["module-level", "function-level"])
def test_no_layer_imports_a_layer_above_it(in_function):
    upward = [f"{e}: layer {LAYERS[layer_of(e.source)][0]!r} imports layer "
              f"{LAYERS[layer_of(e.target)][0]!r}"
              for e in all_imports()
              if e.in_function == in_function and layer_of(e.target) > layer_of(e.source)]
    assert not upward, "imports that go up the layers:\n" + "\n".join(upward)


# Private names a module still takes from another, each with the reason it is not public yet.
PRIVATE_IMPORTS_LEFT: set = set()   # (source, module, name) still to make public: none


def test_no_module_imports_a_private_name_of_another():
    """A name with a leading underscore is its module's own; one another module needs is public."""
    modules = module_names()
    private = {(imp.source, imp.target, imp.name)
               for module, path in modules.items() for imp in imports_of(module, path, modules)
               if imp.name.startswith("_") and not imp.name.startswith("__")}
    assert private - PRIVATE_IMPORTS_LEFT == set(), (
        "private names imported from another module (source, module, name): "
        f"{sorted(private - PRIVATE_IMPORTS_LEFT)}. Fix: make the name public or keep it inside.")
    assert PRIVATE_IMPORTS_LEFT - private == set(), (
        f"no longer imported, remove from PRIVATE_IMPORTS_LEFT: {PRIVATE_IMPORTS_LEFT - private}")


def test_the_engine_never_imports_widgets():
    offending = [str(e) for e in all_imports() if e.target.startswith("minigrad.widgets")
                 and not e.source.startswith("minigrad.widgets")]
    assert not offending, offending
