"""The summary call's retries through ``ArsMemory`` and ``LLMSummarizer``
(a LlamaIndex LLM as the summary model), sync and async: an OpenAI-like
``context_length_exceeded`` from the summary model gets the input halved
until it fits, a rate limit is asked again after the backoff; the event and the
``completed`` instrumentation payload list the retries (R23, R27, R41)."""

from __future__ import annotations

import anthropic
import anyio
import httpx
import pytest
from llama_index.core.base.llms.types import ChatMessage

from ars_core import ApproxEstimator
from ars_core.l2 import describe_error
from ars_core.testing import recorded_sleeps
from ars_llamaindex import ArsMemory, LLMSummarizer
from ars_llamaindex.testing import ContextLengthExceededError, ScriptedLLM
from tests.llamaindex.helpers import EventRecorder, prose

EST = ApproxEstimator()


def conversation() -> list[ChatMessage]:
    """One request, then eight long replies and short follow-ups (~1,900 tokens)."""
    out = [ChatMessage(role="user", content="Summarize the quarterly report for the board.")]
    for i in range(8):
        out.append(ChatMessage(role="assistant", content=prose(160, tag=f"part{i}")))
        out.append(ChatMessage(role="user", content=f"go on with part {i + 1}"))
    return out


def rate_limit() -> anthropic.RateLimitError:
    request = httpx.Request("POST", "https://api.anthropic.com/v1/messages")
    return anthropic.RateLimitError(
        "Rate limit reached", response=httpx.Response(429, request=request), body=None
    )


def memory_with(llm: ScriptedLLM) -> ArsMemory:
    memory = ArsMemory.from_defaults(
        chat_store_key="retries",
        summarizer=LLMSummarizer(llm),
        summary_threshold=1,
        summary_keep_messages=4,
        estimator=EST,
    )
    # the fixed rounds: their T/2 summary input is what overflows the 700-token model
    memory.compressor.lean_rounds = False
    memory.set(conversation())
    return memory


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.spec("R23", "R27", "R41")
def test_an_overflowing_summary_model_gets_the_input_halved(
    mode: str, recorder: EventRecorder
) -> None:
    """A summary model with a 700-token window: the first request overflows,
    the halved one (the request kept, the oldest replies noted as omitted) fits."""
    llm = ScriptedLLM(["THE SUMMARY"], max_context_tokens=700, estimator=EST)
    memory = memory_with(llm)
    view = memory.get() if mode == "sync" else anyio.run(memory.aget)

    first, second = (r for r in llm.requests if r.is_summary)
    assert first.overflowed and not second.overflowed
    assert second.tokens <= 700 < first.tokens
    assert "Summarize the quarterly report for the board." in second.texts[0]
    assert "older messages omitted here to fit the summary budget" in second.texts[0]
    assert "THE SUMMARY" in (view[0].content or "")
    event = memory.get_event()
    assert event is not None and event.summary_error is None
    (retry,) = event.summary_usage.retries  # type: ignore[union-attr]
    assert retry.reason == "context_overflow"
    assert retry.error == describe_error(ContextLengthExceededError(first.tokens, 700))
    assert retry.retry_input_tokens is not None and retry.input_tokens is not None
    assert retry.retry_input_tokens <= retry.input_tokens // 2
    done = recorder.payloads[-1]
    assert done["phase"] == "completed"
    assert done["summary_usage"]["retries"] == [retry.to_dict()]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.spec("R23", "R27", "R41")
def test_a_rate_limited_summary_model_is_asked_again_after_the_backoff(
    mode: str, recorder: EventRecorder
) -> None:
    """Anthropic's ``RateLimitError`` (HTTP 429) then an answer: one recorded 1 s wait, the same
    summary request twice, the retry in the event and the payload."""
    llm = ScriptedLLM([rate_limit(), "THE SUMMARY"], estimator=EST)
    memory = memory_with(llm)
    with recorded_sleeps() as waits:
        view = memory.get() if mode == "sync" else anyio.run(memory.aget)

    assert waits == [1.0]
    first, second = (r for r in llm.requests if r.is_summary)
    assert first.texts == second.texts
    assert "THE SUMMARY" in (view[0].content or "")
    event = memory.get_event()
    assert event is not None
    expected = {
        "reason": "transient_error",
        "error": "RateLimitError: Rate limit reached",
        "delay": 1.0,
    }
    assert [r.to_dict() for r in event.summary_usage.retries] == [expected]  # type: ignore[union-attr]
    assert recorder.payloads[-1]["summary_usage"]["retries"] == [expected]
