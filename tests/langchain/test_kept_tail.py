"""A long chat through a real LangChain agent: ``keep`` is honored after every round.

121 messages of 150-200 tokens (a user turn, the agent's answer, ...) at
T = 16K with the default keep of 10, through ``create_agent`` with
``ArsSummarizationMiddleware`` on a real checkpointer: every model request
right after an L2 round holds the summary and the newest 10 messages of the
thread, the newest user message last, and the request after it does not
summarize again. The checkpointed thread keeps every message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ars_core import ApproxEstimator, ExtractiveSummarizer, FsspecBackend, SummaryConfig
from ars_langchain import ArsSummarizationMiddleware
from ars_langchain.testing import FakeToolChatModel
from tests.core.helpers import words
from tests.langchain.conftest import async_saver, make_saver
from tests.langchain.helpers import build_agent

pytestmark = pytest.mark.spec("R21", "R59")

KEEP = 10
CONFIG = SummaryConfig(summary_threshold=16, summary_keep_messages=KEEP)
TURNS = 61  # 61 user messages and 60 answers: 121 messages when the last is sent


def _text(i: int) -> str:
    return f"turn {i}: " + words(150 + (i * 37) % 51, f"w{i}")


def _answers() -> list[AIMessage]:
    return [AIMessage(_text(2 * t + 1), id=f"ai-{t}") for t in range(TURNS)]


def _is_summary(m: BaseMessage) -> bool:
    return m.additional_kwargs.get("lc_source") == "summarization"


def _middleware(thread_id: str) -> ArsSummarizationMiddleware:
    return ArsSummarizationMiddleware(
        CONFIG,
        backend=FsspecBackend(f"memory://kept-tail-{thread_id}"),
        summarizer=ExtractiveSummarizer(),  # the built-in one: the main model only answers
        estimator=ApproxEstimator(),
    )


def _check(main: FakeToolChatModel, history: list[BaseMessage]) -> None:
    """Every request right after a round: the summary, then the newest ``KEEP`` (or more)
    messages of the thread as they were, the newest user message last; the next
    request carries the same summary (no second round)."""
    assert [m.id for m in history] == [
        f"human-{i // 2}" if i % 2 == 0 else f"ai-{i // 2}" for i in range(2 * TURNS)
    ]  # the checkpointed thread keeps every message
    views = main.main_calls
    assert len(views) == TURNS
    previous = None
    rounds = 0
    for t, view in enumerate(views):
        summaries = [m for m in view if _is_summary(m)]
        summary = summaries[0].content if summaries else None
        if summary is not None and summary != previous:  # this request followed a round
            rounds += 1
            kept = view[view.index(summaries[0]) + 1 :]
            sent = history[: 2 * t + 1]  # the thread when user message t was sent
            assert len(kept) >= KEEP
            assert [(m.id, m.content) for m in kept] == [
                (m.id, m.content) for m in sent[-len(kept) :]
            ]
            assert kept[-1].id == f"human-{t}"
            if t + 1 < len(views):  # the next request does not summarize again
                nxt = [m.content for m in views[t + 1] if _is_summary(m)]
                assert nxt == [summary]
        previous = summary
    assert rounds >= 1


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_long_chat_keeps_the_newest_messages_sync(
    kind: str, tmp_path: Path, thread_id: str, request: pytest.FixtureRequest
) -> None:
    main = FakeToolChatModel(_answers())
    config: Any = {"configurable": {"thread_id": thread_id}}
    with make_saver(kind, tmp_path, request) as saver:
        agent = build_agent(main, _middleware(thread_id))(saver)
        for t in range(TURNS):
            agent.invoke({"messages": [HumanMessage(_text(2 * t), id=f"human-{t}")]}, config)
        history = agent.get_state(config).values["messages"]
    _check(main, history)


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_long_chat_keeps_the_newest_messages_async(
    kind: str, tmp_path: Path, thread_id: str
) -> None:
    main = FakeToolChatModel(_answers())
    config: Any = {"configurable": {"thread_id": thread_id}}
    async with async_saver(kind, tmp_path, None) as saver:
        agent = build_agent(main, _middleware(thread_id))(saver)
        for t in range(TURNS):
            turn = {"messages": [HumanMessage(_text(2 * t), id=f"human-{t}")]}
            await agent.ainvoke(turn, config)
        history = (await agent.aget_state(config)).values["messages"]
    _check(main, history)
