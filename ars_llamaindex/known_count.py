"""The exact size of each view's messages, for an :class:`~ars_llamaindex.ArsMemory`.

When the engine counted the effective messages of a view exactly, its outcome
carries a stamp of that count (:mod:`ars_core.known_size`). LlamaIndex gives ARS
no place on the answer for it: the memory builds the view (``get``), the agent
calls the model and puts the answer back, and a ``ChatMessage``'s
``additional_kwargs`` are sent on to some providers, which reject unknown fields.

So :class:`KnownLog` keeps the stamp of the last view in the chat store under
``<key>::ars_known`` with the position in the stored history where the answer to
that view lands (the stored messages' number when the view was built), and when
the memory loads the history again (this process or a new one) the assistant
message at that position gets the stamp in its core form (:meth:`KnownLog.apply`):
the engine then sizes the history from it as it does a LangChain answer's, and
ignores it unless every part of its fingerprint matches.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llama_index.core.base.llms.types import ChatMessage

from ars_core import Message
from ars_core.adapter import MARK_KNOWN_SIZE, with_known_size

from .stored_record import StoredRecord

__all__ = ["KNOWN_KEY_SUFFIX", "KnownLog"]

#: suffix of the chat-store key of a conversation's last view stamp
KNOWN_KEY_SUFFIX = "::ars_known"
_FIELD = "ars_known"


class KnownLog(StoredRecord):
    """The last view's known size of one conversation (see the module docstring)."""

    field = _FIELD

    def __init__(self, store: Any, key: str) -> None:
        super().__init__(store, key)
        self._pending: dict[str, Any] | None = None

    def keep(self, outcome: Any, stored: int) -> None:
        """The memory built the view of ``outcome`` from ``stored`` messages: its stamp
        (when the count is known) is to be written for the answer landing after them."""
        stamp = outcome.known
        self._pending = None if stamp is None else {"at": stored, "stamp": stamp}

    def _taken(self) -> list[ChatMessage] | None:
        record, self._pending = self._pending, None
        return None if record is None else self._rows(record)

    def write(self) -> None:
        """Write the stamp :meth:`keep` took (nothing when there is none)."""
        rows = self._taken()
        if rows is not None:
            self._store.set(self.key, rows)

    async def awrite(self) -> None:
        rows = self._taken()
        if rows is not None:
            await self._store.aset(self.key, rows)

    def forget(self) -> None:
        super().forget()
        self._pending = None

    def mark(self, core: list[Message], record: Any) -> list[Message]:
        """``core`` with the answer to the last view stamped."""
        return _stamped(core, record)


def _stamped(core: list[Message], record: Any) -> list[Message]:
    at = record.get("at") if isinstance(record, Mapping) else None
    stamp = record.get("stamp") if isinstance(record, Mapping) else None
    if type(at) is not int or not 0 <= at < len(core) or not isinstance(stamp, Mapping):
        return core
    message = core[at]
    if message.role != "assistant" or MARK_KNOWN_SIZE in message.metadata:
        return core
    copy = list(core)
    copy[at] = with_known_size(message, stamp)
    return copy
