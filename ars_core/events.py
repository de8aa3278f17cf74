"""The event model: what L2 persists, and what every compression round reports.

``SummarizationEvent`` is the ``_summarization_event`` record kept in the
agent's state: the *cumulative, global* cutoff into the state
messages, the summary message, and the history file's path when the archive
write succeeded. :func:`effective_messages` rebuilds "latest summary +
messages after the cutoff"; :func:`to_global_cutoff` converts a cutoff chosen
in the effective messages into a global one across chained summaries. Both
records serialise to plain JSON (:meth:`SummarizationEvent.to_dict`) so any
checkpointer can store them.

``CompressionEvent`` is one stream record of a compression round:
``started``, then ``completed`` or ``failed``.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import attrs

from .files import text_sha256
from .messages import Message, message_from_dict, message_to_dict
from .summarize import Usage

__all__ = [
    "CompressionEvent",
    "EventEmitter",
    "Level",
    "Phase",
    "SummarizationEvent",
    "apply_sent_forms",
    "describe_event",
    "effective_messages",
    "message_key",
    "sent_forms_of",
    "to_global_cutoff",
]

Phase = Literal["started", "completed", "failed"]
Level = Literal["L1", "L2"]


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")


@attrs.frozen
class SummarizationEvent:
    """The persisted L2 record (``_summarization_event``).

    ``cutoff`` is the number of state messages the summary replaces (a global,
    cumulative index: ``state[cutoff:]`` follow the summary). ``file_path`` is
    the virtual path of the archive holding ``state[previous_cutoff:cutoff]``,
    or ``None`` when that write failed.
    """

    cutoff: int
    summary_message: Message
    file_path: str | None = None
    previous_cutoff: int = 0
    summary_usage: Usage | None = None
    summary_error: str | None = None
    created_at: str = attrs.field(factory=_now)
    #: How the L2 request sent the kept messages that L1 (or the tail trim)
    #: rewrote: ``(offset after the cutoff, message key, sent form)``. Later
    #: calls send those messages in the same form (see :func:`apply_sent_forms`).
    sent_forms: tuple[tuple[int, str, Message], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable form (what checkpointers store)."""
        out = {
            "cutoff": self.cutoff,
            "summary_message": message_to_dict(self.summary_message),
            "file_path": self.file_path,
            "previous_cutoff": self.previous_cutoff,
            "summary_usage": self.summary_usage.to_dict() if self.summary_usage else None,
            "summary_error": self.summary_error,
            "created_at": self.created_at,
        }
        if self.sent_forms:
            out["sent_forms"] = [
                {"offset": offset, "key": key, "message": message_to_dict(form)}
                for offset, key, form in self.sent_forms
            ]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SummarizationEvent:
        usage = data.get("summary_usage")
        summary = data["summary_message"]
        return cls(
            cutoff=int(data["cutoff"]),
            summary_message=summary if isinstance(summary, Message) else message_from_dict(summary),
            file_path=data.get("file_path"),
            previous_cutoff=int(data.get("previous_cutoff", 0)),
            summary_usage=Usage.from_dict(usage) if usage else None,
            summary_error=data.get("summary_error"),
            created_at=data.get("created_at") or _now(),
            sent_forms=tuple(
                (int(f["offset"]), str(f["key"]), message_from_dict(f["message"]))
                for f in data.get("sent_forms") or ()
            ),
        )


def effective_messages(state: Sequence[Message], event: SummarizationEvent | None) -> list[Message]:
    """``[event.summary_message] + state[event.cutoff:]``, or the state when there
    is no event. A new list; ``state`` is untouched."""
    if event is None:
        return list(state)
    return [event.summary_message, *state[event.cutoff :]]


def message_key(message: Message) -> str:
    """A stable identity for a message: its id, or a hash of its content."""
    if message.id:
        return message.id
    return "sha256:" + text_sha256(json.dumps(message_to_dict(message), sort_keys=True))


def apply_sent_forms(effective: list[Message], event: SummarizationEvent | None) -> list[Message]:
    """The effective messages with the kept messages in the form the last L2
    request sent them (offloaded results stay offloaded), so that every later
    request repeats the bytes a prompt cache already holds.

    Only the window right after the summary is looked at (the messages that
    were kept), matched by message key, so edits that moved or removed them
    are tolerated. ``effective`` is changed in place and returned.
    """
    if event is None or not event.sent_forms or not effective:
        return effective
    forms = {key: form for _, key, form in event.sent_forms}
    window = event.sent_forms[-1][0] + 1
    for i in range(1, min(len(effective), 1 + window)):
        form = forms.get(message_key(effective[i]))
        if form is not None:
            effective[i] = form
    return effective


def sent_forms_of(
    raw: Sequence[Message], sent: Sequence[Message]
) -> tuple[tuple[int, str, Message], ...]:
    """The messages of ``sent`` that differ from ``raw`` (same positions), as
    :attr:`SummarizationEvent.sent_forms` records them."""
    return tuple(
        (offset, message_key(original), form)
        for offset, (original, form) in enumerate(zip(raw, sent, strict=True))
        if form is not original and form != original
    )


def to_global_cutoff(local_cutoff: int, event: SummarizationEvent | None) -> int:
    """Convert a cutoff into the effective messages into a global one.

    With an event, effective index 0 is the summary and index ``i >= 1`` is
    state index ``event.cutoff + i - 1``.
    """
    if event is None:
        return local_cutoff
    if local_cutoff < 1:
        raise ValueError("a cutoff inside effective messages with a summary must be >= 1")
    return event.cutoff + local_cutoff - 1


@attrs.frozen
class CompressionEvent:
    """One stream record of a compression round.

    ``level`` is the deepest level the round reached. ``cutoff`` and
    ``file_path`` are set only on an L2 ``completed``/``failed`` record:
    an L1-only ``completed`` carries neither, so consumers can tell the level.
    """

    phase: Phase
    level: Level
    round_id: str
    forced: bool = False
    tokens_before: int | None = None
    tokens_after: int | None = None
    threshold: int | None = None
    cutoff: int | None = None
    file_path: str | None = None
    offloaded: tuple[str, ...] = ()
    truncated_args: int = 0
    summary_usage: Usage | None = None
    error: str | None = None
    timestamp: str = attrs.field(factory=_now)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable payload (the ``data`` of an SSE frame)."""
        out: dict[str, Any] = {
            "type": "context_compression",
            "phase": self.phase,
            "level": self.level,
            "round_id": self.round_id,
            "forced": self.forced,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "threshold": self.threshold,
            "timestamp": self.timestamp,
        }
        if self.offloaded:
            out["offloaded"] = list(self.offloaded)
        if self.truncated_args:
            out["truncated_args"] = self.truncated_args
        if self.cutoff is not None:
            out["cutoff"] = self.cutoff
        if self.file_path is not None:
            out["file_path"] = self.file_path
        if self.summary_usage is not None:
            out["summary_usage"] = self.summary_usage.to_dict()
        if self.error is not None:
            out["error"] = self.error
        return out


EventEmitter = Callable[[CompressionEvent], None]


def _tokens(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else "?"


def describe_event(event: CompressionEvent | Mapping[str, Any]) -> str:
    """What a compression round did, in words, for logs and example output.

    ``started L1: 8,422 tokens ≥ T 16,384``,
    ``completed L1: 8,422 → 3,120 tokens (T 16,384), 2 tool results offloaded``,
    ``completed L2: 8,422 → 3,120 tokens (T 16,384), history archived to outputs/...``,
    ``failed L2: 8,422 tokens (T 16,384), SummarizerError: ...``.
    Takes the event or its JSON form (:meth:`CompressionEvent.to_dict`, an SSE
    frame's data), so a client can describe what it received.
    """
    data = event.to_dict() if isinstance(event, CompressionEvent) else event
    phase, level = data.get("phase"), data.get("level")
    before, after = data.get("tokens_before"), data.get("tokens_after")
    limit = data.get("threshold")
    head = f"{phase} {level}"
    if data.get("forced"):
        head += " (forced by a context overflow)"
    if phase == "started":
        if isinstance(before, int) and isinstance(limit, int):
            compared = "≥" if before >= limit else "<"
            return f"{head}: {_tokens(before)} tokens {compared} T {_tokens(limit)}"
        return f"{head}: {_tokens(before)} tokens"
    bound = f" (T {_tokens(limit)})" if isinstance(limit, int) else ""
    if phase == "failed":
        return f"{head}: {_tokens(before)} tokens{bound}, {data.get('error') or 'unknown error'}"
    text = f"{head}: {_tokens(before)} → {_tokens(after)} tokens{bound}"
    details: list[str] = []
    offloaded = list(data.get("offloaded") or ())
    if offloaded:
        noun = "tool result" if len(offloaded) == 1 else "tool results"
        details.append(f"{len(offloaded)} {noun} offloaded to {', '.join(offloaded)}")
    truncated = data.get("truncated_args") or 0
    if truncated:
        noun = "argument" if truncated == 1 else "arguments"
        details.append(f"{truncated} large {noun} truncated")
    if level == "L2" and data.get("cutoff") is not None:
        where = data.get("file_path")
        archived = f"history archived to {where}" if where else "history archive not written"
        details.append(f"{archived}, summary covers messages 1-{data['cutoff']}")
    return ", ".join([text, *details])
