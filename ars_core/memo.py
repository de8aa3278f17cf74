"""Everything ARS remembers between calls, and the one rule that keeps it true.

Per-call work tracks what changed because two kinds of things are remembered:

* **What a message is** (its token count, its L1 plan, its archive line...), kept
  on the message itself, in its private ``Message._cache``. A message is frozen
  and an edited message is a new object, so such a value can never go stale.
  Every value kept there belongs to one :class:`Family` of :data:`FAMILIES` (the
  table below, also in ``docs/architecture.md``); no module reads or writes
  ``_cache`` but through one.
* **Where things are in a history** (running token totals, which messages were
  checked to be records, the positions of user requests...), kept by the engine
  that saw the history: a :class:`Memo` owned by each
  :class:`~ars_core.Compressor` (freed with it; no module keeps a history alive).
  Each such memo is a :class:`PrefixMemo` and follows one rule,
  :func:`unchanged_prefix`: the next history *extends* a remembered one when the
  remembered messages are, position for position, its first messages (the same
  objects, or equal ones). Only then is the remembered work reused and the
  appended messages alone read. Anything else (a message replaced by id, a dict
  in place of a message, a removal, an edit the adapters report as a new object)
  makes it a new history, read whole (cheaply: the per-message values above are
  still there). The check is one list comparison at C speed, a few microseconds
  at thousands of messages.

Code that runs inside an engine's call finds that engine's memo with
:func:`current` (a context variable the engine sets for the call); called on its
own, outside any engine, it gets the process's small memo for such calls.

=====================  ===============  ===============================================
family                 written by       value (per message)
=====================  ===============  ===============================================
``tokens``             estimate         an estimator's token count (per estimator)
``l1``                 l1               the message's L1 plan (per limits and estimator)
``l1-user``            l1_user          a user message's offload above T (per T, estimator)
``l1-media``           l1_media         the message with inline media offloaded (per size)
``kept-kind``          summarize        summary/system, user request or other
``shortened``          summarize        a request shortened to a length (per length)
``request-text``       retention        the text as a user request ("" when none)
``edited-files``       retention        paths its tool calls write
``commands``           retention        commands its tool calls run
``error-lines``        retention        error lines of a tool result
``content-key``        checkpoint       ``sha:`` of its content (matching kept messages)
``form-key``           checkpoint       its content key plus its own metadata (sent forms)
``covered``            families         a mark: a stored summary covers it (values dropped)
=====================  ===============  ===============================================

The values a round drops from the messages a stored summary covers: :mod:`ars_core.families`.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import threading
import weakref
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any, Generic, Protocol, TypeVar, cast, runtime_checkable

from .capabilities import has
from .families import (
    COMMANDS,
    CONTENT_KEY,
    COVERED,
    EDITED_FILES,
    ERROR_LINES,
    FAMILIES,
    FLOOR,
    FORM_KEY,
    KEPT_KIND,
    L1_MEDIA,
    L1_PLAN,
    L1_USER,
    REQUEST_TEXT,
    SHORTENED,
    TOKENS,
    UNTIL_SUMMARIZED,
    Family,
    forget_covered,
)
from .messages import Message, as_messages
from .totals import HistorySize, Totals

__all__ = [
    "COMMANDS",
    "CONTENT_KEY",
    "COVERED",
    "EDITED_FILES",
    "ERROR_LINES",
    "FAMILIES",
    "FLOOR",
    "FORM_KEY",
    "KEPT_KIND",
    "L1_MEDIA",
    "L1_PLAN",
    "L1_USER",
    "REQUEST_TEXT",
    "SHORTENED",
    "TOKENS",
    "UNTIL_SUMMARIZED",
    "Family",
    "Memo",
    "PrefixMemo",
    "call_scratch",
    "current",
    "estimator_key",
    "forget_covered",
    "unchanged_prefix",
]

T = TypeVar("T")
S = TypeVar("S")


@runtime_checkable
class KeyedEstimator(Protocol):
    """An estimator that names the key its counts are kept under (``("tokens", ...)``)."""

    @property
    def cache_key(self) -> Hashable: ...


_instance_keys: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_next_key = itertools.count(1)
_keys_lock = threading.Lock()


def instance_key() -> int:
    """A number no other object of this process is given (keys never reused)."""
    with _keys_lock:
        return next(_next_key)


def estimator_key(estimator: object) -> Hashable:
    """The identity values derived from ``estimator``'s counts are kept under: its
    ``cache_key`` when it declares one, else a number given to this estimator object
    alone (two estimators never share values because they share a name)."""
    if has(estimator, KeyedEstimator):  # worked out once per class
        return cast(KeyedEstimator, estimator).cache_key
    with _keys_lock:
        try:
            key = _instance_keys.get(estimator)
            if key is None:
                key = _instance_keys[estimator] = next(_next_key)
        except TypeError:  # neither weakly referable nor hashable: its id, for this call
            return ("id", id(estimator))
    return ("estimator", key)


# ---------------------------------------------------------------- where things are


def unchanged_prefix(known: Sequence[object], messages: Sequence[object]) -> bool:
    """The rule every history memo follows: whether the remembered ``known`` and
    ``messages`` hold the same messages (the same objects, or equal ones) over their
    common length, i.e. ``messages`` is ``known`` plus appended messages (or a
    prefix of it). One list comparison, at C speed (identity is checked first)."""
    n = min(len(known), len(messages))
    if not n:
        return False
    if len(messages) > n and isinstance(known, list) and isinstance(messages, list):
        known += messages[n:]  # compared in place, no copy of the history; undone below
        try:
            return bool(known == messages)
        except Exception:  # a message whose metadata cannot be compared (an array): changed
            return False
        finally:
            del known[n:]
    head = messages if isinstance(messages, list) and len(messages) == n else list(messages[:n])
    try:
        return bool((known if len(known) == n else known[:n]) == head)
    except Exception:
        return False


class Tracked(Generic[S]):
    """One remembered history: its messages (a list of ARS's own) and what a memo
    derived from them (``state``). ``link`` names the engine's checked history (and
    its ``generation``) this one was last found consistent with: while that history
    only grows, a call on it needs no second comparison here."""

    __slots__ = ("generation", "link", "messages", "state")

    def __init__(self, state: S) -> None:
        self.messages: list[Any] = []
        self.state = state
        self.link: tuple[Tracked[Any], int] | None = None
        #: bumped whenever ``messages`` is emptied in place (links to it then break)
        self.generation = 0


def _found(
    candidates: list[Tracked[S]],
    i: int,
    via: tuple[Tracked[Any], int] | None,
    messages: Sequence[Any],
) -> tuple[Tracked[S], int]:
    """The ``i``-th of ``candidates``, found to hold ``messages``' first messages (or
    ``messages`` its first ones): moved to the front, linked to ``via``."""
    seen = candidates[i]
    if i:
        candidates.insert(0, candidates.pop(i))
    # linked only when it is a prefix of the checked history: one longer (``messages``
    # a prefix of it) may part from that history as it grows
    seen.link = via if len(seen.messages) <= len(messages) else None
    return seen, min(len(seen.messages), len(messages))


class PrefixMemo(Generic[S]):
    """The last histories seen (by first message; ``per_first`` of them each, for a
    history and its views) and their state, kept under :func:`unchanged_prefix`.

    :meth:`track` returns the remembered history ``messages`` extends or is a prefix
    of, with how many of its messages were known (``n_known``: 0 for a new one, read
    whole); the caller brings the state up to date and calls :meth:`extend`."""

    def __init__(self, new_state: Callable[[], S], *, slots: int = 16, per_first: int = 4) -> None:
        self._new_state = new_state
        self._slots = slots
        self._per_first = per_first
        self._seen: OrderedDict[int, list[Tracked[S]]] = OrderedDict()
        self.lock = threading.RLock()

    def track(self, messages: Sequence[Any]) -> tuple[Tracked[S], int]:
        """``(history, n_known)``; call under :attr:`lock`."""
        key = id(messages[0])
        candidates = self._seen.get(key)
        if candidates is None:
            candidates = self._seen[key] = []
        self._seen.move_to_end(key)
        via = _checked_this_call(messages)
        if via is not None:  # consistent with the history this call checked, which only
            for i, seen in enumerate(candidates):  # grew since: no comparison (looked for first)
                if seen.link == via:
                    return _found(candidates, i, via, messages)
        for i, seen in enumerate(candidates):
            if unchanged_prefix(seen.messages, messages):
                return _found(candidates, i, via, messages)
        seen = Tracked(self._new_state())
        seen.link = via
        candidates.insert(0, seen)
        del candidates[self._per_first :]
        while len(self._seen) > self._slots:
            self._seen.popitem(last=False)
        return seen, 0

    def grown(
        self, messages: Sequence[Any], key: object, new: Callable[[Any], S]
    ) -> tuple[Tracked[S], int]:
        """:meth:`track` for a state made for ``key`` (its ``key``) that is only extended:
        ``new(key)`` for a new history, a shorter one or another key. Call under :attr:`lock`."""
        seen, known = self.track(messages)
        if not known or len(messages) < len(seen.messages) or cast(Any, seen.state).key != key:
            seen.messages.clear()
            seen.state = new(key)
        return seen, known

    def follow(self, messages: Sequence[Any], reset: Callable[[S], object]) -> S:
        """The state of the remembered history ``messages`` extends or is a prefix of
        (a new one ``reset`` first), recorded as extended to ``messages``: the caller
        brings it up to date from its own length. Call under :attr:`lock`."""
        seen, known = self.track(messages)
        if not known:
            seen.messages.clear()
            reset(seen.state)
        self.extend(seen, messages, known)
        return seen.state

    @staticmethod
    def extend(seen: Tracked[S], messages: Sequence[Any], n_known: int) -> None:
        """Record ``messages[n_known:]`` as appended to ``seen``."""
        if len(messages) > len(seen.messages):
            seen.messages.extend(messages[len(seen.messages) :])

    def clear(self) -> None:
        with self.lock:
            self._seen.clear()


class HistoryTotals:
    """Token totals of growing histories, for one per-message counter: a history
    that extends the last one counts only its appended messages."""

    def __init__(self, *, slots: int = 16) -> None:
        self._memo: PrefixMemo[Totals] = PrefixMemo(Totals, slots=slots)

    def total(self, messages: Sequence[Message], count: Callable[[Message], int]) -> int:
        return self.size(messages, count).counted()

    def size(
        self,
        messages: Sequence[Message],
        count: Callable[[Message], int],
        bound: Callable[[Message], int] | None = None,
    ) -> HistorySize:
        """The exact total of ``messages``, or a bound (see :meth:`Totals.size`)."""
        if not messages:
            return HistorySize(0)
        memo = self._memo
        with memo.lock:
            seen, known = memo.track(messages)
            if not known:
                seen.messages.clear()
                seen.state.reset()
            size = seen.state.size(messages, count, bound, memo.lock, seen.messages)
            memo.extend(seen, messages, known)
            return size

    def clear(self) -> None:
        self._memo.clear()


class _History:
    """One conversation an engine saw: its messages (all records) and their running
    token totals per estimator key."""

    __slots__ = ("totals",)

    def __init__(self) -> None:
        self.totals: dict[Hashable, Totals] = {}

    def clear(self) -> None:  # another history: no earlier size counts into these
        for totals in self.totals.values():
            totals.reset()
        self.totals.clear()


class CheckedHistories:
    """The histories of one engine, found to hold only :class:`Message` records, with
    their running token totals: a history that extends one seen before has only its
    appended messages looked at (and counted). A history holding anything else is
    converted whole by :func:`~ars_core.messages.as_messages` (and not remembered).
    ``checked`` counts the messages looked at (a cost counter tests read)."""

    def __init__(self, *, slots: int = 64) -> None:
        self._memo: PrefixMemo[_History] = PrefixMemo(_History, slots=slots, per_first=2)
        self.checked = 0

    def __call__(self, messages: Sequence[Any]) -> Sequence[Message]:
        """``messages`` as records: handed back as they are when they hold only
        records, else read with :func:`~ars_core.messages.as_messages`."""
        if not messages:
            return as_messages(messages)
        scope = _CURRENT.get()
        checked = scope.history if scope is not None and scope.memo.checked is self else None
        if checked is not None and checked[0] is messages and checked[1] == len(messages):
            return messages  # the very history this call checked
        memo = self._memo
        with memo.lock:
            seen, known = memo.track(messages)
            if not known:
                seen.messages.clear()
                seen.state.clear()
            start = len(seen.messages)
            self.checked += max(0, len(messages) - start)
            if start < len(messages):
                for m in messages[start:]:
                    if not isinstance(m, Message):
                        seen.messages.clear()  # nothing of it is remembered
                        seen.generation += 1
                        seen.state.clear()
                        return as_messages(messages)
                seen.messages.extend(messages[start:])
        if scope is not None:  # the counts of this call's history start from this record
            scope.history = (messages, len(messages), seen)
        return messages

    def clear(self) -> None:
        self._memo.clear()


class SparseIndex(Generic[T]):
    """The positions of the messages whose ``value_of`` is truthy, and those values,
    kept as a history grows: a history that extends one seen before reads only its
    appended messages; a prefix of one reads nothing; any other history is read whole.

    ``value_of`` must depend on the message alone (messages are immutable)."""

    def __init__(self, value_of: Callable[[Message], T], *, slots: int = 8) -> None:
        self._value_of = value_of
        self._memo: PrefixMemo[_Positions[T]] = PrefixMemo(_Positions, slots=slots)

    def __call__(self, messages: Sequence[Message], since: int = 0) -> tuple[list[int], list[T]]:
        """``(positions, values)`` in ``messages``, positions ascending (from the
        ``since``-th found on: a caller that read the first ones copies only the rest)."""
        if not messages:
            return [], []
        memo = self._memo
        with memo.lock:
            seen, known = memo.track(messages)
            found = seen.state
            if not known:
                seen.messages.clear()
                found.positions.clear()
                found.values.clear()
            n, have = len(messages), len(seen.messages)
            if n <= have:
                end = bisect_left(found.positions, n)
                return found.positions[since:end], found.values[since:end]
            value_of = self._value_of
            for i in range(have, n):
                value = value_of(messages[i])
                if value:
                    found.positions.append(i)
                    found.values.append(value)
            memo.extend(seen, messages, known)
            return found.positions[since:], found.values[since:]

    def knows(self, messages: Sequence[Message]) -> bool:
        """Whether a remembered history is a prefix of ``messages`` (or ``messages`` of
        it): calling the index then reads only the appended messages."""
        with self._memo.lock:
            seen = self._memo._seen.get(id(messages[0]), ()) if messages else ()
            return any(unchanged_prefix(s.messages, messages) for s in seen)

    def remember(self, messages: Sequence[Message], positions: list[int], values: list[T]) -> None:
        """Keep a reading of every message of ``messages`` the caller made (``positions``
        ascending, as a call returns them) unless the index holds that history already."""
        with self._memo.lock:
            seen, known = self._memo.track(messages)
            if not known:
                seen.messages[:] = messages
                seen.state.positions[:], seen.state.values[:] = positions, values


class _Positions(Generic[T]):
    __slots__ = ("positions", "values")

    def __init__(self) -> None:
        self.positions: list[int] = []
        self.values: list[T] = []


# ---------------------------------------------------------------- one engine's memo


class Memo:
    """What one engine remembers about the histories it saw (see the module doc).

    Owned by a :class:`~ars_core.Compressor`; nothing here outlives it."""

    def __init__(self, *, slots: int = 16) -> None:
        self._slots = slots
        #: histories found to hold only records
        self.checked = CheckedHistories()
        self._totals: dict[Hashable, HistoryTotals] = {}
        self._indexes: dict[str, SparseIndex[Any]] = {}
        self._prefixes: dict[str, PrefixMemo[Any]] = {}
        self._lock = threading.Lock()
        # task statements (lists of request texts, grown round after round like the
        # history): their token totals per estimator
        self._text_totals: dict[Hashable, HistoryTotals] = {}
        #: one state per name, not per history (the lines of the latest history archive)
        self._singles: dict[str, Any] = {}

    def history_tokens(
        self, messages: Sequence[Message], key: Hashable, count: Callable[[Message], int]
    ) -> int:
        """Tokens of ``messages`` for the estimator of ``key`` (:func:`estimator_key`),
        each message counted with ``count``: exact (see :meth:`history_size`)."""
        return self.history_size(messages, key, count).counted()

    def history_size(
        self,
        messages: Sequence[Message],
        key: Hashable,
        count: Callable[[Message], int],
        bound: Callable[[Message], int] | None = None,
    ) -> HistorySize:
        """The size of ``messages``: the running total of the history this call checked
        (when ``messages`` is it), else of the remembered one it extends, appended
        messages counted; with ``bound`` (never below ``count``) a history nothing of
        which was counted has the sum of its bounds (counted exactly when read so)."""
        if not messages:
            return HistorySize(0)
        scope = _CURRENT.get()
        tracked = scope.history if scope is not None and scope.memo is self else None
        if tracked is not None and tracked[0] is messages and tracked[1] == len(messages):
            lock = self.checked._memo.lock
            with lock:
                totals = tracked[2].state.totals.get(key)
                if totals is None:
                    totals = tracked[2].state.totals[key] = Totals()
                return totals.size(messages, count, bound, lock, tracked[2].messages)
        with self._lock:
            found = self._totals.get(key)
            if found is None:
                found = self._totals[key] = HistoryTotals()
        return found.size(messages, count, bound)

    def text_tokens(self, texts: Sequence[str], key: Hashable, count: Callable[[str], int]) -> int:
        """The sum of ``count`` over ``texts`` (a task statement: the texts of the last
        one plus new ones), for the estimator of ``key``: only new texts are counted."""
        with self._lock:
            found = self._text_totals.get(key)
            if found is None:
                found = self._text_totals[key] = HistoryTotals(slots=self._slots)
        return found.total(texts, count)  # type: ignore[arg-type]

    def index(self, name: str, value_of: Callable[[Message], T]) -> SparseIndex[T]:
        """The :class:`SparseIndex` of ``name`` (one per kind of fact read)."""
        with self._lock:
            found = self._indexes.get(name)
            if found is None:
                found = self._indexes[name] = SparseIndex(value_of, slots=self._slots)
            return found

    def prefix(self, name: str, new_state: Callable[[], S]) -> PrefixMemo[S]:
        """The :class:`PrefixMemo` of ``name`` (what one concern derives from a history)."""
        with self._lock:
            found = self._prefixes.get(name)
            if found is None:
                found = self._prefixes[name] = PrefixMemo(new_state, slots=self._slots)
            return found

    def single(self, name: str, new_state: Callable[[], S]) -> S:
        """The one state of ``name``, not one per history (the latest archive's lines,
        a :class:`~ars_core.recent.Recent`)."""
        with self._lock:
            found: S = self._singles.get(name) or self._singles.setdefault(name, new_state())
            return found


def _checked_this_call(messages: Sequence[Any]) -> tuple[Tracked[Any], int] | None:
    """``(record, generation)`` when ``messages`` is the history the running engine
    call checked (the very list, at the same length) or a head of it taken in this
    call (:func:`ars_core.per_call.head`), else ``None``."""
    scope = _CURRENT.get()
    if scope is None:
        return None
    checked = scope.history
    if checked is not None and checked[0] is messages and checked[1] == len(messages):
        record = checked[2]
        return record, record.generation
    part = scope.heads.get(id(messages)) if scope.heads else None
    if part is None or part[0] is not messages or part[1] != len(messages):
        return None
    return part[2]


class _Scope:
    """One engine call: its memo, the history it checked (``(messages, length, record)``:
    counted with no second comparison), the parts of it taken as its first messages
    (``heads``) and what it keeps while it runs (``scratch``)."""

    __slots__ = ("heads", "history", "memo", "scratch")

    def __init__(self, memo: Memo) -> None:
        self.memo = memo
        self.history: tuple[Sequence[Any], int, Tracked[_History]] | None = None
        self.scratch: dict[Any, Any] = {}
        #: the heads of that history taken in the call (:func:`~ars_core.per_call.head`)
        self.heads: dict[int, tuple[Sequence[Any], int, tuple[Tracked[Any], int]]] = {}


def call_scratch() -> dict[Any, Any] | None:
    """A dict that lives as long as the running engine call (``None`` outside one)."""
    return None if (scope := _CURRENT.get()) is None else scope.scratch


_CURRENT: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar("ars_memo", default=None)


#: histories remembered by the memo of calls made outside any engine
OUTSIDE_SLOTS = 4
_outside: Memo | None = None


def current() -> Memo:
    """The memo of the engine whose call is running. Outside any engine's call (a
    direct call of ``audit_retention``, say) one memo of :data:`OUTSIDE_SLOTS`
    histories serves the process: engines never use it, so no engine's history is
    kept alive by it."""
    scope = _CURRENT.get()
    if scope is not None:
        return scope.memo
    global _outside
    if _outside is None:
        with _keys_lock:
            if _outside is None:
                _outside = Memo(slots=OUTSIDE_SLOTS)
    return _outside


@contextlib.contextmanager
def active(memo: Memo) -> Iterator[Memo]:
    """Make ``memo`` the :func:`current` one for the code run inside."""
    token = _CURRENT.set(_Scope(memo))
    try:
        yield memo
    finally:
        _CURRENT.reset(token)
