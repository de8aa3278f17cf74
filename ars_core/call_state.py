"""One call's state: what the flow of :mod:`ars_core.flow` carries from step to step.

:class:`CallState` holds a call's inputs, its measurements and the stream
events emitted so far (whether or not a compression round runs in it);
:class:`L1View`, :class:`Cut` and :class:`Tail` are what its L1 step, its
cutoff and its L2 step produce. :class:`CallOutcome` and :class:`StateUpdate`
are what the call returns to the engine (and the engine to the adapter).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import attrs

from .checkpoint import EventCheck, SummarizationEvent
from .config import SummaryConfig
from .effects import Emit, ModelResult
from .estimate import Estimator, message_tokens
from .memo import Memo
from .messages import Message
from .pairing import pair_tool_calls
from .stream import CompressionEvent, Level, Phase

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


@attrs.frozen
class CallOutcome:
    """The result of one wrapped model call."""

    response: Any
    view: Sequence[Message]
    update: StateUpdate | None
    events: tuple[CompressionEvent, ...]
    level: Level | None
    forced: bool
    tokens_before: int
    tokens_after: int


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
    extra: int
    tokens_before: int
    threshold: int
    l2_threshold: int
    forced: bool
    thread: str | None
    requested: bool = False  # on demand (a compaction tool, compact_now): L2 now
    round_id: str = ""
    started: bool = False
    reached: Level = "L1"
    emitted: list[CompressionEvent] = attrs.field(factory=list)
    orphan_results: int = 0  # tool results left out of the view sent (no call heads them)
    unanswered_calls: int = 0  # tool calls answered with a synthetic result in the view

    def send(self, view: list[Message]) -> list[Message]:
        """``view`` as it is sent: every tool call paired with its result."""
        paired = pair_tool_calls(view)
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
            tokens_before=self.tokens_before,
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
        tokens_after: int,
        update: StateUpdate | None = None,
    ) -> CallOutcome:
        if update is None and self.check.changed:  # re-anchored or dropped: persist that
            update = StateUpdate(event=self.check.event, clear_event=self.check.event is None)
        return CallOutcome(
            response=result.response,
            view=view,
            update=update,
            events=tuple(self.emitted),
            level=level,
            forced=self.forced,
            tokens_before=self.tokens_before,
            tokens_after=tokens_after,
        )

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


@attrs.frozen
class L1View:
    """The view after L1, its size, and what a stream event reports about L1."""

    view: list[Message]
    tokens: int
    fields: dict[str, Any]  # what a stream event reports about L1


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
    tokens: int
    replaced: tuple[tuple[int, Message], ...] = ()  # trimmed kept messages, by state index
