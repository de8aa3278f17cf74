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
             |- summarize ... archive || (summary input, summary)
             |- compose ..... new SummarizationEvent; trim_tail: kept tail still too
             |                big, trim it (persisted by id); the retention audit
             |- settle ...... the archive's write, run beside the steps above, is
             |                durable (a failed one: compose again without its path)
             |- then ........ call the model, ``completed``
     a started round that raises (or is cancelled) reports ``failed``

The effects it yields are in :mod:`ars_core.effects`; :mod:`ars_core.engine`
drives it synchronously or asynchronously.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Generator, Sequence
from typing import Any

import attrs

from .archive import HistoryArchive
from .budget import (
    default_input_budget,
    in_estimate_units,
    summary_input_budget,
    task_share,
)
from .call_state import CallOutcome, CallState, Cut, FlowSettings, L1View, StateUpdate, Tail
from .checkpoint import (
    SummarizationEvent,
    anchor_at,
    apply_sent_forms,
    check_event,
    effective_messages,
    message_key,
    sent_forms_of,
)
from .cutoff import choose_cut, conversation_tokens
from .effects import (
    ArchiveAndSummarize,
    Archived,
    BeginArchive,
    CallModel,
    Effect,
    Emit,
    ModelResult,
    SettleArchive,
    SettleWrites,
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
from .families import forget_covered
from .floors import floors_reach_of
from .known_size import history_size
from .l1 import L1Plan, plan_l1
from .l1_media import media_offloader, offload_inline_media
from .l1_user import offload_oversized_user_messages
from .l2 import (
    CheckedSummary,
    build_summary_message,
    describe_error,
    select_cutoff,
    trim_tail,
)
from .messages import Message
from .per_call import head
from .provider_size import provider_ratio
from .retention import Retention, audit_retention, view_text
from .retention_log import log_retention
from .stream import CompressionEvent
from .summarize import (
    ExtractiveSummarizer,
    SummaryResult,
    condense_history,
    whole_tokens,
)
from .summary_call import InputHalver, RetryPolicy, SummaryCall
from .task_text import TaskSection, fitted_summary, summarizer_limit, summary_task
from .totals import CountLater, NewestFirst
from .usage import Usage

__all__ = ["CallOutcome", "FlowSettings", "StateUpdate", "can_compact", "flow"]

log = logging.getLogger("ars")

Flow = Generator[Effect, Any, "CallOutcome"]


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
    # every budget of the call, in estimate units (and the provider's, when it counted more)
    budget = in_estimate_units(cfg, est, provider_ratio(state, est))
    threshold, l2_threshold = budget.threshold_tokens, budget.l2_threshold_tokens
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
    history = history_size(settings.memo, est, effective, event)
    r = CallState(
        settings=settings,
        state=state,
        check=check,
        event=event,
        effective=effective,
        raw=raw,
        extra=extra,
        history=history,
        threshold=threshold,
        l2_threshold=l2_threshold,
        forced=forced,
        thread=thread,
        requested=requested and can_compact(effective, event, cfg.summary_keep_messages),
        budget=budget,
    )
    return _run(r)


def can_compact(effective: Sequence[Message], event: SummarizationEvent | None, keep: int) -> bool:
    """Whether an L2 round has something to summarize in ``effective`` (the
    summary, when ``event`` is set, and the messages after it) beyond the
    ``keep`` latest messages, without separating a tool call from its results."""
    return select_cutoff(effective, keep, start=1 if event is not None else 0) is not None


def _run(r: CallState) -> Flow:
    r.pair_history()
    if r.check.dropped is not None:
        yield from _dropped_notice(r)
    if not r.forced and not r.requested and r.fits(r.threshold):
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


def _dropped_notice(r: CallState) -> Generator[Effect, Any, None]:
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
        tokens_before=r.before(),
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


def _below_threshold(r: CallState) -> Generator[Effect, Any, CallOutcome | None]:
    """The effective messages go straight to the model; ``None`` when it
    overflowed and the forced path takes over."""
    view = r.send(r.effective)
    result = yield CallModel(view)
    if r.overflowed(result):
        return None
    return r.outcome(result, view, None, None)


def _level1(r: CallState) -> Generator[Effect, Any, L1View]:
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
    # written beside the round's next steps where the backend allows (``None``): settled
    # (:func:`_settle`) before anything naming the files is sent
    failed = (yield Write(plan.writes, beside=True)) if plan.writes else set()
    return _l1_view(r, plan, failed or set(), unsettled=failed is None)


def _l1_view(r: CallState, plan: L1Plan, failed: set[str], unsettled: bool = False) -> L1View:
    """The L1 view of ``plan``, the originals kept where a write ``failed``."""
    est = r.settings.estimator
    view, offloaded = plan.finalize(failed)
    fields = {"offloaded": offloaded, "truncated_args": plan.truncated_args}
    size: int | NewestFirst
    if not r.history.exact:  # counted from the newest message back as far as decisions need
        size = NewestFirst(view, lambda m: message_tokens(est, m), r.extra, floors_reach_of(est))
    else:
        replaced = plan.replaced
        size = (
            r.tokens_before
            + sum(message_sizes(est, [view[i] for i in replaced]))
            - sum(message_sizes(est, list(replaced.values())))
        )
    return L1View(view, size, fields, plan if unsettled else None)


def _settle(r: CallState, l1: L1View) -> Generator[Effect, Any, L1View | None]:
    """Wait for ``l1``'s offloads when they are written beside the round: ``None``
    when each is durable (or none was pending), else the L1 view made again with the
    originals of the failed ones (the round goes on from that view instead)."""
    if l1.unsettled is None:
        return None
    failed = yield SettleWrites()
    return _l1_view(r, l1.unsettled, failed) if failed else None


def _after_l1(r: CallState, l1: L1View) -> Flow:
    """Send the L1 view when it fits the L2 threshold, else summarize (L2)."""
    sent: ModelResult | None = None
    if not r.forced and not r.requested and not l1.exceeds(r.l2_threshold):
        if (redo := (yield from _settle(r, l1))) is not None:
            return (yield from _after_l1(r, redo))
        view = r.send(l1.view)
        sent = yield CallModel(view)
        if not r.overflowed(sent):
            yield r.record("completed", "L1", tokens_after=l1.tokens, **l1.fields)
            return r.outcome(sent, view, "L1", l1.tokens)
    # the round reads the summarized part too (its requests make the task statement):
    # checked now when the call took the kept part alone (engine: reads_kept_part_only)
    r.state = r.settings.memo.checked(r.state)
    cut = choose_cut(r, l1)
    if cut is None:
        if (redo := (yield from _settle(r, l1))) is not None:
            return (yield from _after_l1(r, redo))
        return (yield from _l1_fallback(r, l1, sent))
    return (yield from _level2(r, l1, cut))


def _l1_fallback(r: CallState, l1: L1View, sent: ModelResult | None) -> Flow:
    """No valid cutoff: the L1 view is all there is (an overflow of it propagates). A
    WARNING when that view may not fit (above T, or the model said it overflowed); an
    INFO line when it fits T: too few messages to summarize yet, nothing lost."""
    fits = l1.tokens <= r.threshold and (sent is None or sent.error is None)
    log.log(
        logging.INFO if fits else logging.WARNING,
        "ARS: no valid cutoff for L2 (%d effective messages); sending the L1 view "
        "(~%d tokens, %s %d)",
        len(r.effective),
        l1.tokens,
        "within the threshold of" if fits else "it may not fit the model's window; threshold",
        r.threshold,
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


def _level2(r: CallState, l1: L1View, cut: Cut) -> Flow:
    """Summarize the older history, trim the kept tail if needed, call the model."""
    r.reached = "L2"
    if not r.started:  # the forced path announces itself when L2 begins
        yield r.start("L2")
    summarized = yield from _summarize(r, l1, cut)
    if isinstance(summarized, L1View):  # an offload failed: the round goes on from this view
        return (yield from _after_l1(r, summarized))
    new_event, sent, retention, text = yield from _compose(r, l1, cut, summarized)
    if summarized.archived.pending:  # written beside the steps above: durable before it is named
        archived = yield SettleArchive()
        if archived.error is not None:
            summarized = attrs.evolve(summarized, archived=_archive_failed(archived))
            new_event, sent, retention, text = yield from _compose(r, l1, cut, summarized)
    log_retention(cut, sent.view, text, retention)
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
    forget_covered(r.state, cut.previous)  # what the stored summary covers: in no later request
    update = StateUpdate(event=new_event, replaced=sent.replaced)
    return r.outcome(result, view, "L2", sent.tokens, update)


def _compose(
    r: CallState, l1: L1View, cut: Cut, summarized: _Summarized
) -> Generator[Effect, Any, tuple[SummarizationEvent, Tail, Retention, str]]:
    """The new event for ``summarized``, the view it sends (the kept tail trimmed
    when needed), the retention audit of that view and the view's text (read once,
    for the audit and the report)."""
    new_event = _new_event(r, cut, summarized)
    sent = yield from _trim_tail(r, l1, cut, new_event.summary_message)
    text = view_text(sent.view)
    retention = audit_retention(
        head(r.raw, cut.start, cut.local), sent.view, task=cut.task, text=text
    )
    new_event = attrs.evolve(new_event, retention=retention)
    return new_event, sent, retention, text


@attrs.frozen
class _Summarized:
    """What the summary step made: the summary (or the error it failed with), its
    call, the task sections and where the archive went."""

    summary: SummaryResult | SummarizerError
    checked: CheckedSummary
    fallback: str | None
    task: TaskSection
    archived: Archived


def _summarize(r: CallState, l1: L1View, cut: Cut) -> Generator[Effect, Any, _Summarized | L1View]:
    """Archive the summarized history and summarize it; the L1 view made again when
    an offload written beside the round failed (before the summary is asked for)."""
    s = r.settings
    part = head(r.raw, cut.start, cut.local)
    archive = HistoryArchive.of(part, start=cut.previous, thread=r.thread)
    yield BeginArchive(archive)  # written beside the input's build; whole before the summary
    history = l1.part(0, cut.local)  # the part choose_cut read
    budget, task_room = s.summary_input_tokens or default_input_budget(r.threshold), None
    if s.lean_rounds and not s.summary_input_tokens:
        task_room = cut.task_limit  # a task too large for its share is read whole
        whole, turns = whole_tokens(history, s.estimator), conversation_tokens(history, s.estimator)
        budget = summary_input_budget(r.threshold, whole, task_room, turns)
    cleaned = condense_history(history, budget, s.estimator, task_tokens=task_room)
    task = _task_section(r, cut)
    call = SummaryCall(
        cleaned,
        s.config.summary_prompt,
        summarizer_limit(cut.summary_limit, task, s.estimator),
        policy=RetryPolicy.from_config(s.config, s.is_overflow),
        halver=InputHalver(history, s.estimator),
        whole=list(history),
        task=tuple(cut.task),
    )
    if (redo := (yield from _settle(r, l1))) is not None:  # the input names the offloads
        yield SettleArchive(forget=True)  # the cut is chosen again: this archive is not named
        return redo
    archived, summary = yield ArchiveAndSummarize(archive, call)
    checked, fallback = _checked(r, cut, summary, call, task)
    return _Summarized(summary, checked, fallback, task, _archive_failed(archived))


def _archive_failed(archived: Archived) -> Archived:
    """``archived``, its failure (if it failed) in the log."""
    if archived.error is not None:
        log.warning(
            "ARS: history archive write failed (%s); summarizing anyway, file_path=None",
            describe(archived.error),
        )
    return archived


def _task_section(r: CallState, cut: Cut) -> TaskSection:
    """The task sections the engine writes into the summary message: the requests
    that set the work and the newest one (and an earlier summary's task), verbatim
    within the task's room in the summary, their headers included (its own room
    when it is too large for its share, else that share)."""
    room = cut.task_limit or task_share(cut.summary_limit)
    return summary_task(head(r.state, 0, cut.global_), cut.task, room, r.settings.estimator)


def _checked(
    r: CallState,
    cut: Cut,
    summary: SummaryResult | SummarizerError,
    call: SummaryCall,
    task: TaskSection,
) -> tuple[CheckedSummary, str | None]:
    """The summary fitted to the round's bound beside the ``task`` sections, and when
    it failed (a failed summary never raises) a deterministic fallback summary of the
    ``call``'s input (whole for a conversation), fitted the same way; a failure is
    logged."""
    s, limit = r.settings, call.budget
    # a wrapped failure is described by what the summarizer raised
    raw = summary.cause if isinstance(summary, SummarizerError) and summary.cause else summary
    checked = fitted_summary(raw, task, cut.summary_limit, s.estimator)
    if checked.error is None:
        return checked, None
    if isinstance(summary, SummarizerError):
        log.error("ARS: summary model failed: %s", checked.error)
    else:
        log.error("ARS: summary rejected: %s", checked.error)
    extractive = ExtractiveSummarizer(summary_tokens=limit, task=call.task)
    fallback = extractive.summarize(call.input_for(extractive), s.config.summary_prompt)
    return checked, fitted_summary(fallback, task, cut.summary_limit, s.estimator).text


def _new_event(r: CallState, cut: Cut, made: _Summarized) -> SummarizationEvent:
    """The event for the summary ``made``, the task sections before what the
    summarizer wrote (a failed summary: its error text and the fallback)."""
    checked, archived = made.checked, made.archived
    message = build_summary_message(
        checked.text if checked.error is None else None,
        cutoff=cut.global_,
        file_path=archived.path,
        continues=archived.continues,
        error=checked.error,
        fallback=made.fallback,
        task=made.task.sections,
    )
    return SummarizationEvent(
        cutoff=cut.global_,
        summary_message=message,
        file_path=archived.path,
        previous_cutoff=cut.previous,
        summary_usage=checked.usage if checked.error is None else _failed_usage(made.summary),
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
    r: CallState, l1: L1View, cut: Cut, summary: Message
) -> Generator[Effect, Any, Tail]:
    """``[summary, *kept tail]``; when that is still over capacity, the tail
    is trimmed further and the trimmed messages are returned to persist."""
    s, tail = r.settings, l1.view[cut.local :]
    view = [summary, *tail]
    capacity = r.l2_threshold if r.forced else r.threshold
    size = r.view_size(view)
    if not size.reaches(capacity - r.extra + 1):  # within capacity: by the bound when below
        tokens = size.tokens + r.extra if size.exact else CountLater(size, r.extra)
        return Tail(view, tokens)
    untrimmed = Tail(view, size.counted() + r.extra)
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
    return Tail(view, r.tokens(view), replaced)
