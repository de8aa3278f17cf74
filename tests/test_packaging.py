"""The distribution's metadata and contents, read from ``pyproject.toml`` and the tree.

``nox -s wheel`` (run by ``.ci/run``) builds the sdist and the wheel, checks what the sdist
holds, installs the wheel alone in a fresh virtualenv and runs ``ars replay`` outside the
tree; these tests keep the declarations it builds from honest without building.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
META = PROJECT["project"]


def nox_constant(name: str) -> object:
    """A module-level constant of ``noxfile.py`` (read without importing nox)."""
    tree = ast.parse((REPO_ROOT / "noxfile.py").read_text(encoding="utf-8"))
    for node in tree.body:
        targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            assert node.value is not None
            return ast.literal_eval(node.value)
    raise AssertionError(f"noxfile.py defines no {name}")


def test_licence_readme_and_authors_are_declared() -> None:
    assert META["license"] == "MIT"
    assert META["license-files"] == ["LICENSE"]
    licence = (REPO_ROOT / "LICENSE").read_text(encoding="utf-8")
    assert licence.startswith("MIT License\n") and "The ARS maintainers" in licence
    assert META["readme"] == "README.md" and (REPO_ROOT / "README.md").is_file()
    assert META["authors"] and all(a["name"] for a in META["authors"])
    # PEP 639: a licence expression and a licence classifier together are refused by builders
    assert not [c for c in META["classifiers"] if c.startswith("License ::")]


def test_classifiers_name_exactly_the_python_versions_nox_tests() -> None:
    tested = nox_constant("PYTHON")
    versions = {tested} if isinstance(tested, str) else set(tested)  # type: ignore[arg-type]
    declared = {
        c.rsplit(" :: ", 1)[1]
        for c in META["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    }
    assert declared == versions
    assert META["requires-python"] == f">={min(versions, key=lambda v: int(v.split('.')[1]))}"


def test_project_urls_share_one_repository_address() -> None:
    urls = META["urls"]
    assert {"Homepage", "Documentation", "Source", "Issues"} <= set(urls)
    base = urls["Source"]
    assert base.startswith("https://") and all(u.startswith(base) for u in urls.values())


@pytest.mark.parametrize(
    "path",
    ["LICENSE", "README.md", "docs", "examples", "tests", "benchmarks", "noxfile.py"],
)
def test_the_sdist_carries_what_its_tests_docs_and_examples_need(path: str) -> None:
    """Each path the sdist includes exists, and ``nox -s wheel`` checks the built archive
    for one file of each (``SDIST_MUST_HOLD``)."""
    assert path in PROJECT["tool"]["hatch"]["build"]["targets"]["sdist"]["include"]
    assert (REPO_ROOT / path).exists()
    must_hold = nox_constant("SDIST_MUST_HOLD")
    assert isinstance(must_hold, tuple)
    assert any(name == path or name.startswith(path + "/") for name in must_hold)
    assert all((REPO_ROOT / name).is_file() for name in must_hold)


def test_the_shipped_sample_runs_carry_their_licence() -> None:
    """The sample runs in the wheel come from an MIT-licensed project: its notice ships
    beside them."""
    data = REPO_ROOT / "ars_core" / "data"
    notice = (data / "README.md").read_text(encoding="utf-8")
    assert "Copyright (c) 2025 Kilian A. Lieret and Carlos E. Jimenez" in notice
    for run in sorted(data.glob("*.jsonl.gz")):
        assert f"`{run.name}`" in notice
