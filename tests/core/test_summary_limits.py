"""A summary model that hangs, or asks to wait longer than the timeout
(R41, R55): abandoned summary threads are bounded (and the bound says so in
the event), and a Retry-After past ``summary_timeout`` fails at once with the
rate limit named in ``summary_error``. Through :class:`Compressor`, sync and
async."""

from __future__ import annotations

import threading
import time

import anthropic
import httpx
import pytest

from ars_core import CallableSummarizer
from ars_core.summary_call import MAX_ABANDONED_SUMMARIES, abandoned_summaries
from ars_core.testing import FakeSummarizer, recorded_sleeps

from .test_summary_call import MODES, agent_run, engine, run


@pytest.mark.spec("R41", "R55")
@MODES
def test_a_hanging_summarizer_leaks_at_most_the_bound_of_threads(mode: str) -> None:
    """Eight rounds against a summary model that never answers (timeout 0.1 s):
    at most MAX_ABANDONED_SUMMARIES worker threads are left running; the rounds
    past the bound fail at once with an error naming it; released, they end."""
    release = threading.Event()
    summarizer = CallableSummarizer(lambda _: "late" if release.wait(60) else "")
    before = threading.active_count()
    errors: list[str | None] = []
    try:
        for _ in range(8):
            out = run(mode, engine(summarizer, summary_timeout=0.1), agent_run())
            errors.append(out.update.event.summary_error)  # type: ignore[union-attr]
        assert abandoned_summaries() == MAX_ABANDONED_SUMMARIES
        assert threading.active_count() <= before + MAX_ABANDONED_SUMMARIES + 1
    finally:
        release.set()
    timed_out = "SummarizerError: the summary call did not finish within 0.1 s (summary_timeout)"
    assert errors[:MAX_ABANDONED_SUMMARIES] == [timed_out] * MAX_ABANDONED_SUMMARIES
    bound = (
        f"SummarizerError: {MAX_ABANDONED_SUMMARIES} summary calls given up at summary_timeout "
        "are still running (the bound, MAX_ABANDONED_SUMMARIES); not starting another until "
        "one returns"
    )
    assert errors[MAX_ABANDONED_SUMMARIES:] == [bound] * (8 - MAX_ABANDONED_SUMMARIES)
    for _ in range(100):  # the released threads return and are no longer counted
        if abandoned_summaries() == 0:
            break
        time.sleep(0.05)
    assert abandoned_summaries() == 0


@pytest.mark.spec("R41")
@MODES
def test_a_retry_after_past_the_timeout_names_the_rate_limit(mode: str) -> None:
    """A 429 asking to wait 120 s, with summary_timeout 30 s: no wait, one call, and
    summary_error names the rate limit, the wait and the timeout."""
    request = httpx.Request("POST", "https://api.example/v1")
    answer = httpx.Response(429, headers={"retry-after": "120"}, request=request)
    limited = anthropic.RateLimitError("rate limit exceeded", response=answer, body=None)
    summarizer = FakeSummarizer(errors=[limited])
    with recorded_sleeps() as waits:
        out = run(mode, engine(summarizer, summary_timeout=30), agent_run())
    assert waits == [] and len(summarizer.calls) == 1
    error = out.update.event.summary_error  # type: ignore[union-attr]
    assert error == (
        "SummarizerError: RateLimitError: rate limit exceeded; not retried: the retry would "
        "wait 120 s, past summary_timeout (30 s)"
    )
