"""One call's state: what the flow of :mod:`ars_core.flow` carries from step to step.

:class:`CallState` holds a call's inputs, its measurements and the stream
events emitted so far (whether or not a compression round runs in it);
:class:`L1View`, :class:`Cut` and :class:`Tail` are what its L1 step, its
cutoff and its L2 step produce. :class:`CallOutcome` and :class:`StateUpdate`
are what the call returns to the engine (and the engine to the adapter).
"""

from __future__ import annotations

import functools
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import attrs

from .checkpoint import EventCheck, SummarizationEvent
from .config import SummaryConfig
from .effects import Emit, ModelResult
from .estimate import Estimator, is_bounded, message_tokens
from .floors import floors_reach_of
from .known_size import stamp_of
from .memo import Memo
from .messages import Message
from .pairing import Pairing, pair_tool_calls
from .pending_form import made
from .stream import CompressionEvent, Level, Phase
from .totals import CountLater, HistorySize, NewestFirst, Totals

__all__ = ["CallOutcome", "CallState", "Cut", "FlowSettings", "L1View", "StateUpdate", "Tail"]


@attrs.frozen
class StateUpdate:
    """What to persist after a call: the new event, and the kept-tail messages
    trimmed under overflow as ``(state index, new message)``.

    ``event`` is also set when the stored event was re-anchored after the
    history was edited; ``clear_event`` (with ``event=None``) says the stored
    event no longer matches the history and must be removed."""

    event: SummarizationEvent | None = None
    replaced: tuple[tuple[int, Message], ...] = ()
    clear_event: bool = False


#: a token count given now, or counted when first read (a history's, extra aside; or
#: a view's, extra included)
Tokens = int | HistorySize | CountLater


@attrs.frozen
class CallOutcome:
    """The result of one wrapped model call.

    ``tokens_before`` and ``tokens_after`` are exact counts. When the engine found
    the history below T by a bound (see
    :class:`~ars_core.capabilities.BoundedEstimator`) without counting it, they are
    counted on first read (the same number the call would have counted);
    :attr:`counted` says whether reading them costs nothing."""

    response: Any
    view: Sequence[Message]
    update: StateUpdate | None
    events: tuple[CompressionEvent, ...]
    level: Level | None
    forced: bool
    _tokens_before: Tokens = attrs.field(alias="tokens_before")
    _tokens_after: Tokens = attrs.field(alias="tokens_after")
    _extra: int = attrs.field(default=0, alias="extra")
    _known: Callable[[], dict[str, Any] | None] | None = attrs.field(
        default=None, alias="known_size"
    )

    @property
    def tokens_before(self) -> int:
        return _read(self._tokens_before, self._extra)

    @property
    def tokens_after(self) -> int:
        return _read(self._tokens_after, self._extra)

    @property
    def known(self) -> dict[str, Any] | None:
        """The stamp of the exact size of the effective messages this call read, for
        its answer (see :mod:`ars_core.known_size`): ``None`` when they were not
        counted (by the time this is read) or the call made a new summary."""
        return self._known() if self._known is not None else None

    @property
    def counted(self) -> bool:
        """Whether both counts are known (reading them counts nothing)."""
        return all(
            not isinstance(t, HistorySize | CountLater) or t.exact
            for t in (self._tokens_before, self._tokens_after)
        )


def _read(tokens: Tokens, extra: int) -> int:
    if isinstance(tokens, CountLater):
        return tokens.value()
    return tokens.counted() + extra if isinstance(tokens, HistorySize) else tokens


class FlowSettings(Protocol):
    """What the flow reads from its engine (a :class:`~ars_core.Compressor`)."""

    config: SummaryConfig
    estimator: Estimator
    memo: Memo
    arg_char_limit: int
    truncate_tools: tuple[str, ...]
    summary_input_tokens: int | None
    is_overflow: Callable[[BaseException], bool]
    stable_views: bool
    lean_rounds: bool
    threshold_source: str | None


@attrs.define
class CallState:
    """One call's state: its inputs, its measurements, and the events so far
    (whether or not a compression round runs in it)."""

    settings: FlowSettings
    state: Sequence[Message]
    check: EventCheck
    event: SummarizationEvent | None
    effective: list[Message]
    raw: Sequence[Message]  # the effective messages as in state (archived losslessly)
    extra: int  # system and tools, and the notes pairing adds to calls without a result
    history: HistorySize  # the effective messages' size: exact, or a bound counted on need
    threshold: int
    l2_threshold: int
    forced: bool
    thread: str | None
    requested: bool = False  # on demand (a compaction tool, compact_now): L2 now
    #: the configuration's token sizes in estimate units (budget.in_estimate_units): what
    #: every budget rule of this call reads
    budget: SummaryConfig = attrs.field(default=None)
    round_id: str = ""
    started: bool = False
    reached: Level = "L1"
    emitted: list[CompressionEvent] = attrs.field(factory=list)
    orphan_results: int = 0  # tool results left out of the view sent (no call heads them)
    unanswered_calls: int = 0  # tool calls answered with a synthetic result in the view
    paired: Pairing | None = None  # the effective messages as sent (pair_history)

    @property
    def tokens_before(self) -> int:
        """The exact size of the request before compression (counted on first need)."""
        return self.history.counted() + self.extra

    def fits(self, limit: int) -> bool:
        """Whether the request before compression is below ``limit``: decided by the
        bound when it is below, else by exact counts (the newest messages' until they
        reach it, see :meth:`HistorySize.reaches`)."""
        floors = floors_reach_of(self.settings.estimator)
        return not self.history.reaches(limit - self.extra, floors)

    def before(self) -> int | CountLater:
        """What a stream event reports as ``tokens_before``: the exact count, made when
        first read when only the bound is known (no decision of this call needed it)."""
        return self.tokens_before if self.history.exact else CountLater(self.history, self.extra)

    def pair_history(self) -> None:
        """Pair the effective messages before any size is compared: the notes a view
        gets for calls without a result are part of the request, so their size joins
        ``extra`` (results left out are not taken off, so every view sent is at most
        the size counted; views of these messages hold the same calls)."""
        self.paired = paired = pair_tool_calls(self.effective)
        if paired.added:
            est = self.settings.estimator
            self.extra += sum(message_tokens(est, m) for m in paired.added)

    def send(self, view: list[Message]) -> list[Message]:
        """``view`` as it is sent: every tool call paired with its result (an L1 form
        made, see :mod:`ars_core.pending_form`)."""
        if view is not self.effective:
            made(view)
        paired = (
            self.paired
            if self.paired is not None and view is self.effective
            else pair_tool_calls(view, named=self.paired)
        )
        if paired.changed:
            self.orphan_results = len(paired.orphans)
            self.unanswered_calls = len(paired.unanswered)
        return paired.view

    def record(self, phase: Phase, level: Level, **kw: Any) -> Emit:
        self.round_id = self.round_id or uuid.uuid4().hex[:12]
        if phase != "started":
            kw.setdefault("orphan_results", self.orphan_results)
            kw.setdefault("unanswered_calls", self.unanswered_calls)
        event = CompressionEvent(
            phase=phase,
            level=level,
            round_id=self.round_id,
            forced=self.forced,
            requested=self.requested,
            tokens_before=self.before(),
            threshold=self.settings.config.threshold_tokens,
            threshold_source=self.settings.threshold_source,
            **kw,
        )
        self.emitted.append(event)
        return Emit(event)

    def start(self, level: Level) -> Emit:
        self.started = True
        return self.record("started", level)

    def outcome(
        self,
        result: ModelResult,
        view: Sequence[Message],
        level: Level | None,
        tokens_after: int | CountLater | None,
        update: StateUpdate | None = None,
    ) -> CallOutcome:
        """The call's outcome; ``tokens_after`` ``None``: the request went out whole
        (then both counts are the history's, counted when first read if only bounded)."""
        if update is None and self.check.changed:  # re-anchored or dropped: persist that
            update = StateUpdate(event=self.check.event, clear_event=self.check.event is None)
        return CallOutcome(
            response=result.response,
            view=view,
            update=update,
            events=tuple(self.emitted),
            level=level,
            forced=self.forced,
            tokens_before=self.history if not self.history.exact else self.tokens_before,
            tokens_after=self.history if tokens_after is None else tokens_after,
            extra=self.extra,
            known_size=None if level == "L2" else self.known_size,
        )

    def known_size(self) -> dict[str, Any] | None:
        """The stamp of the effective messages when their exact count is known."""
        if not self.history.exact:
            return None
        est, tokens = self.settings.estimator, self.history.tokens
        return stamp_of(self.effective, tokens, est, self.event, self.history.origin)

    def overflowed(self, result: ModelResult) -> bool:
        """``True`` when the model failed with a context overflow (the round is
        forced from now on); any other error is raised."""
        if result.error is None:
            return False
        if not self.settings.is_overflow(result.error):
            raise result.error
        self.forced = True
        return True

    def tokens(self, view: Sequence[Message]) -> int:
        est = self.settings.estimator
        return self.extra + sum(message_tokens(est, m) for m in view)

    def view_size(self, view: Sequence[Message]) -> HistorySize:
        """The size of ``view``'s messages (``extra`` aside): with a
        :class:`~ars_core.capabilities.BoundedEstimator`, the bound of the messages not
        counted yet (a new summary message), counted when a decision or a reader needs
        the exact size; else the exact count."""
        est = self.settings.estimator
        count = functools.partial(message_tokens, est)
        if not is_bounded(est):
            return HistorySize(sum(map(count, view)))
        messages = tuple(view)  # what the count reads, whatever becomes of the list
        bound = sum(map(est.token_bound, messages))
        return HistorySize.bound(bound, Totals(), messages, count, threading.Lock())


@attrs.frozen
class L1View:
    """The view after L1, its size, and what a stream event reports about L1. The
    size is exact: given, or counted from the newest message back as far as a
    decision needs (:meth:`exceeds`) and whole when :attr:`tokens` is read."""

    view: list[Message]
    size: int | NewestFirst
    fields: dict[str, Any]  # what a stream event reports about L1
    #: the plan whose offloads are still being written (the view takes them as
    #: written until the flow settles them, before anything naming them is sent)
    unsettled: Any = None
    _parts: dict[tuple[int, int], Sequence[Message]] = attrs.field(
        factory=dict, init=False, eq=False, repr=False
    )

    def part(self, start: int, end: int) -> Sequence[Message]:
        """``view[start:end]``, the same object each time (the round's readers of its
        summarized part share what they work out about it, see
        :func:`~ars_core.per_call.once_per_call`)."""
        found = self._parts.get((start, end))
        if found is None:
            found = self._parts[start, end] = self.view[start:end]
        return found

    @property
    def tokens(self) -> int:
        """The exact size of the request with this view."""
        return self.size if isinstance(self.size, int) else self.size.total()

    def exceeds(self, limit: int) -> bool:
        """Whether the request with this view is above ``limit``."""
        return self.size > limit if isinstance(self.size, int) else self.size.exceeds(limit)


@attrs.frozen
class Cut:
    """Where an L2 round cuts, what its summary carries and may take."""

    local: int  # into the effective messages
    start: int  # 1 when effective[0] is the previous summary
    previous: int  # the previous event's global cutoff
    global_: int
    task: list[str]  # the task statement: the requests that set the work, the newest
    summary_limit: int  # the tokens the summary may take
    task_limit: int | None = None  # the task's own room in it (a task too large for its share)


@attrs.frozen
class Tail:
    """The view after L2: the summary and the kept tail (trimmed ones to persist)."""

    view: list[Message]  # [summary, *kept tail]
    tokens: int | CountLater  # the request's size: counted when read if found within T by a bound
    replaced: tuple[tuple[int, Message], ...] = ()  # trimmed kept messages, by state index
