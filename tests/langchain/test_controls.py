"""The controls users of the peers expect, on a real LangGraph agent
(``create_agent`` with real checkpointers): oversized user messages offloaded
in the view, T following the model's profile."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from ars_core import Compaction, ConfigError, FsspecBackend, SummaryConfig, describe_event
from ars_langchain import (
    ArsSummarizationMiddleware,
    acompact_now,
    compact_now,
    event_to_state,
)
from ars_langchain.testing import FakeToolChatModel, tool_call
from tests.langchain.conftest import async_saver, make_saver
from tests.langchain.helpers import SYSTEM, Runner, build_agent, prose
from tests.langchain.test_scenarios import cfg, kind, runner

__all__ = ["kind", "runner"]  # fixtures: every checkpointer, sync and async


@pytest.mark.spec("R10", "R12", "R5")
def test_oversized_user_message_reaches_the_model_as_a_file_and_preview(
    runner: Runner, thread_id: str
) -> None:
    """A user message larger than T: the model gets the path and a head-and-tail
    preview, the file holds the exact text (named by its SHA-256), and the
    checkpoint keeps the original message."""
    text = prose("paste", 1500) + " LAST LINE: the error is here"
    model = FakeToolChatModel([AIMessage("read it", id="a1")])
    backend = FsspecBackend(f"memory://controls-{thread_id}")
    mw = ArsSummarizationMiddleware(SummaryConfig(summary_threshold=1), backend=backend)
    seed = [HumanMessage(text, id="h1")]
    result = runner.run(build_agent(model, mw), [{"messages": seed}], cfg(thread_id))
    assert result.runs[0].error is None

    digest = hashlib.sha256(text.encode()).hexdigest()
    path = f"outputs/large_user_messages/user-{digest}.txt"
    system, sent = model.main_calls[0]
    assert system == SystemMessage(SYSTEM)
    assert isinstance(sent, HumanMessage) and sent.id == "h1"
    assert sent.text.startswith(
        f"[ARS: user message offloaded: {len(text)} characters (~"
    ) and sent.text.split("\nPreview:\n")[0].endswith(
        f"tokens) saved to {path}. Read that file for the full message.]"
    )
    preview = sent.text.split("\nPreview:\n", 1)[1]
    assert text.startswith(preview.split("\n[... ")[0][:200])
    assert preview.endswith("LAST LINE: the error is here")
    assert len(sent.text) < len(text) // 5
    assert backend.scoped(thread_id).read_text(path) == text
    assert result.state["messages"][0] == HumanMessage(text, id="h1")
    assert "_summarization_event" not in result.state
    assert [(e["phase"], e["level"], e.get("offloaded")) for e in result.runs[0].compression] == [
        ("started", "L1", None),
        ("completed", "L1", [path]),
    ]


def _turns() -> list[dict[str, Any]]:
    """Four exchanges of ~200 tokens each: about 1,700 tokens with the system
    prompt and the tool schemas, no message above 300 tokens."""
    seed: list[Any] = []
    for i in range(4):
        seed += [HumanMessage(prose(f"q{i}", 150), id=f"h{i}"), AIMessage(prose(f"a{i}", 150))]
    return [{"messages": [*seed, HumanMessage("go on", id="h-last")]}]


@pytest.mark.spec("R2", "R35")
def test_threshold_follows_the_model_profile_when_not_configured(
    runner: Runner, thread_id: str
) -> None:
    """No ``summary_threshold``: T is 85% of the profile's ``max_input_tokens``
    (exactly 1,275 for 1,500), the events say where T came from; the same
    request under a 4,000-token window (T 3,400) triggers nothing."""
    events: dict[int, list[dict[str, Any]]] = {}
    for window in (1500, 4000):
        model = FakeToolChatModel(
            [AIMessage("S", id="s"), AIMessage("done", id="a")],
            profile={"max_input_tokens": window},
        )
        mw = ArsSummarizationMiddleware(SummaryConfig(summary_l2_trigger_ratio=1.0))
        result = runner.run(build_agent(model, mw), _turns(), cfg(f"{thread_id}-{window}"))
        assert result.runs[0].error is None
        events[window] = result.runs[0].compression
    started, completed = events[1500]
    source = "85% of the model's 1,500-token input window"
    assert (started["phase"], started["threshold"], started["threshold_source"]) == (
        "started",
        1275,
        source,
    )
    assert 1275 <= started["tokens_before"] < 3400
    assert describe_event(started) == (
        f"started L1: {started['tokens_before']:,} tokens ≥ T 1,275 ({source})"
    )
    assert completed["phase"] == "completed" and completed["threshold"] == 1275
    assert events[4000] == []


@pytest.mark.spec("R2", "R35")
def test_configured_threshold_wins_over_the_model_profile(runner: Runner, thread_id: str) -> None:
    """``summary_threshold=1`` with a 1,000,000-token profile: T is 1,024, and
    the events name no model source."""
    model = FakeToolChatModel(
        [AIMessage("S", id="s"), AIMessage("done", id="a")],
        profile={"max_input_tokens": 1_000_000},
    )
    mw = ArsSummarizationMiddleware(
        SummaryConfig(summary_threshold=1, summary_l2_trigger_ratio=1.0)
    )
    result = runner.run(build_agent(model, mw), _turns(), cfg(thread_id))
    started = result.runs[0].compression[0]
    assert started["phase"] == "started" and started["threshold"] == 1024
    assert "threshold_source" not in started


# ------------------------------------------------------------------ on-demand compaction


def _history(n_pairs: int) -> list[Any]:
    out: list[Any] = []
    for i in range(n_pairs):
        out += [HumanMessage(prose(f"q{i}", 30), id=f"h{i}"), AIMessage(f"answer {i}", id=f"a{i}")]
    return out


@pytest.mark.spec("R21", "R24", "R30", "R31")
def test_compaction_tool_call_summarizes_before_the_next_model_call(
    runner: Runner, thread_id: str
) -> None:
    """The agent calls ``compact_conversation``: the next model call of the
    same run gets the summary and the kept tool call and result, the event
    is persisted, the request is cleared, and the next turn builds on it."""
    seed = [*_history(3), HumanMessage("new task: compact first", id="h-new")]
    model = FakeToolChatModel(
        [
            AIMessage("", id="a-c", tool_calls=[tool_call("compact_conversation", {}, "c1")]),
            AIMessage("SUMMARY-OF-OLD-WORK", id="s1"),
            AIMessage("compacted, continuing", id="a-done"),
            AIMessage("second turn", id="a-2"),
        ]
    )
    mw = ArsSummarizationMiddleware(SummaryConfig(summary_keep_messages=2), compaction_tool=True)
    turns = [{"messages": seed}, {"messages": [HumanMessage("and now?", id="h-next")]}]
    result = runner.run(build_agent(model, mw), turns, cfg(thread_id))
    assert [r.error for r in result.runs] == [None, None]

    first, second, third = model.main_calls
    assert [m.id for m in first[1:]] == [m.id for m in seed]
    summary, *kept = second[1:]
    assert second[0] == SystemMessage(SYSTEM)
    assert "SUMMARY-OF-OLD-WORK" in summary.text
    assert [m.id for m in kept[:1]] == ["a-c"] and isinstance(kept[1], ToolMessage)
    assert kept[1].text.startswith("Compaction scheduled: before your next step")
    assert len(kept) == 2  # the tool call and its result: summary_keep_messages=2
    event = result.state["_summarization_event"]
    assert event["cutoff"] == len(seed)  # every message before the tool call
    assert not result.state.get("_ars_compaction_requested")
    assert [m.id for m in third[2:]] == ["a-c", kept[1].id, "a-done", "h-next"]
    assert third[1].text == summary.text
    phases = [(e["phase"], e["level"], e.get("requested")) for e in result.runs[0].compression]
    assert phases == [("started", "L1", True), ("completed", "L2", True)]
    assert result.runs[1].compression == []


@pytest.mark.spec("R1", "R21")
def test_compaction_tool_with_nothing_to_compact_says_so(runner: Runner, thread_id: str) -> None:
    """Fewer messages than ``summary_keep_messages``: the tool answers that there
    is nothing to compact, requests nothing, and no round runs."""
    seed = [HumanMessage("hi", id="h0")]
    model = FakeToolChatModel(
        [
            AIMessage("", id="a-c", tool_calls=[tool_call("compact_conversation", {}, "c1")]),
            AIMessage("fine", id="a-done"),
        ]
    )
    mw = ArsSummarizationMiddleware(SummaryConfig(summary_keep_messages=4), compaction_tool=True)
    result = runner.run(build_agent(model, mw), [{"messages": seed}], cfg(thread_id))
    assert result.runs[0].error is None
    answer = model.main_calls[1][-1]
    assert isinstance(answer, ToolMessage) and answer.text == Compaction.nothing_to_compact(4)
    assert [m.id for m in model.main_calls[1][1:3]] == ["h0", "a-c"]
    assert "_summarization_event" not in result.state
    assert not result.state.get("_ars_compaction_requested")
    assert result.runs[0].compression == []


@pytest.mark.spec("R21", "R24", "R30", "R31")
@pytest.mark.parametrize("saver_kind", ["memory", "sqlite"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_compact_now_on_a_checkpointed_thread_then_the_next_turn_sends_summary_and_kept(
    mode: str, saver_kind: str, thread_id: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Between turns, ``compact_now`` summarizes the thread's older messages and
    persists the event with ``update_state``; the next invoke sends the summary
    and the kept messages; the events are an automatic round's, marked requested.
    A second ``compact_now`` with nothing new to summarize changes nothing."""
    model = FakeToolChatModel(
        [
            AIMessage("answer 3", id="a3"),
            AIMessage("SUMMARY-NOW", id="s1"),
            AIMessage("after compaction", id="a4"),
        ]
    )
    events: list[Any] = []
    mw = ArsSummarizationMiddleware(SummaryConfig(summary_keep_messages=2), on_event=events.append)
    seed = [*_history(3), HumanMessage("q3", id="h3")]
    config = cfg(thread_id)
    nothing: list[Compaction] = []

    def run_sync() -> tuple[Compaction, dict[str, Any]]:
        with make_saver(saver_kind, tmp_path, request) as saver:
            agent = build_agent(model, mw)(saver)
            agent.invoke({"messages": seed}, config)
            done = compact_now(agent, config, middleware=mw, model=model)
            stored = dict(agent.get_state(config).values)
            nothing.append(compact_now(agent, config, middleware=mw, model=model))
            agent.invoke({"messages": [HumanMessage("q4", id="h4")]}, config)
            return done, stored

    async def run_async() -> tuple[Compaction, dict[str, Any]]:
        async with async_saver(saver_kind, tmp_path) as saver:
            agent = build_agent(model, mw)(saver)
            await agent.ainvoke({"messages": seed}, config)
            done = await acompact_now(agent, config, middleware=mw, model=model)
            stored = dict((await agent.aget_state(config)).values)
            nothing.append(await acompact_now(agent, config, middleware=mw, model=model))
            await agent.ainvoke({"messages": [HumanMessage("q4", id="h4")]}, config)
            return done, stored

    done, stored = run_sync() if mode == "sync" else asyncio.run(run_async())
    # 8 state messages (3 pairs, q3, answer 3): the first 6 summarized, 2 kept
    assert done.compacted and done.event is not None and done.event.cutoff == 6
    assert done.message.startswith("Conversation compacted: messages 1-6 summarized (")
    assert stored["_summarization_event"] == event_to_state(done.event)
    assert [m.id for m in stored["messages"]] == [*(m.id for m in seed), "a3"]
    (after,) = model.main_calls[1:]
    assert after[0] == SystemMessage(SYSTEM) and "SUMMARY-NOW" in after[1].text
    assert [m.id for m in after[2:]] == ["h3", "a3", "h4"]
    assert [(e.phase, e.level, e.requested) for e in events] == [
        ("started", "L1", True),
        ("completed", "L2", True),
    ]
    assert events[1].cutoff == 6
    (again,) = nothing
    assert not again.compacted and again.message == Compaction.nothing_to_compact(2)
    assert again.update is None


@pytest.mark.spec("R35")
def test_compact_now_without_a_summary_model_is_a_clear_error(thread_id: str) -> None:
    """A process that has not run the thread and was given no model: a
    ``ConfigError`` naming ``model``, and the thread is left as it was."""
    from langgraph.checkpoint.memory import InMemorySaver

    saver = InMemorySaver()
    seed = _history(3)
    model = FakeToolChatModel([AIMessage("answer", id="a-x")])
    build_agent(model, ArsSummarizationMiddleware())(saver).invoke(
        {"messages": seed}, cfg(thread_id)
    )
    fresh = ArsSummarizationMiddleware()  # another process: no session, no model
    agent = build_agent(model, fresh)(saver)
    with pytest.raises(ConfigError, match="compact_now needs a summary model: pass model="):
        compact_now(agent, cfg(thread_id), middleware=fresh)
    assert "_summarization_event" not in agent.get_state(cfg(thread_id)).values


@pytest.mark.spec("R50", "R21", "R24")
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_compaction_tool_in_a_deep_agent(mode: str, thread_id: str) -> None:
    """In ``create_deep_agent`` (ARS replacing deepagents' summarization by name)
    the agent's ``compact_conversation`` call is followed by a request holding
    the summary and the kept tool call and result, and the event is stored."""
    from deepagents import create_deep_agent
    from langgraph.checkpoint.memory import InMemorySaver

    model = FakeToolChatModel(
        [
            AIMessage("", id="a-c", tool_calls=[tool_call("compact_conversation", {}, "c1")]),
            AIMessage("DEEP-SUMMARY", id="s1"),
            AIMessage("done", id="a-done"),
        ]
    )
    mw = ArsSummarizationMiddleware(SummaryConfig(summary_keep_messages=2), compaction_tool=True)
    agent = create_deep_agent(model, middleware=[mw], checkpointer=InMemorySaver())
    seed = {"messages": [*_history(2), HumanMessage("compact, then go on", id="h-go")]}
    config = cfg(thread_id)
    if mode == "sync":
        agent.invoke(seed, config)
        state = agent.get_state(config).values
    else:

        async def run() -> dict[str, Any]:
            await agent.ainvoke(seed, config)
            return dict((await agent.aget_state(config)).values)

        state = asyncio.run(run())
    after = model.main_calls[1]
    assert "DEEP-SUMMARY" in after[1].text
    assert [m.id for m in after[2:3]] == ["a-c"] and isinstance(after[3], ToolMessage)
    assert len(after) == 4
    assert state["_summarization_event"]["cutoff"] == 5


@pytest.mark.spec("R21", "R24", "R62")
def test_two_compaction_calls_in_one_model_message_are_one_request(
    runner: Runner, thread_id: str
) -> None:
    """The model calls ``compact_conversation`` twice in one message: both calls are
    answered (no ``InvalidUpdateError`` from two writes of the request key in one
    step), one L2 round runs before the next model call, and the request is cleared."""
    seed = [*_history(3), HumanMessage("new task: compact first", id="h-new")]
    calls = [
        tool_call("compact_conversation", {}, "c1"),
        tool_call("compact_conversation", {}, "c2"),
    ]
    model = FakeToolChatModel(
        [
            AIMessage("", id="a-c", tool_calls=calls),
            AIMessage("SUMMARY-OF-OLD-WORK", id="s1"),
            AIMessage("compacted, continuing", id="a-done"),
        ]
    )
    mw = ArsSummarizationMiddleware(SummaryConfig(summary_keep_messages=2), compaction_tool=True)
    result = runner.run(build_agent(model, mw), [{"messages": seed}], cfg(thread_id))
    assert result.runs[0].error is None
    answers = [m for m in result.state["messages"] if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in answers] == ["c1", "c2"]
    assert all(m.text.startswith("Compaction scheduled") for m in answers)
    _, second = model.main_calls
    assert "SUMMARY-OF-OLD-WORK" in second[1].text
    assert [m.id for m in second[2:3]] == ["a-c"]
    assert [m.tool_call_id for m in second[3:]] == ["c1", "c2"]
    assert result.state["_summarization_event"]["cutoff"] == len(seed)
    assert not result.state.get("_ars_compaction_requested")
    phases = [(e["phase"], e["level"]) for e in result.runs[0].compression]
    assert phases == [("started", "L1"), ("completed", "L2")]


@pytest.mark.spec("R21", "R24", "R44")
@pytest.mark.parametrize("saver_kind", ["memory", "sqlite"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_compact_now_on_a_thread_whose_next_step_is_the_model_persists_and_resumes(
    mode: str, saver_kind: str, thread_id: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The main model failed (503) after the new question was checkpointed: the
    thread's next step is the model. ``compact_now`` persists its event there (not
    dropped by the input schema), the pending step stays the model, and resuming
    with ``invoke(None)`` sends the summary and the kept messages."""
    model = FakeToolChatModel(
        [
            AIMessage("answer 3", id="a3"),
            RuntimeError("503 Service Unavailable"),
            AIMessage("SUMMARY-NOW", id="s1"),
            AIMessage("resumed", id="a4"),
        ]
    )
    mw = ArsSummarizationMiddleware(SummaryConfig(summary_keep_messages=2))
    seed = [*_history(3), HumanMessage("q3", id="h3")]
    config = cfg(thread_id)

    def run_sync() -> tuple[Compaction, Any, dict[str, Any]]:
        with make_saver(saver_kind, tmp_path, request) as saver:
            agent = build_agent(model, mw)(saver)
            agent.invoke({"messages": seed}, config)
            with pytest.raises(RuntimeError, match="503"):
                agent.invoke({"messages": [HumanMessage("q4", id="h4")]}, config)
            assert agent.get_state(config).next == ("model",)
            done = compact_now(agent, config, middleware=mw, model=model)
            snapshot = agent.get_state(config)
            agent.invoke(None, config)
            return done, snapshot, dict(agent.get_state(config).values)

    async def run_async() -> tuple[Compaction, Any, dict[str, Any]]:
        async with async_saver(saver_kind, tmp_path) as saver:
            agent = build_agent(model, mw)(saver)
            await agent.ainvoke({"messages": seed}, config)
            with pytest.raises(RuntimeError, match="503"):
                await agent.ainvoke({"messages": [HumanMessage("q4", id="h4")]}, config)
            assert (await agent.aget_state(config)).next == ("model",)
            done = await acompact_now(agent, config, middleware=mw, model=model)
            snapshot = await agent.aget_state(config)
            await agent.ainvoke(None, config)
            return done, snapshot, dict((await agent.aget_state(config)).values)

    done, snapshot, final = run_sync() if mode == "sync" else asyncio.run(run_async())
    assert done.compacted and done.event is not None
    assert snapshot.values["_summarization_event"] == event_to_state(done.event)
    assert snapshot.next == ("model",)
    assert [m.id for m in snapshot.values["messages"]] == [*(m.id for m in seed), "a3", "h4"]
    resumed = model.main_calls[-1]
    assert "SUMMARY-NOW" in resumed[1].text
    assert [m.id for m in resumed[2:]] == [
        m.id for m in snapshot.values["messages"][done.event.cutoff :]
    ]
    assert final["messages"][-1].id == "a4"
