"""A thread resumed with fresh message objects is sized from its answers' known sizes.

A real LangChain v1 agent (``create_agent``, the ARS middleware, an InMemorySaver or a
SQLite checkpointer) grows a thread into the zone where its UTF-8 bound is above T
but its exact count is below it (every call there counts the history). A new
middleware (a new process: nothing cached) resumes the thread: it sends exactly the
request that counting the whole history sends, and encodes only the messages
appended since the newest stamped answer. Edited state (messages removed, a message
rewritten under its id) makes the stamp stale: ignored, the history counted whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage

import ars_core.known_size
import ars_langchain.middleware
from ars_core import Compressor, SummaryConfig
from ars_core.known_size import MARK_KNOWN_SIZE
from ars_core.testing import RecordingTiktoken
from ars_langchain import ArsSummarizationMiddleware
from ars_langchain.convert import MARKERS_KEY
from ars_langchain.testing import FakeToolChatModel
from tests.langchain.conftest import make_saver
from tests.langchain.helpers import build_agent, prose

pytestmark = pytest.mark.spec("R1", "R3")

CONFIG = SummaryConfig(summary_threshold=4, summary_keep_messages=4)
TURNS = 14  # ~2.6K of T's ~4K tokens, ~14 KB of text: the zone


def answer(i: int, usage: bool = False) -> AIMessage:
    reported = {"input_tokens": 1000, "output_tokens": 100, "total_tokens": 1100}
    return AIMessage(
        prose(f"answer {i}", 100), id=f"a-{i}", usage_metadata=reported if usage else None
    )


def question(i: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(prose(f"question {i}", 30), id=f"h-{i}")]}


def agent(
    saver: Any, replies: int, start: int = 0, usage: list[Any] | None = None
) -> tuple[Any, FakeToolChatModel, Any]:
    """A new agent (a new middleware and estimator: a new process) on ``saver``; its
    model reports usage when ``usage`` is given (the records go there)."""
    reports = usage is not None
    model = FakeToolChatModel([answer(start + i, reports) for i in range(replies)])
    est = RecordingTiktoken()
    record = usage.append if usage is not None else None
    mw = ArsSummarizationMiddleware(CONFIG, estimator=est, read_tool=False, on_model_usage=record)
    return build_agent(model, mw, tools=[])(saver), model, est


def grow(saver: Any, thread: str) -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread}}
    built, _, _ = agent(saver, TURNS)
    for i in range(TURNS):
        built.invoke(question(i), config)
    return config


def resumed(saver: Any, config: dict[str, Any], ignore: bool, monkeypatch: Any) -> Any:
    """The next turn by a new agent: the request its model got, the texts it encoded,
    the history it resumed."""
    built, model, est = agent(saver, 1, start=TURNS)
    history = built.get_state(config).values["messages"]
    with monkeypatch.context() as m:
        engine_calls = patched(m, ignore)
        built.invoke(question(TURNS), config)
    return model.main_calls[-1], est.texts, history, len(engine_calls)


def patched(m: pytest.MonkeyPatch, ignore: bool) -> list[int]:
    """The engine's calls, counted; with ``ignore``, the middleware and the engine as
    they were: every stamp ignored."""
    if ignore:
        m.setattr(ars_core.known_size, "known_history", lambda size, *args: size)
        m.setattr(ars_langchain.middleware, "known_sendable", lambda *args: None)
    calls: list[int] = []
    engine_call = Compressor.call

    def counted(self: Compressor, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return engine_call(self, *args, **kwargs)

    m.setattr(Compressor, "call", counted)
    return calls


def stamp(message: Any) -> Any:
    return (message.response_metadata.get(MARKERS_KEY) or {}).get(MARK_KNOWN_SIZE)


def as_sent(messages: list[Any]) -> list[tuple[str, Any, Any]]:
    return [(m.type, m.id, m.content) for m in messages]


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_resumed_thread_counts_only_what_follows_its_newest_stamp(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    with make_saver(kind, tmp_path, request) as saver:
        stamped, plain = grow(saver, "stamped"), grow(saver, "plain")
        sent, texts, history, engine = resumed(saver, stamped, False, monkeypatch)
        counted, all_texts, _, engine_before = resumed(saver, plain, True, monkeypatch)
        after = agent(saver, 0)[0].get_state(stamped).values["messages"]
    assert stamp(history[-1]) is not None  # the last answer was stamped, and kept
    # decided without the engine (the engine takes the call without stamps)
    assert (engine, engine_before) == (0, 1)
    assert stamp(after[-1])["covers"] == len(sent) - 1  # its answer stamped in turn
    assert as_sent(sent) == as_sent(counted)  # the same request, the history whole (R1)
    assert len(sent) == 2 * TURNS + 2  # the system message, the history, the question
    contents = {m.content for m in history}
    assert contents <= set(all_texts)  # without the stamp: every message encoded
    # with it: the stamped answer (after the prefix it covers) and the new question
    assert [t for t in texts if t in contents] == [history[-1].content]
    assert question(TURNS)["messages"][0].content in texts


def edits(kind: str, history: list[Any]) -> list[Any]:
    if kind == "remove_one":
        return [RemoveMessage(id=history[2].id)]
    if kind == "remove_many":
        return [RemoveMessage(id=m.id) for m in history[:6]]
    if kind == "remove_all":
        return [RemoveMessage(id=m.id) for m in history]
    # the same id, another text: the add_messages reducer replaces it in place
    return [AIMessage(history[3].content + " (edited)", id=history[3].id)]


@pytest.mark.parametrize("edit", ["remove_one", "remove_many", "remove_all", "rewrite"])
def test_a_stamp_of_edited_state_is_ignored(
    edit: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    with make_saver("memory", tmp_path, request) as saver:
        configs = grow(saver, "stamped"), grow(saver, "plain")
        for config in configs:
            built, _, _ = agent(saver, 0)
            history = built.get_state(config).values["messages"]
            built.update_state(config, {"messages": edits(edit, history)})
        kept = built.get_state(configs[0]).values["messages"]
        sent, texts, _, _ = resumed(saver, configs[0], False, monkeypatch)
        counted, all_texts, _, _ = resumed(saver, configs[1], True, monkeypatch)
    assert as_sent(sent) == as_sent(counted)
    if edit == "remove_all":
        assert len(sent) == 2  # the system message and the new question
        return
    assert any(stamp(m) is not None for m in kept)  # stamps remain, stale
    # the history is above T by its bound: counted whole, as without stamps
    assert {m.content for m in kept} <= set(texts)
    assert texts == all_texts


def test_an_agent_in_the_zone_decides_each_call_from_the_last_one(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One agent (one process) growing a thread through the zone: only the first call
    whose bound reaches T goes through the engine (the history counted whole); every
    later call is decided from the last one's count and the messages appended, each
    message encoded once, and the requests are those of the engine ignoring stamps."""
    turns = TURNS + 6
    sent = []
    for ignore in (False, True):
        with make_saver("memory", tmp_path, request) as saver, monkeypatch.context() as m:
            engine_calls = patched(m, ignore)
            built, model, est = agent(saver, turns)
            config = {"configurable": {"thread_id": "zone"}}
            for i in range(turns):
                built.invoke(question(i), config)
        sent.append([as_sent(c) for c in model.main_calls])
        if not ignore:
            contents = [t for t in est.texts if t.startswith(("question", "answer"))]
            assert len(contents) == len(set(contents)) == 2 * turns - 1
            assert len(engine_calls) == 1
    assert sent[0] == sent[1]


def test_a_reported_usage_is_recorded_against_the_known_estimate(
    tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model reporting usage: the resumed thread's call is still decided without the
    engine, and its usage is recorded against the estimate the engine (ignoring stamps)
    records for the same request; the answer carries both stamps."""
    seen = []
    with make_saver("memory", tmp_path, request) as saver:
        for ignore, thread in ((False, "stamped"), (True, "plain")):
            config = {"configurable": {"thread_id": thread}}
            built, _, _ = agent(saver, TURNS, usage=[])
            for i in range(TURNS):
                built.invoke(question(i), config)
            records: list[Any] = []
            built, model, _ = agent(saver, 1, start=TURNS, usage=records)
            with monkeypatch.context() as m:
                engine_calls = patched(m, ignore)
                built.invoke(question(TURNS), config)
            last = built.get_state(config).values["messages"][-1]
            seen.append((as_sent(model.main_calls[-1]), records, len(engine_calls), last))
    (sent, records, engine, last), (counted, expected, engine_before, _) = seen
    assert sent == counted and (engine, engine_before) == (0, 1)
    assert [r["estimated_tokens"] for r in records] == [r["estimated_tokens"] for r in expected]
    assert [r["view_messages"] for r in records] == [r["view_messages"] for r in expected]
    markers = last.response_metadata[MARKERS_KEY]
    assert markers[MARK_KNOWN_SIZE]["covers"] == len(sent) - 1 and "ars_provider_count" in markers
