"""What a message is: the values ARS keeps on a message itself (its private
``Message._cache``), each of one :class:`Family` of :data:`FAMILIES` (the table in
:mod:`ars_core.memo`'s documentation); no module reads or writes ``_cache`` but
through one.

The families of :data:`UNTIL_SUMMARIZED` hold what only a request holding the message
or an L2 round covering it reads: its L1 form, its shortened copy, what the round's
summary input and audit find in it. Once a stored summary covers a message, no later
request holds it and no later round covers it while that summary stands, so the
next round drops those values from it (:func:`forget_covered`): a history of thousands
of summarized messages does not keep a preview, a copy and the audit's findings of
each. They are pure functions of the message: one needed again (the summary's event
dropped, the history read whole) is made again, the same. What the whole history is
read for (token counts, request texts, content keys) stays.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, Generic, TypeVar

from .messages import Message

__all__ = ["FAMILIES", "UNTIL_SUMMARIZED", "Family", "forget_covered"]

T = TypeVar("T")


class Family(Generic[T]):
    """One kind of value kept on messages: ``name`` (the key, with any parameters
    the value depends on), the module that writes it and what it holds."""

    __slots__ = ("holds", "name", "owner")

    def __init__(self, name: str, owner: str, holds: str) -> None:
        self.name = name
        self.owner = owner
        self.holds = holds

    def key(self, *params: Hashable) -> Hashable:
        """The key of this family's value for ``params`` (what the value depends on
        besides the message)."""
        return (self.name, *params) if params else self.name

    def get(self, message: Message, key: Hashable | None = None) -> T | None:
        """The value kept on ``message`` (under ``key``, default the bare family)."""
        value: T | None = message._cache.get(self.name if key is None else key)
        return value

    def put(self, message: Message, value: T, key: Hashable | None = None) -> T:
        message._cache[self.name if key is None else key] = value
        return value

    def of(self, message: Message, compute: Callable[[Message], T], key: Hashable = None) -> T:
        """The value kept on ``message``, computed (and kept) when missing."""
        cache = message._cache
        k = self.name if key is None else key
        value: T | None = cache.get(k)
        if value is None:
            value = cache[k] = compute(message)
        return value

    def get_many(self, messages: Sequence[Message], key: Hashable) -> list[T | None]:
        """The values kept on each of ``messages`` (``None`` where missing), in one pass."""
        return [m._cache.get(key) for m in messages]

    def holds_value(self, message: Message, key: Hashable | None = None) -> bool:
        return (self.name if key is None else key) in message._cache

    def __repr__(self) -> str:
        return f"Family({self.name!r}, {self.owner})"


TOKENS: Family[int] = Family("tokens", "estimate", "an estimator's token count (per estimator)")
FLOOR: Family[int] = Family("floor", "floors", "a floor of its exact o200k/cl100k count")
L1_PLAN: Family[Any] = Family("l1", "l1", "the message's L1 plan (per limits and estimator)")
L1_USER: Family[Any] = Family("l1-user", "l1_user", "a user message's offload above T")
L1_MEDIA: Family[Any] = Family("l1-media", "l1_media", "the message with inline media offloaded")
KEPT_KIND: Family[int] = Family("kept-kind", "summarize", "summary/system, user request or other")
SHORTENED: Family[Message] = Family("shortened", "summarize", "a request shortened to a length")
REQUEST_TEXT: Family[str] = Family("request-text", "retention", "its text as a user request")
EDITED_FILES: Family[tuple[str, ...]] = Family(
    "edited-files", "retention", "paths its tool calls write"
)
COMMANDS: Family[tuple[str, ...]] = Family("commands", "retention", "commands its tool calls run")
ERROR_LINES: Family[tuple[str, ...]] = Family(
    "error-lines", "retention", "error lines of a tool result"
)
CONTENT_KEY: Family[str] = Family("content-key", "checkpoint", "sha: of its content")
FORM_KEY: Family[str] = Family("form-key", "checkpoint", "content key plus its own metadata")
COVERED: Family[bool] = Family(
    "covered", "families", "a mark: a stored summary covers it, its until-summarized values dropped"
)

#: the values only a request holding the message or a round covering it reads
UNTIL_SUMMARIZED: tuple[Family[Any], ...] = (
    L1_PLAN,
    L1_USER,
    L1_MEDIA,
    SHORTENED,
    KEPT_KIND,
    EDITED_FILES,
    ERROR_LINES,
    COMMANDS,
)

#: every kind of value kept on a message, in one table
FAMILIES: tuple[Family[Any], ...] = (
    TOKENS,
    FLOOR,
    L1_PLAN,
    L1_USER,
    L1_MEDIA,
    KEPT_KIND,
    SHORTENED,
    REQUEST_TEXT,
    EDITED_FILES,
    COMMANDS,
    ERROR_LINES,
    CONTENT_KEY,
    FORM_KEY,
    COVERED,
)


def forget_covered(messages: Sequence[Message], end: int) -> None:
    """Drop the :data:`UNTIL_SUMMARIZED` values kept on ``messages[:end]``, the messages
    the summary a call came with covers (its event is stored: no later request holds
    them, no later round covers them while it stands), each message's other values
    moved to a dict of their size (a dict never shrinks by deletion) with the
    :data:`COVERED` mark, the keys that are not strings (an estimator's tuple) first: a
    dict begun with string keys is rebuilt larger when another key comes (in CPython,
    352 bytes for three keys against 224). From ``end - 1`` back to the first message
    already marked, or holding nothing (never read in this process: a history resumed
    cold), so each message is done once. A round's own summarized part is not dropped
    by that round: a round whose summary is not stored (the next call comes without it)
    summarizes them again. A value another thread keeps meanwhile may be lost: it is
    made again when needed."""
    names, mark = _UNTIL_SUMMARIZED, COVERED.name
    for i in range(min(end, len(messages)) - 1, -1, -1):
        m = messages[i]
        cache = m._cache
        if not cache or mark in cache:
            return
        kept = {}  # loops, not comprehensions: no function made per message
        try:
            for k, v in cache.items():
                if type(k) is not str and (k[0] if type(k) is tuple and k else k) not in names:
                    kept[k] = v
            for k, v in cache.items():
                if type(k) is str and k not in names:
                    kept[k] = v
        except RuntimeError:  # changed by another thread while read: left as it is
            continue
        kept[mark] = True
        _set_cache(m, "_cache", kept)


_UNTIL_SUMMARIZED = frozenset(f.name for f in UNTIL_SUMMARIZED)
_set_cache = object.__setattr__
