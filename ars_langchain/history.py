"""A growing LangChain history converted once: each call converts what was appended.

:class:`HistoryConverter` keeps the per-call cost proportional to the new
messages: it remembers the last LangChain list and its converted twin, and
when the next list holds the same message objects (compared whole, by
identity, at C speed) plus new ones at the end, it converts only what was
appended and hands back the *same* core objects, so the core estimator's
per-message caches and its running totals keep working. After
an edit (``RemoveMessage``, a replacement by id, a checkpoint reload with
equal copies) every message still present under its id keeps its core twin;
only edited and new messages are converted. The summary of the latest round is
converted once, the first time a view holds it, and that LangChain object is
sent again by every later call while the event holds the same summary.

A call with a stored summary event whose anchor sits in place
(:meth:`HistoryConverter.convert_kept`) compares only the kept part: the
summarized part is neither compared nor converted again until something reads
it (an L2 round's task statement), so a call below T costs the kept part, not
the history.
"""

from __future__ import annotations

import operator
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import Any, overload

from langchain_core.messages import BaseMessage

from ars_core import MARK_SUMMARY, Message, SummarizationEvent
from ars_core.adapter import message_key

from . import convert as lc_convert
from .convert import VIEW_HEAD, to_core

__all__ = ["HistoryConverter"]


_ID = operator.attrgetter("id")


def _same(a: BaseMessage, b: BaseMessage) -> bool:
    return a is b or (a.id == b.id and type(a) is type(b) and a == b)


def _unshared(items: list[Any], ours: int) -> bool:
    """Whether ``ours`` references are all there are to ``items`` (CPython's reference
    count; without one, a list is always taken as shared)."""
    getrefcount = getattr(sys, "getrefcount", None)
    # + this function's parameter and getrefcount's own argument
    return getrefcount is not None and getrefcount(items) <= ours + 2


class HistoryConverter:
    """Converts a growing LangChain history, reusing earlier conversions.

    :meth:`convert` returns core messages; :meth:`back` maps a core message
    the converter produced back to the LangChain object it came from (the
    original object, untouched), or converts a new one with :func:`from_core`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lc: list[BaseMessage] = []
        self._core: list[Message] = []
        # id(core message) -> its position in ``_core`` (and the LangChain message's in
        # ``_lc``) for the messages of the history from ``_floor`` to ``_mapped``: filled
        # when ``back`` first needs it (a call below T never does). Those positions hold the
        # same objects while the map holds them (the lists only grow, or the map is
        # cleared), so an id's object is alive and its own; a position, not a pair of the
        # two, is all the map keeps of each message. After a round only the kept part is
        # mapped (``_floor``: where the last call's kept part starts; views of such calls
        # hold nothing before it), so the map holds the kept part, not the history
        self._origin: dict[int, int] = {}
        self._mapped = 0
        self._floor = 0
        # the summary of the latest round and its LangChain form: converted once, when a
        # view first holds it, then reused by the state update and every later view
        self._summary: tuple[Message, BaseMessage] | None = None
        self.converted = 0  # messages converted so far (a cost counter tests read)
        self.rewritten = False  # whether the last convert() saw an edit, not just an append
        # whether the core list is one convert() handed out (a caller may hold it: it is
        # grown in place only once nobody does); convert_kept() hands out views of it
        # that never read past their own length, so it may grow under them
        self._handed_out = False

    def _convert_one(self, message: BaseMessage) -> Message:
        self.converted += 1
        return to_core(message)

    def _convert_all(self, messages: Sequence[BaseMessage]) -> list[Message]:
        self.converted += len(messages)
        return list(map(to_core, messages))

    def convert(self, messages: Sequence[BaseMessage]) -> list[Message]:
        core = self._convert(messages)
        if self._floor:  # a view of this call may hold any message: mapped from the first
            with self._lock:
                self._origin.clear()
                self._mapped = self._floor = 0
        return core

    def _convert(self, messages: Sequence[BaseMessage]) -> list[Message]:
        with self._lock:
            prev_lc, prev_core = self._lc, self._core
            n_prev, n = len(prev_lc), len(messages)
            keep = 0
            # the common case: the same objects, history appended. Every position is
            # checked because a message may be replaced in the middle (the overflow tail
            # trim replaces by id; RemoveMessage and update_state edit anywhere). The
            # remembered list is extended with the new messages and compared whole: list
            # equality compares by identity first, at C speed, and by value only where
            # objects differ, so nothing of the history is copied or touched.
            if n_prev and n >= n_prev:
                prev_lc.extend(messages[n_prev:])
                if (messages if isinstance(messages, list) else list(messages)) == prev_lc:
                    keep = n_prev
                else:
                    del prev_lc[n_prev:]
            if keep < n_prev or not n_prev:  # a reload or an edit: reuse the longest equal prefix
                limit = min(n, n_prev)
                while keep < limit and _same(messages[keep], prev_lc[keep]):
                    keep += 1
                self._lc = list(messages)
                new = self._after_edit(messages[keep:], prev_lc[keep:], prev_core[keep:])
            else:
                new = self._convert_all(messages[n_prev:])
            if keep == n_prev and _unshared(prev_core, 2):  # self._core and prev_core
                core = prev_core  # nobody holds the list returned last time: grow it in place
                core.extend(new)
            else:
                core = prev_core + new if keep == n_prev else prev_core[:keep] + new
            if keep < n_prev or not n_prev:  # mapped back afresh from this history
                self._origin.clear()
                self._mapped = 0
            self.rewritten = keep < n_prev
            self._core = core
            self._handed_out = True
            return core  # grown in place next time only if nobody else holds it then

    def convert_kept(
        self, messages: Sequence[BaseMessage], event: SummarizationEvent | None
    ) -> Sequence[Message]:
        """The core messages of ``messages`` for a call with ``event``. When the event
        is anchored on ids in the history last converted and ``messages`` holds that
        history's kept part (from the last summarized message on: the same objects, or
        equal ones) with messages appended, only the kept part is compared and the
        appended messages converted: the engine then reads nothing before the cutoff
        below T (:func:`~ars_core.adapter.reads_kept_part_only`: the anchor's pair by id,
        checked here too). The summarized part, not compared, is compared (and converted
        where it changed) as :meth:`convert` does when something first reads it (an L2
        round). Else :meth:`convert`."""
        kept = self._kept(messages, event)
        return self.convert(messages) if kept is None else kept

    def _kept(
        self, messages: Sequence[BaseMessage], event: SummarizationEvent | None
    ) -> _KeptHistory | None:
        anchor = event.anchor if event is not None else None
        if event is None or anchor is None or anchor.next is None or anchor.by_content:
            return None
        cut, n = event.cutoff, len(messages)
        start = cut - 1
        with self._lock:
            prev_lc, prev_core = self._lc, self._core
            n_prev = len(prev_lc)
            if not 0 <= start < n_prev - 1 or n < n_prev or len(prev_core) != n_prev:
                return None  # the anchor's pair is not in the history last converted
            prev_lc.extend(messages[n_prev:])  # compared in place, undone when it differs
            tail = messages[start:]
            if (tail if isinstance(tail, list) else list(tail)) != prev_lc[start:]:
                del prev_lc[n_prev:]
                return None
            new = self._convert_all(messages[n_prev:]) if n > n_prev else []
            if self._handed_out and not _unshared(prev_core, 2):  # self._core and prev_core
                core = prev_core + new  # a list a caller holds never changes
            else:
                core = prev_core
                core.extend(new)
            self._core, self._handed_out, self.rewritten = core, False, False
            if message_key(core[start]) != anchor.last or message_key(core[cut]) != anchor.next:
                return None  # the engine reads more than the kept part: convert() compares all
            self._raise_floor(start)
            return _KeptHistory(self, messages, core, n, start)

    def _raise_floor(self, start: int) -> None:
        """Map back only from ``start`` on (the views of a call on the kept part hold
        nothing before it): the messages mapped before it are dropped (under the lock)."""
        if start <= self._floor:
            return
        lo, hi, origin = self._floor, min(start, self._mapped), self._origin
        core, lc = self._core, self._lc
        for i in range(lo, hi):
            at = origin.get(id(core[i]))
            if at is not None and lc[at] is lc[i]:  # (a twin held further on stays)
                del origin[id(core[i])]
        self._floor, self._mapped = start, max(self._mapped, start)

    def _after_edit(
        self,
        messages: Sequence[BaseMessage],
        old_lc: Sequence[BaseMessage],
        old_core: Sequence[Message],
    ) -> list[Message]:
        """The core messages of ``messages`` (what follows an edit): a message that
        was already converted (the same or an equal message under the same id) keeps
        its core twin, so its cached counts survive; only edited and new ones are
        converted."""
        ids = list(map(_ID, messages))
        by_id = dict(zip(map(_ID, old_lc), zip(old_lc, old_core, strict=True), strict=True))
        by_id.pop(None, None)
        if by_id.keys().isdisjoint(ids):  # another history: every message is new
            return self._convert_all(messages)
        out: list[Message] = []
        for m in messages:
            hit = by_id.get(m.id) if m.id else None
            if hit is not None and _same(m, hit[0]):
                out.append(hit[1])
            else:
                out.append(self._convert_one(m))
        return out

    def back(self, message: Message) -> BaseMessage:
        with self._lock:
            core, lc = self._core, self._lc
            at = self._origin.get(id(message))
            if at is None and self._mapped < len(core):
                # map the history's messages not mapped yet (reloaded: current)
                start, end = max(self._mapped, self._floor), min(len(core), len(lc))
                self._origin.update(zip(map(id, core[start:end]), range(start, end), strict=True))
                self._mapped = len(core)
                at = self._origin.get(id(message))
            entry = lc[at] if at is not None and core[at] is message else None
        if entry is not None:
            return entry
        summary = self._summary
        if summary is not None and summary[0] is message:
            return summary[1]
        converted = lc_convert.from_core(message)  # looked up at each use (tests spy on it)
        if message.metadata.get(MARK_SUMMARY):  # the one summary views carry: keep its twin
            self._summary = (message, converted)
        return converted

    def back_all(self, messages: Sequence[Message]) -> list[BaseMessage]:
        """The LangChain messages ``messages`` stand for.

        A view ARS sends ends with the converted history's own messages (the kept
        tail after the summary): that tail is mapped back by slicing the LangChain
        history, once a comparison at C speed (by identity first) shows it is the
        history's end. Only the head — the summary, and the kept messages sent in
        another form (:data:`VIEW_HEAD` at most) — is mapped one by one, so a call
        costs the same however long the kept tail has grown."""
        with self._lock:
            core, lc = self._core, self._lc
        view = messages if isinstance(messages, list) else list(messages)
        n = len(view)
        if len(lc) == len(core):
            for head in (1, VIEW_HEAD):
                start = len(core) - (n - head)
                if head < n and start >= 0 and view[head:] == core[start:]:
                    # bounded: a later call may append to ``lc`` (never change what is here)
                    return [self.back(m) for m in view[:head]] + lc[start : len(core)]
            inserted = self._inserted(view, core)
            if inserted is not None:  # the history with notes inserted (pairing's)
                out: list[BaseMessage] = []
                j = last = 0
                for i in inserted:
                    out += lc[j : j + i - last]
                    j += i - last
                    out.append(self.back(view[i]))
                    last = i + 1
                return out + lc[j : len(core)]
        return [self.back(m) for m in view]

    @staticmethod
    def _inserted(view: list[Message], core: list[Message]) -> list[int] | None:
        """The positions of the messages inserted in ``view`` when it is the whole
        history ``core`` (the same objects, in order) with messages inserted, else None."""
        n = len(core)
        if not n or len(view) < n:
            return None
        inserted: list[int] = []
        j = 0
        for i, m in enumerate(view):
            if j < n and m is core[j]:
                j += 1
            else:
                inserted.append(i)
        return inserted if j == n else None

    def remember(self, core: Message, message: BaseMessage) -> None:
        """Record that ``core`` stands for ``message`` (the event's summary): it takes
        the place of the summary remembered before."""
        self._summary = (core, message)


class _KeptHistory(Sequence[Message]):
    """One call's core messages when only the kept part was compared
    (:meth:`HistoryConverter.convert_kept`): from ``start`` on they are this call's
    messages' twins; reading one before ``start`` (or iterating) first converts the
    call's whole history as :meth:`HistoryConverter.convert` does and reads that.
    ``core`` only grows after this call, so its first ``n`` messages stay this call's."""

    __slots__ = ("_converter", "_core", "_lc", "_n", "_start", "_whole")

    def __init__(
        self,
        converter: HistoryConverter,
        lc: Sequence[BaseMessage],
        core: list[Message],
        n: int,
        start: int,
    ) -> None:
        self._converter, self._lc, self._core = converter, lc, core
        self._n, self._start = n, start
        self._whole: list[Message] | None = None

    def whole(self) -> list[Message]:
        """Every core message of the call, the summarized part compared (and converted
        where it changed) now."""
        if self._whole is None:
            self._whole = self._converter._convert(self._lc)  # views stay on the kept part
        return self._whole

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if self._whole is None:
            if type(index) is int:
                i = index + self._n if index < 0 else index
                if self._start <= i < self._n:
                    return self._core[i]
            elif type(index) is slice:
                lo, hi, step = index.indices(self._n)
                if step == 1 and lo >= self._start:
                    return self._core[lo:hi]
        return self.whole()[index]

    def __iter__(self) -> Iterator[Message]:
        return iter(self.whole())
