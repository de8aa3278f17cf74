"""What the LangChain adapter converts once and reuses across calls, what makes it
convert again, and what its messages add to a history archive.

A round's summary is converted to LangChain once: the request of the round, its
state update and the calls after it carry that one object. A summary read back
from an edited state (a new event dict) is converted anew, so what the model
receives always matches the event in the checkpoint.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)

from ars_core import MARK_TRUNCATED_ARGS, Message, ToolCall
from ars_core.messages import MARK_SUMMARY, message_from_dict, message_to_dict
from ars_langchain import HistoryConverter, from_core, to_core
from ars_langchain import convert as convert_module
from ars_langchain.testing import FakeToolChatModel, tool_call
from tests.langchain.conftest import async_saver, make_saver
from tests.langchain.helpers import SYSTEM, build_agent

# L2 on the third call (cutoff 3), again on the fifth (cutoff 7)
from tests.langchain.test_edited_history import TURNS, setup
from tests.langchain.test_edited_history import turn as _turn


def _summary_conversions(monkeypatch: pytest.MonkeyPatch) -> list[Message]:
    """Every summary message the adapter converts to LangChain, in order."""
    seen: list[Message] = []
    real = convert_module.from_core

    def spy(message: Message) -> BaseMessage:
        if message.metadata.get(MARK_SUMMARY):
            seen.append(message)
        return real(message)

    monkeypatch.setattr(convert_module, "from_core", spy)
    return seen


@pytest.mark.spec("R24")
def test_a_summary_is_converted_once_and_an_equal_copy_is_converted_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Views holding one summary object share its LangChain form (converted once); an
    equal summary read back from state (another object) is converted again, and a
    remembered pair takes the summary's place."""
    conv = HistoryConverter()
    msgs = [HumanMessage(f"m{i}", id=f"id{i}") for i in range(100)]
    core = conv.convert(msgs)
    summary = Message(
        role="user",
        content="S",
        id="ars-summary-60",
        metadata={MARK_SUMMARY: True, "ars_cutoff": 60},
    )
    converted = _summary_conversions(monkeypatch)
    first = conv.back_all([summary, *core[60:]])
    later = conv.back_all([summary, *core[61:]])
    assert first[0] == HumanMessage(
        "S",
        id="ars-summary-60",
        additional_kwargs={"lc_source": "summarization"},
        response_metadata={"ars": {MARK_SUMMARY: True, "ars_cutoff": 60}},
    )
    assert later[0] is first[0] and converted == [summary]
    assert all(a is b for a, b in zip(later[1:], msgs[61:], strict=True))
    reread = message_from_dict(message_to_dict(summary))  # the event of an edited state
    again = conv.back_all([reread, *core[60:]])
    assert converted == [summary, reread]
    assert again[0] == first[0] and again[0] is not first[0]
    other = Message(role="user", content="T", id="ars-summary-70", metadata={MARK_SUMMARY: True})
    mine = HumanMessage("T, as the application stored it", id="ars-summary-70")
    conv.remember(other, mine)
    assert conv.back(other) is mine and len(converted) == 2


def _check(
    model: FakeToolChatModel,
    converted: list[Message],
    states: list[dict[str, Any]],
) -> None:
    """Two rounds (calls 3 and 5), then an edit removing the 4 oldest messages
    re-anchors the second round's event: call 4 resends the first summary object,
    the call after the edit sends the second summary before every message it does
    not cover."""
    calls = model.main_calls
    assert len(calls) == TURNS + 1
    first_event, second_event, edited_event = (s["_summarization_event"] for s in states)
    assert (first_event["cutoff"], second_event["cutoff"], edited_event["cutoff"]) == (3, 7, 3)
    first = from_core(message_from_dict(first_event["summary_message"]))
    second = from_core(message_from_dict(second_event["summary_message"]))
    assert calls[2][1] == first and calls[3][1] is calls[2][1]
    assert calls[4][1] == second
    old, after = states[1]["messages"], states[2]["messages"]
    assert calls[5] == [SystemMessage(SYSTEM), second, *old[7:], after[-2]]
    # one conversion per round: the edit re-anchors the event around the same summary
    assert [m.metadata["ars_cutoff"] for m in converted] == [3, 7]


@pytest.mark.spec("R24", "R51")
@pytest.mark.parametrize("saver_kind", ["memory", "sqlite"])
def test_each_summary_reaches_langchain_once_until_state_is_edited_sync(
    saver_kind: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    thread_id: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real graph over a checkpointer: the model receives exactly the summarized
    views, each summary converted once, and after ``update_state`` removes the
    oldest messages the re-anchored event's summary."""
    model, mw = setup("reuse")
    converted = _summary_conversions(monkeypatch)
    cfg = {"configurable": {"thread_id": thread_id}}
    states: list[dict[str, Any]] = []
    with make_saver(saver_kind, tmp_path, request) as saver:
        agent = build_agent(model, mw)(saver)
        for i in range(TURNS):
            agent.invoke(_turn(i), cfg)
            if i in (2, 4):
                states.append(dict(agent.get_state(cfg).values))
        old = states[-1]["messages"]
        agent.update_state(cfg, {"messages": [RemoveMessage(id=m.id) for m in old[:4]]})
        agent.invoke(_turn(TURNS), cfg)
        states.append(dict(agent.get_state(cfg).values))
    _check(model, converted, states)


@pytest.mark.spec("R24", "R51")
@pytest.mark.parametrize("saver_kind", ["memory", "sqlite"])
def test_each_summary_reaches_langchain_once_until_state_is_edited_async(
    saver_kind: str,
    tmp_path: Path,
    thread_id: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Async twin: ``ainvoke`` and ``aupdate_state`` on the async savers."""
    model, mw = setup("reuse")
    converted = _summary_conversions(monkeypatch)
    cfg = {"configurable": {"thread_id": thread_id}}

    async def run() -> list[dict[str, Any]]:
        states: list[dict[str, Any]] = []
        async with async_saver(saver_kind, tmp_path) as saver:
            agent = build_agent(model, mw)(saver)
            for i in range(TURNS):
                await agent.ainvoke(_turn(i), cfg)
                if i in (2, 4):
                    states.append(dict((await agent.aget_state(cfg)).values))
            old = states[-1]["messages"]
            await agent.aupdate_state(cfg, {"messages": [RemoveMessage(id=m.id) for m in old[:4]]})
            await agent.ainvoke(_turn(TURNS), cfg)
            states.append(dict((await agent.aget_state(cfg)).values))
        return states

    _check(model, converted, asyncio.run(run()))


# ------------------------------------------------------------------ archive lines


def _archived(message: BaseMessage) -> dict[str, Any]:
    """``message`` as a line of a history archive, parsed back."""
    loaded: dict[str, Any] = json.loads(json.dumps(message_to_dict(to_core(message))))
    return loaded


@pytest.mark.spec("R23", "R24")
def test_an_archive_line_holds_each_tool_call_argument_once() -> None:
    """LangChain's standard tool calls are archived once (as the core calls), a tool
    result's default status and a plain class's type not at all; every line still reads
    back as the very LangChain message. Non-standard calls and set fields are kept."""
    big = "needle " * 50
    calls = [tool_call("write_file", {"file_path": "a.py", "content": big}, "c1")]
    ai = AIMessage("", id="a", tool_calls=calls, additional_kwargs={"raw": 1})
    result = ToolMessage("ok", id="t", tool_call_id="c1", name="write_file")
    human = HumanMessage("hi", id="h")
    line = _archived(ai)
    assert line == {
        "role": "assistant",
        "content": "",
        "id": "a",
        "tool_calls": [
            {"id": "c1", "name": "write_file", "args": {"file_path": "a.py", "content": big}}
        ],
        "metadata": {"lc": {"additional_kwargs": {"raw": 1}}},
    }
    assert _archived(result) == {
        "role": "tool",
        "content": "ok",
        "id": "t",
        "name": "write_file",
        "tool_call_id": "c1",
    }
    assert _archived(human) == {"role": "user", "content": "hi", "id": "h"}
    for message in (ai, result, human):
        assert from_core(message_from_dict(_archived(message))) == message
    failed = ToolMessage("boom", id="t2", tool_call_id="c1", status="error")
    assert _archived(failed)["metadata"] == {"lc": {"status": "error"}}
    odd = {"name": "echo", "args": {"text": "x"}, "id": None, "type": "tool_call"}
    no_id = AIMessage("", id="b", tool_calls=[odd])
    assert _archived(no_id)["metadata"] == {"lc": {"tool_calls": [odd]}}
    assert from_core(message_from_dict(_archived(no_id))) == no_id


@pytest.mark.spec("R11", "R43")
def test_rewritten_tool_calls_never_resend_the_raw_provider_copy() -> None:
    """L1's copy of a converted message (its calls truncated) and a rewritten copy of
    an archived one (whose original calls are no longer known) both go back to
    LangChain without the provider's raw copy; an untouched archived message keeps it."""
    raw = {"tool_calls": [{"id": "c1", "function": {"name": "write_file", "arguments": "{}"}}]}
    ai = AIMessage(
        "",
        id="a",
        tool_calls=[tool_call("write_file", {"content": "x" * 3000}, "c1")],
        additional_kwargs=raw,
    )
    truncated = (ToolCall("c1", "write_file", {"content": "[truncated]"}),)
    for source in (to_core(ai), message_from_dict(message_to_dict(to_core(ai)))):
        assert from_core(source) == ai
        copy = attrs.evolve(
            source, tool_calls=truncated, metadata={**source.metadata, MARK_TRUNCATED_ARGS: 1}
        )
        back = from_core(copy)
        assert back.tool_calls == [
            {
                "name": "write_file",
                "args": {"content": "[truncated]"},
                "id": "c1",
                "type": "tool_call",
            }
        ]
        assert back.additional_kwargs == {}
        assert back.response_metadata == {"ars": {MARK_TRUNCATED_ARGS: 1}}


@pytest.mark.spec("R24")
def test_a_summary_is_marked_exactly_as_langchain_marks_harness_messages() -> None:
    """A summary (ARS's, or another harness's carrying LangChain fields) comes back as
    ``add_notification_metadata`` marks it: ``lc_source`` set, an earlier ``lc_data``
    removed, every other field kept."""
    from langchain_core.messages import add_notification_metadata

    theirs = HumanMessage(
        "their summary",
        id="s1",
        additional_kwargs={"lc_source": "summarization", "lc_data": {"n": 1}, "kept": True},
    )
    core = to_core(theirs)
    marked = core.with_content(core.content, **{MARK_SUMMARY: True})
    plain = HumanMessage(
        "their summary",
        id="s1",
        additional_kwargs={"lc_source": "summarization", "lc_data": {"n": 1}, "kept": True},
        response_metadata={"ars": {MARK_SUMMARY: True}},
    )
    assert from_core(marked) == add_notification_metadata(plain, source="summarization")
    assert from_core(marked).additional_kwargs == {"lc_source": "summarization", "kept": True}
    ours = Message(role="user", content="S", id="ars-summary-3", metadata={MARK_SUMMARY: True})
    assert from_core(ours) == add_notification_metadata(
        HumanMessage("S", id="ars-summary-3", response_metadata={"ars": {MARK_SUMMARY: True}}),
        source="summarization",
    )
