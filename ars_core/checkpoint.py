"""The checkpoint: the summarization event L2 persists in the agent's state.

``SummarizationEvent`` is the ``_summarization_event`` record kept in the
agent's state: the *cumulative, global* cutoff into the state
messages, the summary message, and the history file's path when the archive
write succeeded. :func:`effective_messages` rebuilds "latest summary +
messages after the cutoff"; :func:`to_global_cutoff` converts a cutoff chosen
in the effective messages into a global one across chained summaries. Both
records serialise to plain JSON (:meth:`SummarizationEvent.to_dict`) so any
checkpointer can store them.

The event is *anchored* to the identity of the messages around its cutoff
(the last message it summarizes and the first one it keeps: the message id,
or a content hash where a message has none). :func:`check_event` verifies
the anchor on every call, in constant time when nothing was edited; after an
edit (messages removed, replaced, the history cleared) it re-anchors the
event, and when the summarized messages cannot be found any more it drops
the event rather than guess, so every state message the summary does not
cover reaches the model. Events persisted before anchors existed are checked
by position and adopt an anchor.

What a compression round *streams* (``started``, then ``completed`` or
``failed``) is another record, in :mod:`ars_core.stream`; ``ars_core.events``
re-exports both for code written before they were split.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Mapping, Sequence
from itertools import repeat
from typing import Any

import attrs

from .errors import MessageFormatError
from .memo import CONTENT_KEY, FORM_KEY
from .messages import Message, message_from_dict, message_to_dict
from .paths import text_sha256
from .retention import Retention
from .usage import Usage

__all__ = [
    "ANCHOR_WINDOW",
    "Anchor",
    "EventCheck",
    "SummarizationEvent",
    "apply_sent_forms",
    "check_event",
    "content_key",
    "effective_messages",
    "form_key",
    "message_key",
    "reads_kept_part_only",
    "sent_forms_of",
    "timestamp_now",
    "to_global_cutoff",
]


def timestamp_now() -> str:
    """The current UTC time, ISO 8601 to the millisecond (the records' timestamps)."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")


@attrs.frozen
class Anchor:
    """The identity of the messages on both sides of an event's cutoff.

    ``last`` is the :func:`message_key` of the last summarized message
    (``state[cutoff - 1]``), ``next`` that of the first kept one
    (``state[cutoff]``), ``None`` when there is no such message.

    A message without an id is known by a content hash only, and look-alike
    messages ("ok", "continue") share one, so a pair of them can repeat in a
    history. An anchor on such messages also holds ``window``, the keys of
    the last :data:`ANCHOR_WINDOW` summarized messages (``last`` included), and
    ``first``, the key of the history's first message: the cutoff is trusted
    where it was only when all of them still match, and it is moved only to a
    place where the pair occurs once and the window matches (see
    :func:`check_event`). Anchors on message ids hold neither.
    """

    last: str | None
    next: str | None
    first: str | None = None
    window: tuple[str, ...] = ()

    @property
    def by_content(self) -> bool:
        """Whether a side of the pair is known by a content hash (no message id)."""
        last, nxt = self.last, self.next  # read on every call: no generator
        return (last is not None and not last.startswith("id:")) or (
            nxt is not None and not nxt.startswith("id:")
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"last": self.last, "next": self.next}
        if self.first is not None:
            out["first"] = self.first
        if self.window:
            out["window"] = list(self.window)
        return out


#: summarized messages an anchor on content hashes remembers before its cutoff
ANCHOR_WINDOW = 4


def message_key(message: Message) -> str:
    """The identity of a state message: ``id:<id>`` when it has an id, else
    its :func:`content_key`."""
    if message.id:
        return f"id:{message.id}"
    return content_key(message)


def content_key(message: Message) -> str:
    """``sha:<hash>`` of a message's role, name, id, content, tool calls and
    tool-call id (metadata excluded): changes whenever the message is edited,
    even in place under the same id. Cached on the message, so each message
    is hashed once."""
    return CONTENT_KEY.of(message, _content_key)


def _content_key(message: Message) -> str:
    body = message_to_dict(message)
    body.pop("metadata", None)
    text = json.dumps(body, ensure_ascii=False, sort_keys=True, default=repr)
    return f"sha:{text_sha256(text)[:32]}"


def form_key(message: Message) -> str:
    """:func:`content_key` plus the message's own metadata (not ARS's ``ars_``
    marks): a ToolMessage replaced under its id by one with the same text but
    another ``status`` is another message to send. Equal to the content key
    for a message without such metadata. Cached on the message."""
    return FORM_KEY.of(message, _form_key)


def _form_key(message: Message) -> str:
    own = {k: v for k, v in message.metadata.items() if not str(k).startswith("ars_")}
    key = content_key(message)
    if own:
        text = json.dumps(own, ensure_ascii=False, sort_keys=True, default=repr)
        key = f"{key}+{text_sha256(text)[:16]}"
    return key


def anchor_at(state: Sequence[Message], cutoff: int) -> Anchor:
    """The anchor of a cutoff into ``state``."""
    anchor = Anchor(
        last=message_key(state[cutoff - 1]) if 0 < cutoff <= len(state) else None,
        next=message_key(state[cutoff]) if 0 <= cutoff < len(state) else None,
    )
    if not anchor.by_content or cutoff <= 0:
        return anchor
    return attrs.evolve(
        anchor,
        first=message_key(state[0]),
        window=tuple(message_key(m) for m in state[max(0, cutoff - ANCHOR_WINDOW) : cutoff]),
    )


def _event_error(reason: str) -> MessageFormatError:
    return MessageFormatError(reason, source="summarization event")


def _int_field(data: Mapping[str, Any], name: str, default: int | None = None) -> int:
    value = data.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _event_error(f"{name} must be an integer, not {type(value).__name__}")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise _event_error(f"{name} must be an integer, not {value!r}")
    return int(value)


def _opt_str(data: Mapping[str, Any], name: str) -> str | None:
    value = data.get(name)
    if value is not None and not isinstance(value, str):
        raise _event_error(f"{name} must be a string or null, not {type(value).__name__}")
    return value


@attrs.frozen
class SummarizationEvent:
    """The persisted L2 record (``_summarization_event``).

    ``cutoff`` is the number of state messages the summary replaces (a global,
    cumulative index: ``state[cutoff:]`` follow the summary). ``file_path`` is
    the virtual path of the archive holding ``state[previous_cutoff:cutoff]``,
    or ``None`` when that write failed. ``anchor`` identifies the
    messages around the cutoff (``None`` on events persisted before anchors
    existed); see :func:`check_event`.
    """

    cutoff: int
    summary_message: Message
    file_path: str | None = None
    previous_cutoff: int = 0
    summary_usage: Usage | None = None
    summary_error: str | None = None
    created_at: str = attrs.field(factory=timestamp_now)
    #: How the L2 request sent the kept messages that L1 (or the tail trim)
    #: rewrote: ``(offset after the cutoff, form key, sent form)``. Later
    #: calls send those messages in the same form (see :func:`apply_sent_forms`).
    sent_forms: tuple[tuple[int, str, Message], ...] = ()
    anchor: Anchor | None = None
    #: what the retention audit found in the view this round sent (summary + kept messages)
    retention: Retention | None = None

    def anchored(self, state: Sequence[Message], cutoff: int | None = None) -> SummarizationEvent:
        """This event anchored to ``state`` at ``cutoff`` (default: its own);
        ``previous_cutoff`` moves by as much as the cutoff."""
        cut = self.cutoff if cutoff is None else cutoff
        previous = max(0, min(cut, self.previous_cutoff + cut - self.cutoff))
        return attrs.evolve(
            self, cutoff=cut, previous_cutoff=previous, anchor=anchor_at(state, cut)
        )

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
        if self.anchor is not None:
            out["anchor"] = self.anchor.to_dict()
        if self.retention is not None:
            out["retention"] = self.retention.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SummarizationEvent:
        """Inverse of :meth:`to_dict`; a record that is not one raises
        :class:`~ars_core.errors.MessageFormatError` (an :class:`~ars_core.errors.ArsError`)."""
        if not isinstance(data, Mapping):
            raise _event_error(f"an event must be an object, not {type(data).__name__}")
        if "cutoff" not in data or "summary_message" not in data:
            raise _event_error("an event needs 'cutoff' and 'summary_message'")
        summary = data["summary_message"]
        try:
            message = summary if isinstance(summary, Message) else message_from_dict(summary)
            usage = data.get("summary_usage")
            parsed_usage = Usage.from_dict(usage) if usage else None
        except MessageFormatError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise _event_error(f"malformed summary_usage: {exc!r}") from exc
        raw_anchor = data.get("anchor")
        anchor = None
        if raw_anchor is not None:
            if not isinstance(raw_anchor, Mapping):
                raise _event_error("anchor must be an object")
            window = raw_anchor.get("window") or ()
            if not isinstance(window, (list, tuple)) or not all(
                isinstance(key, str) for key in window
            ):
                raise _event_error("anchor window must be a list of strings")
            anchor = Anchor(
                last=_opt_str(raw_anchor, "last"),
                next=_opt_str(raw_anchor, "next"),
                first=_opt_str(raw_anchor, "first"),
                window=tuple(window),
            )
        try:
            sent_forms = tuple(
                (int(f["offset"]), str(f["key"]), message_from_dict(f["message"]))
                for f in data.get("sent_forms") or ()
            )
        except MessageFormatError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise _event_error(f"malformed sent_forms: {exc!r}") from exc
        created = data.get("created_at")
        return cls(
            cutoff=_int_field(data, "cutoff"),
            summary_message=message,
            file_path=_opt_str(data, "file_path"),
            previous_cutoff=_int_field(data, "previous_cutoff", 0),
            summary_usage=parsed_usage,
            summary_error=_opt_str(data, "summary_error"),
            created_at=created if isinstance(created, str) and created else timestamp_now(),
            anchor=anchor,
            sent_forms=sent_forms,
            retention=_retention(data.get("retention")),
        )


def _retention(raw: Any) -> Retention | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise _event_error("retention must be an object")
    try:
        return Retention.from_dict(raw)
    except (TypeError, ValueError) as exc:
        raise _event_error(f"malformed retention: {exc!r}") from exc


def effective_messages(state: Sequence[Message], event: SummarizationEvent | None) -> list[Message]:
    """``[event.summary_message] + state[event.cutoff:]``, or the state when there
    is no event. A new list; ``state`` is untouched. Check the event
    against the state first (:func:`check_event`)."""
    if event is None:
        return list(state)
    return [event.summary_message, *state[event.cutoff :]]


def apply_sent_forms(effective: list[Message], event: SummarizationEvent | None) -> list[Message]:
    """The effective messages with the kept messages in the form the last L2
    request sent them (offloaded results stay offloaded), so that every later
    request repeats the bytes a prompt cache already holds.

    Only the window right after the summary is looked at (the messages that
    were kept), matched by :func:`form_key`: a kept message that was moved
    is still found, and one that was edited (replaced under the same id, its
    text or only its metadata, a tool result's ``status`` say) goes out as it
    now is. ``effective`` is changed in place and returned.
    """
    if event is None or not event.sent_forms or not effective:
        return effective
    forms = {key: form for _, key, form in event.sent_forms}
    window = event.sent_forms[-1][0] + 1
    for i in range(1, min(len(effective), 1 + window)):
        form = forms.get(form_key(effective[i]))
        if form is not None:
            effective[i] = form
    return effective


def sent_forms_of(
    raw: Sequence[Message], sent: Sequence[Message]
) -> tuple[tuple[int, str, Message], ...]:
    """The messages of ``sent`` that differ from ``raw`` (same positions), as
    :attr:`SummarizationEvent.sent_forms` records them."""
    return tuple(
        (offset, form_key(original), form)
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
class EventCheck:
    """What :func:`check_event` found.

    ``event`` is the event to use for this call (``None``: no summary).
    ``changed`` says it differs from the stored one and must be persisted
    (``event=None`` then means "clear the stored event"). ``dropped`` holds
    the reason when the stored event was dropped (``stale`` is that event),
    ``reanchored`` when it was moved to follow an edit.
    """

    event: SummarizationEvent | None
    changed: bool = False
    dropped: str | None = None
    reanchored: str | None = None
    stale: SummarizationEvent | None = None


def _find(state: Sequence[Message], key: str, below: int) -> int | None:
    """The highest index ``<= below`` whose message has identity ``key``."""
    for i in range(min(below, len(state) - 1), -1, -1):
        if message_key(state[i]) == key:
            return i
    return None


def _window_matches(state: Sequence[Message], anchor: Anchor, cut: int) -> bool:
    """Whether the summarized messages just before ``cut`` are the anchor's
    window (as many of them as the history still has before ``cut``: removing
    the oldest messages may have taken the window's first ones)."""
    window = anchor.window
    if not window:
        return True  # an anchor stored before windows existed
    size = min(len(window), cut)
    return [message_key(m) for m in state[cut - size : cut]] == list(window[len(window) - size :])


def _relocate_by_content(state: Sequence[Message], event: SummarizationEvent) -> int | None:
    """Where an event anchored on content hashes has its cutoff now, or ``None``
    when that cannot be told for certain.

    Look-alike messages share a content hash, so a pair found at the old place
    may be a look-alike that moved there when earlier messages were removed.
    The old place is trusted only when the history still starts with the same
    message and the window of summarized messages before the cutoff matches;
    otherwise every place where the pair occurs is looked at, and the cutoff
    moves only when there is exactly one such place and its window matches. Two
    places, or none, and the event is stale: dropped rather than guessed.
    """
    anchor = event.anchor
    assert anchor is not None and anchor.last is not None
    n, cut = len(state), event.cutoff
    last, nxt = anchor.last, anchor.next

    def pair_at(j: int) -> bool:
        if message_key(state[j]) != last:
            return False
        return nxt is None or (j + 1 < n and message_key(state[j + 1]) == nxt)

    if (
        anchor.window  # an anchor stored before windows existed is searched once, then adopts one
        and 0 < cut <= n
        and pair_at(cut - 1)
        and (anchor.first is None or message_key(state[0]) == anchor.first)
        and _window_matches(state, anchor, cut)
    ):
        return cut  # nothing before the cutoff changed: the common case, constant time
    places = [j for j in range(min(cut, n) - 1, -1, -1) if pair_at(j)]
    if len(places) != 1:
        return None  # gone, or a look-alike pair: which one is the cutoff cannot be told
    moved = places[0] + 1
    return moved if _window_matches(state, anchor, moved) else None


def _relocate(state: Sequence[Message], event: SummarizationEvent) -> int | None:
    """Where the event's cutoff is now, or ``None`` when it cannot be told.

    The anchor is a pair: the last summarized message immediately followed by
    the first kept one. Edits only remove or replace messages (new ones are
    appended), so the pair can only have moved earlier: the search looks at
    and below the old position. When one side of the pair is gone (removed,
    or replaced with new content), the other side alone places the cutoff,
    but only if it is a message id. An anchor on content hashes (messages
    without ids) is moved only where it is certain
    (:func:`_relocate_by_content`). When every message the summary covered
    was removed, the summary goes too.
    """
    anchor = event.anchor
    n, cut = len(state), event.cutoff
    if anchor is None:  # persisted before anchors: trust the position if it is one
        return cut if 0 <= cut < n else None
    last, nxt = anchor.last, anchor.next
    if last is None:  # summarizes nothing (cutoff 0)
        return 0 if cut == 0 else None
    if anchor.by_content:
        return _relocate_by_content(state, event)

    def pair_at(j: int) -> bool:
        if message_key(state[j]) != last:
            return False
        return nxt is None or (j + 1 < n and message_key(state[j + 1]) == nxt)

    if 0 < cut <= n and pair_at(cut - 1):
        return cut  # nothing before the cutoff changed: the common case, O(1)
    j = _find(state, last, cut - 1)
    k = _find(state, nxt, cut) if nxt is not None else None
    if j is not None and k == j + 1:
        return k
    if j is not None and k is None:
        return j + 1  # the first kept message went
    if j is None and k and nxt is not None:
        return k  # the last summarized message went (at 0: every summarized one did)
    return None


def reads_kept_part_only(state: Sequence[Any], event: SummarizationEvent | None) -> bool:
    """Whether a call on ``state`` reads nothing before ``event``'s cutoff unless an
    L2 round runs: the event is anchored on message ids, its pair (the last
    summarized message and the first kept one) sits where it was, and every
    message from that pair on is a :class:`Message` record. The summarized part is
    then neither checked nor converted until a round reads it (its requests make
    the task statement): a call's work tracks the kept part, not the history.
    Costs the kept part's length."""
    anchor = event.anchor if event is not None else None
    if event is None or anchor is None or anchor.next is None or anchor.by_content:
        return False
    cut = event.cutoff
    if not 0 < cut < len(state):
        return False
    kept = state[cut - 1 :]
    if not all(map(isinstance, kept, repeat(Message))):  # at C speed
        return False
    return message_key(kept[0]) == anchor.last and message_key(kept[1]) == anchor.next


def check_event(state: Sequence[Message], event: SummarizationEvent | None) -> EventCheck:
    """Check ``event`` against the state messages of this call.

    * anchor still in place (no edit before the cutoff): the event as it is;
    * the messages around the cutoff moved (messages removed or replaced):
      the event re-anchored at their new position, to be persisted;
    * they are gone (the history was cleared or rewritten), or nothing is
      left after the cutoff: the event is dropped, to be cleared from state —
      every state message then reaches the model, none is hidden by a guess;
    * the kept part never opens with a tool result whose call was summarized:
      the cutoff moves forward past it;
    * an event without an anchor (persisted by an older version) is used by
      its position when that position is inside the history, and adopts an
      anchor.

    Constant time unless the history was edited.
    """
    if event is None:
        return EventCheck(None)
    n = len(state)
    cut = _relocate(state, event)
    if cut is None:
        if event.anchor is None:
            reason = f"its cutoff {event.cutoff} is outside the {n} messages of the history"
        else:
            reason = "the messages it summarized were removed or replaced"
        return EventCheck(None, changed=True, dropped=reason, stale=event)
    while cut < n and state[cut].role == "tool":  # an orphan result never opens the window
        cut += 1
    if cut >= n:
        return EventCheck(
            None,
            changed=True,
            dropped="no message is left after the part it summarized",
            stale=event,
        )
    if event.anchor is not None and cut == event.cutoff and event.anchor == anchor_at(state, cut):
        return EventCheck(event)  # the anchor is where it was (checked in constant time)
    moved = event.anchored(state, cut)
    why = None
    same_pair = (
        event.anchor is not None
        and moved.anchor is not None
        and (event.anchor.last, event.anchor.next) == (moved.anchor.last, moved.anchor.next)
    )
    if cut != event.cutoff or (event.anchor is not None and not same_pair):
        why = f"cutoff moved from {event.cutoff} to {cut} after the history was edited"
    return EventCheck(moved, changed=True, reanchored=why)
