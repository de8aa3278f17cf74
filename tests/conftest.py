"""Shared pytest fixtures.

Session-scoped servers (see ``tests/servers.py``):

- ``postgres_url``: a throwaway PostgreSQL cluster on 127.0.0.1,
  ``postgresql://postgres@127.0.0.1:<port>/postgres`` (trust auth).
- ``s3_endpoint``: an in-process moto S3 server on 127.0.0.1 (an
  :class:`servers.S3Server`: ``endpoint_url``, ``create_bucket()``,
  ``storage_options(bucket)``).
- ``trajectories_dir``: the shared sample trajectories, ``../shared/data/trajectories``.

When one of them cannot be provided the test is skipped locally but fails when
``CI=true``. Tests using ``postgres_url`` / ``s3_endpoint`` get the ``postgres`` /
``s3`` marker automatically, so ``pytest -m "not postgres and not s3"`` runs the rest.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import PostgresCluster, S3Server, ServerUnavailable, unavailable

REPO_ROOT = Path(__file__).resolve().parents[1]
TRAJECTORIES_DIR = REPO_ROOT.parent / "shared/data/trajectories"

_AUTO_MARKERS = {"postgres_url": "postgres", "s3_endpoint": "s3"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixturenames = getattr(item, "fixturenames", ())
        for fixture, marker in _AUTO_MARKERS.items():
            if fixture in fixturenames:
                item.add_marker(marker)


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
def trajectories_dir() -> Path:
    """The shared sample trajectories directory (outside the repository)."""
    if not TRAJECTORIES_DIR.is_dir():
        unavailable(f"sample trajectories not found at {TRAJECTORIES_DIR}")
    return TRAJECTORIES_DIR
