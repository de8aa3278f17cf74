"""The summarization event log of an :class:`~ars_llamaindex.ArsMemory`.

A conversation's events live in the chat store beside its messages, under
``key + EVENT_KEY_SUFFIX``: one system ``ChatMessage`` per persisted update,
holding in ``additional_kwargs["ars_event"]`` the event (or ``None`` when the
stored one was dropped) and the kept messages trimmed under overflow (by
position, with a hash of the stored message they stand for). The newest
readable record is the state; a corrupt record is skipped with a warning,
never breaking ``get``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import attrs
from llama_index.core.base.llms.types import ChatMessage

from ars_core import (
    ArsError,
    CallOutcome,
    Message,
    MessageFormatError,
    SummarizationEvent,
    message_from_dict,
    message_to_dict,
)
from ars_core.adapter import text_sha256

__all__ = [
    "EVENT_KEY_SUFFIX",
    "RESERVED_KEY_MARK",
    "LoadedState",
    "load_state",
    "record_of",
]

log = logging.getLogger("ars.llamaindex")

#: the event log of conversation ``key`` lives under ``key + EVENT_KEY_SUFFIX``
EVENT_KEY_SUFFIX = "::ars_event"
#: chat store keys holding this are ARS's (a memory cannot be opened on one)
RESERVED_KEY_MARK = "::ars_"
_RECORD_KEY = "ars_event"
_VERSION = 1


def _sha(message: ChatMessage) -> str:
    text = json.dumps(
        message.model_dump(mode="json"), sort_keys=True, ensure_ascii=False, default=str
    )
    return text_sha256(text)


@attrs.define
class LoadedState:
    """A conversation as one call reads it."""

    chat: list[ChatMessage]  # the stored messages (never handed out)
    core: list[Message]
    event: SummarizationEvent | None
    record: dict[str, Any] | None


def load_state(
    chat: list[ChatMessage], core: list[Message], records: list[ChatMessage], key: str
) -> LoadedState:
    """``core`` with the trimmed messages the event's record names in the form they
    were sent (in a copy: ``core`` itself is not changed); ``key`` names the
    conversation in warnings."""
    record, event = _latest_record(records, key)
    if record is not None and event is not None and record["replaced"]:
        core = list(core)
        for i, item in record["replaced"].items():
            if event.cutoff <= i < len(core) and item["sha"] == _sha(chat[i]):
                core[i] = item["form"]  # what was actually sent
    return LoadedState(chat=chat, core=core, event=event, record=record)


def _latest_record(
    records: list[ChatMessage], key: str
) -> tuple[dict[str, Any] | None, SummarizationEvent | None]:
    """The newest readable record and its event (``None`` after a drop). A
    corrupt record never breaks ``get``: it is skipped with a warning."""
    for m in reversed(records):
        rec = m.additional_kwargs.get(_RECORD_KEY)
        try:
            if not isinstance(rec, Mapping):
                raise MessageFormatError("not an ARS record", source="summarization event")
            raw = rec.get("event")
            event = SummarizationEvent.from_dict(raw) if raw is not None else None
            return {**rec, "replaced": _trims(rec.get("replaced"), key)}, event
        except ArsError as exc:
            log.warning("ARS: ignoring a corrupt summarization record of %r: %s", key, exc)
    return None, None


def _trims(raw: Any, key: str) -> dict[int, dict[str, Any]]:
    """The trimmed-message items of a record, by state index (``index``, ``sha``,
    ``message``, and ``form``: the message read). An item that is not one is
    skipped with a warning: the view then sends that stored message as it is."""
    items = raw if isinstance(raw, list) else ()
    if raw is not None and not isinstance(raw, list):
        log.warning(
            "ARS: ignoring the trimmed messages of a summarization record of %r: not a list but %s",
            key,
            type(raw).__name__,
        )
    trims: dict[int, dict[str, Any]] = {}
    for item in items:
        try:
            if not isinstance(item, Mapping):
                raise TypeError(f"an item is a {type(item).__name__}, not an object")
            index = item["index"]
            if isinstance(index, bool) or not isinstance(index, int) or index < 0:
                raise ValueError(f"index {index!r} is not a message position")
            if not isinstance(item.get("sha"), str):
                raise ValueError("sha is not a string")
            form = message_from_dict(item["message"])
        except (ArsError, KeyError, TypeError, ValueError) as exc:
            log.warning("ARS: ignoring a corrupt trimmed-message record: %s", exc)
            continue
        trims[index] = {**item, "form": form}
    return trims


def record_of(state: LoadedState, outcome: CallOutcome) -> ChatMessage | None:
    """The log record persisting ``outcome``'s update: a new or re-anchored
    event, or an empty record when the stored event was dropped."""
    update = outcome.update
    if update is None or (update.event is None and not update.clear_event):
        return None
    event = update.event
    if event is None:
        record: dict[str, Any] = {"ars_event_version": _VERSION, "event": None}
        text = "[ARS summarization event dropped: it no longer matched the history]"
        return ChatMessage(role="system", content=text, additional_kwargs={_RECORD_KEY: record})
    previous: dict[int, dict[str, Any]] = (state.record or {}).get("replaced") or {}
    replaced = {
        i: {k: v for k, v in item.items() if k != "form"}
        for i, item in previous.items()
        if i >= event.cutoff
    }
    for i, msg in update.replaced:
        replaced[i] = {"index": i, "sha": _sha(state.chat[i]), "message": message_to_dict(msg)}
    record = {
        "ars_event_version": _VERSION,
        "event": event.to_dict(),
        "replaced": [replaced[i] for i in sorted(replaced)],
    }
    text = (
        f"[ARS summarization event: messages 1-{event.cutoff} summarized"
        + (f", history at {event.file_path}" if event.file_path else "")
        + "]"
    )
    return ChatMessage(role="system", content=text, additional_kwargs={_RECORD_KEY: record})
