"""Print ember's package dependency graph from the imports in packages/*/src; fail on a bad arrow.

    python3 tools/depgraph.py [--root REPO] [--dot]

The allowed arrows are design.md's "Packages and layering" table (ALLOWED below mirrors it:
change both together). Every `import` / `from ... import` in a package's sources is checked:
- a module-level import along an arrow the table does not allow is an error (core importing
  autograd: design.md says core never imports a sibling at import time);
- the same import inside a function (lazy, runs only when called) is printed as a warning and a
  dashed edge: allowed by "at import time", but prefer core's component registry (`require`),
  which also gives the one-sentence "pip install ember-X" error;
- a third-party package the table does not list (for the package or, transitively, for the ember
  packages it may import: numpy comes with core) is an error wherever it is imported (no wheel
  declares it: users would hit ModuleNotFoundError);
- an optional arrow (compiler -> devices) is allowed lazily or where an ImportError is handled.
Imports under `if TYPE_CHECKING:` are ignored. Standard-library modules are always allowed.
Known violations listed in tools/depgraph_baseline.txt (file, imported module, reason) are
printed as warnings instead: a tracked debt, to be removed, never a way to add new arrows.
Exit status 1 on any other violation.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
from dataclasses import dataclass

# Which package a module belongs to: longest prefix wins; other `ember.*` modules are core's.
MODULE_PACKAGE = {
    "ember_abi": "stable_abi",
    "ember": "core",
    "ember.autograd": "autograd",
    "ember.optim": "autograd",
    "ember.cuda": "devices",
    "ember.fx": "compiler",
    "ember.compiler": "compiler",
    "ember.export": "export",
    "ember.distributed": "distributed",
}

# Third-party top-level modules -> the distribution design.md names.
THIRD_PARTY = {
    "numpy": "numpy",
    "ml_dtypes": "ml-dtypes",
    "sympy": "sympy",
    "safetensors": "safetensors",
    "triton": "triton",
    "cuda": "cuda-bindings",
    "nvmath": "nvmath-python",
    "mpi4py": "mpi4py",
    "nccl": "nccl4py",
    "setuptools": "setuptools",
    "pybind11": "pybind11",
    "tensorboard": "tensorboard",
    "onnx": "onnx",
}

# design.md, "Packages and layering": package -> what it may import (packages and distributions).
ALLOWED = {
    "stable_abi": set(),
    "core": {"numpy", "ml-dtypes", "stable_abi"},
    "autograd": {"core"},
    "devices": {"core", "triton", "cuda-bindings", "nvmath-python"},
    "compiler": {"core", "autograd", "sympy"},
    "export": {"core", "compiler"},
    "distributed": {"core", "autograd", "mpi4py", "nccl4py"},
}
# Allowed only where the import may fail (try/except ImportError) or lazily (in a function).
# Beyond design.md's table (the wheels declare these as extras, and the import sits in the
# function that needs it): core's ember.utils.safetensors uses the safetensors package (issue 5
# asks for safetensors I/O in core), and ember.utils.tensorboard the tensorboard package's event
# writer (issue 17: SummaryWriter writes real event files), ember.onnx the onnx package's
# ModelProto builders and checker (issue 17: torch.onnx.export); ember_abi's extension-build helper uses setuptools and
# pybind11, which only someone building an extension needs.
OPTIONAL = {"compiler": {"devices"}, "core": {"safetensors", "tensorboard", "onnx"},
            "stable_abi": {"setuptools", "pybind11"}}

PACKAGES = list(ALLOWED)


def _effective(package: str) -> set[str]:
    """ALLOWED plus the third-party packages its allowed ember packages bring (numpy via core):
    the wheel's Requires-Dist guarantees they are installed."""
    out, todo = set(ALLOWED[package]), [p for p in ALLOWED[package] if p in ALLOWED]
    while todo:
        dep = todo.pop()
        for t in ALLOWED[dep]:
            if t not in out:
                out.add(t)
                if t in ALLOWED:
                    todo.append(t)
    return out


EFFECTIVE = {p: _effective(p) for p in PACKAGES}


@dataclass(frozen=True)
class Import:
    package: str  # importing package
    target: str  # imported package or distribution
    module: str  # imported module, as written (absolute)
    where: str  # file:line
    guarded: bool  # in a try/except ImportError, or in a function
    lazy: bool  # in a function


def owner(module: str) -> str | None:
    """The ember package or third-party distribution that provides `module`; None: stdlib."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        pkg = MODULE_PACKAGE.get(".".join(parts[:n]))
        if pkg:
            return pkg
    top = parts[0]
    if top in sys.stdlib_module_names or top == "__future__":
        return None
    return THIRD_PARTY.get(top, top)


class _Visitor(ast.NodeVisitor):
    def __init__(self, module: str, is_pkg: bool, path: str, package: str):
        self.module, self.is_pkg, self.path, self.package = module, is_pkg, path, package
        self.guard = 0
        self.depth = 0  # function nesting
        self.found: list[Import] = []

    def _add(self, name: str, node: ast.AST) -> None:
        target = owner(name)
        if target is None or target == self.package:
            return
        where = f"{self.path}:{node.lineno}"
        self.found.append(Import(self.package, target, name, where, self.guard > 0, self.depth > 0))

    def _guarded(self, node, handles: bool) -> None:
        self.guard += handles
        self.generic_visit(node)
        self.guard -= handles

    def visit_FunctionDef(self, node):
        self.depth += 1
        self._guarded(node, True)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Try(self, node):
        names = set()
        for h in node.handlers:
            for t in [h.type] if not isinstance(h.type, ast.Tuple) else h.type.elts:
                names.add(getattr(t, "id", getattr(t, "attr", None)))
        handles = bool({"ImportError", "ModuleNotFoundError", "Exception", None} & names)
        self.guard += handles
        for stmt in node.body:
            self.visit(stmt)
        self.guard -= handles
        for part in node.handlers + node.orelse + node.finalbody:
            self.visit(part)

    def visit_If(self, node):
        test = node.test
        if getattr(test, "id", None) == "TYPE_CHECKING" or getattr(test, "attr", None) == (
            "TYPE_CHECKING"
        ):
            for stmt in node.orelse:
                self.visit(stmt)
            return
        self.generic_visit(node)

    def visit_Import(self, node):
        for alias in node.names:
            self._add(alias.name, node)

    def visit_ImportFrom(self, node):
        if node.level:
            base = self.module.split(".")
            if not self.is_pkg:
                base = base[:-1]
            base = base[: len(base) - (node.level - 1)]
            name = ".".join(base + ([node.module] if node.module else []))
        else:
            name = node.module or ""
        if node.module is None or (node.level and not node.module):
            # `from . import x` / `from ember import autograd`: each name may be a module.
            for alias in node.names:
                self._add(f"{name}.{alias.name}", node)
        elif name in ("ember",):
            for alias in node.names:
                self._add(f"{name}.{alias.name}", node)
        else:
            self._add(name, node)


def scan(root: str) -> list[Import]:
    found: list[Import] = []
    for package in PACKAGES:
        src = os.path.join(root, "packages", package, "src")
        for dirpath, dirnames, filenames in os.walk(src):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for fn in sorted(filenames):
                if not fn.endswith(".py"):
                    continue
                path = os.path.join(dirpath, fn)
                rel = os.path.relpath(path, src)[: -len(".py")].split(os.sep)
                is_pkg = rel[-1] == "__init__"
                module = ".".join(rel[:-1] if is_pkg else rel)
                with open(path, encoding="utf-8") as f:
                    tree = ast.parse(f.read(), path)
                v = _Visitor(module, is_pkg, os.path.relpath(path, root), package)
                v.visit(tree)
                found += v.found
    return found


def read_baseline(path: str) -> set[tuple[str, str]]:
    known = set()
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.split("#", 1)[0].split()
                if len(line) >= 2:
                    known.add((line[0], line[1]))
    return known


def violations(imports: list[Import]) -> tuple[list[tuple[Import, str]], list[str]]:
    """(errors, warnings)."""
    errors, warnings = [], []
    for imp in imports:
        if imp.target in EFFECTIVE[imp.package]:
            continue
        if imp.target in OPTIONAL.get(imp.package, ()) and imp.guarded:
            continue
        arrow = f"{imp.where}: {imp.package} -> {imp.target} (import {imp.module})"
        if imp.target in OPTIONAL.get(imp.package, ()):
            why = "an optional dependency must be imported lazily or under try/except ImportError"
        elif imp.target in ALLOWED and imp.lazy:
            warnings.append(f"{arrow}: lazy import across the layering; prefer the registry")
            continue
        else:
            why = "design.md does not allow this arrow"
        errors.append((imp, f"{arrow}: {why}"))
    return errors, warnings


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default_root = os.environ.get("BUILD_WORKSPACE_DIRECTORY") or os.path.dirname(
        os.path.dirname(os.path.abspath(__file__))
    )
    ap.add_argument("--root", default=default_root)
    ap.add_argument("--dot", action="store_true", help="print Graphviz dot")
    ap.add_argument("--baseline", default=None, help="default: ROOT/tools/depgraph_baseline.txt")
    args = ap.parse_args(argv)
    imports = scan(args.root)
    # package -> target -> every import of it lazy/guarded?
    edges: dict[str, dict[str, bool]] = {p: {} for p in PACKAGES}
    for imp in imports:
        edges[imp.package][imp.target] = edges[imp.package].get(imp.target, True) and imp.guarded
    if args.dot:
        print("digraph ember {")
        for p in PACKAGES:
            for t, lazy in sorted(edges[p].items()):
                print(f'  "{p}" -> "{t}"' + (" [style=dashed];" if lazy else ";"))
        print("}")
    else:
        for p in PACKAGES:
            targets = [t + (" (lazy)" if lazy else "") for t, lazy in sorted(edges[p].items())]
            print(f"{p:12s} -> {', '.join(targets) or '(nothing)'}")
    baseline = read_baseline(
        args.baseline or os.path.join(args.root, "tools/depgraph_baseline.txt")
    )
    errors, used = [], set()
    found, warnings = violations(imports)
    for w in warnings:
        print("WARNING " + w, file=sys.stderr)
    for imp, message in found:
        key = (imp.where.rsplit(":", 1)[0], imp.module)
        if key in baseline:
            used.add(key)
            print("WARNING (known, tools/depgraph_baseline.txt) " + message, file=sys.stderr)
        else:
            errors.append(message)
    for path, module in sorted(baseline - used):
        print(f"WARNING stale baseline entry (fixed? remove it): {path} {module}", file=sys.stderr)
    for e in errors:
        print("ERROR " + e, file=sys.stderr)
    if errors:
        print(f"{len(errors)} import(s) break design.md's layering", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
