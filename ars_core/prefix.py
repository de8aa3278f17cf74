"""Where something is in a history, kept as the history grows.

An L2 round reads a few facts of every message of a long history: which are
user requests, which edited files or reported errors. Most messages hold none
of them, and the history of the next round is the same objects plus a few
more. :class:`SparseIndex` remembers, for the last histories it saw, the
positions of the messages holding something, and extends them with the
appended messages only: a round costs an identity comparison of the history
(at C speed) and work for what is new, not a Python step per message.

A history that is not an extension (or a prefix) of one seen before, message
for message by identity, is read whole again: an edit anywhere is honoured.
"""

from __future__ import annotations

import operator
import threading
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from .messages import Message

__all__ = ["SparseIndex"]

T = TypeVar("T")


class _Seen(Generic[T]):
    __slots__ = ("messages", "positions", "values")

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.positions: list[int] = []
        self.values: list[T] = []


class SparseIndex(Generic[T]):
    """The positions of the messages whose ``value_of`` is truthy, and those values.

    ``value_of`` must depend on the message alone (messages are immutable);
    the last ``slots`` histories are remembered, one per first message."""

    def __init__(self, value_of: Callable[[Message], T], *, slots: int = 8) -> None:
        self._value_of = value_of
        self._slots = slots
        self._seen: OrderedDict[int, list[_Seen[T]]] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, messages: Sequence[Message]) -> tuple[list[int], list[T]]:
        """``(positions, values)`` in ``messages``, positions ascending."""
        if not messages:
            return [], []
        with self._lock:
            seen = self._slot(messages)
            n, known = len(messages), len(seen.messages)
            if n <= known:
                end = bisect_left(seen.positions, n)
                return seen.positions[:end], seen.values[:end]
            value_of = self._value_of
            for i in range(known, n):
                value = value_of(messages[i])
                if value:
                    seen.positions.append(i)
                    seen.values.append(value)
            seen.messages.extend(messages[known:])
            return list(seen.positions), list(seen.values)

    def _slot(self, messages: Sequence[Message]) -> _Seen[T]:
        """The remembered history ``messages`` extends or is a prefix of (a fresh one
        when there is none). Histories are found by their first message; several may
        share it (a history and its L1 view)."""
        key = id(messages[0])
        candidates = self._seen.get(key)
        if candidates is None:
            candidates = self._seen[key] = []
        self._seen.move_to_end(key)
        for seen in candidates:
            if _same_start(seen.messages, messages):
                return seen
        seen = _Seen()
        candidates.insert(0, seen)
        del candidates[_SAME_FIRST:]
        while len(self._seen) > self._slots:
            self._seen.popitem(last=False)
        return seen


#: histories remembered per first message
_SAME_FIRST = 4


def _same_start(known: list[Message], messages: Sequence[Message]) -> bool:
    """Whether ``known`` and ``messages`` hold the same objects over their common length."""
    if not known:
        return False
    return all(map(operator.is_, known, messages))
