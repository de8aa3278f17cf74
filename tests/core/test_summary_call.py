"""The summary call is robust (R23, R41, R27): an overflowing call is retried
with the input halved down to a floor, transient provider errors get a
bounded retry with exponential backoff, the call has a timeout, and every
retry appears in the logs and in the event's and the stream's usage. Through
:class:`Compressor`, sync and async, with the fakes of ``ars_core.testing``
and the real error classes of the provider clients."""

from __future__ import annotations

import logging
import threading
from typing import Any, ClassVar

import anthropic
import anyio
import httpx
import pytest

from ars_core import (
    DEFAULT_SUMMARY_PROMPT,
    ApproxEstimator,
    CallableSummarizer,
    CallOutcome,
    Compressor,
    ConfigError,
    ContextOverflowError,
    ExtractiveSummarizer,
    Message,
    SummarizerError,
    SummaryConfig,
    SummaryRetry,
    Usage,
    is_context_overflow,
    is_transient_error,
)
from ars_core.estimate import message_tokens
from ars_core.summarize import render_prompt
from ars_core.testing import FakeSummarizer, ScriptedModel, capture_events, recorded_sleeps

from .helpers import assistant, call, small_config, tool, user, words

EST = ApproxEstimator()
TASK = "Fix the failing test in tests/test_parser.py and explain the cause."


def omitted(n: int) -> str:
    return (
        f"[{n} older messages omitted here to fit the summary budget; "
        "their full text is in the conversation history file]"
    )


MODES = pytest.mark.parametrize("mode", ["sync", "async"])


def agent_run(steps: int = 10) -> list[Message]:
    """One task, then ``steps`` bash calls with ~100-token results (L1 keeps them):
    21 messages, ~1,450 tokens; L2 cuts at 17 (keeps 4)."""
    out = [user(TASK)]
    for i in range(steps):
        c = call("bash", f"c{i}", command=f"pytest -k case{i}")
        out += [assistant(f"step {i}", c), tool(c, f"output {i} " + words(90, f"s{i}"))]
    return out


def tokens(messages: list[Message]) -> int:
    return sum(message_tokens(EST, m) for m in messages)


def rendered_tokens(messages: list[Message]) -> int:
    return EST.count_text(render_prompt(DEFAULT_SUMMARY_PROMPT, messages))


def run(mode: str, compressor: Compressor, state: list[Message]) -> CallOutcome:
    model = ScriptedModel(["ok"])
    if mode == "sync":
        return compressor.call(state, model)

    async def go() -> CallOutcome:
        return await compressor.acall(state, model.acall)

    return anyio.run(go)


def engine(summarizer: Any, **config: Any) -> Compressor:
    # the fixed rounds (T/2 input, keep 4): the exact inputs below are built on them; the
    # retries are the same with the default lean rounds
    return Compressor(
        small_config(**config), estimator=EST, summarizer=summarizer, lean_rounds=False
    )


def response(status: int) -> httpx.Response:
    return httpx.Response(status, request=httpx.Request("POST", "https://api.example/v1"))


def rate_limit() -> anthropic.RateLimitError:
    return anthropic.RateLimitError("rate limit exceeded", response=response(429), body=None)


def server_error() -> anthropic.InternalServerError:
    return anthropic.InternalServerError("upstream failed", response=response(503), body=None)


# ------------------------------------------------------------------ overflow


@pytest.mark.spec("R23", "R27", "R41")
class TestOverflowHalvesTheInput:
    @MODES
    def test_an_overflowing_summary_call_is_retried_with_half_the_input(
        self, mode: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The first input (the task and 13 of the 17 summarized messages, ~1,000
        tokens) overflows a 730-token summary model; the retry keeps the task
        whole, notes the 10 oldest other messages as omitted and keeps the 6
        newest: half the tokens.
        The retry, its reason and sizes are in the log, the event's usage and
        the ``completed`` stream event."""
        state = agent_run()
        summarizer = FakeSummarizer("THE SUMMARY", overflow_above=730, estimator=EST)
        with caplog.at_level(logging.WARNING, logger="ars"), capture_events() as captured:
            out = run(mode, engine(summarizer), state)

        first, second = (messages for messages, _ in summarizer.calls)
        # the first input: the summary input budget (T/2) already left out the 3 oldest
        assert first[0] is state[0] and first[1].text == omitted(3) and first[2:] == state[4:17]
        assert second[0] is state[0] and second[0].text == TASK
        assert second[1].text == omitted(10)
        assert second[2:] == state[11:17]
        assert tokens(second) <= tokens(first) // 2
        assert rendered_tokens(first) > 730 >= rendered_tokens(second)

        retry = SummaryRetry(
            "context_overflow",
            f"ContextOverflowError: prompt is too long: {rendered_tokens(first)} tokens "
            "> 730 maximum",
            input_tokens=tokens(first),
            retry_input_tokens=tokens(second),
        )
        event = out.update.event  # type: ignore[union-attr]
        assert event.summary_error is None
        assert event.summary_usage == Usage(100, 20, retries=(retry,))
        assert "THE SUMMARY" in event.summary_message.text
        done = captured.events[-1].to_dict()
        assert (done["phase"], done["level"]) == ("completed", "L2")
        assert done["summary_usage"] == {
            "input_tokens": 100,
            "output_tokens": 20,
            "total_tokens": 120,
            "retries": [retry.to_dict()],
        }
        assert retry.to_dict() == {
            "reason": "context_overflow",
            "error": retry.error,
            "input_tokens": tokens(first),
            "retry_input_tokens": tokens(second),
        }
        assert (
            f"the summary call overflowed the summary model's window at {tokens(first)} input "
            f"tokens ({retry.error}); retrying with the input halved to {tokens(second)} tokens"
        ) in caplog.text
        # the persisted form carries the retries and reads back equal
        assert type(event).from_dict(event.to_dict()).summary_usage == event.summary_usage

    @MODES
    def test_an_input_that_cannot_be_halved_further_fails_as_a_recorded_summary_error(
        self, mode: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A 100-token summary model: the halved input (~470 tokens) still overflows
        and half of it would be under the 256-token floor. The round completes
        with the error text and the fallback summary, the usage lists the retry."""
        state = agent_run()
        summarizer = FakeSummarizer(overflow_above=100, estimator=EST)
        with caplog.at_level(logging.WARNING, logger="ars"), capture_events() as captured:
            out = run(mode, engine(summarizer), state)

        first, second = (messages for messages, _ in summarizer.calls)
        assert tokens(second) // 2 < 256
        event = out.update.event  # type: ignore[union-attr]
        error = f"ContextOverflowError: prompt is too long: {rendered_tokens(second)} tokens > 100 maximum"
        assert event.summary_error == error
        assert f"[ARS: the summary model failed: {error}]" in event.summary_message.text
        assert TASK in event.summary_message.text  # the fallback keeps the task
        assert event.summary_usage == Usage(
            retries=(
                SummaryRetry(
                    "context_overflow",
                    f"ContextOverflowError: prompt is too long: {rendered_tokens(first)} tokens "
                    "> 100 maximum",
                    input_tokens=tokens(first),
                    retry_input_tokens=tokens(second),
                ),
            )
        )
        assert captured.phases == [("started", "L1"), ("completed", "L2")]
        assert out.response == "ok"
        assert (
            f"cannot be halved further ({tokens(second)} tokens); the summary fails" in caplog.text
        )

    @MODES
    def test_overflow_retries_are_bounded_by_the_config(self, mode: str) -> None:
        """``summary_overflow_retries=0``: one call, the overflow is the recorded error,
        and a usage-less failure has no usage (as before retries existed)."""
        summarizer = FakeSummarizer(overflow_above=700, estimator=EST)
        out = run(mode, engine(summarizer, summary_overflow_retries=0), agent_run())
        assert len(summarizer.calls) == 1
        event = out.update.event  # type: ignore[union-attr]
        assert event.summary_error is not None
        assert event.summary_error.startswith("ContextOverflowError: prompt is too long")
        assert event.summary_usage is None


# ------------------------------------------------------------------ transient errors


@pytest.mark.spec("R23", "R27", "R41")
class TestTransientErrorsAreRetried:
    @MODES
    def test_a_rate_limit_then_a_server_error_are_retried_with_exponential_backoff(
        self, mode: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Anthropic's 429 then 503: waits of 1 s and 2 s (recorded, not slept),
        the same input three times, the third answer is the summary."""
        summarizer = FakeSummarizer("THE SUMMARY", errors=[rate_limit(), server_error()])
        state = agent_run()
        with caplog.at_level(logging.WARNING, logger="ars"), recorded_sleeps() as waits:
            out = run(mode, engine(summarizer), state)

        assert waits == [1.0, 2.0]
        inputs = [messages for messages, _ in summarizer.calls]
        assert len(inputs) == 3 and inputs[0] == inputs[1] == inputs[2]
        assert inputs[0][0] is state[0] and inputs[0][2:] == state[4:17]
        event = out.update.event  # type: ignore[union-attr]
        assert event.summary_error is None
        assert event.summary_usage == Usage(
            100,
            20,
            retries=(
                SummaryRetry("transient_error", "RateLimitError: rate limit exceeded", delay=1.0),
                SummaryRetry("transient_error", "InternalServerError: upstream failed", delay=2.0),
            ),
        )
        assert event.summary_usage.to_dict()["retries"] == [
            {
                "reason": "transient_error",
                "error": "RateLimitError: rate limit exceeded",
                "delay": 1.0,
            },
            {
                "reason": "transient_error",
                "error": "InternalServerError: upstream failed",
                "delay": 2.0,
            },
        ]
        assert (
            "failed with a transient error (RateLimitError: rate limit exceeded); retry 1 of 2 in 1 s"
            in caplog.text
        )
        assert (
            "failed with a transient error (InternalServerError: upstream failed); retry 2 of 2 in 2 s"
            in caplog.text
        )

    @MODES
    def test_a_provider_retry_after_longer_than_the_backoff_is_honoured(self, mode: str) -> None:
        """A 429 whose response says ``Retry-After: 7``: the wait is 7 s, not the 1 s
        backoff; a shorter ``Retry-After`` (0.25 s) leaves the backoff (2 s)."""
        request = httpx.Request("POST", "https://api.example/v1")

        def limited(after: str) -> anthropic.RateLimitError:
            answer = httpx.Response(429, headers={"retry-after": after}, request=request)
            return anthropic.RateLimitError("rate limit exceeded", response=answer, body=None)

        summarizer = FakeSummarizer(errors=[limited("7"), limited("0.25")])
        with recorded_sleeps() as waits:
            out = run(mode, engine(summarizer), agent_run())
        assert waits == [7.0, 2.0] and len(summarizer.calls) == 3
        retries = out.update.event.summary_usage.retries  # type: ignore[union-attr]
        assert [r.delay for r in retries] == [7.0, 2.0]

    @MODES
    def test_transient_retries_stop_at_the_bound_and_the_last_error_is_recorded(
        self, mode: str
    ) -> None:
        """Three 503s with ``summary_max_retries=2`` and a 0.5 s base delay: three calls,
        waits 0.5 and 1.0, the third error recorded with both retries."""
        summarizer = FakeSummarizer(errors=[server_error()] * 3)
        with recorded_sleeps() as waits:
            out = run(mode, engine(summarizer, summary_retry_delay=0.5), agent_run())
        assert len(summarizer.calls) == 3 and waits == [0.5, 1.0]
        event = out.update.event  # type: ignore[union-attr]
        assert event.summary_error == "InternalServerError: upstream failed"
        retry = "InternalServerError: upstream failed"
        assert event.summary_usage == Usage(
            retries=(
                SummaryRetry("transient_error", retry, delay=0.5),
                SummaryRetry("transient_error", retry, delay=1.0),
            )
        )

    @MODES
    def test_a_non_transient_error_is_not_retried(self, mode: str) -> None:
        """An authentication error (401) fails at once: one call, no wait."""
        auth = anthropic.AuthenticationError("invalid x-api-key", response=response(401), body=None)
        summarizer = FakeSummarizer(errors=[auth])
        with recorded_sleeps() as waits:
            out = run(mode, engine(summarizer), agent_run())
        assert len(summarizer.calls) == 1 and waits == []
        event = out.update.event  # type: ignore[union-attr]
        assert event.summary_error == "AuthenticationError: invalid x-api-key"
        assert event.summary_usage is None


@pytest.mark.spec("R41")
@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (anthropic.RateLimitError("slow down", response=response(429), body=None), True),
        (anthropic.InternalServerError("oops", response=response(500), body=None), True),
        (anthropic.APIStatusError("overloaded", response=response(529), body=None), True),
        (anthropic.APIConnectionError(request=httpx.Request("POST", "https://x")), True),
        (anthropic.APITimeoutError(request=httpx.Request("POST", "https://x")), True),
        (httpx.ConnectError("connection refused"), True),
        (httpx.ReadTimeout("read timed out"), True),
        (
            httpx.HTTPStatusError(
                "bad gateway", request=httpx.Request("GET", "https://x"), response=response(502)
            ),
            True,
        ),
        (ConnectionResetError("reset by peer"), True),
        (TimeoutError("timed out"), True),
        (SummarizerError("wrapped", cause=httpx.ConnectError("refused")), True),
        (
            anthropic.BadRequestError(
                "prompt is too long: 300000 tokens > 200000 maximum",
                response=response(400),
                body=None,
            ),
            False,
        ),
        (anthropic.AuthenticationError("bad key", response=response(401), body=None), False),
        (anthropic.PermissionDeniedError("forbidden", response=response(403), body=None), False),
        (ContextOverflowError("too long"), False),
        (ValueError("bad value"), False),
        (SummarizerError("the summary call did not finish within 300 s (summary_timeout)"), False),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_transient_errors_are_told_by_the_clients_types_and_statuses(
    error: BaseException, transient: bool
) -> None:
    """Rate limits, 5xx (529 included), connection errors and timeouts of the real
    anthropic / httpx classes are transient; overflows, auth and bad requests are not."""
    assert is_transient_error(error) is transient
    if isinstance(error, anthropic.BadRequestError):
        assert is_context_overflow(error)


# ------------------------------------------------------------------ timeout


@pytest.mark.spec("R41", "R55")
class TestTheSummaryCallHasATimeout:
    def test_sync_a_summary_past_its_timeout_is_recorded_and_the_call_returns(self) -> None:
        """A summary model that does not answer: after ``summary_timeout`` the round
        stops waiting, records the timeout and completes with the fallback summary."""
        release = threading.Event()

        def hang(_: str) -> str:
            release.wait(30)
            return "too late"

        summarizer = CallableSummarizer(hang)
        try:
            with capture_events() as captured:
                out = run("sync", engine(summarizer, summary_timeout=0.2), agent_run())
        finally:
            release.set()
        event = out.update.event  # type: ignore[union-attr]
        error = "SummarizerError: the summary call did not finish within 0.2 s (summary_timeout)"
        assert event.summary_error == error
        assert TASK in event.summary_message.text and "too late" not in event.summary_message.text
        assert captured.phases == [("started", "L1"), ("completed", "L2")]

    @pytest.mark.parametrize("kind", ["async summarizer", "sync summarizer"])
    def test_async_a_summary_past_its_timeout_is_cancelled_and_recorded(self, kind: str) -> None:
        """Async: an async summary model is cancelled at the deadline; a sync one
        runs in a worker thread that is abandoned. Either way the round completes."""
        release = threading.Event()
        if kind == "async summarizer":
            summarizer: Any = FakeSummarizer("too late", gate=anyio.sleep_forever)
        else:
            summarizer = CallableSummarizer(lambda _: "too late" if release.wait(30) else "")
        try:
            out = run("async", engine(summarizer, summary_timeout=0.2), agent_run())
        finally:
            release.set()
        event = out.update.event  # type: ignore[union-attr]
        assert event.summary_error == (
            "SummarizerError: the summary call did not finish within 0.2 s (summary_timeout)"
        )
        assert out.response == "ok"

    def test_sync_an_inline_summarizer_runs_in_the_calling_thread(self) -> None:
        """A summarizer that declares ``runs_inline`` (in process, cannot hang: the
        extractive one) is called in the caller's thread; any other sync summarizer
        in a worker thread (where the timeout can be enforced)."""
        caller = threading.get_ident()

        class Inline(ExtractiveSummarizer):
            threads: ClassVar[list[int]] = []

            def summarize(self, messages: Any, prompt: str) -> Any:
                self.threads.append(threading.get_ident())
                return super().summarize(messages, prompt)

        class Worker(Inline):
            runs_inline = False
            threads: ClassVar[list[int]] = []

        assert ExtractiveSummarizer.runs_inline is True
        inline_out = run("sync", engine(Inline(summary_tokens=400)), agent_run())
        worker_out = run("sync", engine(Worker(summary_tokens=400)), agent_run())
        assert Inline.threads == [caller]
        assert len(Worker.threads) == 1 and Worker.threads[0] != caller
        inline_text = inline_out.update.event.summary_message.text  # type: ignore[union-attr]
        worker_text = worker_out.update.event.summary_message.text  # type: ignore[union-attr]
        # the same summary (the archives differ only by the fresh message ids)
        assert (
            inline_text.partition("The full text")[0] == worker_text.partition("The full text")[0]
        )
        assert TASK in inline_text

    @MODES
    def test_a_backoff_past_the_deadline_ends_the_call_without_waiting(self, mode: str) -> None:
        """A 429 with a 10 s backoff and a 5 s timeout: no wait, the rate limit, the
        wait and the timeout are the recorded error, and the retry that was planned
        is listed."""
        summarizer = FakeSummarizer(errors=[rate_limit()])
        with recorded_sleeps() as waits:
            out = run(
                mode,
                engine(summarizer, summary_timeout=5, summary_retry_delay=10),
                agent_run(),
            )
        assert waits == [] and len(summarizer.calls) == 1
        event = out.update.event  # type: ignore[union-attr]
        assert event.summary_error == (
            "SummarizerError: RateLimitError: rate limit exceeded; not retried: the retry "
            "would wait 10 s, past summary_timeout (5 s)"
        )
        assert event.summary_usage == Usage(
            retries=(
                SummaryRetry("transient_error", "RateLimitError: rate limit exceeded", delay=10.0),
            )
        )


@pytest.mark.spec("R35")
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("summary_timeout", 0),
        ("summary_timeout", float("inf")),
        ("summary_timeout", "300"),
        ("summary_max_retries", -1),
        ("summary_max_retries", 1.5),
        ("summary_retry_delay", -0.1),
        ("summary_overflow_retries", True),
    ],
)
def test_summary_call_controls_are_validated(field: str, value: object) -> None:
    """The new controls reject bad values with a ConfigError naming the field; the
    defaults are a 300 s timeout, 2 transient retries from 1 s, 3 halvings."""
    with pytest.raises(ConfigError) as info:
        SummaryConfig(**{field: value})  # type: ignore[arg-type]
    assert info.value.field == field
    c = SummaryConfig()
    assert (
        c.summary_timeout,
        c.summary_max_retries,
        c.summary_retry_delay,
        c.summary_overflow_retries,
    ) == (300.0, 2, 1.0, 3)


@pytest.mark.spec("R41")
def test_replay_counts_retries_apart_from_failed_summaries() -> None:
    """``ars replay``'s report: a rate limit answered by a retry is one retry and two
    summary calls, not a failed summary; the report's summary line says so."""
    from ars_core.cli.report import format_report
    from ars_core.replay import replay_messages, total_report

    run_messages = [*agent_run(), assistant("done")]
    with recorded_sleeps() as waits:
        report = replay_messages(
            run_messages,
            config=small_config(),
            estimator=EST,
            summarizer=FakeSummarizer("THE SUMMARY", errors=[rate_limit()]),
        )
    assert waits == [1.0]
    assert (report.l2_rounds, report.summary_calls, report.summary_retries) == (1, 2, 1)
    assert report.summary_errors == 0
    text = format_report(
        [report],
        total_report([report]),
        config=small_config(),
        estimator="approx",
        summarizer="fake",
        out="outputs",
        samples=False,
    )
    assert (
        " ".join(text.split()).count(
            "1 summary calls were retries (an overflowing input halved, or a transient provider "
            "error); the engine's warnings name each."
        )
        == 1
    )
    assert "summaries failed" not in text
