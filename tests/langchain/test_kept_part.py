"""After an L2 round the middleware reads the part the event keeps: while the event's
anchor (the last summarized message and the first kept one, by id) sits where it was,
a call below T neither compares nor converts the summarized part of the LangChain
history, so its cost tracks what was appended, not the history. A round reads the
summarized part (its requests make the task statement) and compares it then. The
oracle: the same conversation with the real messages throughout gives the same
requests, events and state updates."""

from __future__ import annotations

import asyncio
from typing import Any, NoReturn

import pytest
from langchain.agents.middleware.types import ExtendedModelResponse, ModelRequest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_to_dict,
)
from langchain_core.runnables.config import var_child_runnable_config

from ars_core import FsspecBackend, Message, SummarizationEvent, SummaryConfig, message_to_dict
from ars_core.adapter import reads_kept_part_only
from ars_core.testing import FakeSummarizer
from ars_langchain import ArsSummarizationMiddleware, HistoryConverter
from ars_langchain.middleware import EVENT_KEY, event_from_state
from ars_langchain.testing import FakeToolChatModel, tool_call
from tests.core.helpers import words

pytestmark = pytest.mark.spec("R1", "R10", "R51")

MODES = pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])


class Tripwire:
    """A message no call below T may look at: reading, comparing or hashing it raises."""

    def __getattribute__(self, name: str) -> NoReturn:
        raise AssertionError(f"a summarized message was read ({name})")

    def __eq__(self, other: object) -> NoReturn:
        raise AssertionError("a summarized message was compared")

    def __hash__(self) -> NoReturn:
        raise AssertionError("a summarized message was hashed")


def turn(i: int) -> list[BaseMessage]:
    call = tool_call("bash", {"command": f"make step{i}"}, f"c{i}")
    return [
        HumanMessage(f"request {i}: " + words(30, seed=f"r{i}"), id=f"u{i}"),
        AIMessage("", id=f"a{i}", tool_calls=[call]),
        ToolMessage(f"output {i}: " + words(60, seed=f"o{i}"), tool_call_id=f"c{i}", id=f"t{i}"),
        AIMessage(f"answer {i}: " + words(20, seed=f"n{i}"), id=f"r{i}"),
    ]


class Thread:
    """One conversation through ``wrap_model_call``, each round persisted as LangGraph
    does (the event into state, trimmed messages replaced by id)."""

    def __init__(self, run_async: bool) -> None:
        self.run_async = run_async
        self.mw = ArsSummarizationMiddleware(
            SummaryConfig(summary_threshold=1, summary_keep_messages=4),
            summarizer=FakeSummarizer("S"),
            backend=FsspecBackend("memory://kept-part-lc"),
            stream=False,
        )
        self.state: dict[str, Any] = {"messages": []}
        self.sent: list[list[dict[str, Any]]] = []
        self.updates: list[Any] = []

    def event(self) -> Any:
        return event_from_state(self.state.get(EVENT_KEY))

    def call(self, messages: list[Any]) -> None:
        async def ahandler(request: ModelRequest[Any]) -> AIMessage:
            return handler(request)

        def handler(request: ModelRequest[Any]) -> AIMessage:
            self.sent.append(messages_to_dict(request.messages))
            return AIMessage("done", id="reply")

        request = ModelRequest(
            model=FakeToolChatModel(["never"]),
            messages=messages,
            system_message=SystemMessage("be brief"),
            tools=[],
            state={**self.state, "messages": messages},
        )
        token = var_child_runnable_config.set({"configurable": {"thread_id": "kept"}})
        try:
            if self.run_async:
                result = asyncio.run(self.mw.awrap_model_call(request, ahandler))
            else:
                result = self.mw.wrap_model_call(request, handler)
        finally:
            var_child_runnable_config.reset(token)
        values = result.command.update if isinstance(result, ExtendedModelResponse) else None
        self.updates.append(None if values is None else _plain(values))
        for key, value in (values or {}).items():
            if key == "messages":
                by_id = {m.id: m for m in value}
                self.state["messages"] = [by_id.get(m.id, m) for m in self.state["messages"]]
            else:
                self.state[key] = value


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    """A state update without what differs by run (the event's time)."""
    out = {k: messages_to_dict(v) if k == "messages" else v for k, v in values.items()}
    if out.get(EVENT_KEY):
        out[EVENT_KEY] = {k: v for k, v in out[EVENT_KEY].items() if k != "created_at"}
    return out


@MODES
def test_a_call_below_t_after_a_round_touches_no_summarized_message(run_async: bool) -> None:
    """The conversation once with its real messages; then again where every call with a
    stored event that did not run a round gets, in place of each summarized message
    (before the anchor's pair), a message that raises when read: the same requests,
    events and state updates, and several rounds in between (each reading the real
    summarized part)."""
    real, tripped = Thread(run_async), Thread(run_async)
    rounds = 0
    for i in range(40):
        for thread in (real, tripped):
            thread.state["messages"] = [*thread.state["messages"], *turn(i)]
        event = real.event()
        real.call(real.state["messages"])
        ran_round = real.updates[-1] is not None and EVENT_KEY in real.updates[-1]
        rounds += ran_round
        messages = list(tripped.state["messages"])
        if event is not None and not ran_round:
            messages[: event.cutoff - 1] = [Tripwire() for _ in range(event.cutoff - 1)]
        tripped.call(messages)
    assert rounds >= 3
    assert tripped.sent == real.sent and tripped.updates == real.updates
    (session,) = tripped.mw.sessions.by_key.values()
    assert session.converter.converted == 4 * 40  # every message converted once


def test_the_summarized_part_is_compared_when_read() -> None:
    """A message of the summarized part replaced by id (an edit the kept part does not
    show): the call's messages are those of a fresh conversion wherever they are read,
    the kept part without comparing the summarized part, the rest when first read."""
    history = [m for i in range(30) for m in turn(i)]
    conv = HistoryConverter()
    first = conv.convert(history)
    cut = 60
    event = _event_at(first, cut)
    edited = list(history)
    edited[5] = HumanMessage("an edited request", id=history[5].id)
    grown = [*edited, *turn(30)]
    kept = conv.convert_kept(grown, event)
    assert reads_kept_part_only(kept, event)
    fresh = HistoryConverter().convert(grown)
    assert conv.converted == len(history) + 4  # the appended turn alone
    assert [message_to_dict(m) for m in kept[cut - 1 :]] == [
        message_to_dict(m) for m in fresh[cut - 1 :]
    ]
    assert all(a is b for a, b in zip(kept[cut - 1 : 120], first[cut - 1 :], strict=True))
    assert kept[5].text == "an edited request"  # read: compared, the edit converted
    assert [message_to_dict(m) for m in kept] == [message_to_dict(m) for m in fresh]
    assert conv.converted == len(history) + 4 + 1


def test_a_kept_part_that_changed_is_converted_whole() -> None:
    """A message of the kept part replaced by id, or the anchor's pair gone: the call's
    messages are the whole history's, as a fresh conversion gives them."""
    history = [m for i in range(30) for m in turn(i)]
    conv = HistoryConverter()
    event = _event_at(conv.convert(history), 60)
    edited = list(history)
    edited[100] = HumanMessage("an edited kept request", id=history[100].id)
    out = conv.convert_kept(edited, event)
    assert isinstance(out, list)
    assert [message_to_dict(m) for m in out] == [
        message_to_dict(m) for m in HistoryConverter().convert(edited)
    ]
    moved = [*history[:10], *history[12:]]  # the anchor's pair is no longer at the cutoff
    out = conv.convert_kept(moved, event)
    assert isinstance(out, list) and [m.id for m in out] == [m.id for m in moved]


def test_messages_handed_out_never_change() -> None:
    """The kept part's core list grows in place under the messages handed out earlier:
    those still hold what their call had (their length, their messages), and a list
    handed out whole is never grown."""
    history = [m for i in range(30) for m in turn(i)]
    conv = HistoryConverter()
    whole = conv.convert(history)
    event = _event_at(whole, 60)
    one = conv.convert_kept([*history, *turn(30)], event)
    two = conv.convert_kept([*history, *turn(30), *turn(31)], event)
    assert len(whole) == 120 and len(one) == 124 and len(two) == 128
    assert one[-1].id == "r30" and two[-1].id == "r31" and one[123] is two[123]
    assert [m.id for m in one[118:]] == ["t29", "r29", "u30", "a30", "t30", "r30"]
    with pytest.raises(IndexError):
        one[124]
    assert [m.id for m in one] == [m.id for m in history] + ["u30", "a30", "t30", "r30"]


def _event_at(core: list[Message], cut: int) -> SummarizationEvent:
    """A summary event of the first ``cut`` messages of ``core``, anchored on them."""
    summary = Message(role="user", content="S", id="ars-summary", metadata={"ars_summary": True})
    return SummarizationEvent(cutoff=cut, summary_message=summary).anchored(core)


def test_messages_are_mapped_back_from_the_kept_part_alone() -> None:
    """A view of a call on the kept part mapped back message by message (a kept message
    sent in another form past the view's head): each kept message is the very
    LangChain object of the history, and what the converter keeps to map them back
    holds the kept part, not the history; a call on the whole history maps any message."""
    history = [m for i in range(100) for m in turn(i)]
    conv = HistoryConverter()
    core = conv.convert(history)
    conv.back_all(core)  # a view of the whole history mapped: every message
    event = _event_at(core, 300)
    grown = [*history, *turn(100)]
    kept = conv.convert_kept(grown, event)
    summary = Message(role="user", content="S", id="s", metadata={"ars_summary": True})
    other = Message(role="tool", content="offloaded", tool_call_id="c90", id="t90")
    view = [summary, *kept[300:380], other, *kept[381:]]
    back = conv.back_all(view)
    assert all(a is b for a, b in zip(back[1:81], grown[300:380], strict=True))
    assert back[81].content == "offloaded" and back[82] is grown[381]
    assert len(conv._origin) <= len(grown) - 299
    again = conv.convert([*grown, *turn(101)])  # a call reading the whole history
    assert conv.back(again[3]) is grown[3]
