"""What an engine keeps by value, not by history: the values of the last keys asked for.

A :class:`Recent` lives in an engine's memo (:meth:`~ars_core.memo.Memo.single`), so
it is freed with the engine: the index of each task text the retention audit
measures (a task keeps its first request while its newest changes), and the
counts of the texts a summary's task framing and body come to (the same task
sections come back round after round).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["Recent"]

T = TypeVar("T")


class Recent(Generic[T]):
    """The values of the last ``slots`` keys asked for (made when missing)."""

    def __init__(self, slots: int = 16) -> None:
        self._values: OrderedDict[Hashable, T] = OrderedDict()
        self._slots = slots
        self._lock = threading.Lock()

    def get(self, key: Hashable, make: Callable[[], T]) -> T:
        """The value of ``key``, made (and kept) when missing."""
        with self._lock:
            value = self._values.get(key)
            if value is not None:
                self._values.move_to_end(key)
                return value
        value = make()
        with self._lock:
            self._values[key] = value
            while len(self._values) > self._slots:
                self._values.popitem(last=False)
        return value
