"""Running token totals of a history, exact where counted and bounded elsewhere.

A :class:`Totals` is what a history memo (:mod:`ars_core.memo`) keeps per
estimator: ``totals[i]`` is the size of the history's first ``i`` messages. Up
to :attr:`Totals.exact` messages it is their exact count; past it, an upper
bound read from the estimator's cheap bound (a
:class:`~ars_core.capabilities.BoundedEstimator`), so that a history nothing has
counted is sized without encoding it. :class:`HistorySize` is one call's answer:
the exact total, or a bound with the means to count it exactly when something
reads it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from itertools import accumulate
from typing import Any

__all__ = ["CountLater", "HistorySize", "NewestFirst", "Totals", "no_bound"]


#: whether messages' floors (never above their counts), read in their order, reach a limit
Reach = Callable[[Iterable[Any], int], bool]

#: the "bound" of a history nothing bounded (any count is below it)
UNKNOWN = sys.maxsize


def no_bound(message: Any) -> int:
    """The bound that says nothing (see :meth:`Totals.size`): a history is sized by
    counts alone, as far as a question needs (the bounds of a whole history cost more
    than counting the few newest messages a small limit needs)."""
    return UNKNOWN


class Totals(list[int]):
    """Running sums of a history's message sizes (``self[i]``: the first ``i``),
    exact up to :attr:`exact` messages and upper bounds past it. :attr:`version`
    changes whenever it is emptied for another history."""

    __slots__ = ("base", "exact", "known", "version")

    def __init__(self) -> None:
        super().__init__((0,))
        self.exact = 0
        self.version = 0
        #: positions below it (but 0) hold bounds only, even up to :attr:`exact`: the
        #: exact total of the first ``base`` messages was given (see :meth:`seed`)
        self.base = 0
        #: what :mod:`ars_core.known_size` keeps of this history (its byte bounds)
        self.known: Any = None

    def reset(self) -> None:
        """Emptied for another history."""
        del self[1:]
        self.exact = self.base = 0
        self.version += 1
        self.known = None

    def counted(self, messages: Sequence[Any], count: Callable[[Any], int], n: int) -> int:
        """The exact total of ``messages[:n]`` (``messages`` the history these totals
        describe), counting only what was not counted before."""
        e = self.exact
        if n <= e:
            if n < self.base and n:  # a prefix shorter than the given total: counted
                return sum(map(count, messages[:n]))
            return self[n]
        running = self[e]
        if len(self) == e + 1:  # nothing bounded past the counted part: append
            for m in messages[e:n]:
                running += count(m)
                self.append(running)
        else:  # bounds replaced by counts (later bounds stay valid: counts are below them)
            size = len(self)
            for i in range(e, n):
                running += count(messages[i])
                if i + 1 < size:
                    self[i + 1] = running
                else:
                    self.append(running)
        self.exact = n
        return running

    def seed(self, n: int, tokens: int) -> bool:
        """Take ``tokens`` as the exact total of the first ``n`` messages (a count made
        elsewhere: :mod:`ars_core.known_size`), when nothing was counted yet and the
        bounds reach past them; the later bounds stay (counts are below them)."""
        if self.exact or n >= len(self) or n <= 0:
            return False
        self[n] = tokens
        self.exact = self.base = n
        return True

    def bounded(self, messages: Sequence[Any], bound: Callable[[Any], int], n: int) -> int:
        """At least the total of ``messages[:n]`` (exact where counted), reading the
        bound of messages no earlier call sized."""
        if n < len(self):
            return self[n]
        sums = accumulate(map(bound, messages[len(self) - 1 : n]), initial=self[-1])
        next(sums)  # the running total so far, already kept
        self.extend(sums)
        return self[n]

    def size(
        self,
        messages: Sequence[Any],
        count: Callable[[Any], int],
        bound: Callable[[Any], int] | None,
        lock: Any,
        source: Sequence[Any] | None = None,
    ) -> HistorySize:
        """The size of ``messages`` (the history these totals describe): exact when
        any of it was counted before (its appended messages are counted, as every
        call does), else, given ``bound``, the sum of the bounds (kept as it grows;
        ``lock`` guards these totals when the exact count is made later; ``source``:
        see :meth:`HistorySize.bound`). With ``bound`` :func:`no_bound`, a history nothing
        of which was counted is neither counted nor bounded (a question about its size
        counts it from the newest message back, see :meth:`HistorySize.reaches`)."""
        n = len(messages)
        if bound is None or self.exact:
            size = HistorySize(self.counted(messages, count, n))
        elif bound is no_bound:
            size = HistorySize.bound(UNKNOWN, self, messages, count, lock, source)
        else:
            tokens = self.bounded(messages, bound, n)
            size = HistorySize.bound(tokens, self, messages, count, lock, source)
        size.origin = self
        return size


class HistorySize:
    """The size of one call's history: :attr:`tokens` is its exact count when
    :attr:`exact`, else an upper bound; :meth:`counted` is the exact count (counted
    on first need, into the memo's totals while they still describe this history)."""

    __slots__ = (
        *("_count", "_lock", "_messages", "_n", "_source", "_totals", "_version"),
        *("exact", "origin", "tokens"),
    )

    def __init__(self, tokens: int, exact: bool = True) -> None:
        self.tokens = tokens
        self.exact = exact
        #: the running totals of the history this size was read from (``None``: none)
        self.origin: Totals | None = None
        self._totals: Totals | None = None
        self._version = self._n = 0
        self._messages: Sequence[Any] = ()
        self._source: Sequence[Any] = ()
        self._count: Callable[[Any], int] | None = None
        self._lock: Any = None

    @classmethod
    def bound(
        cls,
        tokens: int,
        totals: Totals,
        messages: Sequence[Any],
        count: Callable[[Any], int],
        lock: threading.RLock | threading.Lock,
        source: Sequence[Any] | None = None,
    ) -> HistorySize:
        """An upper bound ``tokens`` of ``messages``, whose exact count ``totals``
        (guarded by ``lock``) can be brought to. ``source`` is the memo's own list of
        the history (its first ``len(messages)`` are these messages for as long as
        ``totals`` keep their version); without it, or once the totals describe
        another history, the first ``len(messages)`` of ``messages`` are counted."""
        size = cls(tokens, exact=False)
        size._totals, size._version = totals, totals.version
        size._messages, size._n = messages, len(messages)
        size._source = messages if source is None else source
        size._count, size._lock = count, lock
        return size

    def reaches(self, limit: int, floors: Reach | None = None) -> bool:
        """Whether the exact count is at least ``limit``, counting no more than that
        takes: the bound answers below ``limit``; else ``floors`` (whether messages'
        floors, never above their counts, reach a limit) of the messages newest first,
        when given; else messages are counted newest first until their counts reach it
        (what is left counts at least nothing), or all of them (then the exact count
        is kept, as :meth:`counted` keeps it)."""
        if self.exact or self.tokens < limit:
            return self.tokens >= limit
        with self._lock:
            count, totals, n = self._count, self._totals, self._n
            if totals is None or count is None:  # counted by another thread meanwhile
                return self.tokens >= limit
            messages = self._source if totals.version == self._version else self._messages
            newest = map(messages.__getitem__, range(n - 1, -1, -1))
            if floors is not None and floors(newest, limit):
                return True
            running = 0
            for i in range(n - 1, -1, -1):
                running += count(messages[i])
                if running >= limit:
                    return True
        return self.counted() >= limit

    def known_prefix(self, n: int, tokens: int) -> None:
        """Made exact from ``tokens``, the exact count of the first ``n`` messages: only
        the messages after them are counted (kept in the memo's totals while they still
        describe this history)."""
        if self.exact:
            return
        with self._lock:
            totals, count = self._totals, self._count
            if totals is None or count is None:  # counted by another thread meanwhile
                return
            if not (totals.version == self._version and totals.seed(n, tokens)):
                rest = sum(map(count, self._messages[n : self._n]))
                self.tokens, self.exact = tokens + rest, True
                self._messages = self._source = ()
                self._totals = None
                return
        self.counted()  # from the seeded totals

    def counted(self) -> int:
        """The exact count of the history (counted now when only bounded)."""
        if self.exact:
            return self.tokens
        with self._lock:
            count, totals, n = self._count, self._totals, self._n
            if totals is None or count is None:  # counted by another thread meanwhile
                return self.tokens
            if totals.version == self._version:  # still this history's: counts kept there
                total = totals.counted(self._source, count, n)
            else:
                total = sum(map(count, self._messages[:n]))
            self.tokens, self.exact = total, True
            self._messages = self._source = ()
            self._totals = None
        return total


class CountLater:
    """An exact count made when first read: the history's (:meth:`HistorySize.counted`)
    plus ``extra`` (the system message and the tools). A stream event carries it for
    ``tokens_before`` when the engine decided by a bound and never needed the count,
    and for ``tokens_after`` when a round's view was found within T by its bound."""

    __slots__ = ("_extra", "_size")

    def __init__(self, size: HistorySize, extra: int) -> None:
        self._size, self._extra = size, extra

    def value(self) -> int:
        return self._size.counted() + self._extra

    @property
    def exact(self) -> bool:
        """Whether the count is made (reading :meth:`value` counts nothing)."""
        return self._size.exact

    def __repr__(self) -> str:  # a repr counts nothing (a debugger, a log of a task)
        if self._size.exact:
            return repr(self.value())
        return f"<at most {self._size.tokens + self._extra}, counted when read>"


class NewestFirst:
    """The exact total of ``messages`` (plus ``extra``), counted from the newest
    message back only as far as a question needs: whether it exceeds a limit reads
    the newest messages until their counts pass it (a view far above a threshold
    counts a few), the total reads them all. One call's, not thread-safe."""

    __slots__ = ("_count", "_floors", "_messages", "_next", "_sum")

    def __init__(
        self,
        messages: Sequence[Any],
        count: Callable[[Any], int],
        extra: int,
        floors: Reach | None = None,
    ) -> None:
        self._messages, self._count, self._floors = messages, count, floors
        self._next, self._sum = len(messages), extra

    def exceeds(self, limit: int) -> bool:
        """Whether the exact total is above ``limit``: by ``floors`` (whether messages'
        floors, never above their counts, reach a limit) of the messages not counted
        yet, newest first, when given and they tell; else by counts."""
        messages, count = self._messages, self._count
        if self._floors is not None and self._sum <= limit:
            newest = map(messages.__getitem__, range(self._next - 1, -1, -1))
            if self._floors(newest, limit - self._sum + 1):
                return True
        while self._sum <= limit and self._next > 0:
            self._next -= 1
            self._sum += count(messages[self._next])
        return self._sum > limit

    def total(self) -> int:
        """The exact total (every message counted)."""
        messages, count = self._messages, self._count
        while self._next > 0:
            self._next -= 1
            self._sum += count(messages[self._next])
        return self._sum
