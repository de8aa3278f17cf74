"""One interface over LlamaIndex's two kinds of chat store.

* ``BaseChatStore`` (``SimpleChatStore``, the Redis/Postgres integrations...):
  a sync API with ``a*`` twins.
* ``AsyncDBChatStore`` (``SQLAlchemyChatStore`` on SQLite or PostgreSQL, what
  llama-index-core 0.14 ships and what its ``Memory`` uses): async only; the
  sync methods run it with ``llama_index.core.async_utils.asyncio_run``, as
  LlamaIndex's own ``Memory`` does. Prefer the async methods with such a
  store (agents use them).

Messages of every status are read: ARS never archives or deletes rows.
"""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from llama_index.core.async_utils import asyncio_run
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.storage.chat_store import BaseChatStore
from llama_index.core.storage.chat_store.base_db import AsyncDBChatStore

__all__ = ["ChatStoreAdapter"]

T = TypeVar("T")


def _run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio_run(coro)  # type: ignore[no-any-return]


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

    # ------------------------------------------------------------ async

    async def aget(self, key: str) -> list[ChatMessage]:
        if isinstance(self.store, AsyncDBChatStore):
            return list(await self.store.get_messages(key, status=None))
        return [m.model_copy(deep=True) for m in await self.store.aget_messages(key)]

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
            return _run(self.aget(key))
        # an in-memory store hands out its own objects: never let them be mutated
        return [m.model_copy(deep=True) for m in self.store.get_messages(key)]

    def add(self, key: str, messages: Sequence[ChatMessage]) -> None:
        if isinstance(self.store, AsyncDBChatStore):
            _run(self.aadd(key, messages))
            return
        for m in messages:  # a copy: the caller may mutate its object later
            self.store.add_message(key, m.model_copy(deep=True))

    def set(self, key: str, messages: Sequence[ChatMessage]) -> None:
        if isinstance(self.store, AsyncDBChatStore):
            _run(self.aset(key, messages))
            return
        self.store.set_messages(key, [m.model_copy(deep=True) for m in messages])

    def delete(self, key: str) -> None:
        if isinstance(self.store, AsyncDBChatStore):
            _run(self.adelete(key))
            return
        self.store.delete_messages(key)
