"""A message whose text is made when it is first read.

L1 replaces each large tool result by a form holding a header (its token count)
and a preview fitted to a token budget: both need the result counted. In
an L2 round most of those forms are summarized at once and never read (the
archive holds the originals, the files hold their text): a pending form is a
:class:`~ars_core.messages.Message` whose role, ids, name, tool calls and metadata
are set and whose ``content`` is made by ``fill`` the first time anything reads
it (its text, its count, an equality, a copy). From then on it is an ordinary
``Message`` (its class is switched back), equal to the one made at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs

from .messages import Message

__all__ = ["cannot_hold", "has_text_content", "is_pending", "made", "pending_form"]

#: where a pending form keeps what makes its content (in its own ``_cache``)
_FILL = "pending-content"
#: where it keeps whether a word may be in its content (see :func:`cannot_hold`)
_MAY_HOLD = "pending-may-hold"
#: the content slot of every message (the pending class hides it behind a property)
_CONTENT: Any = Message.__dict__["content"]
#: the fields copied from the prototype (the content and the scratch space aside)
_FIELDS = tuple(f.name for f in attrs.fields(Message) if f.name not in ("content", "_cache"))


def _materialize(form: Message) -> Message:
    """``form`` with its content made (once; a race makes the same content twice)."""
    fill = form._cache.get(_FILL)
    if fill is not None:
        _CONTENT.__set__(form, fill(form))
        object.__setattr__(form, "__class__", Message)
        form._cache.pop(_FILL, None)
        form._cache.pop(_MAY_HOLD, None)
    return form


class _PendingForm(Message):
    """A :class:`Message` whose content is made when first read (see the module doc)."""

    __slots__ = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        # attrs.evolve and the attrs copy protocols build a plain message of the fields
        return Message(*args, **kwargs) if args or kwargs else object.__new__(cls)

    @property
    def content(self) -> Any:
        return _CONTENT.__get__(_materialize(self), Message)

    def __eq__(self, other: object) -> bool:
        return _materialize(self) == other

    def __ne__(self, other: object) -> bool:
        return _materialize(self) != other

    def __hash__(self) -> int:
        return hash(_materialize(self))

    def __repr__(self) -> str:
        return repr(_materialize(self))

    def __reduce_ex__(self, protocol: Any) -> Any:
        return _materialize(self).__reduce_ex__(protocol)


def pending_form(
    proto: Message, fill: Callable[[Message], str], may_hold: Callable[[str], bool] | None = None
) -> Message:
    """A message with ``proto``'s fields whose content is ``fill(message)``, made when
    first read (``fill`` may keep values on the message, as its count). ``may_hold``,
    when given, tells without making it whether a word (of no digits) may be in the
    content (see :func:`cannot_hold`)."""
    form = object.__new__(_PendingForm)
    for name in _FIELDS:
        object.__setattr__(form, name, getattr(proto, name))
    cache: dict[Any, Any] = {_FILL: fill}
    if may_hold is not None:
        cache[_MAY_HOLD] = may_hold
    object.__setattr__(form, "_cache", cache)
    return form


def cannot_hold(message: Message, words: Iterable[str]) -> bool:
    """Whether ``message`` is a pending form whose content, once made, holds none of
    ``words`` (words of no digits), as its maker tells without making it; ``False``
    for any other message (its text tells)."""
    may_hold = message._cache.get(_MAY_HOLD) if type(message) is _PendingForm else None
    return may_hold is not None and not any(map(may_hold, words))


def is_pending(message: Message) -> bool:
    """Whether ``message``'s content is not made yet."""
    return type(message) is _PendingForm


def has_text_content(message: Message) -> bool:
    """Whether ``message``'s content is a string (a pending form's always is), without
    making a pending form's content."""
    return type(message) is _PendingForm or isinstance(message.content, str)


def made(messages: list[Message]) -> list[Message]:
    """``messages``, every pending form among them made (in place): what leaves the
    engine (a request, a summarizer's input) holds only ordinary messages."""
    for m in messages:
        if type(m) is _PendingForm:
            _materialize(m)
    return messages
