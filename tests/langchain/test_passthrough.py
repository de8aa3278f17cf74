"""A call below T goes out as the agent's own messages, nothing converted
(``ars_langchain.passthrough``), and is exactly what the engine would have sent: the
oracle is the same middleware with that shortcut turned off (every call through the
engine), on fresh message objects (a deserialized checkpoint), sync and async."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)
from langchain_core.runnables.config import var_child_runnable_config

from ars_core import Compressor, FsspecBackend, SummaryConfig, ToolCall
from ars_core.adapter import fits_by_bound, synthetic_result
from ars_core.testing import FakeSummarizer
from ars_langchain import ArsSummarizationMiddleware, passthrough
from ars_langchain.testing import FakeToolChatModel, tool_call

pytestmark = pytest.mark.spec("R1", "R62")

USAGE = {"input_tokens": 1234, "output_tokens": 5, "total_tokens": 1239}


def _turns(n: int, *, big: int = 40) -> list[BaseMessage]:
    """``n`` tool turns: a question, a call, its result."""
    out: list[BaseMessage] = []
    for i in range(n):
        out.append(HumanMessage(f"question {i} " + "word " * big, id=f"h{i}"))
        calls = [tool_call("echo", {"text": f"x{i}", "n": i, "ok": True}, f"c{i}")]
        out.append(AIMessage("", id=f"a{i}", tool_calls=calls))
        out.append(ToolMessage(f"echo: x{i} " + "data " * big, tool_call_id=f"c{i}", id=f"t{i}"))
    return out


def _fresh(messages: list[BaseMessage]) -> list[BaseMessage]:
    """New objects of the same messages, as a checkpointer's deserialization builds."""
    return list(messages_from_dict(messages_to_dict(messages)))


class Recorder:
    """A model-call handler: records each request's messages, answers ``reply`` (a
    ``ModelResponse``), or raises the errors queued in ``errors`` first."""

    def __init__(self, *, usage: bool = False, errors: list[Exception] | None = None) -> None:
        self.sent: list[list[BaseMessage]] = []
        self.requests: list[ModelRequest[Any]] = []
        self.errors = list(errors or [])
        meta = dict(USAGE) if usage else None
        self.reply = ModelResponse(result=[AIMessage("done", id="r", usage_metadata=meta)])

    def __call__(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        self.requests.append(request)
        self.sent.append(list(request.messages))
        if self.errors:
            raise self.errors.pop(0)
        return self.reply

    async def acall(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        return self(request)


def _middleware(threshold: float = 1000, **kw: Any) -> tuple[ArsSummarizationMiddleware, list]:
    events: list[Any] = []
    mw = ArsSummarizationMiddleware(
        SummaryConfig(summary_threshold=threshold, summary_keep_messages=4),
        summarizer=FakeSummarizer("S"),
        backend=FsspecBackend("memory://passthrough"),
        on_event=events.append,
        stream=False,
        **kw,
    )
    return mw, events


def _request(messages: list[BaseMessage]) -> ModelRequest[Any]:
    return ModelRequest(
        model=FakeToolChatModel(["never"]),
        messages=messages,
        system_message=SystemMessage("be brief"),
        tools=[],
        state={"messages": messages},
    )


def _call(
    mw: ArsSummarizationMiddleware,
    messages: list[BaseMessage],
    handler: Recorder,
    thread: str = "t",
    *,
    run_async: bool = False,
) -> Any:
    token = var_child_runnable_config.set({"configurable": {"thread_id": thread}})
    try:
        if run_async:
            return asyncio.run(mw.awrap_model_call(_request(messages), handler.acall))
        return mw.wrap_model_call(_request(messages), handler)
    finally:
        var_child_runnable_config.reset(token)


@pytest.fixture
def engine_only(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Turns the shortcut off: every call goes through the engine (the oracle)."""

    def off() -> None:
        monkeypatch.setattr("ars_langchain.middleware.sendable", lambda *a, **k: None)

    return off


def _both(
    engine_only: Callable[[], None],
    histories: list[list[BaseMessage]],
    *,
    run_async: bool = False,
    threshold: float = 1000,
    handler: Callable[[], Recorder] = Recorder,
) -> tuple[list[Any], list[Any]]:
    """Each history (fresh objects every call, one thread) through the middleware, then
    through the engine alone: (requests, events, results, usage) of each."""
    out = []
    for shortcut in (True, False):
        if not shortcut:
            engine_only()
        mw, events = _middleware(threshold)
        rec = handler()
        results = [_call(mw, _fresh(h), rec, run_async=run_async) for h in histories]
        out.append((rec.sent, [(e.phase, e.level) for e in events], results, mw.last_usage("t")))
    return out[0], out[1]


def _same_requests(a: list[list[BaseMessage]], b: list[list[BaseMessage]]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert messages_to_dict(x) == messages_to_dict(y)


@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
def test_a_call_below_t_sends_the_users_own_messages_and_converts_nothing(
    run_async: bool,
) -> None:
    """Fresh objects on a thread new to the worker, below T: the model gets the very
    request objects (no copy, no conversion) and the middleware returns its response."""
    mw, events = _middleware()
    history = _fresh([*_turns(30), HumanMessage("and now?", id="last")])
    rec = Recorder()
    result = _call(mw, history, rec, run_async=run_async)
    assert result is rec.reply and events == []
    (sent,) = rec.sent
    assert len(sent) == len(history) and all(a is b for a, b in zip(sent, history, strict=True))
    (session,) = mw.sessions.by_key.values()
    assert session.converter.converted == 0 and session.passthrough.measured == len(history)


@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
def test_what_is_sent_equals_what_the_engine_sends(
    engine_only: Callable[[], None], run_async: bool
) -> None:
    """Histories of every kind, below and above T: the requests, events and results are
    those of the engine alone (the shortcut takes what it can prove, the engine the rest)."""
    base = _turns(10)
    dangling = AIMessage("", id="ax", tool_calls=[tool_call("echo", {"text": "y"}, "cx")])
    orphan = ToolMessage("stray", tool_call_id="ghost", id="t-orphan")
    blocks = AIMessage([{"type": "text", "text": "thinking " * 30}], id="blocks")
    chat = ChatMessage("from a chat role " * 20, role="user", id="chat")
    marked = HumanMessage("S", id="sum", response_metadata={"ars": {"ars_summary": True}})
    histories = [
        base,
        [*base, dangling],  # a call without a result ends the history: a note after it
        [*base, dangling, ToolMessage("y", tool_call_id="cx", id="tx")],
        [*base[:4], orphan, *base[4:]],  # an orphan result: left out by the engine
        [*base[:3], dangling, *base[3:]],  # an unanswered call in the middle
        [*base, blocks, chat, HumanMessage("next", id="n")],
        [marked, *base],
        [*base, HumanMessage("huge " * 40_000, id="huge")],  # above T: a round
    ]
    shortcut, engine = _both(engine_only, histories, run_async=run_async, threshold=8)
    _same_requests(shortcut[0], engine[0])
    assert shortcut[1] == engine[1] and ("completed", "L1") in engine[1]
    assert shortcut[3] == engine[3] is None


def test_a_call_without_a_result_is_answered_with_the_engines_note_named_once(
    engine_only: Callable[[], None], caplog: pytest.LogCaptureFixture
) -> None:
    """The history ends with a call whose result never came: the request is the history
    plus the engine's note answering it, and the warning names the call once per history."""
    dangling = AIMessage("", id="ax", tool_calls=[tool_call("echo", {"text": "y"}, "cx")])
    history = [*_turns(5), dangling]
    with caplog.at_level(logging.WARNING, logger="ars"):
        shortcut, engine = _both(engine_only, [history, history])
    _same_requests(shortcut[0], engine[0])
    note = shortcut[0][0][-1]
    assert isinstance(note, ToolMessage) and note.tool_call_id == "cx"
    warnings = [r.getMessage() for r in caplog.records if "answered with a note" in r.message]
    # once per history (a reload of the same thread is the same history), as the engine
    assert len(warnings) == 2 and all("(cx)" in w for w in warnings)


def test_a_growing_thread_measures_only_what_was_appended() -> None:
    """The same objects with messages appended: each call measures the new ones; an edit
    in a middle message (a new object) is measured again from the start, and seen."""
    mw, _ = _middleware()
    rec = Recorder()
    history = _turns(20)
    for k in range(5):
        history = [*history, HumanMessage(f"more {k}", id=f"m{k}")]
        _call(mw, history, rec)
    (session,) = mw.sessions.by_key.values()
    assert session.passthrough.measured == 60 + 5
    edited = list(history)
    edited[10] = AIMessage("an edited answer", id=edited[10].id)  # its call is gone
    _call(mw, edited, rec)
    assert session.passthrough.measured == 60 + 5 + len(edited)
    # the edit left the call's result without its call: the engine left it out
    assert rec.sent[-1][10].content == "an edited answer" and len(rec.sent[-1]) == 64
    assert session.converter.converted == len(edited)


def test_an_edit_in_a_middle_message_that_reaches_t_runs_a_round(
    engine_only: Callable[[], None],
) -> None:
    """Warm calls below T, then a middle message replaced by a large one: the request
    reaches T and the round runs, as the engine alone runs it."""
    history = _turns(20)
    grown = [*history, HumanMessage("go on", id="go")]
    edited = list(grown)
    edited[6] = HumanMessage("question 2 " + "word " * 20_000, id=edited[6].id)
    shortcut, engine = _both(engine_only, [history, grown, edited], threshold=8)
    _same_requests(shortcut[0], engine[0])
    assert shortcut[1] == engine[1] == [("started", "L1"), ("completed", "L1")]
    assert len(shortcut[0]) == 3 and "word " * 20_000 not in shortcut[0][-1][6].text


@pytest.mark.spec("R4")
@pytest.mark.parametrize("run_async", [False, True], ids=["sync", "async"])
def test_an_overflow_of_a_call_sent_as_it_came_takes_the_forced_path(
    engine_only: Callable[[], None], run_async: bool
) -> None:
    """The model rejects the request sent as it came: the engine takes the forced path
    from that answer (the model is not asked the same request twice)."""
    history = _turns(20)

    def overflowing() -> Recorder:
        return Recorder(errors=[ContextOverflowError("prompt is too long")])

    shortcut, engine = _both(engine_only, [history], run_async=run_async, handler=overflowing)
    _same_requests(shortcut[0], engine[0])
    assert len(shortcut[0]) == 2 and len(shortcut[0][0]) == len(history)
    assert shortcut[1] == engine[1] and shortcut[1][-1] == ("completed", "L2")


@pytest.mark.spec("R3")
def test_usage_is_recorded_against_the_engines_estimate(engine_only: Callable[[], None]) -> None:
    """A response reporting usage: the record holds the engine's estimate of the request
    and its length, the same as through the engine alone."""

    shortcut, engine = _both(
        engine_only, [_turns(10), _turns(12)], handler=lambda: Recorder(usage=True)
    )
    _same_requests(shortcut[0], engine[0])
    assert shortcut[3] == engine[3]
    assert shortcut[3]["view_messages"] == 36 and shortcut[3]["usage_metadata"] == USAGE


def test_other_errors_propagate_unchanged(engine_only: Callable[[], None]) -> None:
    mw, events = _middleware()
    rec = Recorder(errors=[ValueError("boom")])
    with pytest.raises(ValueError, match="boom"):
        _call(mw, _turns(5), rec)
    assert len(rec.sent) == 1 and events == []


def test_much_new_text_is_measured_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """An async call with more new text than the loop measures: the measuring runs in a
    worker thread, and the request still goes out as it came."""
    threads: list[str] = []
    real = passthrough._read

    def spy(*args: Any) -> int:
        threads.append(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(passthrough, "_read", spy)
    mw, _ = _middleware()
    history = [*_turns(5), HumanMessage("log " * 60_000, id="big")]
    rec = Recorder()
    _call(mw, history, rec, run_async=True)
    assert rec.sent[0] == history and threads[-1] != threading.main_thread().name
    assert len(threads) == 2  # aborted on the loop, measured whole in the worker


def test_the_notes_answering_calls_count_toward_t() -> None:
    """The engine counts the notes a view gets toward T: so does the bound that lets a
    call skip it (a history just below T with a note is not sent as it came)."""
    compressor = Compressor(SummaryConfig(summary_threshold=1))  # T = 1,024
    note = synthetic_result(ToolCall(id="c1", name="echo", args={}))
    assert fits_by_bound(compressor, 1023, None, None)
    assert not fits_by_bound(compressor, 1023, None, None, [note])
    assert not fits_by_bound(compressor, 1024, None, None)


@pytest.mark.spec("R1", "R2")
def test_a_history_above_t_is_measured_no_further_than_t(
    engine_only: Callable[[], None],
) -> None:
    """A history whose first messages' bound already reaches T: the shortcut stops
    there (the rest is not read; what was read is remembered, so a longer call on the
    same first messages reads none of them again) and the engine decides, as it does
    alone."""
    big = HumanMessage("question 0 " + "word " * 20_000, id="big")
    history = [big, *_turns(30)]
    grown = [*history, HumanMessage("go on", id="go")]
    mw, _ = _middleware(threshold=8)
    rec = Recorder()
    for h in (history, grown):
        _call(mw, h, rec)
    (session,) = mw.sessions.by_key.values()
    assert session.passthrough.measured == 1  # the first message alone, at the first call
    shortcut, engine = _both(engine_only, [history, grown], threshold=8)
    _same_requests(shortcut[0], engine[0])
    assert shortcut[1] == engine[1] and [p for p, _ in shortcut[1]] == ["started", "completed"] * 2


@pytest.mark.spec("R1", "R2")
def test_a_longer_call_resumes_after_the_part_above_t_it_read() -> None:
    """What a measure stopped at T read is remembered: a longer call on the same first
    messages reads only the messages past it, and comes to what a fresh measure of its
    whole history comes to (the bound and the calls to answer), whatever its reach."""
    from ars_core.adapter import utf8_bound

    estimator = Compressor(SummaryConfig(summary_threshold=1)).estimator
    counter = utf8_bound(estimator)
    assert counter is not None
    history = _turns(12)
    last = AIMessage("", id="a-last", tool_calls=[tool_call("echo", {"text": "y"}, "c-last")])
    grown = [*history, HumanMessage("go on", id="go"), last]  # a call without its result
    whole = passthrough.Passthrough().measure(grown, counter, estimator)
    assert whole is not None and [c.id for c in whole[1]] == ["c-last"]
    shared = passthrough.Passthrough()
    assert shared.measure(history, counter, estimator, stop_at=whole[0] // 2) is None
    first = shared.measured
    assert 0 < first < len(history)  # stopped at T's worth of the history
    assert shared.measure(grown, counter, estimator, stop_at=whole[0] // 3) is None
    assert shared.measured == first  # below the reach it stopped at: nothing read again
    resumed = shared.measure(grown, counter, estimator, stop_at=whole[0] + 1)
    assert resumed is not None and resumed[0] == whole[0]
    assert [c.id for c in resumed[1]] == ["c-last"]
    assert shared.measured == len(grown)  # each message read once
