"""Compression events through LlamaIndex instrumentation.

Every core :class:`~ars_core.CompressionEvent` of a memory is dispatched as one
of three :class:`BaseEvent` subclasses on the ``ars_llamaindex`` dispatcher
(a child of LlamaIndex's root dispatcher, so a handler added to
``llama_index.core.instrumentation.get_dispatcher()`` sees them too):
:class:`ArsCompressionStartedEvent`, :class:`ArsCompressionCompletedEvent`,
:class:`ArsCompressionFailedEvent`. ``payload`` is exactly
``CompressionEvent.to_dict()`` (what an SSE ``context_compression`` frame
carries); ``chat_store_key`` names the conversation.

The same payload goes to the memory's optional ``on_event`` callback.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, ClassVar

from llama_index_instrumentation import get_dispatcher
from llama_index_instrumentation.base import BaseEvent

from ars_core import CompressionEvent

__all__ = [
    "DISPATCHER_NAME",
    "ArsCompressionCompletedEvent",
    "ArsCompressionEvent",
    "ArsCompressionFailedEvent",
    "ArsCompressionStartedEvent",
    "EventCallback",
    "dispatch",
    "instrumentation_event",
]

log = logging.getLogger("ars.llamaindex")

#: name of the dispatcher ARS events are sent on
DISPATCHER_NAME = "ars_llamaindex"

#: ``on_event(payload)``: called with ``CompressionEvent.to_dict()``
EventCallback = Callable[[dict[str, Any]], Any]


class ArsCompressionEvent(BaseEvent):
    """Base of ARS's instrumentation events (one compression round's record)."""

    phase: ClassVar[str] = ""
    chat_store_key: str
    payload: dict[str, Any]

    @property
    def level(self) -> str:
        return str(self.payload.get("level"))

    @property
    def round_id(self) -> str:
        return str(self.payload.get("round_id"))

    @classmethod
    def class_name(cls) -> str:
        return "ArsCompressionEvent"


class ArsCompressionStartedEvent(ArsCompressionEvent):
    """A compression round started."""

    phase: ClassVar[str] = "started"

    @classmethod
    def class_name(cls) -> str:
        return "ArsCompressionStartedEvent"


class ArsCompressionCompletedEvent(ArsCompressionEvent):
    """A round completed; an L1-only one carries no ``cutoff``/``file_path``."""

    phase: ClassVar[str] = "completed"

    @classmethod
    def class_name(cls) -> str:
        return "ArsCompressionCompletedEvent"


class ArsCompressionFailedEvent(ArsCompressionEvent):
    """A round that had started ended with an exception."""

    phase: ClassVar[str] = "failed"

    @classmethod
    def class_name(cls) -> str:
        return "ArsCompressionFailedEvent"


_BY_PHASE: dict[str, type[ArsCompressionEvent]] = {
    "started": ArsCompressionStartedEvent,
    "completed": ArsCompressionCompletedEvent,
    "failed": ArsCompressionFailedEvent,
}


def instrumentation_event(event: CompressionEvent, chat_store_key: str) -> ArsCompressionEvent:
    """The instrumentation event for one core compression event."""
    return _BY_PHASE[event.phase](chat_store_key=chat_store_key, payload=event.to_dict())


def dispatch(
    event: CompressionEvent, chat_store_key: str, callback: EventCallback | None = None
) -> None:
    """Send ``event`` on the ``ars_llamaindex`` dispatcher and to ``callback``.

    Observers never break a call: a failing callback is logged (the dispatcher
    itself swallows handler errors).
    """
    ev = instrumentation_event(event, chat_store_key)
    get_dispatcher(DISPATCHER_NAME).event(ev)
    if callback is not None:
        try:
            callback(dict(ev.payload))
        except Exception as exc:
            log.warning("ARS: on_event callback failed: %s: %s", type(exc).__name__, exc)
