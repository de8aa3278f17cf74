"""The stream: what a compression round reports while it runs.

:class:`CompressionEvent` is one record of a round: ``started``, then
``completed`` or ``failed`` (the one event type every observer gets: an
``emitter`` callback, a plugin's ``compression_event`` hook, the LangGraph
custom stream, SSE frames, LlamaIndex instrumentation).
:func:`describe_event` says what a round did in words.

What L2 *persists* is another record, the summarization event kept in the
agent's state (:mod:`ars_core.checkpoint`).
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, KeysView, Mapping, Sequence, ValuesView
from typing import Any

import attrs

from .checkpoint import timestamp_now
from .errors import MessageFormatError
from .layout import LARGE_USER_MESSAGES_DIR, MEDIA_DIR
from .retention import Retention
from .totals import CountLater
from .typing import EventEmitter, Level, Phase
from .usage import Usage

__all__ = [
    "SSE_EVENT_TYPE",
    "CompressionEvent",
    "EventEmitter",
    "Level",
    "Phase",
    "describe_event",
]


#: the ``type`` of a compression event's payload (and the SSE event name)
SSE_EVENT_TYPE = "context_compression"


@attrs.frozen
class CompressionEvent:
    """One stream record of a compression round: the one event type observers get.

    ``level`` is the deepest level the round reached. ``cutoff`` and
    ``file_path`` are set only on an L2 ``completed``/``failed`` record:
    an L1-only ``completed`` carries neither, so consumers can tell the level.

    Every observer sees the same record: an ``emitter``/``on_event`` callback and a
    plugin's ``compression_event`` hook get this object, the LangGraph custom
    stream, SSE frames and LlamaIndex payloads carry its :meth:`to_dict` (plain
    JSON), and :meth:`from_dict` reads that back. The object also reads like its
    dict, so code written for one works on the other: ``event["phase"]``,
    ``event.get("cutoff")``, ``"file_path" in event``, ``dict(event)``.
    """

    phase: Phase
    level: Level
    round_id: str
    forced: bool = False
    #: the request's size before compression: exact, counted when first read when the
    #: engine decided by a bound and needed no count (see :attr:`tokens_before`)
    _tokens_before: int | CountLater | None = attrs.field(
        default=None, alias="tokens_before", eq=lambda v: _value(v)
    )
    #: the request's size after compression: exact, counted when first read when the
    #: engine found the view within T by a bound (see :attr:`tokens_after`)
    _tokens_after: int | CountLater | None = attrs.field(
        default=None, alias="tokens_after", eq=lambda v: _value(v)
    )
    threshold: int | None = None
    cutoff: int | None = None
    file_path: str | None = None
    offloaded: tuple[str, ...] = ()
    truncated_args: int = 0
    summary_usage: Usage | None = None
    error: str | None = None
    timestamp: str = attrs.field(factory=timestamp_now)
    retention: Retention | None = None
    #: where T came from when it follows the model ("85% of the model's ... window")
    threshold_source: str | None = None
    #: the round was asked for (a compaction tool, ``compact_now``), not triggered by size
    requested: bool = False
    #: tool results left out of the view sent: no call of the message heading their block
    orphan_results: int = 0
    #: tool calls with no result, answered in the view sent with a synthetic result
    unanswered_calls: int = 0

    @property
    def tokens_before(self) -> int | None:
        """The exact size of the request before compression (the system message, the
        tools and the effective messages); an engine that found it above T by a bound
        counts it when this is first read."""
        return _value(self._tokens_before)

    @property
    def tokens_after(self) -> int | None:
        """The exact size of the request sent after compression; counted when first
        read when the engine found it within T by a bound."""
        return _value(self._tokens_after)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable payload (the ``data`` of an SSE frame)."""
        out: dict[str, Any] = {
            "type": SSE_EVENT_TYPE,
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
        if self.retention is not None:
            out["retention"] = self.retention.to_dict()
        if self.threshold_source is not None:
            out["threshold_source"] = self.threshold_source
        if self.requested:
            out["requested"] = True
        if self.orphan_results:
            out["orphan_results"] = self.orphan_results
        if self.unanswered_calls:
            out["unanswered_calls"] = self.unanswered_calls
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CompressionEvent:
        """The event a :meth:`to_dict` payload (a stream chunk, an SSE frame's data)
        describes."""
        if not isinstance(data, Mapping) or data.get("type", SSE_EVENT_TYPE) != SSE_EVENT_TYPE:
            raise MessageFormatError("not a context_compression event payload")
        try:
            usage = data.get("summary_usage")
            retention = data.get("retention")
            return cls(
                phase=data["phase"],
                level=data["level"],
                round_id=str(data["round_id"]),
                forced=bool(data.get("forced", False)),
                tokens_before=data.get("tokens_before"),
                tokens_after=data.get("tokens_after"),
                threshold=data.get("threshold"),
                cutoff=data.get("cutoff"),
                file_path=data.get("file_path"),
                offloaded=tuple(data.get("offloaded") or ()),
                truncated_args=int(data.get("truncated_args") or 0),
                summary_usage=Usage.from_dict(usage) if usage else None,
                error=data.get("error"),
                timestamp=str(data.get("timestamp") or timestamp_now()),
                retention=Retention.from_dict(retention) if retention else None,
                threshold_source=data.get("threshold_source"),
                requested=bool(data.get("requested", False)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise MessageFormatError(f"malformed context_compression payload: {exc}") from exc

    # the record read like its dict (a read-only mapping of :meth:`to_dict`)

    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.to_dict().get(key, default)

    def keys(self) -> KeysView[str]:
        return self.to_dict().keys()

    def items(self) -> ItemsView[str, Any]:
        return self.to_dict().items()

    def values(self) -> ValuesView[Any]:
        return self.to_dict().values()

    def __contains__(self, key: object) -> bool:
        return key in self.to_dict()

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())


def _value(tokens: int | CountLater | None) -> int | None:
    return tokens.value() if isinstance(tokens, CountLater) else tokens


#: what an offload path holds, by its folder (anything else: a tool result)
_OFFLOAD_KINDS = (
    (f"{MEDIA_DIR}/", "inline media part", "inline media parts"),
    (f"{LARGE_USER_MESSAGES_DIR}/", "user message", "user messages"),
)


def _offloaded_kinds(paths: Sequence[str]) -> str:
    """``2 tool results``, ``1 tool result and 2 inline media parts``..."""
    counts: dict[tuple[str, str], int] = {}
    for path in paths:
        kind = next(
            ((one, many) for prefix, one, many in _OFFLOAD_KINDS if path.startswith(prefix)),
            ("tool result", "tool results"),
        )
        counts[kind] = counts.get(kind, 0) + 1
    return " and ".join(f"{n} {one if n == 1 else many}" for (one, many), n in counts.items())


def _tokens(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else "?"


def describe_event(event: CompressionEvent | Mapping[str, Any]) -> str:
    """What a compression round did, in words, for logs and example output.

    ``started L1: 8,422 tokens ≥ T 16,384``,
    ``completed L1: 8,422 → 3,120 tokens (T 16,384), 2 tool results offloaded``,
    ``completed L2: 8,422 → 3,120 tokens (T 16,384), history archived to outputs/...``,
    ``failed L2: 8,422 tokens (T 16,384), SummarizerError: ...``; when T follows
    the model, where it came from: ``(T 108,800: 85% of the model's 128,000-token
    input window)``.
    Takes the event or its JSON form (:meth:`CompressionEvent.to_dict`, an SSE
    frame's data), so a client can describe what it received.
    """
    data = event.to_dict() if isinstance(event, CompressionEvent) else event
    phase, level = data.get("phase"), data.get("level")
    before, after = data.get("tokens_before"), data.get("tokens_after")
    limit = data.get("threshold")
    source = data.get("threshold_source")
    head = f"{phase} {level}"
    if data.get("forced"):
        head += " (forced by a context overflow)"
    elif data.get("requested"):
        head += " (requested)"
    if phase == "started":
        if isinstance(before, int) and isinstance(limit, int):
            compared = "≥" if before >= limit else "<"
            of = f" ({source})" if source else ""
            return f"{head}: {_tokens(before)} tokens {compared} T {_tokens(limit)}{of}"
        return f"{head}: {_tokens(before)} tokens"
    of = f": {source}" if source else ""
    bound = f" (T {_tokens(limit)}{of})" if isinstance(limit, int) else ""
    if phase == "failed":
        return f"{head}: {_tokens(before)} tokens{bound}, {data.get('error') or 'unknown error'}"
    text = f"{head}: {_tokens(before)} → {_tokens(after)} tokens{bound}"
    details: list[str] = []
    offloaded = list(data.get("offloaded") or ())
    if offloaded:
        details.append(f"{_offloaded_kinds(offloaded)} offloaded to {', '.join(offloaded)}")
    truncated = data.get("truncated_args") or 0
    if truncated:
        noun = "argument" if truncated == 1 else "arguments"
        details.append(f"{truncated} large {noun} truncated")
    orphans, unanswered = data.get("orphan_results") or 0, data.get("unanswered_calls") or 0
    if orphans:
        plural = "s" if orphans != 1 else ""
        details.append(f"{orphans} tool result{plural} without a call left out")
    if unanswered:
        noun = "call" if unanswered == 1 else "calls"
        details.append(f"{unanswered} tool {noun} without a result answered with a note")
    if level == "L2" and data.get("cutoff") is not None:
        where = data.get("file_path")
        archived = f"history archived to {where}" if where else "history archive not written"
        details.append(f"{archived}, summary covers messages 1-{data['cutoff']}")
    return ", ".join([text, *details])
