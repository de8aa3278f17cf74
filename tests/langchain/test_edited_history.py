"""Edited LangGraph state never hides the newest messages (R51).

After an L2 round the user edits the thread with ``update_state``: clears it
("new chat", ``RemoveMessage(id=REMOVE_ALL_MESSAGES)``) or removes the oldest
messages. The next model call receives every state message the summary does
not cover, the new question included; a stale summary is dropped with a
warning and a stream notice. Real graphs on InMemorySaver, SqliteSaver and
PostgresSaver, sync and async.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, SystemMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from ars_core import SummaryConfig
from ars_core.messages import message_from_dict
from ars_core.testing import FakeSummarizer
from ars_langchain import ArsSummarizationMiddleware, from_core, is_compression_event
from ars_langchain.testing import FakeToolChatModel
from tests.langchain.conftest import SAVERS, async_saver, make_saver
from tests.langchain.helpers import SYSTEM, build_agent, prose

pytestmark = pytest.mark.spec("R51", "R24")

CONFIG = SummaryConfig(summary_threshold=1, summary_l2_trigger_ratio=0.5, summary_keep_messages=2)
TURNS = 5  # L2 on the third call (cutoff 3), again on the fifth (cutoff 7)
# (counted in o200k, the default estimator with tiktoken)


def turn(i: int) -> dict[str, Any]:
    # short questions: the first and the newest are the task every summary carries
    return {"messages": [HumanMessage(prose(f"question {i}", 30), id=f"h-{i}")]}


def setup(tag: str) -> tuple[FakeToolChatModel, Any]:
    # the first answer long (the third call crosses T), the others so that the fourth
    # call, with the summary and its task, stays below T and the fifth crosses it
    model = FakeToolChatModel(
        [
            AIMessage(prose(f"answer {i}", 450 if i == 0 else 170), id=f"a-{tag}-{i}")
            for i in range(TURNS + 1)
        ]
    )
    mw = ArsSummarizationMiddleware(
        CONFIG,
        summarizer=FakeSummarizer("SUMMARY OF EARLIER TURNS"),
        compressor_options={"lean_rounds": False},
        read_tool=False,  # the cutoffs below are pinned for a request without its schema
    )
    return model, mw


def custom_events(chunks: list[Any]) -> list[dict[str, Any]]:
    return [c for mode, c in chunks if mode == "custom" and is_compression_event(c)]


def edit(kind: str, messages: list[Any]) -> list[Any]:
    if kind == "remove_all":
        return [RemoveMessage(id=REMOVE_ALL_MESSAGES)]
    return [RemoveMessage(id=m.id) for m in messages[:4]]


def check(
    kind: str,
    model: FakeToolChatModel,
    before: dict[str, Any],
    after: dict[str, Any],
    notices: list[dict[str, Any]],
) -> None:
    event = before["_summarization_event"]
    assert event is not None and event["cutoff"] == 7
    old = before["messages"]
    summary = from_core(message_from_dict(event["summary_message"]))
    sent = model.main_calls[-1]
    new_q = turn(TURNS)["messages"][0]
    if kind == "remove_all":
        # the new question reaches the model; the stale summary is gone, with a notice
        assert sent == [SystemMessage(SYSTEM), new_q]
        assert after["messages"][0] == new_q and len(after["messages"]) == 2
        assert after.get("_summarization_event") is None
        assert [(n["phase"], n["level"]) for n in notices] == [("started", "L2"), ("failed", "L2")]
        assert "summary dropped" in notices[1]["error"]
    else:
        # the 4 oldest (summarized) messages went: nothing unsummarized is skipped
        assert sent == [SystemMessage(SYSTEM), summary, *old[7:], new_q]
        moved = after["_summarization_event"]
        assert moved["cutoff"] == 3
        assert moved["summary_message"] == event["summary_message"]
        assert moved["anchor"] == {"last": f"id:{old[6].id}", "next": f"id:{old[7].id}"}
        assert notices == []


@pytest.mark.parametrize("kind", ["remove_all", "remove_oldest"])
@pytest.mark.parametrize("saver_kind", SAVERS)
def test_edited_thread_sends_every_unsummarized_message_sync(
    saver_kind: str,
    kind: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    thread_id: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``update_state`` after an L2 round, then ``invoke``: the model receives
    the new question (after "new chat") and every message the summary does not
    cover (after removing the 4 oldest)."""
    model, mw = setup(kind)
    cfg = {"configurable": {"thread_id": thread_id}}
    with make_saver(saver_kind, tmp_path, request) as saver:
        agent = build_agent(model, mw)(saver)
        for i in range(TURNS):
            agent.invoke(turn(i), cfg)
        before = dict(agent.get_state(cfg).values)
        agent.update_state(cfg, {"messages": edit(kind, before["messages"])})
        with caplog.at_level(logging.WARNING, logger="ars"):
            chunks = list(agent.stream(turn(TURNS), cfg, stream_mode=["custom", "updates"]))
        after = dict(agent.get_state(cfg).values)
    check(kind, model, before, after, custom_events(chunks))
    if kind == "remove_all":
        assert "no longer matches the history" in caplog.text


@pytest.mark.parametrize("kind", ["remove_all", "remove_oldest"])
@pytest.mark.parametrize("saver_kind", SAVERS)
def test_edited_thread_sends_every_unsummarized_message_async(
    saver_kind: str,
    kind: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    thread_id: str,
) -> None:
    """Async twin: ``aupdate_state`` then ``astream`` on the async savers."""
    model, mw = setup(kind)
    cfg = {"configurable": {"thread_id": thread_id}}
    url = request.getfixturevalue("pg_setup") if saver_kind == "postgres" else None

    async def run() -> tuple[dict[str, Any], dict[str, Any], list[Any]]:
        async with async_saver(saver_kind, tmp_path, url) as saver:
            agent = build_agent(model, mw)(saver)
            for i in range(TURNS):
                await agent.ainvoke(turn(i), cfg)
            before = dict((await agent.aget_state(cfg)).values)
            await agent.aupdate_state(cfg, {"messages": edit(kind, before["messages"])})
            chunks = [
                c async for c in agent.astream(turn(TURNS), cfg, stream_mode=["custom", "updates"])
            ]
            after = dict((await agent.aget_state(cfg)).values)
            return before, after, chunks

    before, after, chunks = asyncio.run(run())
    check(kind, model, before, after, custom_events(chunks))


LOOK_ALIKE = ["continue", "IMPORTANT: use postgres", "continue"]


def look_alike_setup() -> tuple[FakeToolChatModel, Any]:
    """Prose turns (L2 on the third and fifth), then turns whose messages look alike:
    ``U"continue" A"ok" U"IMPORTANT: use postgres" A"ok" U"continue" A"ok"``, all
    sent without ids."""
    answers = [AIMessage(prose(f"answer {i}", 133)) for i in range(TURNS)]
    answers += [AIMessage("ok") for _ in range(len(LOOK_ALIKE) + 1)]
    return FakeToolChatModel(answers), setup("look-alike")[1]


def look_alike_turns() -> list[dict[str, Any]]:
    prose_turns = [{"messages": [HumanMessage(prose(f"question {i}", 133))]} for i in range(TURNS)]
    return [*prose_turns, *({"messages": [HumanMessage(t)]} for t in LOOK_ALIKE)]


def check_look_alike(model: FakeToolChatModel, before: dict[str, Any]) -> None:
    """ "use postgres" reaches the model after the 3 oldest were removed (LangGraph's
    ``add_messages`` gives every message an id, which ARS anchors on)."""
    assert all(m.id for m in before["messages"])
    sent = [m.content for m in model.main_calls[-1]]
    assert "IMPORTANT: use postgres" in sent and sent[-1] == "which database?"


@pytest.mark.parametrize("saver_kind", SAVERS)
def test_removing_the_3_oldest_never_skips_a_message_among_look_alikes_sync(
    saver_kind: str, tmp_path: Path, request: pytest.FixtureRequest, thread_id: str
) -> None:
    """Messages sent without ids, look-alike pairs around the cutoff, then
    ``RemoveMessage`` of the 3 oldest: the next call sends "use postgres"."""
    model, mw = look_alike_setup()
    cfg = {"configurable": {"thread_id": thread_id}}
    with make_saver(saver_kind, tmp_path, request) as saver:
        agent = build_agent(model, mw)(saver)
        for t in look_alike_turns():
            agent.invoke(t, cfg)
        before = dict(agent.get_state(cfg).values)
        assert before["_summarization_event"] is not None
        agent.update_state(
            cfg, {"messages": [RemoveMessage(id=m.id) for m in before["messages"][:3]]}
        )
        agent.invoke({"messages": [HumanMessage("which database?")]}, cfg)
    check_look_alike(model, before)


@pytest.mark.parametrize("saver_kind", SAVERS)
def test_removing_the_3_oldest_never_skips_a_message_among_look_alikes_async(
    saver_kind: str, tmp_path: Path, request: pytest.FixtureRequest, thread_id: str
) -> None:
    """Async twin on the async savers."""
    model, mw = look_alike_setup()
    cfg = {"configurable": {"thread_id": thread_id}}
    url = request.getfixturevalue("pg_setup") if saver_kind == "postgres" else None

    async def run() -> dict[str, Any]:
        async with async_saver(saver_kind, tmp_path, url) as saver:
            agent = build_agent(model, mw)(saver)
            for t in look_alike_turns():
                await agent.ainvoke(t, cfg)
            before = dict((await agent.aget_state(cfg)).values)
            assert before["_summarization_event"] is not None
            removed = [RemoveMessage(id=m.id) for m in before["messages"][:3]]
            await agent.aupdate_state(cfg, {"messages": removed})
            await agent.ainvoke({"messages": [HumanMessage("which database?")]}, cfg)
            return before

    check_look_alike(model, asyncio.run(run()))
