"""ArsMemory converts only what changed in the chat store: appended messages
once, an edited or removed message honoured exactly, a reset or shared store
followed; views never expose the stored objects."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.storage.chat_store import SimpleChatStore
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore
from sqlalchemy import select

import ars_llamaindex.history as history_module
import ars_llamaindex.store as store_module
from ars_core import Message
from ars_llamaindex import ArsFunctionAgent, ArsMemory
from ars_llamaindex.history import FRESH_TAIL, VIEW_TAIL
from ars_llamaindex.testing import ScriptedLLM
from tests.llamaindex.helpers import dumps, prose

KEY = "conv"


def chat(n: int, start: int = 0) -> list[ChatMessage]:
    return [
        ChatMessage(role="user" if i % 2 == 0 else "assistant", content=prose(12, tag=f"m{i}"))
        for i in range(start, start + n)
    ]


def make_store(kind: str, tmp_path: Path) -> Any:
    if kind == "simple":
        return SimpleChatStore()
    return SQLAlchemyChatStore(
        table_name="ars_inc", async_database_uri=f"sqlite+aiosqlite:///{tmp_path / 'chat.db'}"
    )


class Api:
    """One memory used through its sync or its async methods."""

    def __init__(self, memory: ArsMemory, mode: str) -> None:
        self.memory, self.mode = memory, mode

    async def _call(self, name: str, *args: Any) -> Any:
        if self.mode == "sync":
            return getattr(self.memory, name)(*args)
        method: Callable[..., Awaitable[Any]] = getattr(self.memory, "a" + name)
        return await method(*args)

    async def get(self) -> list[ChatMessage]:
        result: list[ChatMessage] = await self._call("get")
        return result

    async def put_messages(self, messages: list[ChatMessage]) -> None:
        await self._call("put_messages", messages)

    async def set(self, messages: list[ChatMessage]) -> None:
        await self._call("set", messages)

    async def reset(self) -> None:
        await self._call("reset")


def memory_on(store: Any) -> ArsMemory:
    return ArsMemory.from_defaults(chat_store=store, chat_store_key=KEY, summary_threshold=1000)


@pytest.fixture
def conversions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The text of every message the memory converts to a core message."""
    seen: list[str] = []
    real = history_module.to_core

    def spy(message: ChatMessage, **kwargs: Any) -> Message:
        seen.append(message.content or "")
        return real(message, **kwargs)

    monkeypatch.setattr(history_module, "to_core", spy)
    return seen


MODES = pytest.mark.parametrize("mode", ["sync", "async"])
STORES = pytest.mark.parametrize("store_kind", ["simple", "sqlalchemy"])


@MODES
@STORES
@pytest.mark.spec("R1")
def test_appended_messages_are_converted_once(
    store_kind: str, mode: str, tmp_path: Path, conversions: list[str]
) -> None:
    """Each ``get`` converts only the messages appended since the last one (none
    when nothing changed), and the view is still exactly what the store holds."""
    history = chat(30)

    async def scenario() -> None:
        api = Api(memory_on(make_store(store_kind, tmp_path)), mode)
        await api.put_messages(history[:20])
        assert dumps(await api.get()) == dumps(history[:20])
        assert len(conversions) == 20
        await api.put_messages(history[20:22])
        assert dumps(await api.get()) == dumps(history[:22])
        assert conversions[20:] == [m.content for m in history[20:22]]
        assert dumps(await api.get()) == dumps(history[:22])
        assert len(conversions) == 22  # nothing new, nothing converted
        for m in history[22:]:
            await api.put_messages([m])
            assert dumps(await api.get())[-1] == dumps([m])[0]
        assert conversions == [m.content for m in history]

    asyncio.run(scenario())


@MODES
@STORES
@pytest.mark.spec("R1", "R51")
def test_an_edited_message_in_the_middle_is_reconverted_and_reaches_the_view(
    store_kind: str, mode: str, tmp_path: Path, conversions: list[str]
) -> None:
    """Replacing a message in the middle of the stored chat converts that message
    alone and the view carries its new form; removing one converts nothing and
    the view no longer has it; both are exact, message for message."""
    history = chat(40)
    edited = ChatMessage(role="user", content="EDITED in the middle")

    async def scenario() -> None:
        api = Api(memory_on(make_store(store_kind, tmp_path)), mode)
        await api.set(history)
        await api.get()
        before = len(conversions)
        changed = [*history[:17], edited, *history[18:]]
        await api.set(changed)
        assert dumps(await api.get()) == dumps(changed)
        assert conversions[before:] == ["EDITED in the middle"]
        removed = [*changed[:5], *changed[6:]]
        await api.set(removed)
        assert dumps(await api.get()) == dumps(removed)
        assert len(conversions) == before + 1

    asyncio.run(scenario())


@pytest.mark.spec("R51")
def test_a_stored_message_edited_in_place_reaches_the_view() -> None:
    """A ``SimpleChatStore`` message changed in place (the same object) is seen:
    the first, middle and last stored messages are checked against ARS's copies
    every call, and a difference converts the history again."""
    store = SimpleChatStore()
    memory = memory_on(store)
    history = chat(30)
    memory.set(history)
    memory.get()
    for i in (0, 15, 29):
        store.get_messages(KEY)[i].blocks[0].text = f"changed in place {i}"  # type: ignore[union-attr]
        assert memory.get()[i].content == f"changed in place {i}"
    assert dumps(memory.get()) == dumps(store.get_messages(KEY))


@MODES
@STORES
@pytest.mark.spec("R1", "R51")
def test_a_reset_memory_starts_over(
    store_kind: str, mode: str, tmp_path: Path, conversions: list[str]
) -> None:
    """After ``reset`` the view holds only what is stored from then on, and
    those messages are converted anew (even when equal to earlier ones)."""
    history = chat(12)

    async def scenario() -> None:
        api = Api(memory_on(make_store(store_kind, tmp_path)), mode)
        await api.put_messages(history)
        await api.get()
        await api.reset()
        assert await api.get() == []
        await api.put_messages(history[:3])
        assert dumps(await api.get()) == dumps(history[:3])
        assert conversions[12:] == [m.content for m in history[:3]]

    asyncio.run(scenario())


@MODES
@STORES
@pytest.mark.spec("R1", "R51")
def test_a_chat_store_shared_by_two_memories_stays_correct(
    store_kind: str, mode: str, tmp_path: Path
) -> None:
    """Two memories on one store and key each see what the other appended or
    removed, exactly (and the one that edits sees its own edit)."""
    history = chat(16)

    async def scenario() -> None:
        store = make_store(store_kind, tmp_path)
        a, b = Api(memory_on(store), mode), Api(memory_on(store), mode)
        await a.put_messages(history[:10])
        assert dumps(await b.get()) == dumps(history[:10])
        await b.put_messages(history[10:12])
        assert dumps(await a.get()) == dumps(history[:12])
        edited = [*history[:4], ChatMessage(role="user", content="by b"), *history[5:12]]
        await b.set(edited)
        assert dumps(await b.get()) == dumps(edited)
        await a.set(edited[2:])  # the oldest two removed
        await a.put_messages(history[12:])
        assert dumps(await b.get()) == dumps([*edited[2:], *history[12:]])
        assert dumps(await a.get()) == dumps([*edited[2:], *history[12:]])

    asyncio.run(scenario())


@pytest.mark.spec("R5")
def test_views_are_copies_and_the_newest_are_fresh_every_call() -> None:
    """Editing a view's messages in place changes neither the store nor, for the
    newest messages (where agents edit), the next view."""
    store = SimpleChatStore()
    memory = memory_on(store)
    history = chat(FRESH_TAIL + 6)
    memory.set(history)
    view = memory.get()
    assert all(v is not s for v, s in zip(view, store.get_messages(KEY), strict=True))
    view[-2].blocks[0].text = "edited by the caller"  # type: ignore[union-attr]
    assert dumps(memory.get_all()) == dumps(history)
    again = memory.get()
    assert dumps(again) == dumps(history)
    assert all(a is not b for a, b in zip(again[-FRESH_TAIL:], view[-FRESH_TAIL:], strict=True))
    for m in view:
        m.blocks[0].text = "edited by the caller"  # type: ignore[union-attr]
    assert dumps(memory.get_all()) == dumps(history)


@pytest.mark.anyio
@pytest.mark.spec("R1", "R5")
async def test_agent_state_formatted_into_the_last_message_never_reaches_later_views() -> None:
    """``FunctionAgent`` formats its state into the last message of the view in
    place; the next run's request carries that message as it is stored."""
    store = SimpleChatStore()
    memory = memory_on(store)
    memory.set(chat(FRESH_TAIL * 2))
    llm = ScriptedLLM(["first answer", "second answer"])
    agent = ArsFunctionAgent(llm=llm, tools=[], initial_state={"n": 1})
    await agent.run("first question", memory=memory)
    await agent.run("second question", memory=memory)
    stored = store.get_messages(KEY)
    assert [m.content for m in stored[-4:]] == [
        "first question",
        "first answer",
        "second question",
        "second answer",
    ]
    first, second = llm.requests
    assert "first question" in (first.messages[-1].content or "")
    assert "'n': 1" in (first.messages[-1].content or "")  # the agent's state was formatted in
    assert dumps(second.messages[:-1]) == dumps(stored[:-2])


@pytest.fixture
def rows_read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The text of every database row the memory's store adapter deserializes."""
    seen: list[str] = []
    real = store_module._message

    def spy(data: Any) -> ChatMessage:
        message = real(data)
        seen.append(message.content or "")
        return message

    monkeypatch.setattr(store_module, "_message", spy)
    return seen


@MODES
@pytest.mark.parametrize("database", ["sqlite", "postgres"])
@pytest.mark.spec("R1", "R51")
def test_a_database_store_reads_only_the_new_rows(
    database: str, mode: str, tmp_path: Path, rows_read: list[str], request: pytest.FixtureRequest
) -> None:
    """On ``SQLAlchemyChatStore`` a call reads only the rows added since the last
    one (none when nothing was added); rows replaced, removed or added before the
    end behind the memory's back, anywhere, are seen and the view is exact."""
    history = chat(50)
    changed = [*history[:17], ChatMessage(role="user", content="changed"), *history[18:]]

    async def scenario(store: Any, api: Api, direct: Callable[..., Awaitable[Any]]) -> None:
        await api.put_messages(history[:48])
        assert dumps(await api.get()) == dumps(history[:48])
        assert len(rows_read) == 48
        await api.put_messages(history[48:])
        assert dumps(await api.get()) == dumps(history)
        assert dumps(await api.get()) == dumps(history)
        assert rows_read[48:] == [m.content for m in history[48:]]
        await direct(store.set_messages(KEY, changed))  # not through the memory
        assert dumps(await api.get()) == dumps(changed)
        await direct(store.delete_message(KEY, await _row_id(store, direct, 30)))
        assert dumps(await api.get()) == dumps([*changed[:30], *changed[31:]])

    if database == "sqlite":
        store = make_store("sqlalchemy", tmp_path)
    else:
        url = request.getfixturevalue("postgres_url")
        table = f"ars_inc_{mode}_{uuid.uuid4().hex[:8]}"
        uri = url.replace("postgresql://", "postgresql+asyncpg://", 1)
        store = SQLAlchemyChatStore(table_name=table, async_database_uri=uri)
    memory = memory_on(store)
    asyncio.run(scenario(store, Api(memory, mode), around(memory, mode)))


def around(memory: ArsMemory, mode: str) -> Callable[[Coroutine[Any, Any, Any]], Awaitable[Any]]:
    """Runs a store coroutine behind the memory's back, on the loop the memory's
    store uses (the sync API runs the store on the memory's own loop)."""

    async def awaited(coro: Coroutine[Any, Any, Any]) -> Any:
        return await coro

    async def on_its_loop(coro: Coroutine[Any, Any, Any]) -> Any:
        return memory._store._loop.run(coro)

    return awaited if mode == "async" else on_its_loop


async def _row_id(store: Any, direct: Callable[..., Awaitable[Any]], index: int) -> int:
    """The id of the row at ``index`` in the store's order."""

    async def ids() -> list[int]:
        factory, table = await store._initialize()
        async with factory() as session:
            query = select(table.c.id).where(table.c.key == KEY)
            rows = await session.execute(query.order_by(table.c.timestamp, table.c.id))
            return [r.id for r in rows.fetchall()]

    return int((await direct(ids()))[index])


@MODES
@pytest.mark.spec("R1", "R51")
def test_another_database_store_is_read_after_the_known_rows_with_check_rows(
    mode: str, tmp_path: Path
) -> None:
    """A database store read only through the public ``get_messages`` (not a
    ``SQLAlchemyChatStore`` row by row): after an append, the view is exact; a
    change that moves a check row (the first, middle or last known) is seen."""
    history = chat(50)
    changed = [*history[:25], ChatMessage(role="user", content="changed"), *history[26:]]

    store = make_store("sqlalchemy", tmp_path)
    memory = memory_on(store)
    memory._store._rows = None  # read as any other AsyncDBChatStore is
    direct = around(memory, mode)

    async def scenario() -> None:
        api = Api(memory, mode)
        await api.put_messages(history[:48])
        await api.get()
        await api.put_messages(history[48:])
        assert dumps(await api.get()) == dumps(history)
        await direct(store.set_messages(KEY, changed))  # the middle row changed
        assert dumps(await api.get()) == dumps(changed)
        await direct(store.set_messages(KEY, changed[3:]))  # the oldest three removed
        assert dumps(await api.get()) == dumps(changed[3:])

    asyncio.run(scenario())


ROOMY = 1_000_000  # a threshold no test history here reaches: every view is below T


def tool_turns(turns: int, start: int = 0) -> list[ChatMessage]:
    """Turns of a request, an assistant message calling two tools, their two
    results and an answer (five messages a turn)."""
    out: list[ChatMessage] = []
    for t in range(start, start + turns):
        calls = [
            ToolCallBlock(tool_call_id=f"c{t}a", tool_name="bash", tool_kwargs={"cmd": f"ls {t}"}),
            ToolCallBlock(tool_call_id=f"c{t}b", tool_name="grep", tool_kwargs={"q": f"x{t}"}),
        ]
        out += [
            ChatMessage(role="user", content=prose(8, tag=f"ask{t}")),
            ChatMessage(role="assistant", blocks=list(calls)),
            ChatMessage(
                role="tool",
                content=prose(10, tag=f"out{t}a"),
                additional_kwargs={"tool_call_id": f"c{t}a"},
            ),
            ChatMessage(
                role="tool",
                content=prose(10, tag=f"out{t}b"),
                additional_kwargs={"tool_call_id": f"c{t}b"},
            ),
            ChatMessage(role="assistant", content=prose(6, tag=f"done{t}")),
        ]
    return out


def roomy(store: Any) -> ArsMemory:
    return ArsMemory.from_defaults(chat_store=store, chat_store_key=KEY, summary_threshold=ROOMY)


def fresh_view(store: Any) -> list[dict[str, Any]]:
    """What a memory that never saw the store gives for it."""
    return dumps(roomy(store).get())


@pytest.mark.spec("R1", "R62")
def test_a_growing_view_maps_back_only_its_newest_messages() -> None:
    """A history growing one message at a time, its calls answered one result at
    a time (a note stands in for each result not stored yet): every view is
    exactly what a fresh memory gives, and each call maps back one by one only
    the messages near the end of the last view, however long the history."""
    store = SimpleChatStore()
    memory = roomy(store)
    noted = 0
    for i, message in enumerate(tool_turns(24)):
        memory.put(message)
        before = memory._history.mapped
        view = memory.get()
        assert dumps(view) == fresh_view(store)
        noted += len(view) - (i + 1)  # the notes standing in for results not stored yet
        if i:
            assert memory._history.mapped - before <= VIEW_TAIL + 2
    assert noted == 24 * 3  # two notes after each call, one after its first result
    assert len(view) == 24 * 5 > 3 * VIEW_TAIL


@pytest.mark.spec("R1", "R51", "R62")
def test_views_after_edits_of_a_growing_tool_history_are_what_a_fresh_memory_gives() -> None:
    """With the last view remembered: a message replaced in the middle, a result
    removed (its call then answered by a note mid-history), messages removed, a
    stored message edited in place, another memory on the same store appending
    and editing: each view, of both memories, is exactly what a fresh memory
    gives, and appending afterwards maps back only the newest messages again."""
    store = SimpleChatStore()
    a, b = roomy(store), roomy(store)
    history = tool_turns(12)
    for message in history:
        a.put(message)
        assert dumps(a.get()) == fresh_view(store)

    def same_views() -> None:
        assert dumps(a.get()) == fresh_view(store)
        assert dumps(b.get()) == fresh_view(store)

    same_views()
    stored = store.get_messages(KEY)
    store.set_messages(
        KEY, [*stored[:20], ChatMessage(role="user", content="replaced"), *stored[21:]]
    )
    same_views()
    store.delete_message(KEY, 32)  # a result: its call is answered by a note mid-history
    same_views()
    store.set_messages(KEY, store.get_messages(KEY)[7:])  # the oldest messages removed
    same_views()
    for i in (0, len(store.get_messages(KEY)) // 2, -1):
        store.get_messages(KEY)[i].blocks[0].text = f"edited in place {i}"  # type: ignore[union-attr]
        same_views()
    for message in tool_turns(2, start=12):
        b.put(message)
        same_views()
    b.set([*b.get_all()[:40], *b.get_all()[41:]])
    same_views()
    for message in tool_turns(3, start=14):
        a.put(message)
        before = a._history.mapped
        assert dumps(a.get()) == fresh_view(store)
        assert a._history.mapped - before <= VIEW_TAIL + 2


@pytest.mark.spec("R1", "R5")
def test_a_core_view_the_caller_keeps_is_never_changed_by_later_calls() -> None:
    """The engine is handed the history's own list of core messages, grown in
    place while nothing else holds it; a round's ``outcome.view`` the caller keeps
    (the history itself, below T) stays exactly as it was through later calls,
    and every view is still what a fresh memory gives."""
    store = SimpleChatStore()
    memory = roomy(store)
    memory.put_messages(chat(10))
    lists = set()
    for message in chat(3, start=10):
        memory.put(message)
        memory.get()
        lists.add(id(memory._history.update(store.get_messages(KEY))[0]))
    assert len(lists) == 1  # nothing else held it: grown in place
    rnd = memory.compact_round()
    rnd.succeeded()
    held = rnd.outcome.view
    before = list(held)
    for message in chat(4, start=13):
        memory.put(message)
        assert dumps(memory.get()) == fresh_view(store)
    assert len(held) == len(before) == 13
    assert all(a is b for a, b in zip(held, before, strict=True))
