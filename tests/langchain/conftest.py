"""Fixtures for the LangChain adapter tests: real checkpointers.

``saver`` is parametrized over InMemorySaver, SqliteSaver (a file in tmp_path)
and PostgresSaver (the session's throwaway cluster, ``postgres_url``). Async
tests build their async twins with :func:`async_saver`.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

SAVERS = ["memory", "sqlite", "postgres"]


@pytest.fixture(scope="session")
def pg_setup(postgres_url: str) -> str:
    """The PostgreSQL URL with the checkpoint tables created (once a session)."""
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(postgres_url) as saver:
        saver.setup()
    return postgres_url


@contextlib.contextmanager
def make_saver(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    if kind == "memory":
        yield InMemorySaver()
    elif kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(str(tmp_path / "checkpoints.sqlite")) as saver:
            yield saver
    elif kind == "postgres":
        from langgraph.checkpoint.postgres import PostgresSaver

        url = request.getfixturevalue("pg_setup")
        with PostgresSaver.from_conn_string(url) as saver:
            yield saver
    else:  # pragma: no cover
        raise ValueError(kind)


@pytest.fixture(params=SAVERS)
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A real checkpointer (memory / sqlite / postgres)."""
    with make_saver(request.param, tmp_path, request) as s:
        yield s


@contextlib.asynccontextmanager
async def async_saver(kind: str, tmp_path: Path, url: str | None = None) -> AsyncIterator[Any]:
    if kind == "memory":
        yield InMemorySaver()
    elif kind == "sqlite":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "checkpoints.sqlite")) as s:
            yield s
    elif kind == "postgres":
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        assert url is not None
        async with AsyncPostgresSaver.from_conn_string(url) as s:
            yield s
    else:  # pragma: no cover
        raise ValueError(kind)


@pytest.fixture
def thread_id() -> str:
    """A fresh thread id (the PostgreSQL database is shared by the session)."""
    return f"t-{uuid.uuid4().hex[:10]}"
