"""What one engine call works out once: the first messages of the history it
checked, known to be those (:func:`head`), and answers about the very same
objects read again in the call (:func:`once_per_call`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from .memo import _CURRENT, _checked_this_call

__all__ = ["head", "once_per_call"]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def head(messages: Sequence[T], start: int, end: int) -> Sequence[T]:
    """``messages[start:end]``. When ``start`` is 0 and ``messages`` is the history the
    running engine call checked (or a head of it), the part is known to be that
    history's first messages: a memo tracking it takes the call's check (the link of
    :class:`~ars_core.memo.Tracked`) instead of comparing it, message by message, with
    what it remembers. The part must not be changed in place while the call runs."""
    part = messages[start:end]
    if start == 0 and part and (via := _checked_this_call(messages)) is not None:
        scope = _CURRENT.get()
        assert scope is not None
        scope.heads[id(part)] = (part, len(part), via)  # kept alive (its id is its own)
    return part


def once_per_call(fn: F) -> F:
    """``fn(messages, *rest)`` worked out once per engine call for the very same objects
    (``messages`` at the same length, each of ``rest``): a round reads its summarized
    part when it cuts and when it summarizes. Outside an engine call, every time. The
    answer is shared: its readers do not change it."""

    @functools.wraps(fn)
    def once(messages: Sequence[Any], *rest: Any) -> Any:
        scope = _CURRENT.get()
        if scope is None:
            return fn(messages, *rest)
        key = (once, id(messages), *map(id, rest))
        kept = scope.scratch.get(key)  # the objects kept beside: their ids are their own
        if (
            kept is not None
            and kept[0] is messages
            and kept[1] == len(messages)
            and all(map(_same, kept[2], rest))
        ):
            return kept[3]
        value = fn(messages, *rest)
        scope.scratch[key] = (messages, len(messages), rest, value)
        return value

    return cast(F, once)


def _same(a: object, b: object) -> bool:
    return a is b
