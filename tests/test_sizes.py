"""No module of the packages is over 600 lines and no function over 60: a module
or a function that grows past them is split by what it does (see
docs/architecture.md), not left to grow."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ars_core", "ars_langchain", "ars_llamaindex")
MODULE_LINES = 600
FUNCTION_LINES = 60


def _sources() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def test_the_packages_have_sources() -> None:
    assert len(_sources()) > 50  # the oracle below reads real files


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_is_over_600_lines(package: str) -> None:
    long = {
        p.relative_to(ROOT).as_posix(): n
        for p in _sources()
        if p.relative_to(ROOT).parts[0] == package
        and (n := len(p.read_text(encoding="utf-8").splitlines())) > MODULE_LINES
    }
    assert long == {}


@pytest.mark.parametrize("package", PACKAGES)
def test_no_function_is_over_60_lines(package: str) -> None:
    """Counted from ``def`` to the function's last line (docstring included,
    decorators not)."""
    long = {}
    for path in _sources():
        if path.relative_to(ROOT).parts[0] != package:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT).as_posix()}:{node.lineno} {node.name}"] = lines
    assert long == {}
