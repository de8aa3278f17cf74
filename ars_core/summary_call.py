"""The summary call, robust against the summary model's own failures.

One L2 round makes one *summary call*, which may take several attempts:

* **overflow** — the summary model rejects the input as larger than its
  window (the engine's overflow classifier, by default
  :func:`~ars_core.errors.is_context_overflow`): the input is rebuilt from the
  summarized messages with half the tokens of the one that overflowed
  (:func:`~ars_core.summarize.condense_history`: the previous summary and the
  user's requests stay, the oldest other messages give way), up to
  ``summary_overflow_retries`` times and never below :data:`MIN_HALVED_INPUT`
  tokens;
* **transient errors** — rate limits, server and connection errors, provider
  timeouts (:func:`~ars_core.errors.is_transient_error`): retried up to
  ``summary_max_retries`` times, after ``summary_retry_delay`` seconds,
  doubled at each retry, or after the provider's ``Retry-After`` when longer;
* **timeout** — ``summary_timeout`` bounds the whole call, retries and waits
  included. Async: the attempt is cancelled (a synchronous summarizer's
  worker thread is abandoned). Sync: the attempt runs in a worker thread and
  the round stops waiting for it at the deadline; Python cannot stop a thread,
  so a summarizer that never returns keeps its thread (a daemon) until it does,
  and its answer is discarded. At most :data:`MAX_ABANDONED_SUMMARIES` such
  threads run at once: past that no new summary thread starts (the summary
  fails, saying so, with an error in the log) until one returns. A retry
  whose wait (a ``Retry-After``) would end past the deadline is not waited
  for: the call fails at once naming the error it would have retried and the
  wait. A summarizer that declares ``runs_inline``
  (in process, cannot hang: the extractive one) is called in the calling
  thread, once the deadline has not passed.

Anything else, or the last failure, becomes a recorded
:class:`~ars_core.errors.SummarizerError` (never raised to the caller: the
round stores the error text with a fallback summary). Every retry is logged
and listed in the usage (:class:`~ars_core.usage.SummaryRetry`), or in the
error's ``retries`` when the call failed.

The decisions are a generator (:func:`summary_attempts`) that yields what to
do — an :class:`Attempt` or a :class:`Pause` — and the two shells
(:func:`call_sync`, :func:`call_async`) carry them out. The waits go through
this module's :func:`sleep` / :func:`asleep`, which tests replace (see
:func:`ars_core.testing.recorded_sleeps`); the async one never blocks the loop.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import math
import threading
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import attrs

from ._workers import MAX_ABANDONED_SUMMARIES, Worker, abandoned_summaries, run_abandonable
from .capabilities import InlineSummarizer, WholeHistorySummarizer, has
from .errors import SummarizerError, is_context_overflow, is_transient_error
from .estimate import Estimator, message_tokens
from .l2 import describe_error
from .messages import Message
from .pending_form import made
from .summarize import SummaryResult, bound_summarizer, condense_history
from .usage import SummaryRetry, Usage

__all__ = [
    "MAX_ABANDONED_SUMMARIES",
    "MIN_HALVED_INPUT",
    "Attempt",
    "InputHalver",
    "Pause",
    "RetryPolicy",
    "SummaryCall",
    "abandoned_summaries",
    "asleep",
    "call_async",
    "call_sync",
    "check_summary",
    "retry_after",
    "sleep",
    "summary_attempts",
    "summary_failure",
]

log = logging.getLogger("ars")

T = TypeVar("T")

#: the fewest tokens an overflowing summary input is halved to
MIN_HALVED_INPUT = 256


def sleep(seconds: float) -> None:
    """How the sync shell waits before a transient retry (tests replace it)."""
    time.sleep(seconds)


async def asleep(seconds: float) -> None:
    """How the async shell waits before a transient retry (tests replace it)."""
    await anyio.sleep(seconds)


@attrs.frozen
class RetryPolicy:
    """The controls of a summary call (see the module doc)."""

    timeout: float = 300.0
    max_retries: int = 2
    retry_delay: float = 1.0
    overflow_retries: int = 3
    is_overflow: Callable[[BaseException], bool] = is_context_overflow
    is_transient: Callable[[BaseException], bool] = is_transient_error

    @classmethod
    def from_config(
        cls, config: Any, is_overflow: Callable[[BaseException], bool] = is_context_overflow
    ) -> RetryPolicy:
        """The policy of a :class:`~ars_core.config.SummaryConfig`."""
        return cls(
            timeout=float(config.summary_timeout),
            max_retries=int(config.summary_max_retries),
            retry_delay=float(config.summary_retry_delay),
            overflow_retries=int(config.summary_overflow_retries),
            is_overflow=is_overflow,
        )


@attrs.frozen
class InputHalver:
    """Rebuilds a summary input from ``source`` (the summarized messages, as
    L1 left them) with half the tokens of one that overflowed."""

    source: Sequence[Message]
    estimator: Estimator

    def tokens(self, history: Sequence[Message]) -> int:
        return sum(message_tokens(self.estimator, m) for m in history)

    def halve(self, history: Sequence[Message]) -> list[Message] | None:
        """The input with half the tokens of ``history``; ``None`` at the floor
        (below :data:`MIN_HALVED_INPUT` tokens, or no smaller input exists)."""
        size = self.tokens(history)
        target = size // 2
        if target < MIN_HALVED_INPUT:
            return None
        smaller = condense_history(self.source, target, self.estimator)
        return smaller if self.tokens(smaller) < size else None


@attrs.frozen
class SummaryCall:
    """One summary call: the input, the prompt, the summary's token bound
    (``budget``), the controls, how to halve the input on overflow, and the
    task's own room in the summary when it has one (``task_budget``, see
    :func:`~ars_core.budget.task_budget`)."""

    history: list[Message]
    prompt: str
    budget: int
    policy: RetryPolicy = RetryPolicy()
    halver: InputHalver | None = None
    task_budget: int | None = None
    #: the history before it was condensed, for a summarizer that reads it whole
    whole: list[Message] | None = None
    #: the requests the engine writes beside the summary (the summarizer leaves them out)
    task: tuple[str, ...] | None = None

    def input_for(self, summarizer: Any) -> list[Message]:
        """What ``summarizer`` reads: the condensed history, or the whole one when
        its ``reads_whole_history(whole)`` says so (a summarizer that computes in
        this process, which no model window bounds: the extractive summarizer,
        for a conversation)."""
        if (
            self.whole is not None
            and has(summarizer, WholeHistorySummarizer)
            and summarizer.reads_whole_history(self.whole) is True
        ):
            return self.whole
        return self.history


@attrs.frozen
class Attempt:
    """Call the summarizer with ``history``; send back its checked result or the exception."""

    history: list[Message]


@attrs.frozen
class Pause:
    """Wait ``seconds`` before retrying after ``cause``; send back ``None``, or
    the error that ends the call (the deadline)."""

    seconds: float
    cause: BaseException | None = None


Step = Attempt | Pause
Outcome = SummaryResult | SummarizerError


def check_summary(result: object) -> SummaryResult:
    """A summarizer's return value as a :class:`SummaryResult` (a ``str`` is
    accepted); anything else is a :class:`SummarizerError`."""
    if isinstance(result, SummaryResult):
        return result
    if isinstance(result, str):
        return SummaryResult(text=result)
    wrong = TypeError(f"a summarizer must return SummaryResult or str, not {type(result).__name__}")
    raise summary_failure(wrong)


def summary_failure(exc: BaseException) -> SummarizerError:
    """``exc``, raised while summarizing, as the :class:`SummarizerError` the round
    records (its reason: the original as ``"TypeName: message"``, host paths hidden)."""
    if isinstance(exc, SummarizerError):
        return exc
    error = SummarizerError(describe_error(exc), cause=exc)
    error.__cause__ = exc
    return error


def summary_attempts(
    history: list[Message], policy: RetryPolicy, halver: InputHalver | None = None
) -> Generator[Step, Any, Outcome]:
    """The decisions of one summary call (see the module doc): yields
    :class:`Attempt` and :class:`Pause` steps, returns the result (its usage
    listing the retries) or the :class:`SummarizerError` to record."""
    retries: list[SummaryRetry] = []
    overflows = transients = 0
    while True:
        outcome = yield Attempt(made(history))
        if isinstance(outcome, SummaryResult):
            return _with_retries(outcome, retries)
        exc: BaseException = outcome
        smaller = None
        if overflows < policy.overflow_retries and halver is not None and policy.is_overflow(exc):
            smaller = halver.halve(history)
            if smaller is None:
                log.warning(
                    "ARS: the summary input overflowed the summary model's window and "
                    "cannot be halved further (%d tokens); the summary fails",
                    halver.tokens(history),
                )
        if smaller is not None:
            assert halver is not None
            overflows += 1
            retry = SummaryRetry(
                "context_overflow",
                describe_error(exc),
                input_tokens=halver.tokens(history),
                retry_input_tokens=halver.tokens(smaller),
            )
            log.warning(
                "ARS: the summary call overflowed the summary model's window at %d input "
                "tokens (%s); retrying with the input halved to %d tokens",
                retry.input_tokens,
                retry.error,
                retry.retry_input_tokens,
            )
            retries.append(retry)
            history = smaller
            continue
        if transients < policy.max_retries and policy.is_transient(exc):
            delay = max(policy.retry_delay * 2**transients, retry_after(exc) or 0.0)
            transients += 1
            retry = SummaryRetry("transient_error", describe_error(exc), delay=delay)
            log.warning(
                "ARS: the summary call failed with a transient error (%s); retry %d of %d in %g s",
                retry.error,
                transients,
                policy.max_retries,
                delay,
            )
            retries.append(retry)
            waited = yield Pause(delay, exc)
            if waited is None:
                continue
            exc = waited
        return _failed(exc, retries)


def retry_after(exc: BaseException) -> float | None:
    """The seconds a provider asked to wait (its response's ``Retry-After``
    header, in seconds, on ``exc`` or the error it wraps), or ``None``."""
    for error in (exc, exc.__cause__, getattr(exc, "cause", None)):
        headers = getattr(getattr(error, "response", None), "headers", None)
        value = headers.get("retry-after") if isinstance(headers, Mapping) else None
        try:
            seconds = float(value) if value is not None else None
        except (TypeError, ValueError):  # an HTTP date: the backoff decides
            seconds = None
        if seconds is not None and math.isfinite(seconds) and seconds >= 0:
            return seconds
    return None


def _with_retries(result: SummaryResult, retries: list[SummaryRetry]) -> SummaryResult:
    if not retries:
        return result
    usage = result.usage if result.usage is not None else Usage()
    return attrs.evolve(result, usage=attrs.evolve(usage, retries=tuple(retries)))


def _failed(exc: BaseException, retries: list[SummaryRetry]) -> SummarizerError:
    error = summary_failure(exc)
    if retries:
        error.retries = tuple(retries)
    return error


class _Clock:
    """The deadline of one summary call, and what a step finds when it is past."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.deadline = time.monotonic() + policy.timeout

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def timed_out(self) -> SummarizerError:
        return SummarizerError(
            f"the summary call did not finish within {self.policy.timeout:g} s (summary_timeout)"
        )

    def past(self, pause: Pause) -> SummarizerError | None:
        """The timeout when ``pause`` would end past the deadline (the call ends
        without waiting), naming the error the wait was for (a rate limit whose
        ``Retry-After`` is longer than what is left of the timeout says so), else
        ``None`` (wait)."""
        left = self.remaining()
        if pause.seconds < left:
            return None
        if pause.cause is None:
            return self.timed_out()
        return SummarizerError(
            f"{describe_error(pause.cause)}; not retried: the retry would wait "
            f"{pause.seconds:g} s, past summary_timeout ({self.policy.timeout:g} s)"
        )


def _next(steps: Generator[Step, Any, Outcome], value: Any) -> Step | Outcome:
    try:
        return steps.send(value)
    except StopIteration as stop:
        result: Outcome = stop.value
        return result


def _method(summarizer: Any, call: SummaryCall, name: str) -> Callable[..., Any] | None:
    bounded = bound_summarizer(summarizer, call.budget, call.task_budget, call.task)
    method = getattr(bounded, name, None)
    return method if callable(method) else None


def call_sync(summarizer: Any, call: SummaryCall) -> Outcome:
    """Make the summary call synchronously (see the module doc for the timeout)."""
    summarize = _method(summarizer, call, "summarize")
    if summarize is None:
        name = type(summarizer).__name__
        wrong = TypeError(f"{name} only summarizes asynchronously (use acall/acompact)")
        return summary_failure(wrong)
    clock = _Clock(call.policy)
    inline = has(summarizer, InlineSummarizer) and summarizer.runs_inline is True
    steps = summary_attempts(call.input_for(summarizer), call.policy, call.halver)
    step = _next(steps, None)
    while isinstance(step, Attempt | Pause):
        if isinstance(step, Pause):
            value: Any = clock.past(step)
            if value is None:
                sleep(step.seconds)
        else:
            try:
                fn = functools.partial(summarize, step.history, call.prompt)
                value = check_summary(
                    _inline(fn, clock) if inline else _in_thread(fn, clock.remaining())
                )
            except _Late:
                value = clock.timed_out()
            except Exception as exc:
                value = exc
        step = _next(steps, value)
    return step


async def call_async(summarizer: Any, call: SummaryCall) -> Outcome:
    """Async twin of :func:`call_sync`: a synchronous summarizer runs in a
    worker thread; the deadline cancels the attempt."""
    asummarize = _method(summarizer, call, "asummarize")
    summarize = _method(summarizer, call, "summarize")
    if asummarize is None and summarize is None:
        return summary_failure(TypeError(f"{type(summarizer).__name__} is not a summarizer"))
    clock = _Clock(call.policy)
    steps = summary_attempts(call.input_for(summarizer), call.policy, call.halver)
    step = _next(steps, None)
    while isinstance(step, Attempt | Pause):
        if isinstance(step, Pause):
            value: Any = clock.past(step)
            if value is None:
                await asleep(step.seconds)
        else:
            value = clock.timed_out()
            with anyio.move_on_after(clock.remaining()):
                try:
                    if asummarize is not None:
                        result = await asummarize(step.history, call.prompt)
                    else:
                        assert summarize is not None
                        fn = functools.partial(summarize, step.history, call.prompt)
                        result = await run_abandonable(fn)
                    value = check_summary(result)
                except Exception as exc:
                    value = exc
        step = _next(steps, value)
    return step


class _Late(Exception):
    """The attempt did not finish before the deadline."""


def _inline(fn: Callable[[], T], clock: _Clock) -> T:
    """``fn()`` in the calling thread (a summarizer that cannot hang), unless the
    deadline has passed (:class:`_Late`)."""
    if clock.remaining() <= 0:
        raise _Late
    return fn()


def _in_thread(fn: Callable[[], T], timeout: float) -> T:
    """``fn()`` in a daemon worker thread (with the caller's context variables),
    waited for at most ``timeout`` seconds; :class:`_Late` after that."""
    if timeout <= 0:
        raise _Late
    box: list[tuple[bool, Any]] = []
    done = threading.Event()
    context = contextvars.copy_context()
    worker = Worker(functools.partial(context.run, fn))

    def run() -> None:
        try:
            box.append((True, worker()))
        except BaseException as exc:
            box.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=run, name="ars-summary", daemon=True).start()
    if not done.wait(timeout):
        worker.abandon()
        raise _Late
    ok, value = box[0]
    if ok:
        result: T = value
        return result
    raise value
