"""A task larger than the summary bound survives an L2 round on a real graph.

At T = 8K the ordinary summary bound is 3,276 tokens; the task below takes
about 5,300. Through the real LangGraph middleware, with a chat model as the
summary model, the summary model is sent the task whole, its summary carrying
the task is not cut, and the model request after the round holds the task.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ars_core import ApproxEstimator, FsspecBackend, SummaryConfig
from ars_langchain import ArsSummarizationMiddleware
from ars_langchain.testing import FakeToolChatModel
from tests.core.helpers import large_task
from tests.langchain.conftest import async_saver, make_saver
from tests.langchain.helpers import build_agent

pytestmark = pytest.mark.spec("R21", "R23", "R24")

TASK = large_task(200)  # ~4,800 approx tokens: above the summary bound, within the grown one
CONFIG = SummaryConfig(summary_threshold=8)
PROGRESS = "Progress: big_output ran 14 times; the build is clean."
TURNS = 14


def _script() -> list[AIMessage]:
    """The agent calls ``big_output`` (about 240 tokens each) ``TURNS`` times, then answers."""
    calls = [
        AIMessage(
            "",
            tool_calls=[
                {"name": "big_output", "args": {"n": 20}, "id": f"call-{i}", "type": "tool_call"}
            ],
            id=f"ai-{i}",
        )
        for i in range(TURNS)
    ]
    return [*calls, AIMessage("the marker is honoured again", id="ai-final")]


def _summary_reply(messages: list[BaseMessage]) -> str:
    """The summary model answers with its progress note only when it was sent the task whole."""
    sent = "\n".join(str(m.content) for m in messages)
    return PROGRESS if TASK in sent else f"TASK NOT SENT WHOLE\n\n{PROGRESS}"


def _middleware(summary_model: FakeToolChatModel, thread_id: str) -> ArsSummarizationMiddleware:
    return ArsSummarizationMiddleware(
        CONFIG,
        model=summary_model,
        backend=FsspecBackend(f"memory://large-task-{thread_id}"),
        estimator=ApproxEstimator(),
    )


def _check(main: FakeToolChatModel, summary_model: FakeToolChatModel) -> None:
    """Every summary call was sent the whole task; every model request holding a
    summary holds the task (the engine wrote it) and the progress note, uncut."""
    assert ApproxEstimator().count_text(TASK) > CONFIG.summary_token_limit
    assert summary_model.summary_calls
    for sent in summary_model.summary_calls:
        assert TASK in "\n".join(str(m.content) for m in sent)
    summaries = [
        m
        for view in main.main_calls
        for m in view
        if m.additional_kwargs.get("lc_source") == "summarization"
    ]
    assert summaries, "expected a model request after an L2 round"
    for summary in summaries:
        assert isinstance(summary, HumanMessage)
        assert f"⟦ARS⟧ Task\n{TASK}\n\n⟦ARS⟧ Summary\n{PROGRESS}\n\n" in str(summary.content)
        assert "[ARS: this summary was cut" not in str(summary.content)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_task_larger_than_the_bound_reaches_the_model_after_l2_sync(
    kind: str, tmp_path: Path, thread_id: str, request: pytest.FixtureRequest
) -> None:
    """Sync graph: the summary model reads the 5,300-token task whole and the next
    model request carries the summary holding it, uncut."""
    main = FakeToolChatModel(_script())
    summary_model = FakeToolChatModel([_summary_reply] * TURNS)
    with make_saver(kind, tmp_path, request) as saver:
        agent = build_agent(main, _middleware(summary_model, thread_id))(saver)
        config: Any = {"configurable": {"thread_id": thread_id}}
        agent.invoke({"messages": [HumanMessage(TASK, id="task")]}, config)
    _check(main, summary_model)


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_task_larger_than_the_bound_reaches_the_model_after_l2_async(
    kind: str, tmp_path: Path, thread_id: str
) -> None:
    """Async graph: the same, with archive and summary running concurrently."""
    main = FakeToolChatModel(_script())
    summary_model = FakeToolChatModel([_summary_reply] * TURNS)
    async with async_saver(kind, tmp_path, None) as saver:
        agent = build_agent(main, _middleware(summary_model, thread_id))(saver)
        config: Any = {"configurable": {"thread_id": thread_id}}
        await agent.ainvoke({"messages": [HumanMessage(TASK, id="task")]}, config)
    await asyncio.sleep(0)
    _check(main, summary_model)
