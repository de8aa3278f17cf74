"""One interface over LlamaIndex's two kinds of chat store.

* ``BaseChatStore`` (``SimpleChatStore``, the Redis/Postgres integrations...):
  a sync API with ``a*`` twins.
* ``AsyncDBChatStore`` (``SQLAlchemyChatStore`` on SQLite or PostgreSQL, what
  llama-index-core 0.14 ships and what its ``Memory`` uses): async only. The
  sync methods run its coroutines on one private event loop in a daemon
  thread, one per store (and its engine) however many memories share it, so
  the store's engine (whose connections belong to the loop that opened them,
  asyncpg's strictly) always sees the same loop. Use either the
  sync or the async methods with one store object, not both: an async engine
  cannot serve two event loops.

Messages of every status are read: ARS never archives or deletes rows.

Reading again what was read before costs what is new: an in-memory store is
read without copying its messages, a ``SQLAlchemyChatStore`` by row id (only
the rows added since the last read, after one aggregate over the row ids that
shows whether any known row was removed or replaced), and any other database
store through its public ``get_messages`` with a few check rows.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import weakref
import zlib
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

import attrs
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.storage.chat_store import BaseChatStore
from llama_index.core.storage.chat_store.base_db import AsyncDBChatStore
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore
from sqlalchemy import LargeBinary, Text, case, cast, func, select

from .convert import same_message

__all__ = ["ChatStoreAdapter"]

T = TypeVar("T")


class _LoopThread:
    """An event loop running in a daemon thread; ``run(coro)`` waits for the result."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(
                    target=loop.run_forever, name="ars-chat-store", daemon=True
                ).start()
                self._loop = loop
            return self._loop

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._start()).result()

    def serve(self, store: Any, coro: Coroutine[Any, Any, T]) -> T:
        """``run``, then this loop also serves the engine ``store`` opened (another
        store built on that engine gets the same loop)."""
        try:
            return self.run(coro)
        finally:
            engine = getattr(store, "_async_engine", None)
            if engine is not None:
                with _LOOPS_LOCK:
                    _remember_loop(engine, self)


_LOOPS_LOCK = threading.Lock()
#: the loop thread of each store (and of its engine, once it has one), by ``id``,
#: with a weak reference telling a live key from a reused ``id``
_LOOPS: dict[int, tuple[weakref.ref[Any], _LoopThread]] = {}


def _loop_for(store: Any) -> _LoopThread:
    """The one loop thread serving ``store``'s sync calls, shared by every adapter
    (every ``ArsMemory``) on that store or on its engine: an async engine's
    connections belong to the loop that opened them (asyncpg's strictly), so two
    loops on one engine fail with "attached to a different loop"."""
    engine = getattr(store, "_async_engine", None)
    keys = [k for k in (engine, store) if k is not None]
    with _LOOPS_LOCK:
        loop = next((entry for k in keys if (entry := _known_loop(k)) is not None), None)
        loop = loop or _LoopThread()
        for k in keys:
            _remember_loop(k, loop)
        return loop


def _known_loop(key: Any) -> _LoopThread | None:
    entry = _LOOPS.get(id(key))
    return entry[1] if entry is not None and entry[0]() is key else None


def _remember_loop(key: Any, loop: _LoopThread) -> None:
    if _known_loop(key) is loop:
        return
    index = id(key)

    def forget(ref: weakref.ref[Any]) -> None:
        if _LOOPS.get(index, (None,))[0] is ref:
            _LOOPS.pop(index, None)

    try:
        ref = weakref.ref(key, forget)
    except TypeError:  # not weak-referenceable: not shared
        return
    _LOOPS[index] = (ref, loop)


def _message(data: Any) -> ChatMessage:
    """A stored row's message."""
    return ChatMessage.model_validate(data)


@attrs.define
class _Rows:
    """The rows of one key a read returned, in the store's order (timestamp, id)."""

    count: int
    id_sum: int
    max_id: int  # the highest row id
    max_id_ts: int  # that row's timestamp
    last_ts: int  # the timestamp of the last row
    data_sum: int = 0  # the sum of the rows' data hashes (see _row_hash)


#: the SQLite function ARS registers on its connections: a row's data hash
_SQLITE_HASH = "ars_row_hash"


class _RowReader:
    """Reads a ``SQLAlchemyChatStore`` by row id (its table: ``id``, ``key``,
    ``timestamp``, ``data``; what ``get_messages`` orders by and returns).

    The store's API changes rows only by adding (new, higher ids), deleting and
    replacing them all (``set_messages``: new ids), so the known rows are
    unchanged when the rows of the key up to the highest known id have the
    same count and id sum, and that row still has its timestamp (SQLite may
    give a deleted highest id to the next row; its timestamp is new). A row
    edited in place behind the store's back (``UPDATE ... SET data``, a
    redaction) keeps all three, so the same aggregate also sums a hash of each
    row's data, computed by the database: PostgreSQL's ``hashtextextended``,
    on SQLite a CRC-32 function ARS registers on the connection. On another
    database every row is read on every call."""

    def __init__(self, store: SQLAlchemyChatStore) -> None:
        self.store = store
        self.rows: dict[str, _Rows] = {}
        self._hashing: weakref.WeakSet[Any] = weakref.WeakSet()  # SQLite connections

    async def _row_hash(self, session: Any, data: Any) -> Any:
        """The SQL expression of a row's data hash on this session's database
        (``None``: the database has none ARS can use)."""
        dialect = session.get_bind().dialect.name
        if dialect == "postgresql":
            return func.hashtextextended(cast(data, Text), 0)
        if dialect != "sqlite":
            return None
        connection = await session.connection()
        raw = (await connection.get_raw_connection()).driver_connection
        if raw not in self._hashing:
            create = getattr(raw, "create_function", None)
            if create is None:
                return None
            # zlib.crc32 itself (a C function) over the row's bytes: no Python frame a row
            done = create(_SQLITE_HASH, 1, zlib.crc32, deterministic=True)
            if inspect.isawaitable(done):  # aiosqlite
                await done
            self._hashing.add(raw)
        return getattr(func, _SQLITE_HASH)(cast(data, LargeBinary))

    async def read(self, key: str, known: Sequence[ChatMessage]) -> list[ChatMessage]:
        factory, table = await self.store._initialize()
        c = table.c
        info = self.rows.get(key)
        async with factory() as session:
            digest = await self._row_hash(session, c.data)
            if known and info is not None and info.count == len(known) and digest is not None:
                check = select(
                    func.count(c.id),
                    func.sum(c.id),
                    func.max(case((c.id == info.max_id, c.timestamp))),
                    func.sum(digest),
                ).where(c.key == key, c.id <= info.max_id)
                count, id_sum, ts, data_sum = (await session.execute(check)).one()
                if (count, int(id_sum or 0), ts, int(data_sum or 0)) == (
                    info.count,
                    info.id_sum,
                    info.max_id_ts,
                    info.data_sum,
                ):
                    query = select(c.id, c.timestamp, c.data, digest.label("digest")).where(
                        c.key == key, c.id > info.max_id
                    )
                    new = (await session.execute(query.order_by(c.timestamp, c.id))).fetchall()
                    if not new or new[0].timestamp >= info.last_ts:  # after the known rows
                        self._remember(key, new, info)
                        return [*known, *(_message(r.data) for r in new)]
            columns = [c.id, c.timestamp, c.data]
            if digest is not None:
                columns.append(digest.label("digest"))
            query = select(*columns).where(c.key == key)
            rows = (await session.execute(query.order_by(c.timestamp, c.id))).fetchall()
        if digest is not None:
            self._remember(key, rows, None)
        else:  # no data hash on this database: every call reads every row
            self.rows.pop(key, None)
        return [_message(r.data) for r in rows]

    def _remember(self, key: str, rows: Sequence[Any], before: _Rows | None) -> None:
        info = before or _Rows(count=0, id_sum=0, max_id=-1, max_id_ts=0, last_ts=0)
        for r in rows:
            info.count += 1
            info.id_sum += r.id
            info.data_sum += int(r.digest or 0)
            if r.id > info.max_id:
                info.max_id, info.max_id_ts = r.id, r.timestamp
        if rows:
            info.last_ts = rows[-1].timestamp
        self.rows[key] = info


class ChatStoreAdapter:
    """get / add / set / delete messages under a key, sync and async."""

    def __init__(self, store: BaseChatStore | AsyncDBChatStore) -> None:
        if not isinstance(store, (BaseChatStore, AsyncDBChatStore)):
            raise TypeError(
                "chat_store must be a llama_index BaseChatStore (SimpleChatStore...) or an "
                f"AsyncDBChatStore (SQLAlchemyChatStore), not {type(store).__name__}"
            )
        self.store = store
        self.is_async = isinstance(store, AsyncDBChatStore)
        self._loop = _loop_for(store)
        self._rows: _RowReader | None = None
        # by row id through the store's own table (its ``_initialize``), when it has one
        if isinstance(store, SQLAlchemyChatStore) and callable(getattr(store, "_initialize", None)):
            self._rows = _RowReader(store)

    # ------------------------------------------------------------ async

    async def aget(self, key: str) -> list[ChatMessage]:
        if isinstance(self.store, AsyncDBChatStore):
            return list(await self.store.get_messages(key, status=None))
        return [m.model_copy(deep=True) for m in await self.store.aget_messages(key)]

    async def apeek(self, key: str, known: Sequence[ChatMessage] = ()) -> list[ChatMessage]:
        """The stored messages, without a defensive copy: an in-memory store's own
        objects (its own list), which the caller must not mutate (:meth:`aget`
        copies them).

        ``known`` is what the last read of ``key`` returned. A database store
        then reads only the rows after those messages, and the known objects
        stand for them, when they are unchanged: a ``SQLAlchemyChatStore`` tells
        by row id (see :class:`_RowReader`); another database store when its
        rows at the first, the middle and the last known positions still hold
        them (a row removed or inserted before the end shifts them). Otherwise
        it reads every row."""
        if not isinstance(self.store, AsyncDBChatStore):
            return await self.store.aget_messages(key)
        if self._rows is not None:
            return await self._rows.read(key, known)
        n = len(known)
        if n:
            get = self.store.get_messages
            rows = await get(key, status=None, offset=n - 1)
            if rows and same_message(rows[0], known[n - 1]):
                for i in sorted({0, n // 2} - {n - 1}):
                    at = await get(key, status=None, limit=1, offset=i)
                    if not at or not same_message(at[0], known[i]):
                        break
                else:
                    return [*known[:n], *rows[1:]]
        return list(await self.store.get_messages(key, status=None))

    async def aadd(self, key: str, messages: Sequence[ChatMessage]) -> None:
        if not messages:
            return
        if isinstance(self.store, AsyncDBChatStore):
            if len(messages) == 1:
                await self.store.add_message(key, messages[0])
            else:
                await self.store.add_messages(key, list(messages))
            return
        for m in messages:
            await self.store.async_add_message(key, m.model_copy(deep=True))

    async def aset(self, key: str, messages: Sequence[ChatMessage]) -> None:
        if isinstance(self.store, AsyncDBChatStore):
            await self.store.delete_messages(key, status=None)
            if messages:
                await self.store.add_messages(key, list(messages))
            return
        await self.store.aset_messages(key, [m.model_copy(deep=True) for m in messages])

    async def adelete(self, key: str) -> None:
        if isinstance(self.store, AsyncDBChatStore):
            await self.store.delete_messages(key, status=None)
            return
        await self.store.adelete_messages(key)

    # ------------------------------------------------------------ sync

    def get(self, key: str) -> list[ChatMessage]:
        if isinstance(self.store, AsyncDBChatStore):
            return self._loop.serve(self.store, self.aget(key))
        # an in-memory store hands out its own objects: never let them be mutated
        return [m.model_copy(deep=True) for m in self.store.get_messages(key)]

    def peek(self, key: str, known: Sequence[ChatMessage] = ()) -> list[ChatMessage]:
        """Sync twin of :meth:`apeek`."""
        if isinstance(self.store, AsyncDBChatStore):
            return self._loop.serve(self.store, self.apeek(key, known))
        return self.store.get_messages(key)

    def add(self, key: str, messages: Sequence[ChatMessage]) -> None:
        if isinstance(self.store, AsyncDBChatStore):
            self._loop.serve(self.store, self.aadd(key, messages))
            return
        for m in messages:  # a copy: the caller may mutate its object later
            self.store.add_message(key, m.model_copy(deep=True))

    def set(self, key: str, messages: Sequence[ChatMessage]) -> None:
        if isinstance(self.store, AsyncDBChatStore):
            self._loop.serve(self.store, self.aset(key, messages))
            return
        self.store.set_messages(key, [m.model_copy(deep=True) for m in messages])

    def delete(self, key: str) -> None:
        if isinstance(self.store, AsyncDBChatStore):
            self._loop.serve(self.store, self.adelete(key))
            return
        self.store.delete_messages(key)
