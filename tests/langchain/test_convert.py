"""Message conversion LangChain <-> core (lossless), its incremental cache, the
overflow classifier and configuration from the runtime context."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from ars_core import (
    ConfigError,
    ContentPart,
    FsspecBackend,
    Message,
    SummaryConfig,
    ToolCall,
    is_context_overflow,
)
from ars_core.messages import NO_METADATA, message_from_dict, message_to_dict
from ars_langchain import (
    ArsSummarizationMiddleware,
    HistoryConverter,
    from_core,
    to_core,
)
from ars_langchain.convert import VIEW_HEAD
from ars_langchain.testing import FakeToolChatModel, tool_call
from tests.langchain.helpers import build_agent, prose

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
SAMPLES: list[Any] = [
    SystemMessage("be brief", id="s"),
    HumanMessage(
        [
            "look at this",
            {"type": "text", "text": "and this", "cache_control": {"type": "ephemeral"}},
            IMAGE,
            {
                "type": "file",
                "source_type": "base64",
                "data": "AAAA",
                "mime_type": "application/pdf",
            },
        ],
        id="h",
        name="alice",
        additional_kwargs={"x": 1},
    ),
    AIMessage(
        [
            {"type": "reasoning", "reasoning": "think", "id": "r1"},
            {"type": "text", "text": "calling"},
        ],
        id="a",
        tool_calls=[tool_call("search", {"q": "ars", "n": 3}, "c1"), tool_call("echo", {}, "c2")],
        invalid_tool_calls=[
            {
                "type": "invalid_tool_call",
                "name": "bad",
                "args": "{oops",
                "id": "c3",
                "error": "json",
            }
        ],
        usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
        response_metadata={"model_name": "m", "finish_reason": "tool_calls"},
        additional_kwargs={
            "tool_calls": [{"id": "c1", "function": {"name": "search", "arguments": "{}"}}]
        },
    ),
    ToolMessage(
        "result one",
        id="t1",
        tool_call_id="c1",
        name="search",
        artifact={"rows": [1, 2]},
        status="success",
    ),
    ToolMessage([{"type": "text", "text": "failed"}], id="t2", tool_call_id="c2", status="error"),
    ChatMessage("from the critic", role="critic", id="c"),
    FunctionMessage("fn out", name="legacy", id="f"),
    HumanMessage(
        "plain", response_metadata={"ars": {"ars_offloaded": "outputs/x.txt"}}, id="marked"
    ),
]


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: f"{m.type}-{m.id}")
def test_conversion_is_lossless(message: Any) -> None:
    """ids, names, tool calls, invalid tool calls, additional_kwargs, response_metadata,
    usage_metadata, artifacts, status and multimodal content blocks survive
    LangChain -> core -> LangChain, and core -> JSON -> core (the history file format)."""
    core = to_core(message)
    assert from_core(core) == message
    assert type(from_core(core)) is type(message)
    if message.type != "tool" or message.artifact is None:
        assert from_core(message_from_dict(message_to_dict(core))) == message


@pytest.mark.spec("R1")
@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: f"{m.type}-{m.id}")
def test_a_converted_message_is_what_the_constructor_builds(message: Any) -> None:
    """The conversion builds core messages without the constructor's checks: each is
    equal (and hashes equal) to the one the constructor builds from the same fields,
    its own fresh cache, and metadata of its own (the shared read-only empty one
    when it has none)."""
    core = to_core(message)
    rebuilt = Message(
        role=core.role,
        content=core.content,
        id=core.id,
        name=core.name,
        tool_calls=[ToolCall(id=c.id, name=c.name, args=c.args) for c in core.tool_calls],
        tool_call_id=core.tool_call_id,
        metadata=core.metadata,
    )
    assert core == rebuilt and hash(repr(core)) == hash(repr(rebuilt))
    assert core._cache == {} and core._cache is not to_core(message)._cache
    assert core.metadata is not to_core(message).metadata or core.metadata is NO_METADATA


def test_core_view_of_a_message() -> None:
    core = to_core(SAMPLES[2])
    assert core.role == "assistant" and core.id == "a"
    assert core.tool_calls == (
        ToolCall("c1", "search", {"q": "ars", "n": 3}),
        ToolCall("c2", "echo", {}),
    )
    assert core.content[1] == ContentPart(type="text", text="calling")
    assert core.content[0].text is None and core.content[0].data["reasoning"] == "think"
    human = to_core(SAMPLES[1])
    assert human.text == "look at this\nand this"
    assert [p.type for p in human.content] == ["text", "text", "image_url", "file"]
    tool = to_core(SAMPLES[3])
    assert (tool.role, tool.name, tool.tool_call_id) == ("tool", "search", "c1")
    assert to_core(SAMPLES[5]).role == "user" and to_core(SAMPLES[0]).role == "system"
    # ARS markers live in response_metadata["ars"] and come back as core metadata
    assert to_core(SAMPLES[-1]).metadata["ars_offloaded"] == "outputs/x.txt"


@pytest.mark.spec("R43")
def test_changed_tool_calls_drop_the_raw_provider_copy() -> None:
    """When L1 or the overflow tail trim rewrite tool-call arguments, the provider's raw copy in
    additional_kwargs must not resend the original."""
    core = to_core(SAMPLES[2])
    changed = Message(
        role=core.role,
        content=core.content,
        id=core.id,
        tool_calls=(ToolCall("c1", "search", {"q": "[truncated]"}), core.tool_calls[1]),
        metadata={**core.metadata, "ars_truncated_args": 1},
    )
    back = from_core(changed)
    assert back.tool_calls[0]["args"] == {"q": "[truncated]"}
    assert "tool_calls" not in back.additional_kwargs
    assert back.response_metadata == {
        **SAMPLES[2].response_metadata,
        "ars": {"ars_truncated_args": 1},
    }
    assert back.usage_metadata == SAMPLES[2].usage_metadata and back.id == "a"


def test_summary_message_becomes_a_human_message() -> None:
    summary = Message(
        role="user",
        content="S",
        id="ars-summary-4",
        metadata={"ars_summary": True, "ars_cutoff": 4},
    )
    # marked harness-inserted the way LangChain marks its own summaries
    assert from_core(summary) == HumanMessage(
        "S",
        id="ars-summary-4",
        additional_kwargs={"lc_source": "summarization"},
        response_metadata={"ars": {"ars_summary": True, "ars_cutoff": 4}},
    )
    assert to_core(from_core(summary)).metadata["ars_summary"] is True


def test_history_conversion_is_incremental() -> None:
    """Per-call overhead does not grow with history: a grown list converts only its
    new messages and returns the same core objects for the old ones; a reloaded
    (equal but new) list reuses them too; an edit converts only the edited message."""
    conv = HistoryConverter()
    msgs = [HumanMessage(f"m{i}", id=f"id{i}") for i in range(200)]
    first = conv.convert(msgs)
    assert conv.converted == 200
    grown = [*msgs, AIMessage("new", id="new")]
    second = conv.convert(grown)
    assert conv.converted == 201
    assert all(a is b for a, b in zip(first, second, strict=False))
    reloaded = [m.model_copy() for m in grown]  # a checkpoint reload: equal, not identical
    third = conv.convert(reloaded)
    assert conv.converted == 201 and all(a is b for a, b in zip(second, third, strict=True))
    edited = [*reloaded[:150], HumanMessage("edited", id="id150"), *reloaded[151:]]
    fourth = conv.convert(edited)
    assert conv.converted == 201 + 1  # only the edited message: the rest keep their twins
    assert fourth[149] is third[149] and fourth[150].text == "edited"
    assert all(a is b for a, b in zip(fourth[151:], third[151:], strict=True))
    # back() gives the LangChain message an unchanged core message stands for (an equal
    # one after a reload: the identity-or-equality check keeps the first objects seen)
    assert conv.back(fourth[3]) == reloaded[3] and conv.back(fourth[150]) is edited[150]


def test_middleware_converts_only_new_messages_per_call() -> None:
    """The whole middleware, over a 40-turn conversation on one thread: each call
    converts only the messages it has not seen (about two per turn). The estimator has
    no UTF-8 bound, so every call goes through the engine (and the converter)."""
    from langgraph.checkpoint.memory import InMemorySaver

    model = FakeToolChatModel([f"answer {i}" for i in range(40)])
    mw = ArsSummarizationMiddleware(
        SummaryConfig(summary_threshold=1000),
        backend=FsspecBackend("memory://inc"),
        estimator="approx",
    )
    agent = build_agent(model, mw)(InMemorySaver())
    config = {"configurable": {"thread_id": "inc"}}
    for i in range(40):
        agent.invoke({"messages": [HumanMessage(f"q{i}", id=f"q{i}")]}, config)
    (session,) = mw._sessions.values()
    # each turn: the new question is converted; the previous answer too (it arrived via state)
    assert session.converter.converted == 40 + 39
    assert model.main_calls[-1][1:] == agent.get_state(config).values["messages"][:-1]


@pytest.mark.spec("R1")
def test_a_released_history_list_grows_in_place_and_a_held_one_never_changes() -> None:
    """Appending to a history costs no copy of it: once nobody holds the core list
    handed out last time, the next call grows that same list; a list a caller still
    holds is never changed (the next call builds a new one)."""
    conv = HistoryConverter()
    msgs = [HumanMessage(f"m{i}", id=f"id{i}") for i in range(100)]
    held = conv.convert(msgs)
    grown = conv.convert([*msgs, AIMessage("a", id="a")])
    assert len(held) == 100 and grown is not held  # ``held`` is still referenced here
    assert [m.text for m in grown[-2:]] == ["m99", "a"]
    grown_id = id(grown)
    del grown
    third = conv.convert([*msgs, AIMessage("a", id="a"), HumanMessage("b", id="b")])
    # the old list is freed only after the new one exists: a copy would have another id
    assert id(third) == grown_id and len(third) == 102 and third[-1].text == "b"
    assert conv.converted == 102


@pytest.mark.spec("R1", "R24")
def test_a_view_after_a_summary_maps_its_kept_tail_back_by_slicing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A view ``[summary, *history[cut:]]`` goes back to LangChain as the summary plus
    the very LangChain objects of the history's tail, mapping only the head one by
    one; a kept message sent in another form (L1) is converted, the rest still
    sliced; a view that is not the history's end is mapped message by message."""
    conv = HistoryConverter()
    msgs = [HumanMessage(f"m{i}", id=f"id{i}") for i in range(300)]
    core = conv.convert(msgs)
    summary = Message(role="user", content="S", id="summary", metadata={"ars_summary": True})
    mapped: list[Message] = []
    real_back = HistoryConverter.back
    monkeypatch.setattr(
        HistoryConverter, "back", lambda self, m: mapped.append(m) or real_back(self, m)
    )
    back = conv.back_all([summary, *core[100:]])
    assert back[0] == from_core(summary)
    assert all(a is b for a, b in zip(back[1:], msgs[100:], strict=True))
    assert mapped == [summary]
    offloaded = Message(role="user", content="m100 (offloaded)", id="id100")
    mapped.clear()
    back = conv.back_all([summary, offloaded, *core[101:]])
    assert back[1] == from_core(offloaded) and back[2] is msgs[101] and back[-1] is msgs[-1]
    assert len(mapped) == VIEW_HEAD
    mapped.clear()
    middle = [summary, *core[100:200]]  # not the history's end
    assert [m.content for m in conv.back_all(middle)[1:]] == [f"m{i}" for i in range(100, 200)]
    assert len(mapped) == 101


@pytest.mark.spec("R1", "R62")
def test_a_view_with_notes_inserted_maps_the_history_back_by_slicing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The whole history with messages inserted (the notes answering unanswered calls)
    goes back as the very LangChain objects of the history, the inserted ones converted
    one by one, in place; a view missing a history message is mapped one by one."""
    conv = HistoryConverter()
    msgs = [HumanMessage(f"m{i}", id=f"id{i}") for i in range(300)]
    core = conv.convert(msgs)
    notes = [Message(role="tool", content=f"note {k}", tool_call_id=f"c{k}") for k in range(3)]
    mapped: list[Message] = []
    real_back = HistoryConverter.back
    monkeypatch.setattr(
        HistoryConverter, "back", lambda self, m: mapped.append(m) or real_back(self, m)
    )
    view = [notes[0], *core[:120], notes[1], *core[120:], notes[2]]
    back = conv.back_all(view)
    assert mapped == notes
    assert [type(m).__name__ for m in back].count("ToolMessage") == 3
    assert back[0] == from_core(notes[0]) and back[121] == from_core(notes[1])
    assert back[-1] == from_core(notes[2])
    rest = back[1:121] + back[122:-1]
    assert len(rest) == 300 and all(a is b for a, b in zip(rest, msgs, strict=True))
    mapped.clear()
    gapped = [*core[:120], notes[1], *core[121:]]  # core[120] left out: not the history
    back = conv.back_all(gapped)
    assert len(mapped) == len(gapped) and back[120] == from_core(notes[1])
    assert back[121] is msgs[121]


def _edited_thread_check(agent: Any, model: FakeToolChatModel, mw: Any, config: Any) -> None:
    state = agent.get_state(config).values["messages"]
    assert model.main_calls[-1][1:] == state[:-1]  # exactly the edited history, then its answer
    assert [m.content for m in model.main_calls[-1][1:5]] == [
        "q0",
        "answer 0",
        "q1",
        "edited question 2",
    ]
    assert "answer 1" not in [m.content for m in model.main_calls[-1]]
    (session,) = mw._sessions.values()
    # 12 turns: each call converts its question and the previous answer (23 messages);
    # the call after the edit converts the last answer, the edited question and the new
    # question, nothing of what surrounds the edit
    assert session.converter.converted == 23 + 3


def _edit_turns(model_answers: int) -> tuple[FakeToolChatModel, Any, Any]:
    model = FakeToolChatModel([f"answer {i}" for i in range(model_answers)])
    mw = ArsSummarizationMiddleware(
        SummaryConfig(summary_threshold=1000),
        backend=FsspecBackend("memory://edit-mid"),
        estimator="approx",  # no UTF-8 bound: every call through the engine and converter
    )
    return model, mw, build_agent(model, mw)


def _edits(messages: list[Any]) -> list[Any]:
    from langchain_core.messages import RemoveMessage

    answer_1 = messages[3]
    assert answer_1.content == "answer 1"
    return [RemoveMessage(id=answer_1.id), HumanMessage("edited question 2", id="q2")]


@pytest.mark.spec("R1", "R51")
def test_an_edit_in_the_middle_of_a_thread_reaches_the_model_sync() -> None:
    """update_state removes an answer and replaces a question in the middle of a
    12-turn thread: the next model call gets exactly the edited history (the
    incremental conversion sees the edit), converting only what changed."""
    from langgraph.checkpoint.memory import InMemorySaver

    model, mw, build = _edit_turns(13)
    agent = build(InMemorySaver())
    config = {"configurable": {"thread_id": "edit-mid"}}
    for i in range(12):
        agent.invoke({"messages": [HumanMessage(f"q{i}", id=f"q{i}")]}, config)
    agent.update_state(config, {"messages": _edits(agent.get_state(config).values["messages"])})
    agent.invoke({"messages": [HumanMessage("q12", id="q12")]}, config)
    _edited_thread_check(agent, model, mw, config)


@pytest.mark.spec("R1", "R51")
@pytest.mark.anyio
async def test_an_edit_in_the_middle_of_a_thread_reaches_the_model_async() -> None:
    """The same through ``ainvoke`` / ``aupdate_state``."""
    from langgraph.checkpoint.memory import InMemorySaver

    model, mw, build = _edit_turns(13)
    agent = build(InMemorySaver())
    config = {"configurable": {"thread_id": "edit-mid-async"}}
    for i in range(12):
        await agent.ainvoke({"messages": [HumanMessage(f"q{i}", id=f"q{i}")]}, config)
    state = (await agent.aget_state(config)).values["messages"]
    await agent.aupdate_state(config, {"messages": _edits(state)})
    await agent.ainvoke({"messages": [HumanMessage("q12", id="q12")]}, config)
    _edited_thread_check(agent, model, mw, config)


@pytest.mark.parametrize(
    "exc, expected",
    [
        (ContextOverflowError("anything"), True),  # langchain-core's class
        (
            type("BadRequestError", (Exception,), {"status_code": 400})(
                "Error code: 400 - This model's maximum context length is 128000 tokens"
            ),
            True,
        ),  # OpenAI
        (
            type("BadRequestError", (Exception,), {"status_code": 400})(
                "prompt is too long: 210000 tokens"
            ),
            True,
        ),
        (type("APIStatusError", (Exception,), {"status_code": 413})("request too large"), True),
        (
            type("RateLimitError", (Exception,), {"status_code": 429})(
                "too many tokens per minute"
            ),
            False,
        ),
        (ValueError("unrelated"), False),
    ],
)
@pytest.mark.spec("R4")
def test_overflow_classification(exc: BaseException, expected: bool) -> None:
    """Which model errors start the forced path."""
    assert is_context_overflow(exc) is expected


@pytest.mark.spec("R4")
def test_overflow_found_in_the_cause_chain() -> None:
    try:
        try:
            raise ContextOverflowError("too long")
        except ContextOverflowError as inner:
            raise RuntimeError("wrapped by a retry layer") from inner
    except RuntimeError as outer:
        assert is_context_overflow(outer)


@dataclasses.dataclass
class AgentContext:
    """A Context schema with the five admin-only summary fields."""

    user_id: str = "u"
    summary_threshold: float | None = None
    summary_keep_messages: int | None = None
    summary_prompt: str | None = None
    summary_tool_result_token_limit: int | None = None
    summary_l2_trigger_ratio: float | None = None


@pytest.mark.spec("R35", "R50")
def test_config_comes_from_the_runtime_context() -> None:
    """The Context's summary_* fields drive the middleware at run time
    (here: a threshold low enough, and keep=1, to force L2 with cutoff 2); the
    summary prompt comes from the Context as well."""
    from langgraph.checkpoint.memory import InMemorySaver

    model = FakeToolChatModel(["CTX-SUMMARY", "ok", "ok again"])
    mw = ArsSummarizationMiddleware(backend=FsspecBackend("memory://ctx"))
    agent = build_agent(model, mw, context_schema=AgentContext)(InMemorySaver())
    ctx = AgentContext(
        summary_threshold=0.25,
        summary_keep_messages=1,
        summary_l2_trigger_ratio=0.5,
        summary_prompt="Summarize briefly:\n{messages}",
    )
    seed = [
        HumanMessage(prose("a", 100), id="a"),
        AIMessage(prose("b", 100), id="b"),
        HumanMessage(prose("c", 100), id="c"),
    ]
    config = {"configurable": {"thread_id": "ctx"}}
    agent.invoke({"messages": seed}, config, context=ctx)
    event = agent.get_state(config).values["_summarization_event"]
    assert event["cutoff"] == 2
    assert model.summary_calls[0][0].text.startswith("Summarize briefly:\n[user]\na: alpha")
    # the same middleware with the default context: nothing happens at the default 100K
    agent.invoke(
        {"messages": [HumanMessage("q", id="q")]},
        {"configurable": {"thread_id": "ctx2"}},
        context=AgentContext(),
    )
    assert model.main_calls[-1][1:] == [HumanMessage("q", id="q")]


@pytest.mark.spec("R35")
def test_invalid_context_values_are_rejected() -> None:
    with pytest.raises(ConfigError, match="summary_keep_messages"):
        ArsSummarizationMiddleware.from_context(AgentContext(summary_keep_messages=0))
    with pytest.raises(ConfigError, match="summary_prompt"):
        ArsSummarizationMiddleware.from_context({"summary_prompt": "no placeholder"})
    mw = ArsSummarizationMiddleware.from_context(
        AgentContext(summary_threshold=8, summary_keep_messages=4)
    )
    assert mw.config == SummaryConfig(summary_threshold=8, summary_keep_messages=4)
    sub = mw.for_subagent()
    assert sub.config == mw.config and sub.name == mw.name == "SummarizationMiddleware"
    assert sub._resolver is mw._resolver  # same backend (and scope cache) as the parent


class BadRequestError(Exception):
    """Shaped like an OpenAI SDK 400 error."""

    status_code = 400


@pytest.mark.spec("R4", "R27")
def test_provider_400_text_forces_l2_in_a_graph() -> None:
    """A provider 400 "maximum context length" error below the threshold starts
    the forced path (announced when L2 begins); the explicit summary model's usage
    goes to on_summary_usage and the event, apart from the main model."""
    from langgraph.checkpoint.memory import InMemorySaver

    from ars_core import Usage
    from ars_langchain.testing import FakeToolChatModel as Fake

    seed = [
        (HumanMessage if i % 2 == 0 else AIMessage)(prose(f"t{i}", 60), id=f"m{i}")
        for i in range(7)
    ]
    usage = {"input_tokens": 40, "output_tokens": 4, "total_tokens": 44}
    error = BadRequestError("Error code: 400 - This model's maximum context length is 8192 tokens")
    model = Fake([error, AIMessage("fine now", id="ok")])
    summary_model = Fake([AIMessage("SHORT SUMMARY", usage_metadata=usage)])
    usages: list[Usage] = []
    events: list[Any] = []
    mw = ArsSummarizationMiddleware(
        SummaryConfig(summary_threshold=4, summary_keep_messages=2),
        model=summary_model,
        backend=FsspecBackend("memory://r4-provider"),
        on_summary_usage=usages.append,
        on_event=events.append,
    )
    agent = build_agent(model, mw)(InMemorySaver())
    config = {"configurable": {"thread_id": "p"}}
    agent.invoke({"messages": seed}, config)
    event = agent.get_state(config).values["_summarization_event"]
    assert event["cutoff"] == 5 and event["summary_usage"] == usage
    assert usages == [Usage(40, 4, 44)]
    assert [(e.phase, e.level, e.forced) for e in events] == [
        ("started", "L2", True),
        ("completed", "L2", True),
    ]
    assert len(model.main_calls) == 2 and model.main_calls[0][1:] == seed
    assert model.main_calls[1][1].text.endswith(f"saved at {event['file_path']}.")
    assert model.main_calls[1][2:] == seed[5:]
    assert len(summary_model.summary_calls) == 1 and model.summary_calls == []


def test_event_from_state_reads_ars_and_deepagents_layouts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The persisted event round-trips as plain JSON; an event left by deepagents'
    own middleware (``cutoff_index`` + a HumanMessage) is read as a starting point;
    a malformed one is ignored with a warning."""
    from ars_core import SummarizationEvent, Usage
    from ars_langchain import event_from_state, event_to_state

    ev = SummarizationEvent(
        cutoff=4,
        summary_message=Message(
            role="user", content="S", id="ars-summary-4", metadata={"ars_summary": True}
        ),
        file_path="outputs/conversation_history/h.jsonl",
        previous_cutoff=2,
        summary_usage=Usage(1, 2),
    )
    stored = event_to_state(ev)
    assert json.loads(json.dumps(stored)) == stored  # plain JSON
    assert event_from_state(stored) == ev
    legacy = {
        "cutoff_index": 3,
        "summary_message": HumanMessage("old summary", id="s"),
        "file_path": "/conversation_history/t.md",
    }
    read = event_from_state(legacy)
    assert read is not None and read.cutoff == 3 and read.file_path == "/conversation_history/t.md"
    assert (
        read.summary_message.text == "old summary" and read.summary_message.metadata["ars_summary"]
    )
    assert event_from_state(None) is None
    assert event_from_state({"summary_message": "x"}) is None
    assert "malformed" in caplog.text
