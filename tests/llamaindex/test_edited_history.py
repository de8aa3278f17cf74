"""ArsMemory on an edited chat store (R51): the core's anchor check, not the
adapter's, decides whether the summary still applies; a corrupt stored record
is skipped with a warning instead of breaking every ``get``."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.storage.chat_store import SimpleChatStore
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

from ars_core import FsspecBackend, read_archive
from ars_core.testing import FakeSummarizer
from ars_llamaindex import ArsMemory
from tests.llamaindex.helpers import dumps, prose

pytestmark = pytest.mark.spec("R51")

KEY = "conv"


def conversation(turns: int) -> list[ChatMessage]:
    out: list[ChatMessage] = []
    for i in range(turns):
        out.append(ChatMessage(role="user", content=prose(130, tag=f"q{i}")))
        out.append(ChatMessage(role="assistant", content=f"answer {i}"))
    return out


def make_store(kind: str, tmp_path: Path) -> Any:
    if kind == "simple":
        return SimpleChatStore()
    return SQLAlchemyChatStore(
        table_name="ars_edit", async_database_uri=f"sqlite+aiosqlite:///{tmp_path / 'chat.db'}"
    )


def memory_for(store: Any, file_backend: FsspecBackend, keep: int = 4) -> ArsMemory:
    return ArsMemory.from_defaults(
        chat_store=store,
        chat_store_key=KEY,
        file_backend=file_backend,
        summarizer=FakeSummarizer("SUMMARY"),
        summary_threshold=1,
        summary_keep_messages=keep,
    )


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("store_kind", ["simple", "sqlalchemy"])
def test_removing_the_oldest_messages_skips_no_unsummarized_message(
    store_kind: str, mode: str, tmp_path: Path, file_backend: FsspecBackend
) -> None:
    """After L2 the 4 oldest stored messages are removed and a question added:
    ``get`` returns the summary and every message it does not cover, and the
    re-anchored event is appended to the log."""
    history = conversation(8)
    question = ChatMessage(role="user", content="NEW QUESTION")

    def run_sync() -> tuple[Any, list[ChatMessage], Any, int]:
        memory = memory_for(make_store(store_kind, tmp_path), file_backend)
        memory.set(history)
        memory.get()
        event = memory.get_event()
        assert event is not None
        memory.set([*history[4:], question])
        records = len(memory._store.get(memory.event_key))
        return event, memory.get(), memory.get_event(), records

    async def run_async() -> tuple[Any, list[ChatMessage], Any, int]:
        memory = memory_for(make_store(store_kind, tmp_path), file_backend)
        await memory.aset(history)
        await memory.aget()
        event = await memory.aget_event()
        assert event is not None
        await memory.aset([*history[4:], question])
        records = len(await memory._store.aget(memory.event_key))
        return event, await memory.aget(), await memory.aget_event(), records

    event, view, moved, records = run_sync() if mode == "sync" else asyncio.run(run_async())
    assert view[0].content == event.summary_message.text
    assert dumps(view[1:]) == dumps([*history[event.cutoff :], question])
    assert moved is not None and moved.cutoff == event.cutoff - 4
    assert moved.summary_message == event.summary_message
    assert records == 1  # the re-anchored event is appended by the get() after the edit


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    "record",
    [
        {"ars_event": {"event": {"cutoff": "x", "summary_message": {"role": "user"}}}},
        {"ars_event": {"event": {"summary_message": {"role": "robot", "content": "s"}}}},
        {"ars_event": "not a record"},
    ],
    ids=["bad-cutoff", "bad-message", "not-a-mapping"],
)
def test_a_corrupt_stored_record_is_ignored_with_a_warning(
    mode: str,
    record: dict[str, Any],
    file_backend: FsspecBackend,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A record that cannot be read is skipped (logged), never raised from ``get``."""
    store = SimpleChatStore()
    memory = ArsMemory.from_defaults(
        chat_store=store, chat_store_key=KEY, file_backend=file_backend, summary_threshold=50
    )
    history = conversation(2)
    store.set_messages(KEY, history)
    store.add_message(
        memory.event_key, ChatMessage(role="system", content="?", additional_kwargs=record)
    )
    with caplog.at_level(logging.WARNING, logger="ars.llamaindex"):
        view = memory.get() if mode == "sync" else asyncio.run(memory.aget())
    assert dumps(view) == dumps(history)
    assert "ignoring a corrupt summarization record" in caplog.text


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("store_kind", ["simple", "sqlalchemy"])
def test_deleting_the_oldest_rows_never_anchors_on_a_look_alike_pair(
    store_kind: str,
    mode: str,
    tmp_path: Path,
    file_backend: FsspecBackend,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """LlamaIndex messages carry no ids: ARS knows them by content hash. An L2 round
    cuts between ``A"ok"`` and ``U"continue"``; the chat goes on with ``U"IMPORTANT:
    use postgres", A"ok", U"continue"``, a look-alike of that pair; then the 3 oldest
    stored messages are deleted, which puts the look-alike pair where the cutoff was.
    The summary is not moved onto it: it is dropped with a warning, and "use
    postgres" is in the next view or in the archive of the round that summarizes it
    again, never lost."""

    def said(*turns: tuple[str, str]) -> list[ChatMessage]:
        return [ChatMessage(role=role, content=text) for role, text in turns]

    history = [*conversation(8), *said(("assistant", "ok"), ("user", "continue"))]
    goes_on = said(("user", "IMPORTANT: use postgres"), ("assistant", "ok"), ("user", "continue"))
    later = said(("assistant", "sure"), ("user", "which database?"))
    store = make_store(store_kind, tmp_path)
    memory = memory_for(store, file_backend, keep=1)  # the newest message kept: cut before it

    def delete_oldest() -> None:
        if store_kind == "simple":
            for _ in range(3):
                store.delete_message(KEY, 0)
        else:
            memory._store._loop.run(store.delete_oldest_messages(KEY, 3))

    def run_sync() -> tuple[Any, list[ChatMessage], Any]:
        memory.set(history)
        memory.get()
        event = memory.get_event()
        memory.put_messages(goes_on)
        delete_oldest()
        memory.put_messages(later)
        return event, memory.get(), memory.get_event()

    async def run_async() -> tuple[Any, list[ChatMessage], Any]:
        await memory.aset(history)
        await memory.aget()
        event = await memory.aget_event()
        await memory.aput_messages(goes_on)
        if store_kind == "simple":
            delete_oldest()
        else:
            await store.delete_oldest_messages(KEY, 3)
        await memory.aput_messages(later)
        return event, await memory.aget(), await memory.aget_event()

    with caplog.at_level(logging.WARNING, logger="ars"):
        event, view, after = run_sync() if mode == "sync" else asyncio.run(run_async())
    assert event is not None and [m.content for m in history[event.cutoff - 1 :]] == [
        "ok",
        "continue",
    ]
    assert "no longer matches" in caplog.text
    texts = [m.content or "" for m in view]
    if "IMPORTANT: use postgres" not in texts:  # summarized again: then it is in the archive
        assert after is not None and after.file_path is not None
        archived = read_archive(file_backend, after.file_path)
        assert "IMPORTANT: use postgres" in [m.text for m in archived]
    assert texts[-1] == "which database?"


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    "replaced",
    [5, [{"index": "x"}], [{"index": 3}], ["item"], {"index": 1}, [{"index": True, "sha": "s"}]],
    ids=["int", "bad-index", "no-sha", "not-an-object", "a-mapping", "bool-index"],
)
def test_a_corrupt_replaced_field_breaks_neither_get_nor_the_next_round(
    mode: str, replaced: Any, file_backend: FsspecBackend, caplog: pytest.LogCaptureFixture
) -> None:
    """The stored record's ``replaced`` (the tail messages sent trimmed) is corrupt:
    ``get`` still sends the summary and every kept message (the stored form), and the
    next L2 round writes a new record whose ``replaced`` is a clean list."""
    store = SimpleChatStore()
    memory = memory_for(store, file_backend)
    history = conversation(8)
    more = conversation(20)[16:]

    def corrupt() -> None:
        records = store.get_messages(memory.event_key)
        record = records[-1].additional_kwargs["ars_event"]
        record["replaced"] = replaced
        store.set_messages(memory.event_key, records)

    def run_sync() -> tuple[Any, list[ChatMessage], Any]:
        memory.set(history)
        memory.get()
        event = memory.get_event()
        corrupt()
        view = memory.get()
        memory.put_messages(more)
        memory.get()
        return event, view, memory.get_event()

    async def run_async() -> tuple[Any, list[ChatMessage], Any]:
        await memory.aset(history)
        await memory.aget()
        event = await memory.aget_event()
        corrupt()
        view = await memory.aget()
        await memory.aput_messages(more)
        await memory.aget()
        return event, view, await memory.aget_event()

    with caplog.at_level(logging.WARNING, logger="ars.llamaindex"):
        event, view, after = run_sync() if mode == "sync" else asyncio.run(run_async())
    assert event is not None
    assert view[0].content == event.summary_message.text
    assert dumps(view[1:]) == dumps(history[event.cutoff :])
    assert "ignoring" in caplog.text and "trimmed" in caplog.text
    assert after is not None and after.cutoff > event.cutoff
    newest = store.get_messages(memory.event_key)[-1].additional_kwargs["ars_event"]
    assert newest["replaced"] == []
