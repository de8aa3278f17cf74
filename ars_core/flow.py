"""The decisions of one model call, as a generator of effects (no I/O).

:func:`flow` is the whole call; each step is a short sub-generator joined
with ``yield from``, as httpx writes its auth flows::

    flow ............... measure: system + tools + effective messages
     |- dropped_notice .... the stored event no longer matches: say so
     |- below_threshold ... effective messages fit: call the model, done
     |- level1 ............ L1 on a copy: offload big tool results (and user messages
     |                      above T), truncate big args
     |- after_l1
         |- L1 view fits the L2 threshold: call the model, done
         |- no valid cutoff: l1_fallback (send the L1 view)
         |- level2
             |- summarize ... archive || (summary input, summary) -> new SummarizationEvent
             |- trim_tail ... kept tail still too big: trim it (persisted by id)
             |- then ........ call the model, ``completed``
     a started round that raises (or is cancelled) reports ``failed``

The effects it yields are in :mod:`ars_core.effects`; :mod:`ars_core.engine`
drives it synchronously or asynchronously.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Generator, Sequence
from typing import Any, Protocol

import attrs

from .archive import HistoryArchive
from .budget import (
    SUMMARY_TOKENS_FLOOR,
    default_input_budget,
    kept_tail_room,
    lean_summary_budget,
    summary_input_budget,
    task_budget,
    thresholds,
)
from .checkpoint import (
    EventCheck,
    SummarizationEvent,
    anchor_at,
    apply_sent_forms,
    check_event,
    effective_messages,
    message_key,
    sent_forms_of,
    to_global_cutoff,
)
from .config import SummaryConfig
from .effects import (
    ArchiveAndSummarize,
    Archived,
    CallModel,
    Effect,
    Emit,
    ModelResult,
    Write,
    describe,
)
from .errors import SummarizerError
from .estimate import (
    Estimator,
    Tools,
    is_incremental,
    message_sizes,
    message_tokens,
)
from .l1 import offload_oversized_user_messages, plan_l1
from .l1_media import media_offloader, offload_inline_media
from .l2 import (
    build_summary_message,
    describe_error,
    forbidden_cuts,
    select_cutoff,
    trim_tail,
    validate_summary,
)
from .layout import HISTORY_DIR
from .memo import Memo, estimator_key
from .messages import Message
from .pairing import pair_tool_calls
from .retention import (
    Retention,
    audit_retention,
    is_user_request,
    task_retention,
    task_statement,
)
from .stream import CompressionEvent, Level, Phase
from .summarize import (
    ExtractiveSummarizer,
    SummaryResult,
    condense_history,
    turn_tokens,
    whole_tokens,
)
from .summary_call import InputHalver, RetryPolicy, SummaryCall
from .usage import Usage

__all__ = ["CallOutcome", "FlowSettings", "StateUpdate", "can_compact", "flow"]

log = logging.getLogger("ars")

Flow = Generator[Effect, Any, "CallOutcome"]
#: an archive path of the length the engine writes: sizes the summary message's frame
_SAMPLE_PATH = f"{HISTORY_DIR}/history-{0:06d}-{0:06d}-{0:016x}.jsonl"


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
class _Round:
    """One call's state: its inputs, its measurements, and the events so far."""

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
class _L1View:
    view: list[Message]
    tokens: int
    fields: dict[str, Any]  # what a stream event reports about L1


@attrs.frozen
class _Cut:
    local: int  # into the effective messages
    start: int  # 1 when effective[0] is the previous summary
    previous: int  # the previous event's global cutoff
    global_: int
    task: list[str]  # the task statement: the requests that set the work, the newest
    summary_limit: int  # the tokens the summary may take
    task_limit: int | None = None  # the task's own room in it (a task too large for its share)


@attrs.frozen
class _Tail:
    view: list[Message]  # [summary, *kept tail]
    tokens: int
    replaced: tuple[tuple[int, Message], ...] = ()  # trimmed kept messages, by state index


def flow(
    settings: FlowSettings,
    state: Sequence[Message],
    event: SummarizationEvent | None,
    system: Message | str | None,
    tools: Tools | None,
    *,
    thread: str | None,
    forced: bool = False,
    requested: bool = False,
) -> Flow:
    """One model call: measures the request, then returns the generator that
    yields effects and returns the :class:`CallOutcome`. ``requested`` runs L2
    now, whatever the size (on demand); with nothing to summarize it is an
    ordinary call."""
    cfg, est = settings.config, settings.estimator
    check = check_event(state, event)  # edited history: re-anchor or drop the event
    event = check.event
    # T and T2 in estimate units (budget.py: calibration and safety margin)
    threshold, l2_threshold = thresholds(cfg, est)
    # with no event the effective messages are the state itself: no O(history) copy on
    # the hot path (views that differ from it are always new lists)
    effective = (
        state if event is None and isinstance(state, list) else effective_messages(state, event)
    )
    raw = effective
    if settings.stable_views and event is not None and event.sent_forms:
        # kept messages go out as the L2 request sent them (prompt caches hold those bytes)
        effective = apply_sent_forms(list(effective), event)
    extra = _count_extra(est, system, tools)
    history_tokens = _history_tokens(settings.memo, est, effective)
    r = _Round(
        settings=settings,
        state=state,
        check=check,
        event=event,
        effective=effective,
        raw=raw,
        extra=extra,
        tokens_before=history_tokens + extra,
        threshold=threshold,
        l2_threshold=l2_threshold,
        forced=forced,
        thread=thread,
        requested=requested and can_compact(effective, event, cfg.summary_keep_messages),
    )
    return _run(r)


def _history_tokens(memo: Memo, est: Estimator, effective: Sequence[Message]) -> int:
    """Tokens of the effective messages: for an incremental estimator, the engine's
    running total of this history, extended by what was appended since the last call."""
    if is_incremental(est):
        return memo.history_tokens(effective, est.cache_key, est.count_message)
    return est.count(effective)


def can_compact(effective: Sequence[Message], event: SummarizationEvent | None, keep: int) -> bool:
    """Whether an L2 round has something to summarize in ``effective`` (the
    summary, when ``event`` is set, and the messages after it) beyond the
    ``keep`` latest messages, without separating a tool call from its results."""
    return select_cutoff(effective, keep, start=1 if event is not None else 0) is not None


def _run(r: _Round) -> Flow:
    if r.check.dropped is not None:
        yield from _dropped_notice(r)
    if not r.forced and not r.requested and r.tokens_before < r.threshold:
        done = yield from _below_threshold(r)
        if done is not None:
            return done
    elif not r.forced:  # an automatic or a requested round starts at L1
        yield r.start("L1")
    try:
        l1 = yield from _level1(r)
        return (yield from _after_l1(r, l1))
    except GeneratorExit:
        raise
    except BaseException as exc:  # a started round that raises or is cancelled reports `failed`
        if r.started:
            yield r.record("failed", r.reached, error=describe_error(exc))
        raise


def _dropped_notice(r: _Round) -> Generator[Effect, Any, None]:
    """The stored event no longer matched the history and was dropped: say so
    in the log and on the stream (a ``started``/``failed`` pair of its own)."""
    stale = r.check.stale
    log.warning(
        "ARS: the summary no longer matches the history (%s); it is dropped and every "
        "message is sent",
        r.check.dropped,
    )
    started = CompressionEvent(
        phase="started",
        level="L2",
        round_id=uuid.uuid4().hex[:12],
        forced=r.forced,
        tokens_before=r.tokens_before,
        threshold=r.settings.config.threshold_tokens,
        threshold_source=r.settings.threshold_source,
    )
    failed = attrs.evolve(
        started,
        phase="failed",
        cutoff=stale.cutoff if stale is not None else None,
        file_path=stale.file_path if stale is not None else None,
        error=f"summary dropped: it no longer matches the history ({r.check.dropped})",
    )
    for event in (started, failed):
        r.emitted.append(event)
        yield Emit(event)


def _count_extra(est: Estimator, system: Message | str | None, tools: Tools | None) -> int:
    if is_incremental(est):
        return int(est.count_extra(system=system, tools=tools))
    return est.count([], system=system, tools=tools)


def _below_threshold(r: _Round) -> Generator[Effect, Any, CallOutcome | None]:
    """The effective messages go straight to the model; ``None`` when it
    overflowed and the forced path takes over."""
    view = r.send(r.effective)
    result = yield CallModel(view)
    if r.overflowed(result):
        return None
    return r.outcome(result, view, None, r.tokens_before)


def _level1(r: _Round) -> Generator[Effect, Any, _L1View]:
    """L1 on a copy of the effective messages; the offloaded files are written."""
    s = r.settings
    plan = plan_l1(
        r.effective,
        estimator=s.estimator,
        tool_token_limit=s.config.summary_tool_result_token_limit,
        arg_char_limit=s.arg_char_limit,
        truncate_tools=s.truncate_tools,
    )
    plan = offload_oversized_user_messages(
        plan,
        estimator=s.estimator,
        threshold=r.threshold,
        preview_tokens=s.config.summary_tool_result_token_limit,
        media=media_offloader(s.config.summary_tool_result_token_limit),
    )
    plan = offload_inline_media(plan, tool_token_limit=s.config.summary_tool_result_token_limit)
    failed_writes: set[str] = (yield Write(plan.writes)) if plan.writes else set()
    view, offloaded = plan.finalize(failed_writes)
    replaced = plan.replaced
    tokens = (
        r.tokens_before
        + sum(message_sizes(s.estimator, [view[i] for i in replaced]))
        - sum(message_sizes(s.estimator, list(replaced.values())))
    )
    fields = {"offloaded": offloaded, "truncated_args": plan.truncated_args}
    return _L1View(view, tokens, fields)


def _after_l1(r: _Round, l1: _L1View) -> Flow:
    """Send the L1 view when it fits the L2 threshold, else summarize (L2)."""
    sent: ModelResult | None = None
    if not r.forced and not r.requested and l1.tokens <= r.l2_threshold:
        view = r.send(l1.view)
        sent = yield CallModel(view)
        if not r.overflowed(sent):
            yield r.record("completed", "L1", tokens_after=l1.tokens, **l1.fields)
            return r.outcome(sent, view, "L1", l1.tokens)
    cut = _cutoff(r, l1)
    if cut is None:
        return (yield from _l1_fallback(r, l1, sent))
    return (yield from _level2(r, l1, cut))


def _cutoff(r: _Round, l1: _L1View) -> _Cut | None:
    """Where the summarized part ends. Fixed rounds keep the latest ``keep``
    messages and a summary at its configured bound. Lean rounds keep at least
    the newest ``min(keep, the messages that fit half the L2 threshold)``
    verbatim (tool calls with their results; the newest user request among
    the latest ``keep`` too) and size the summary to share the room under the
    L2 threshold with them, so the next round waits for new messages to fill
    the window again. With ``keep`` or fewer messages, a cut is made only when
    they do not fit the window. ``None`` when no valid cutoff exists."""
    s = r.settings
    keep, start = s.config.summary_keep_messages, 1 if r.event is not None else 0
    forbidden = forbidden_cuts(r.effective)
    preferred = select_cutoff(r.effective, keep, start=start, forbidden=forbidden)
    previous = r.event.cutoff if r.event is not None else 0
    if not s.lean_rounds:  # the latest `keep` messages, a summary at the configured bound
        if preferred is None:
            return None
        global_ = to_global_cutoff(preferred, r.event)
        task = task_statement(r.state[:global_])
        return _Cut(preferred, start, previous, global_, task, s.config.summary_token_limit)
    window = r.l2_threshold if r.forced else r.threshold  # an overflow: the real one is smaller
    if preferred is None and l1.tokens <= window:
        return None  # keep or fewer messages that fit the window: sent as they are
    # the summary's frame, sized with a cutoff of as many digits (the same text round after
    # round: counted once)
    frame = build_summary_message("", cutoff=_nines(len(r.state)), file_path=_SAMPLE_PATH)
    fixed = r.extra + message_tokens(s.estimator, frame)
    room = r.l2_threshold - fixed
    sizes = [message_tokens(s.estimator, m) for m in l1.view[start:]]
    local = kept_cut(
        r.effective,
        keep,
        start=start,
        tail_room=kept_tail_room(s.config, room),
        room=room,
        sizes=sizes,
        forbidden=forbidden,
    )
    if local is None:
        return None
    global_ = to_global_cutoff(local, r.event)
    task = task_statement(r.state[:global_])
    task_tokens = _task_tokens(s.memo, s.estimator, task)
    tail = sum(sizes[local - start :])
    # after a context overflow the real window is smaller than T: no growing for the task
    limit = lean_summary_budget(
        s.config,
        room=room,
        tail=tail,
        task_tokens=task_tokens,
        fixed_tokens=None if r.forced else fixed,
        turns=_conversation(l1.view[start:local], s.estimator),
    )
    left = r.threshold - r.threshold // 8 - fixed - limit  # what a grown summary leaves
    if tail > left > room - limit:  # a task too large for the room: the tail takes what is left
        local = kept_cut(
            r.effective,
            keep,
            start=start,
            tail_room=max(0, left),
            room=max(0, left) + SUMMARY_TOKENS_FLOOR,
            sizes=sizes,
            forbidden=forbidden,
        )
        if local is None:
            return None
        global_ = to_global_cutoff(local, r.event)
        task = task_statement(r.state[:global_])
    task_room = task_budget(s.config, limit, task_tokens)
    return _Cut(local, start, previous, global_, task, limit, task_room)


def kept_cut(
    messages: Sequence[Message],
    keep: int,
    *,
    start: int,
    tail_room: int,
    room: int,
    sizes: Sequence[int],
    forbidden: Sequence[bool],
) -> int | None:
    """A lean round's cut in ``messages`` (``messages[start:]`` may be summarized;
    ``sizes[i]`` is the size of ``messages[start + i]`` as it will be sent):
    the newest ``min(keep, the messages that fit tail_room)`` (see
    :func:`~ars_core.budget.kept_tail_room`; at least one) are kept; so is the
    newest user request among the latest ``keep`` messages, and the cut moves
    earlier so that no tool call is separated from its results, as long as the
    summary keeps its floor of ``room`` (the tokens under the L2 threshold
    beside the fixed part of the request): a tool call that does not fit moves
    the cut later instead. ``None`` when nothing is left to summarize."""
    n = len(messages)
    total, count = 0, 0
    while count < min(keep, n - start):
        total += sizes[n - 1 - count - start]
        if total > tail_room:
            break
        count += 1
    cut = n - max(1, count)
    newest = _newest_request(messages, max(start, n - keep), cut)
    if newest is not None and sum(sizes[newest - start :]) <= room - SUMMARY_TOKENS_FLOOR:
        cut = newest  # the newest request stays in the view as it is, when it fits
    if cut > start and not forbidden[cut]:
        return cut
    earlier = next((c for c in range(cut - 1, start, -1) if not forbidden[c]), None)
    if earlier is not None and sum(sizes[earlier - start :]) <= room - SUMMARY_TOKENS_FLOOR:
        return earlier
    later = next((c for c in range(cut + 1, n) if not forbidden[c]), None)
    return later if later is not None else earlier


def _newest_request(messages: Sequence[Message], low: int, cut: int) -> int | None:
    """The position of the newest user request in ``messages[low:]`` when it is before
    ``cut`` (it would be summarized), else ``None``."""
    for i in range(len(messages) - 1, low - 1, -1):
        if is_user_request(messages[i]):
            return i if i < cut else None
    return None


def _conversation(history: Sequence[Message], estimator: Estimator) -> int:
    """The tokens of what the people said in ``history`` (see
    :func:`~ars_core.summarize.turn_tokens`) when that is most of it (a chat),
    else 0 (an agent run: its summary is sized from its task, its input from
    what it keeps whole)."""
    turns = turn_tokens(history, estimator)
    return turns if 2 * turns >= sum(message_sizes(estimator, history)) else 0


def _nines(n: int) -> int:
    """The largest number with as many digits as ``n``."""
    return int("9" * len(str(n)))


def _task_tokens(memo: Memo, estimator: Estimator, task: Sequence[str]) -> int:
    """The tokens of the task statement (its texts one per paragraph): each request
    is counted once per estimator (the task is the same round after round, can be
    long, and a new request adds only its own count); the sum of the parts bounds
    the count of the whole from above."""
    if not task:
        return 0
    parts = memo.text_tokens(task, estimator_key(estimator), estimator.count_text)
    return parts + estimator.count_text("\n\n") * (len(task) - 1)


def _l1_fallback(r: _Round, l1: _L1View, sent: ModelResult | None) -> Flow:
    """No valid cutoff: the L1 view is all there is (an overflow of it propagates)."""
    log.warning(
        "ARS: no valid cutoff for L2 (%d effective messages); sending the L1 view",
        len(r.effective),
    )
    if sent is not None and sent.error is not None:
        raise sent.error
    view = r.send(l1.view)
    result = yield CallModel(view)
    if result.error is not None:
        if not r.started:  # a failing forced round is reported
            yield r.start("L1")
        raise result.error
    if r.started:
        yield r.record("completed", "L1", tokens_after=l1.tokens, **l1.fields)
    return r.outcome(result, view, "L1" if r.started else None, l1.tokens)


def _level2(r: _Round, l1: _L1View, cut: _Cut) -> Flow:
    """Summarize the older history, trim the kept tail if needed, call the model."""
    r.reached = "L2"
    if not r.started:  # the forced path announces itself when L2 begins
        yield r.start("L2")
    new_event = yield from _summarize(r, l1, cut)
    sent = yield from _trim_tail(r, l1, cut, new_event.summary_message)
    retention = _audit(r, cut, sent.view)
    new_event = attrs.evolve(new_event, retention=retention)
    view = r.send(sent.view)
    result = yield CallModel(view)
    if result.error is not None:
        raise result.error
    yield r.record(
        "completed",
        "L2",
        tokens_after=sent.tokens,
        cutoff=cut.global_,
        file_path=new_event.file_path,
        summary_usage=new_event.summary_usage,
        retention=retention,
        **l1.fields,
    )
    if r.settings.stable_views:
        forms = sent_forms_of(r.raw[cut.local :], sent.view[1:])
        new_event = attrs.evolve(new_event, sent_forms=forms)
    for index, trimmed in sent.replaced:  # the first kept message is persisted trimmed:
        if index == cut.global_ and new_event.anchor is not None:  # anchor to that form
            anchor = attrs.evolve(new_event.anchor, next=message_key(trimmed))
            new_event = attrs.evolve(new_event, anchor=anchor)
    update = StateUpdate(event=new_event, replaced=sent.replaced)
    return r.outcome(result, view, "L2", sent.tokens, update)


def _audit(r: _Round, cut: _Cut, view: Sequence[Message]) -> Retention:
    """The retention audit of the view this round sends: the task (every user
    request up to the cutoff) and what the agent may need from the newly summarized
    messages (files, commands, errors, tool-call ids). The result is a field of the
    event; the log gets one INFO line, and a WARNING only when the model no longer
    sees the task at all, or the newest request (nothing left of it in the view)."""
    retention = audit_retention(r.raw[cut.start : cut.local], view, task=cut.task)
    if not retention.missing:
        return retention
    total = len(retention.missing) + len(retention.found)
    lost = _lost_requests(cut, view, retention)
    if lost:
        log.warning(
            "ARS: after summarizing, the model no longer sees %s; the summary left it "
            "out (the full messages stay in the state and the history archive)",
            lost,
        )
    else:
        log.info(
            "ARS: summary round: the view keeps %d of %d things the agent may need "
            "(%.0f%% of the task statement); only in the archived history: %s",
            len(retention.found),
            total,
            100 * retention.task_fraction,
            "; ".join(retention.missing),
        )
    return retention


def _lost_requests(cut: _Cut, view: Sequence[Message], retention: Retention) -> str:
    """What the model no longer sees of the user's requests, in words ("" when
    nothing): the whole task statement, or the newest request when it was
    summarized (no later request kept) and nothing of it is in the view."""
    if not cut.task:
        return ""
    if retention.task_fraction == 0:
        return "the task (none of the user's requests up to the cutoff)"
    if any(is_user_request(m) for m in view[1:]):
        return ""  # a newer request is kept whole
    if task_retention(cut.task[-1], view) == 0:
        return "the user's newest request"
    return ""


def _summarize(r: _Round, l1: _L1View, cut: _Cut) -> Generator[Effect, Any, SummarizationEvent]:
    """Archive the summarized history and summarize it; the new event."""
    s = r.settings
    archive = HistoryArchive.of(r.raw[cut.start : cut.local], start=cut.previous, thread=r.thread)
    history = l1.view[: cut.local]
    budget, task_room = s.summary_input_tokens or default_input_budget(r.threshold), None
    if s.lean_rounds and not s.summary_input_tokens:
        task_room = cut.task_limit  # a task too large for its share is read whole
        whole, turns = whole_tokens(history, s.estimator), _conversation(history, s.estimator)
        budget = summary_input_budget(r.threshold, whole, task_room, turns)
    cleaned = condense_history(history, budget, s.estimator, task_tokens=task_room)
    call = SummaryCall(
        cleaned,
        s.config.summary_prompt,
        cut.summary_limit,
        policy=RetryPolicy.from_config(s.config, s.is_overflow),
        halver=InputHalver(history, s.estimator),
        task_budget=cut.task_limit,
        whole=list(history),
    )
    archived, summary = yield ArchiveAndSummarize(archive, call)
    if archived.error is not None:
        log.warning(
            "ARS: history archive write failed (%s); summarizing anyway, file_path=None",
            describe(archived.error),
        )
    return _new_event(r, cut, summary, call, archived)


def _new_event(
    r: _Round,
    cut: _Cut,
    summary: SummaryResult | SummarizerError,
    call: SummaryCall,
    archived: Archived,
) -> SummarizationEvent:
    """The event for ``summary``; a failed summary never raises: the summary
    message holds the error text and a deterministic fallback summary of the
    ``call``'s input (whole for a conversation)."""
    s, file_path = r.settings, archived.path
    limit = cut.summary_limit
    # a wrapped failure is described by what the summarizer raised
    raw = summary.cause if isinstance(summary, SummarizerError) and summary.cause else summary
    checked = validate_summary(raw, limit=limit, estimator=s.estimator)
    if checked.error is not None:
        if isinstance(summary, SummarizerError):
            log.error("ARS: summary model failed: %s", checked.error)
        else:
            log.error("ARS: summary rejected: %s", checked.error)
        prompt = s.config.summary_prompt
        extractive = ExtractiveSummarizer(summary_tokens=limit, task_tokens=cut.task_limit)
        fallback = extractive.summarize(call.input_for(extractive), prompt)
        fallback_text = validate_summary(fallback, limit=limit, estimator=s.estimator).text
        message = build_summary_message(
            None,
            cutoff=cut.global_,
            file_path=file_path,
            continues=archived.continues,
            error=checked.error,
            fallback=fallback_text,
        )
    else:
        message = build_summary_message(
            checked.text, cutoff=cut.global_, file_path=file_path, continues=archived.continues
        )
    return SummarizationEvent(
        cutoff=cut.global_,
        summary_message=message,
        file_path=file_path,
        previous_cutoff=cut.previous,
        summary_usage=checked.usage if checked.error is None else _failed_usage(summary),
        summary_error=checked.error,
        anchor=anchor_at(r.state, cut.global_),
    )


def _failed_usage(summary: SummaryResult | SummarizerError) -> Usage | None:
    """The usage of a failed summary call: only its retries, when it had any."""
    if isinstance(summary, SummarizerError):
        retries = summary.retries
    else:
        retries = summary.usage.retries if summary.usage is not None else ()
    return Usage(retries=tuple(retries)) if retries else None


def _trim_tail(
    r: _Round, l1: _L1View, cut: _Cut, summary: Message
) -> Generator[Effect, Any, _Tail]:
    """``[summary, *kept tail]``; when that is still over capacity, the tail
    is trimmed further and the trimmed messages are returned to persist."""
    s, tail = r.settings, l1.view[cut.local :]
    view = [summary, *tail]
    capacity = r.l2_threshold if r.forced else r.threshold
    untrimmed = _Tail(view, r.tokens(view))
    if untrimmed.tokens <= capacity:
        return untrimmed
    trim = trim_tail(
        r.raw[cut.local :],
        tail,
        budget=capacity,
        fixed_tokens=r.extra + message_tokens(s.estimator, summary),
        estimator=s.estimator,
        preview_tokens=s.config.summary_tool_result_token_limit,
    )
    failed = (yield Write(trim.writes)) if trim.writes else set()
    ok = {j for j, w in zip(trim.trimmed, trim.writes, strict=True) if w.path not in failed}
    if not ok:
        return untrimmed
    view = [summary, *(trim.tail[j] if j in ok else m for j, m in enumerate(tail))]
    # the seed's rule: the trimmed tail is persisted only under a context overflow
    replaced = tuple((cut.global_ + j, trim.tail[j]) for j in sorted(ok)) if r.forced else ()
    return _Tail(view, r.tokens(view), replaced)
