"""One interface over LlamaIndex's two kinds of chat store.

* ``BaseChatStore`` (``SimpleChatStore``, the Redis/Postgres integrations...):
  a sync API with ``a*`` twins.
* ``AsyncDBChatStore`` (``SQLAlchemyChatStore`` on SQLite or PostgreSQL, what
  llama-index-core 0.14 ships and what its ``Memory`` uses): async only. The
  sync methods run its coroutines on one private event loop in a daemon
  thread, so the store's engine (whose connections belong to the loop that
  opened them, asyncpg's strictly) always sees the same loop. Use either the
  sync or the async methods with one store object, not both: an async engine
  cannot serve two event loops.

Messages of every status are read: ARS never archives or deletes rows.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.storage.chat_store import BaseChatStore
from llama_index.core.storage.chat_store.base_db import AsyncDBChatStore

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
        self._loop = _LoopThread()

    # ------------------------------------------------------------ async

    async def aget(self, key: str) -> list[ChatMessage]:
        if isinstance(self.store, AsyncDBChatStore):
            return list(await self.store.get_messages(key, status=None))
        return [m.model_copy(deep=True) for m in await self.store.aget_messages(key)]

    async def apeek(self, key: str, known: Sequence[ChatMessage] = ()) -> list[ChatMessage]:
        """The stored messages, without a defensive copy: an in-memory store's own
        objects (its own list), which the caller must not mutate (:meth:`aget`
        copies them).

        ``known`` is what an earlier read returned. A database store then reads
        only the rows after those messages, when the rows at the first, the
        middle and the last known positions still hold them (a row removed,
        inserted or changed before the end shows there), and the known objects
        stand for them; otherwise it reads every row."""
        if not isinstance(self.store, AsyncDBChatStore):
            return await self.store.aget_messages(key)
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
            return self._loop.run(self.aget(key))
        # an in-memory store hands out its own objects: never let them be mutated
        return [m.model_copy(deep=True) for m in self.store.get_messages(key)]

    def peek(self, key: str, known: Sequence[ChatMessage] = ()) -> list[ChatMessage]:
        """Sync twin of :meth:`apeek`."""
        if isinstance(self.store, AsyncDBChatStore):
            return self._loop.run(self.apeek(key, known))
        return self.store.get_messages(key)

    def add(self, key: str, messages: Sequence[ChatMessage]) -> None:
        if isinstance(self.store, AsyncDBChatStore):
            self._loop.run(self.aadd(key, messages))
            return
        for m in messages:  # a copy: the caller may mutate its object later
            self.store.add_message(key, m.model_copy(deep=True))

    def set(self, key: str, messages: Sequence[ChatMessage]) -> None:
        if isinstance(self.store, AsyncDBChatStore):
            self._loop.run(self.aset(key, messages))
            return
        self.store.set_messages(key, [m.model_copy(deep=True) for m in messages])

    def delete(self, key: str) -> None:
        if isinstance(self.store, AsyncDBChatStore):
            self._loop.run(self.adelete(key))
            return
        self.store.delete_messages(key)
