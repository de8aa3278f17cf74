"""A kept message's sent form is reused only while the message is the same,
metadata included: a ToolMessage replaced under its id by one with the same
text but ``status="error"`` goes out in its new form (langchain-anthropic sends
that status as ``is_error``). A real graph on a real checkpointer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

from ars_core import FsspecBackend
from ars_core.testing import FakeSummarizer
from ars_langchain import ArsSummarizationMiddleware
from ars_langchain.testing import FakeToolChatModel
from tests.langchain.conftest import async_saver, make_saver
from tests.langchain.helpers import build_agent, prose
from tests.langchain.test_stable_views import CONFIG, _turn

pytestmark = pytest.mark.spec("R14", "R51")


def _human(i: int) -> dict[str, Any]:
    """A short question: the first and the newest are the task every summary carries."""
    return {"messages": [HumanMessage(prose(f"question {i}", 15), id=f"h-{i}")]}


def _middleware(backend: FsspecBackend) -> ArsSummarizationMiddleware:
    return ArsSummarizationMiddleware(
        CONFIG,
        backend=backend,
        summarizer=FakeSummarizer(),
        compressor_options={"lean_rounds": False},
    )


def _kept_offloaded(state: dict[str, Any], sent: list[BaseMessage]) -> ToolMessage:
    """A tool result of the state that the last request sent offloaded."""
    offloaded = {
        m.tool_call_id
        for m in sent
        if isinstance(m, ToolMessage) and "outputs/large_tool_results/" in str(m.content)
    }
    assert offloaded, "the request should hold a kept, offloaded tool result"
    return next(
        m for m in state["messages"] if isinstance(m, ToolMessage) and m.tool_call_id in offloaded
    )


def _errored(kept: ToolMessage) -> ToolMessage:
    return ToolMessage(
        kept.content, tool_call_id=kept.tool_call_id, id=kept.id, name=kept.name, status="error"
    )


def _check(model: FakeToolChatModel, kept: ToolMessage, before: int) -> None:
    (later,) = [
        m
        for m in model.main_calls[before]
        if isinstance(m, ToolMessage) and m.tool_call_id == kept.tool_call_id
    ]
    assert later.status == "error"  # the edited message goes out as it now is
    assert later.content == kept.content


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_kept_tool_result_whose_status_changed_is_sent_in_its_new_form_sync(
    kind: str, tmp_path: Path, thread_id: str, request: pytest.FixtureRequest
) -> None:
    backend = FsspecBackend(f"memory://forms-{kind}-{thread_id}")
    model = FakeToolChatModel([m for i in range(8) for m in _turn(i)])
    config = {"configurable": {"thread_id": thread_id}}
    with make_saver(kind, tmp_path, request) as saver:
        agent = build_agent(model, _middleware(backend))(saver)
        for i in range(6):
            agent.invoke(_human(i), config)
        state = agent.get_state(config).values
        assert state.get("_summarization_event"), "an L2 round should have run"
        kept = _kept_offloaded(state, model.main_calls[-1])
        agent.update_state(config, {"messages": [_errored(kept)]})
        before = len(model.main_calls)
        agent.invoke(_human(6), config)
    _check(model, kept, before)


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_kept_tool_result_whose_status_changed_is_sent_in_its_new_form_async(
    kind: str, tmp_path: Path, thread_id: str
) -> None:
    backend = FsspecBackend(f"memory://aforms-{kind}-{thread_id}")
    model = FakeToolChatModel([m for i in range(8) for m in _turn(i)])
    config = {"configurable": {"thread_id": thread_id}}
    async with async_saver(kind, tmp_path, None) as saver:
        agent = build_agent(model, _middleware(backend))(saver)
        for i in range(6):
            await agent.ainvoke(_human(i), config)
        state = (await agent.aget_state(config)).values
        assert state.get("_summarization_event"), "an L2 round should have run"
        kept = _kept_offloaded(state, model.main_calls[-1])
        await agent.aupdate_state(config, {"messages": [_errored(kept)]})
        before = len(model.main_calls)
        await agent.ainvoke(_human(6), config)
    _check(model, kept, before)
