"""Shared pytest fixtures.

Session-scoped servers (see ``tests/servers.py``):

- ``postgres_url``: a throwaway PostgreSQL cluster on 127.0.0.1,
  ``postgresql://postgres@127.0.0.1:<port>/postgres`` (trust auth).
- ``s3_endpoint``: an in-process moto S3 server on 127.0.0.1 (an
  :class:`servers.S3Server`: ``endpoint_url``, ``create_bucket()``,
  ``storage_options(bucket)``).
- ``trajectories_dir``: the 104 recorded runs beside the repository,
  ``../shared/data/trajectories`` (not part of a clone; see :func:`shared_data_missing`).
- ``llama_server``: llama-cpp-python's OpenAI-compatible server on 127.0.0.1
  serving SmolLM2-135M-Instruct (a :class:`servers.LlamaServer`: ``base_url``,
  ``model``, ``n_ctx``), for the end-to-end tests under ``tests/e2e``.

Every ``@pytest.mark.spec(...)`` argument must be a requirement number of the
requirements (``docs/requirements.md``): a typo fails the collection.

When one of the servers cannot be provided the test is skipped locally but fails when
``CI=true``. The recorded runs beside the repository are the one exception a bare clone
may declare: with ``ARS_TEST_BARE_CLONE=1`` (``.ci/run`` sets it for its run of the suite
on a clone with no shared folder beside it) their tests skip even under ``CI=true``. Tests using ``postgres_url`` / ``s3_endpoint`` get the ``postgres`` /
``s3`` marker automatically, so ``pytest -m "not postgres and not s3"`` runs the rest.

``tests/e2e`` (a real model, LangGraph's server) is collected only when the mark
expression selects ``e2e`` (``nox -s e2e`` runs ``pytest -m e2e tests/e2e``): its
dependencies are the ``e2e`` extra, which ``nox -s tests`` does not install.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from tests.servers import (
    LlamaServer,
    PostgresCluster,
    S3Server,
    ServerUnavailable,
    in_ci,
    unavailable,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
TRAJECTORIES_DIR = REPO_ROOT.parent / "shared/data/trajectories"
SPEC_PATH = REPO_ROOT / "docs/requirements.md"

E2E_DIR = Path(__file__).resolve().parent / "e2e"

_AUTO_MARKERS = {"postgres_url": "postgres", "s3_endpoint": "s3", "llama_server": "e2e"}


@pytest.fixture(autouse=True, scope="session")
def _ars_files_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """ARS's default file folder (``ARS_FILES_DIR``) is a temporary folder for the whole
    session, subprocesses included: no test writes ``.ars`` into the repository."""
    folder = tmp_path_factory.mktemp("ars-files")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ARS_FILES_DIR", str(folder))
        yield folder


SOAK_DIR = Path(__file__).resolve().parent / "soak"


def _selects(config: pytest.Config, marker: str) -> bool:
    expr = " ".join(str(config.getoption("markexpr") or "").split())
    return marker in expr and f"not {marker}" not in expr


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Leave ``tests/e2e`` and ``tests/soak`` out unless ``-m`` selects their marker
    (``nox -s e2e`` and ``nox -s soak``)."""
    for directory, marker in ((E2E_DIR, "e2e"), (SOAK_DIR, "soak")):
        if not _selects(config, marker) and collection_path.is_relative_to(directory):
            return True
    return None


def spec_requirements(path: Path = SPEC_PATH) -> set[str]:
    """The requirement numbers ``docs/requirements.md`` defines (its ``- R<n>.`` lines)."""
    return set(re.findall(r"^- (R\d+)\.", path.read_text(encoding="utf-8"), re.MULTILINE))


def check_spec_marker(item: pytest.Item, known: set[str] | None) -> None:
    """Raise :class:`pytest.UsageError` unless every ``spec`` marker of ``item``
    names requirement numbers (of ``known``, when the requirements are readable)."""
    for mark in item.iter_markers("spec"):
        bad = [a for a in mark.args if not (isinstance(a, str) and re.fullmatch(r"R\d+", a))]
        if known is not None:
            bad += [a for a in mark.args if isinstance(a, str) and a not in known and a not in bad]
        if not mark.args or bad or mark.kwargs:
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.spec takes requirement numbers of "
                "docs/requirements.md "
                f"(e.g. spec('R20', 'R24')); invalid: {bad or dict(mark.kwargs) or 'no argument'}"
            )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    known = spec_requirements() if SPEC_PATH.is_file() else None
    for item in items:
        fixturenames = getattr(item, "fixturenames", ())
        for fixture, marker in _AUTO_MARKERS.items():
            if fixture in fixturenames:
                item.add_marker(marker)
        check_spec_marker(item, known)


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """Async tests (``@pytest.mark.anyio``) run on asyncio."""
    return "asyncio"


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """URL of a throwaway PostgreSQL cluster, shared by the whole session."""
    try:
        cluster = PostgresCluster()
    except ServerUnavailable as exc:
        unavailable(str(exc))
    try:
        yield cluster.start()
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[S3Server]:
    """An in-process moto S3 server, shared by the whole session."""
    try:
        server = S3Server()
    except ServerUnavailable as exc:
        unavailable(str(exc))
    with server.running():
        yield server


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LlamaServer]:
    """A real model behind a real OpenAI-compatible HTTP API, shared by the whole session."""
    try:
        server = LlamaServer().start()
    except ServerUnavailable as exc:
        unavailable(str(exc))
    try:
        yield server
    finally:
        server.stop()


def shared_data_missing(reason: str) -> NoReturn:
    """Skip a test whose data sits beside the repository, not in it. Under ``CI=true`` it
    fails unless the run declares itself a bare clone (``ARS_TEST_BARE_CLONE=1``): CI's main
    run has the data and must not lose those tests silently."""
    if in_ci() and os.environ.get("ARS_TEST_BARE_CLONE", "") != "1":
        pytest.fail(
            f"{reason} (CI=true: this must not be skipped; a run on a bare clone sets "
            "ARS_TEST_BARE_CLONE=1)",
            pytrace=False,
        )
    pytest.skip(f"{reason} (a bare clone: the recorded runs sit beside the repository)")


@pytest.fixture(scope="session")
def trajectories_dir() -> Path:
    """The 104 recorded runs beside the repository (``../shared/data/trajectories``)."""
    if not TRAJECTORIES_DIR.is_dir():
        shared_data_missing(f"recorded runs not found at {TRAJECTORIES_DIR}")
    return TRAJECTORIES_DIR
