"""Several ``ArsMemory`` objects on one ``SQLAlchemyChatStore`` (the documented
shape: one store, a memory per conversation), and rows changed behind a running
memory's back, on SQLite and PostgreSQL, sync and async."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore
from sqlalchemy import select, update

from ars_llamaindex import ArsMemory
from tests.llamaindex.helpers import dumps

MODES = pytest.mark.parametrize("mode", ["sync", "async"])
DATABASES = pytest.mark.parametrize("database", ["sqlite", "postgres"])


def store_on(database: str, tmp_path: Path, request: pytest.FixtureRequest) -> SQLAlchemyChatStore:
    table = f"ars_one_{uuid.uuid4().hex[:8]}"
    if database == "sqlite":
        uri = f"sqlite+aiosqlite:///{tmp_path / 'chat.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
        uri = url.replace("postgresql://", "postgresql+asyncpg://", 1)
    return SQLAlchemyChatStore(table_name=table, async_database_uri=uri)


def memory(store: SQLAlchemyChatStore, key: str) -> ArsMemory:
    return ArsMemory.from_defaults(chat_store=store, chat_store_key=key, summary_threshold=1000)


def chat(tag: str, n: int) -> list[ChatMessage]:
    roles = ("user", "assistant")
    return [ChatMessage(role=roles[i % 2], content=f"{tag} message {i}") for i in range(n)]


@MODES
@DATABASES
@pytest.mark.spec("R1", "R56")
def test_two_memories_on_one_store_both_work(
    database: str, mode: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Alice's and Bob's memories share one store: each one's calls work and see
    only its own conversation (the second memory's sync calls failed on PostgreSQL
    with "attached to a different loop": one loop thread per memory, not per store)."""
    store = store_on(database, tmp_path, request)
    alice, bob = memory(store, "alice"), memory(store, "bob")
    a, b = chat("alice", 6), chat("bob", 4)

    def run_sync() -> tuple[list[ChatMessage], ...]:
        alice.put_messages(a[:3])
        bob.put_messages(b[:2])
        alice.put_messages(a[3:])
        bob.put_messages(b[2:])
        return alice.get(), bob.get(), alice.get_all(), bob.get_all()

    async def run_async() -> tuple[list[ChatMessage], ...]:
        await alice.aput_messages(a[:3])
        await bob.aput_messages(b[:2])
        await alice.aput_messages(a[3:])
        await bob.aput_messages(b[2:])
        return await alice.aget(), await bob.aget(), await alice.aget_all(), await bob.aget_all()

    views = run_sync() if mode == "sync" else asyncio.run(run_async())
    assert [dumps(v) for v in views] == [dumps(a), dumps(b), dumps(a), dumps(b)]


@MODES
@DATABASES
@pytest.mark.spec("R1", "R51")
def test_a_row_redacted_in_place_reaches_a_running_memorys_view(
    database: str, mode: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A row's data is rewritten in place behind the memory's back (``UPDATE ...
    SET data``: same id, timestamp and count, so the row-id check alone sees
    nothing): the next view holds the redacted text, and so do the views after it."""
    store = store_on(database, tmp_path, request)
    mem = memory(store, "conv")
    history = chat("conv", 6)
    history[3] = ChatMessage(role="assistant", content="the password is hunter2")
    redacted = ChatMessage(role="assistant", content="the password is [REDACTED]")

    async def redact() -> None:
        factory, table = await store._initialize()
        async with factory() as session:
            row = (
                await session.execute(
                    select(table.c.id)
                    .where(table.c.key == "conv")
                    .order_by(table.c.timestamp, table.c.id)
                    .offset(3)
                    .limit(1)
                )
            ).scalar_one()
            await session.execute(
                update(table).where(table.c.id == row).values(data=redacted.model_dump(mode="json"))
            )
            await session.commit()

    def run_sync() -> tuple[list[ChatMessage], list[ChatMessage]]:
        mem.put_messages(history)
        assert dumps(mem.get()) == dumps(history)
        mem._store._loop.run(redact())
        view = mem.get()
        mem.put_messages(chat("more", 2))
        return view, mem.get()

    async def run_async() -> tuple[list[ChatMessage], list[ChatMessage]]:
        await mem.aput_messages(history)
        assert dumps(await mem.aget()) == dumps(history)
        await redact()
        view = await mem.aget()
        await mem.aput_messages(chat("more", 2))
        return view, await mem.aget()

    view, later = run_sync() if mode == "sync" else asyncio.run(run_async())
    expected = [*history[:3], redacted, *history[4:]]
    assert dumps(view) == dumps(expected)
    assert "hunter2" not in json.dumps(dumps(later))
    assert dumps(later) == dumps([*expected, *chat("more", 2)])
