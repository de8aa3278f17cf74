"""The summary call's retries through a real LangGraph graph (``create_agent``
+ a real checkpointer, sync and async): a summary model that first answers
with langchain-core's ``ContextOverflowError`` gets the input halved; one that
first answers with Anthropic's rate-limit error is asked again after the
backoff. The retries are in the checkpointed event's usage and in the
``completed`` custom stream event (R23, R27, R41)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import attrs
import httpx
import pytest
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, HumanMessage

from ars_core import (
    DEFAULT_SUMMARY_PROMPT,
    ApproxEstimator,
    FsspecBackend,
    Message,
    SummaryConfig,
)
from ars_core.estimate import message_tokens
from ars_core.retention import MARK_NOTE
from ars_core.summarize import render_prompt
from ars_core.testing import recorded_sleeps
from ars_langchain import ArsSummarizationMiddleware, to_core
from ars_langchain.testing import FakeToolChatModel
from tests.langchain.helpers import Runner, build_agent, prose

EST = ApproxEstimator()
USAGE = {"input_tokens": 321, "output_tokens": 12, "total_tokens": 333}
CONFIG = SummaryConfig(summary_threshold=1, summary_l2_trigger_ratio=0.5, summary_keep_messages=2)


@pytest.fixture(params=["sync", "async"])
def runner(request: pytest.FixtureRequest, tmp_path: Path) -> Runner:
    return Runner("sqlite", request.param, tmp_path, request)


def seeded() -> list[Any]:
    """Seven messages, ~1,090 tokens (approx) above T = 1,024: requests of ~70
    tokens, replies of ~340; L2 summarizes the first five (~750 tokens)."""
    return [
        HumanMessage(prose(f"turn {i}", 60), id=f"m-{i}")
        if i % 2 == 0
        else AIMessage(prose(f"turn {i}", 300), id=f"m-{i}")
        for i in range(7)
    ]


def rate_limit() -> anthropic.RateLimitError:
    request = httpx.Request("POST", "https://api.anthropic.com/v1/messages")
    return anthropic.RateLimitError(
        "rate limit exceeded", response=httpx.Response(429, request=request), body=None
    )


@pytest.mark.parametrize("failure", ["overflow", "rate_limit"])
@pytest.mark.spec("R23", "R27", "R41")
def test_a_failing_summary_model_is_retried_and_the_retry_is_checkpointed_and_streamed(
    runner: Runner, thread_id: str, failure: str
) -> None:
    """overflow: the second summary request holds the three requests whole, a
    note for the oldest reply and the other one shortened (the input halved); rate_limit: the same
    request twice, after a recorded 1 s wait. Either way the second answer is
    the summary, the main model gets it, and the retry is in the event's and
    the ``completed`` stream event's ``summary_usage``."""
    seed = seeded()
    summarized = [to_core(m) for m in seed[:5]]
    first = render_prompt(DEFAULT_SUMMARY_PROMPT, summarized)
    if failure == "overflow":
        error: BaseException = ContextOverflowError("prompt is too long: 9000 tokens > 500 maximum")
        note = Message(
            role="user",
            content="[1 older messages omitted here to fit the summary budget; "
            "their full text is in the conversation history file]",
            metadata={MARK_NOTE: True},
        )
        # half of ~750 tokens: the requests whole, the oldest reply omitted, the
        # other one shortened to its head and tail (600 characters)
        reply = summarized[3].text
        short = attrs.evolve(
            summarized[3],
            content=f"{reply[:450]}\n[... {len(reply) - 600} characters shortened ...]\n"
            f"{reply[-150:]}",
        )
        halved = [summarized[0], note, summarized[2], short, summarized[4]]
        second = render_prompt(DEFAULT_SUMMARY_PROMPT, halved)
    else:
        error = rate_limit()
        second = first
    summary_model = FakeToolChatModel(
        [error, AIMessage("SUMMARY-TEXT after a retry", usage_metadata=USAGE)]
    )
    model = FakeToolChatModel([AIMessage("the answer", id="ai-1")])
    mw = ArsSummarizationMiddleware(
        CONFIG,
        backend=FsspecBackend(f"memory://retries-{thread_id}"),
        model=summary_model,
        estimator=EST,
        compressor_options={"lean_rounds": False},
    )
    with recorded_sleeps() as waits:
        result = runner.run(
            build_agent(model, mw), [{"messages": seed}], {"configurable": {"thread_id": thread_id}}
        )

    assert result.runs[0].error is None
    assert summary_model.summary_calls == [[HumanMessage(first)], [HumanMessage(second)]]
    event = result.state["_summarization_event"]
    assert event["summary_error"] is None
    assert "SUMMARY-TEXT after a retry" in event["summary_message"]["content"]
    assert model.main_calls[0][1].content == event["summary_message"]["content"]
    if failure == "overflow":
        retry = {
            "reason": "context_overflow",
            "error": "ContextOverflowError: prompt is too long: 9000 tokens > 500 maximum",
            "input_tokens": sum(message_tokens(EST, m) for m in summarized),
            "retry_input_tokens": sum(message_tokens(EST, m) for m in halved),
        }
        assert waits == []
    else:
        retry = {
            "reason": "transient_error",
            "error": "RateLimitError: rate limit exceeded",
            "delay": 1.0,
        }
        assert waits == [1.0]
    assert event["summary_usage"] == {**USAGE, "retries": [retry]}
    completed = result.runs[0].compression[-1]
    assert (completed["phase"], completed["level"]) == ("completed", "L2")
    assert completed["summary_usage"] == {**USAGE, "retries": [retry]}
