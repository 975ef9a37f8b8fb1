"""The type stubs (_zcio.pyi) and the extension module agree: every class,
function and method the stubs declare exists, and every public name of the
module and of its classes is declared."""

from __future__ import annotations

import ast
import os

import zcio
from zcio import _zcio


def stub_tree() -> ast.Module:
    path = os.path.join(os.path.dirname(zcio.__file__), "_zcio.pyi")
    with open(path) as f:
        return ast.parse(f.read())


def declared() -> tuple[set[str], dict[str, set[str]]]:
    top: set[str] = set()
    classes: dict[str, set[str]] = {}
    for node in stub_tree().body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            top.add(node.name)
        elif isinstance(node, ast.ClassDef):
            top.add(node.name)
            names = set()
            for n in node.body:
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(n.name)
                elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
                    names.add(n.target.id)
            classes[node.name] = names
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            top.add(node.target.id)
    return top, classes


def test_stub_names_exist_in_the_module():
    top, classes = declared()
    missing = [n for n in top if not n.startswith("_") and not hasattr(_zcio, n)]
    assert not missing, f"declared in _zcio.pyi but not in the module: {missing}"
    for cls, names in classes.items():
        if cls.startswith("_"):
            continue
        rt = getattr(_zcio, cls)
        # Dunders such as __buffer__ describe protocols (typing only).
        gone = [n for n in names if not n.startswith("__") and not hasattr(rt, n)]
        assert not gone, f"{cls}: declared but missing: {gone}"


def test_module_names_are_declared():
    top, classes = declared()
    undeclared = [n for n in dir(_zcio) if not n.startswith("_") and n not in top]
    assert not undeclared, f"in the module but not in _zcio.pyi: {undeclared}"
    for cls in classes:
        if cls.startswith("_"):
            continue
        rt = getattr(_zcio, cls)
        if not isinstance(rt, type):
            continue
        public = [n for n in vars(rt) if not n.startswith("_")]
        undeclared = [n for n in public if n not in classes[cls]]
        assert not undeclared, f"{cls}: not in _zcio.pyi: {undeclared}"
