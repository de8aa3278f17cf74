"""The adapters use the core's public interface only: ``ars_core`` (the package
face) and ``ars_core.adapter``, never a private core module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ars_core
import ars_core.adapter

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {"ars_core", "ars_core.adapter", "ars_core.testing"}


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module]
    return []


def _core_imports(package: str) -> list[tuple[str, str]]:
    """``(file name, module)`` of every import of an ``ars_core`` module in ``package``."""
    return [
        (path.name, name)
        for path in sorted((ROOT / package).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        for name in _imported(node)
        if name.split(".")[0] == "ars_core"
    ]


@pytest.mark.parametrize("package", ["ars_langchain", "ars_llamaindex"])
def test_adapters_import_only_the_public_interface(package: str) -> None:
    imports = _core_imports(package)
    assert imports, package  # the oracle reads real imports
    assert [(f, m) for f, m in imports if m not in ALLOWED] == []
    # ars_core.testing is for the adapters' own testing twins only
    assert {f for f, m in imports if m == "ars_core.testing"} <= {"testing.py"}


def test_the_adapter_interface_is_public_and_whole() -> None:
    """Every name it lists exists, and none is private."""
    for name in ars_core.adapter.__all__:
        assert hasattr(ars_core.adapter, name), name
        assert not name.startswith("_"), name
    assert ars_core.adapter.CallOptions is ars_core.CallOptions


def test_compaction_uses_the_middlewares_public_methods_only() -> None:
    """``ars_langchain/compaction.py`` reaches the middleware through public members
    (its sessions, ``between_turns``, ``emit``) and imports it for typing only."""
    tree = ast.parse((ROOT / "ars_langchain" / "compaction.py").read_text(encoding="utf-8"))
    private = sorted(
        {
            node.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "middleware"
            and node.attr.startswith("_")
        }
    )
    used = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "middleware"
    }
    assert private == [] and used  # the oracle reads real attribute uses
    runtime_imports = [
        n.module
        for n in tree.body
        if isinstance(n, ast.ImportFrom) and n.level == 1 and n.module == "middleware"
    ]
    assert runtime_imports == []
