"""A record of one conversation kept in its chat store beside the messages.

An :class:`~ars_llamaindex.ArsMemory` keeps what ARS learned about the last
request of a conversation (the provider's usage: :mod:`ars_llamaindex.provider_count`;
the exact size of the view: :mod:`ars_llamaindex.known_count`) in the chat store
under a key of its own, as one system row whose ``additional_kwargs`` hold the
record, so a new process reads it back. :class:`StoredRecord` is that row's
reading and writing; a subclass says how a record marks the loaded history
(:meth:`StoredRecord.mark`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage

from ars_core import Message

__all__ = ["StoredRecord"]

_UNREAD: Any = object()


class StoredRecord:
    """One conversation's record under ``key`` in ``store`` (its row's ``field``): read
    from the store once, then kept as it is written."""

    field = ""

    def __init__(self, store: Any, key: str) -> None:
        self._store, self.key = store, key
        self._record: Any = _UNREAD

    def _rows(self, record: Mapping[str, Any]) -> list[ChatMessage]:
        self._record = record
        return [ChatMessage(role="system", content="", additional_kwargs={self.field: record})]

    def _read(self, stored: Sequence[ChatMessage]) -> Any:
        record = stored[-1].additional_kwargs.get(self.field) if stored else None
        self._record = record if isinstance(record, Mapping) else None
        return self._record

    def apply(self, core: list[Message]) -> list[Message]:
        """``core`` marked with the record (read from the store the first time)."""
        if self._record is _UNREAD:
            self._read(self._store.peek(self.key))
        return self.mark(core, self._record)

    async def aapply(self, core: list[Message]) -> list[Message]:
        if self._record is _UNREAD:
            self._read(await self._store.apeek(self.key))
        return self.mark(core, self._record)

    def forget(self) -> None:
        """The conversation was reset: no record until one is made."""
        self._record = None

    def mark(self, core: list[Message], record: Any) -> list[Message]:
        """``core`` with what ``record`` says of it (``core`` itself when nothing)."""
        raise NotImplementedError
