"""Every view ARS sends pairs each tool call with its result (R62): orphan
results are left out, unanswered calls get a synthetic result, in the view
only; the round's event counts both."""

from __future__ import annotations

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
