"""Test sessions for ARS.

    nox -s tests                 # the full test suite (README / CI command)
    nox -s tests -- -k r12 -x    # arguments after ``--`` go to pytest
    nox -s lint typecheck
    nox -s benchmarks -- --help

Virtualenvs under ``.nox/`` are reused between runs; ``--no-reuse-existing-virtualenvs``
rebuilds them, ``-R`` skips reinstalling.
"""

from __future__ import annotations

from pathlib import Path

import nox

PYTHON = "3.11"
ROOT = Path(__file__).resolve().parent

nox.options.default_venv_backend = "virtualenv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["tests", "lint", "typecheck"]


def _install_project(session: nox.Session) -> None:
    session.install("-e", ".[all,dev]")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Run the test suite (pytest); posargs are passed through."""
    _install_project(session)
    session.run("pytest", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Lint with ruff."""
    session.install("ruff")
    session.run("ruff", "check", *(session.posargs or ["."]))


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """Type-check the three packages with mypy --strict (configured in pyproject.toml)."""
    _install_project(session)
    session.run("mypy", *session.posargs)


@nox.session(python=PYTHON)
def benchmarks(session: nox.Session) -> None:
    """Run ``benchmarks/run.py`` if it exists; posargs are passed through."""
    script = ROOT / "benchmarks" / "run.py"
    if not script.is_file():
        session.skip("benchmarks/run.py does not exist yet")
    _install_project(session)
    session.run("python", str(script), *session.posargs)
