"""Every view ARS sends pairs each tool call with its result (R62): orphan
results are left out, unanswered calls get a synthetic result, in the view
only; the round's event counts both."""

from __future__ import annotations

import re
from typing import Any

import anyio
import pytest

from ars_core import CallOutcome, Compressor, Message, ToolCall, describe_event
from ars_core.pairing import MARK_SYNTHETIC_RESULT, pair_tool_calls
from ars_core.testing import FakeSummarizer, RecordingEmitter, ScriptedModel

from .helpers import assistant, call, memory_backend, small_config, tool, user, words

pytestmark = pytest.mark.spec("R62")

MODES = pytest.mark.parametrize("mode", ["sync", "async"])


def _call(mode: str, engine: Compressor, state: list[Message], model: ScriptedModel) -> CallOutcome:
    if mode == "sync":
        return engine.call(state, model)

    async def run() -> CallOutcome:
        return await engine.acall(state, model.acall)

    return anyio.run(run)


def _engine(**config: Any) -> tuple[Compressor, RecordingEmitter]:
    emitter = RecordingEmitter()
    engine = Compressor(
        small_config(**config),
        backend=memory_backend(),
        summarizer=FakeSummarizer("S"),
        emitter=emitter,
    )
    return engine, emitter


@MODES
def test_below_the_threshold_the_view_is_paired_and_state_untouched(mode: str) -> None:
    """An orphan result (its call removed) is left out; a call without a result is
    answered right after its message; the state list is not changed."""
    c_lost, c_open = call("grep", "call-lost"), call("build", "call-open")
    orphan = tool(c_lost, "stray result")
    state = [user("task"), orphan, assistant("", c_open), user("still there?")]
    before = list(state)
    engine, emitter = _engine(summary_threshold=50)
    model = ScriptedModel(["ok"])
    outcome = _call(mode, engine, state, model)
    sent = model.calls[-1]
    assert sent[:2] == [state[0], state[2]]
    note = sent[2]
    assert (note.role, note.tool_call_id, note.name) == ("tool", "call-open", "build")
    assert note.metadata[MARK_SYNTHETIC_RESULT] is True
    assert "no result was recorded for this build call" in note.text
    assert sent[3:] == [state[3]]
    assert list(outcome.view) == sent
    assert state == before and outcome.update is None
    assert emitter.events == []  # no round ran: the warning says it


@MODES
def test_a_round_counts_what_it_repaired_in_its_event(mode: str) -> None:
    """An L1 round over a view holding an orphan result and an unanswered call:
    the view is paired and ``completed`` counts both (and describes them)."""
    c_lost, c_open = call("grep", "call-lost"), call("build", "call-open")
    c_ok = call("cat", "call-ok")
    state = [
        user("task"),
        tool(c_lost, "stray"),
        assistant("", c_ok, c_open),
        tool(c_ok, words(1500, "big")),  # above T, offloaded by L1: a round runs
        user("and?"),
    ]
    engine, emitter = _engine()
    model = ScriptedModel(["ok"])
    outcome = _call(mode, engine, state, model)
    sent = model.calls[-1]
    assert [(m.role, m.tool_call_id) for m in sent] == [
        ("user", None),
        ("assistant", None),
        ("tool", "call-ok"),
        ("tool", "call-open"),
        ("user", None),
    ]
    assert outcome.level == "L1"
    completed = emitter.events[-1]
    assert (completed.phase, completed.orphan_results, completed.unanswered_calls) == (
        "completed",
        1,
        1,
    )
    assert completed.to_dict()["orphan_results"] == 1
    text = describe_event(completed)
    assert "1 tool result without a call left out" in text
    assert "1 tool call without a result answered with a note" in text


def test_results_must_answer_the_message_heading_their_block() -> None:
    """A result separated from its call by another message, or answering a call a
    second time, is an orphan; a summary first is not a message to pair."""
    a, b = call("one", "c-a"), call("two", "c-b")
    summary = Message(role="user", content="S", metadata={"ars_summary": True})
    first = assistant("", a)
    view = [
        summary,
        first,
        tool(a, "A"),
        tool(a, "A again"),
        user("between"),
        tool(b, "late"),
        assistant("", b),
        tool(b, "B"),
    ]
    paired = pair_tool_calls(view)
    assert paired.view == [summary, first, view[2], view[4], view[6], view[7]]
    assert paired.orphans == ("c-a", "c-b") and paired.unanswered == ()


def test_a_paired_view_comes_back_as_it_is() -> None:
    a = call("one", "c-a")
    view = [user("q"), assistant("", a), tool(a, "A"), assistant("done")]
    paired = pair_tool_calls(view)
    assert paired.view is view and not paired.changed
    grown = [*view, user("next"), assistant("", ToolCall(id="c-b", name="two", args={}))]
    again = pair_tool_calls(grown)  # read again from where the last view ended
    assert again.unanswered == ("c-b",) and again.view[-1].tool_call_id == "c-b"


def _messy_history() -> list[Message]:
    """Blocks of every kind: answered calls, a call left unanswered mid-history, an
    orphan result, a duplicate answer, a call whose results arrive one at a time."""
    out: list[Message] = [user("task")]
    for k in range(6):
        a, b = call("grep", f"a{k}"), call("build", f"b{k}")
        out.append(assistant("", a, b))
        out.append(tool(a, f"grep {k}"))
        if k % 3 != 1:  # every third block leaves b unanswered
            out.append(tool(b, f"build {k}"))
        if k == 2:
            out.append(tool(a, "a second answer to the same call"))
        if k == 4:
            out.append(tool(call("lost", "gone"), "a result whose call was removed"))
        out.append(user(f"next {k}"))
    return out


def test_a_growing_history_is_paired_exactly_as_a_fresh_read_would_pair_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The check remembers what a history's earlier blocks hold and reads only the
    last block and the appended messages: at every length (results arriving one at a
    time included), after an edit in the middle and on a shorter history, its view
    and counts equal those of an engine that never saw the history; each problem is
    named in one warning, not on every call."""
    from ars_core import memo

    history = _messy_history()
    shared = memo.Memo()
    caplog.set_level("WARNING", logger="ars")
    growth: list[str] = []  # the warnings of the remembering engine while the history grows
    lengths = [*range(1, len(history) + 1), 9, len(history)]
    for k, n in enumerate(lengths):
        view = history[:n]
        caplog.clear()
        with memo.active(shared):
            got = pair_tool_calls(view)
        if k < len(history):
            growth += [r.getMessage() for r in caplog.records]
        with memo.active(memo.Memo()):
            want = pair_tool_calls(list(view))
        assert got.view == want.view, n
        assert (got.orphans, got.unanswered) == (want.orphans, want.unanswered), n
    assert got.unanswered == ("b1", "b4") and got.orphans == ("a2", "gone")
    named = []  # (kind, id) of every problem a warning named
    for line in growth:
        orphans = re.findall(r"left out of the view \(([^()]*)\)", line)[0]
        calls = re.findall(r"request only \(([^()]*)\)", line)[0]
        named += [("orphan", i) for i in orphans.split(", ") if i != "-"]
        named += [("call", i) for i in calls.split(", ") if i != "-"]
    assert {("orphan", "a2"), ("orphan", "gone"), ("call", "b1"), ("call", "b4")} <= set(named)
    assert sorted(named) == sorted(set(named))  # each problem named once, not per call

    edited = list(history)
    edited[2] = tool(call("grep", "a0"), "grep 0, edited")  # a new object mid-history
    with memo.active(shared):
        got = pair_tool_calls(edited)
    with memo.active(memo.Memo()):
        want = pair_tool_calls(list(edited))
    assert got.view == want.view and got.view[2].text == "grep 0, edited"
    assert (got.orphans, got.unanswered) == (want.orphans, want.unanswered)


@MODES
def test_the_note_for_a_call_without_a_result_counts_toward_the_threshold(mode: str) -> None:
    """A history a few tokens under T whose run was killed while a tool ran: the note
    standing in for the missing result is part of the request, so the call compresses
    instead of sending a request over T (a fleet soak found views of T + 56 tokens)."""
    engine, emitter = _engine()
    threshold = engine.config.threshold_tokens
    est = engine.estimator
    c_open = call("fetch_report", "call-killed")

    def history(n: int) -> list[Message]:
        turns: list[Message] = []
        for i in range(6):
            turns += [user(f"turn {i}: " + words(60, f"q{i}")), assistant(words(60, f"a{i}"))]
        return [*turns, user("next: " + words(n, "z")), assistant("", c_open), user("go on")]

    n = 1
    while est.count_messages(history(n + 1)) < threshold - 8:
        n += 1
    state = history(n)
    note = pair_tool_calls(state).added
    assert len(note) == 1
    assert (
        est.count_messages(state)
        < threshold
        < est.count_messages(state) + est.count_messages(list(note))
    )
    model = ScriptedModel(["ok"])
    outcome = _call(mode, engine, state, model)
    sent = model.calls[-1]
    assert est.count_messages(sent) <= threshold
    assert outcome.level is not None and emitter.events[0].phase == "started"
    assert any(m.metadata.get(MARK_SYNTHETIC_RESULT) for m in sent)  # still answered
    assert emitter.events[-1].unanswered_calls == 1


@MODES
def test_a_summary_round_names_an_unanswered_call_once(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The history is paired, then the round's view after its summary: the call
    without a result is answered in the view and counted in ``completed``, and the
    warning names it once, not once per list paired; the next call names it no more."""
    caplog.set_level("WARNING", logger="ars")
    state = [user("task " + words(50))]
    for i in range(12):
        c = call("read_file", f"call-{i}")
        state += [assistant("", c), tool(c, words(200, f"t{i}"))]
    state += [assistant("", call("build", "call-open")), user("why?")]
    engine, emitter = _engine(summary_threshold=1, summary_keep_messages=4)
    model = ScriptedModel(["ok"])
    outcome = _call(mode, engine, state, model)
    assert outcome.level == "L2"
    sent = model.calls[-1]
    assert [(m.role, m.tool_call_id) for m in sent[-3:]] == [
        ("assistant", None),
        ("tool", "call-open"),
        ("user", None),
    ]
    assert emitter.events[-1].unanswered_calls == 1
    warnings = [r.getMessage() for r in caplog.records if "answered with a note" in r.getMessage()]
    assert len(warnings) == 1 and "(call-open)" in warnings[0]
    caplog.clear()
    _call(mode, engine, [*state, assistant("ok"), user("and now?")], model)
    assert [r for r in caplog.records if "answered with a note" in r.getMessage()] == []
