"""Views that prompt caches can reuse, on a real graph and checkpointer.

After an L2 round the kept messages go out exactly as the L2 request sent them
(an offloaded tool result stays a preview with its path) until the next L2
round, in this process and in a resumed one reading the same checkpoint.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ars_core import FsspecBackend, SummaryConfig
from ars_core.testing import FakeSummarizer
from ars_langchain import ArsSummarizationMiddleware
from ars_langchain.testing import FakeToolChatModel
from tests.langchain.conftest import async_saver, make_saver
from tests.langchain.helpers import build_agent, prose

pytestmark = pytest.mark.spec("R14", "R24", "R44")

CONFIG = SummaryConfig(
    summary_threshold=2,
    summary_l2_trigger_ratio=0.5,
    summary_keep_messages=3,
    summary_tool_result_token_limit=80,
)


def _turn(i: int) -> list[AIMessage]:
    call = {"name": "big_output", "args": {"n": 40}, "id": f"call-{i}", "type": "tool_call"}
    return [
        AIMessage("", tool_calls=[call], id=f"ai-call-{i}"),
        AIMessage(prose(f"answer {i}", 60), id=f"ai-{i}"),
    ]


def _human(i: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(prose(f"question {i}", 60), id=f"h-{i}")]}


def _tool_bodies(view: list[BaseMessage]) -> dict[str, str]:
    return {m.tool_call_id: str(m.content) for m in view if isinstance(m, ToolMessage)}


def _check(model: FakeToolChatModel, after: FakeToolChatModel) -> None:
    """The request after each L2 round, and the first request of a resumed
    graph, send each kept tool result as the L2 request did."""
    calls = model.main_calls
    # an L2 request is the one whose history shrank
    rounds = [i for i in range(1, len(calls)) if len(calls[i]) < len(calls[i - 1])]
    assert len(rounds) >= 2, "expected two L2 rounds"
    followers = [(calls[i], calls[i + 1]) for i in rounds if i + 1 < len(calls)]
    followers.append((calls[rounds[-1]], after.main_calls[0]))
    for l2, later in followers:
        sent = _tool_bodies(l2)
        offloaded = {k: v for k, v in sent.items() if "outputs/large_tool_results/" in v}
        assert offloaded, "the L2 request should hold an offloaded tool result"
        bodies = _tool_bodies(later)
        assert {k: bodies[k] for k in offloaded} == offloaded
        assert later[: len(l2)] == l2


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_kept_offloads_stay_offloaded_after_l2_sync(
    kind: str, tmp_path: Path, thread_id: str, request: pytest.FixtureRequest
) -> None:
    """Sync graph: the call after the L2 round and a resumed graph repeat the L2 bytes."""
    backend = FsspecBackend(f"memory://stable-{kind}-{thread_id}")
    model = FakeToolChatModel([m for i in range(6) for m in _turn(i)])
    after = FakeToolChatModel([m for i in range(6, 8) for m in _turn(i)])
    config = {"configurable": {"thread_id": thread_id}}

    def middleware() -> ArsSummarizationMiddleware:
        return ArsSummarizationMiddleware(
            CONFIG,
            backend=backend,
            summarizer=FakeSummarizer(),
            compressor_options={"lean_rounds": False},
        )

    with make_saver(kind, tmp_path, request) as saver:
        agent = build_agent(model, middleware())(saver)
        for i in range(6):
            agent.invoke(_human(i), config)
        resumed = build_agent(after, middleware())(saver)
        resumed.invoke(_human(6), config)
    _check(model, after)


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_kept_offloads_stay_offloaded_after_l2_async(
    kind: str, tmp_path: Path, thread_id: str
) -> None:
    """Async graph: the same, with archive and summary running concurrently."""
    backend = FsspecBackend(f"memory://astable-{kind}-{thread_id}")
    model = FakeToolChatModel([m for i in range(6) for m in _turn(i)])
    after = FakeToolChatModel([m for i in range(6, 8) for m in _turn(i)])
    config = {"configurable": {"thread_id": thread_id}}

    def middleware() -> ArsSummarizationMiddleware:
        return ArsSummarizationMiddleware(
            CONFIG,
            backend=backend,
            summarizer=FakeSummarizer(),
            compressor_options={"lean_rounds": False},
        )

    async with async_saver(kind, tmp_path, None) as saver:
        agent = build_agent(model, middleware())(saver)
        for i in range(6):
            await agent.ainvoke(_human(i), config)
        resumed = build_agent(after, middleware())(saver)
        await resumed.ainvoke(_human(6), config)
    await asyncio.sleep(0)
    _check(model, after)
