"""Views that prompt caches can reuse.

A message, once sent to the model in a form, is sent in that form until an L2
round replaces the prefix: every request starts with the previous request's
messages byte for byte, except on a call where compression must change the
prefix (an L2 round, or the first call at or above T after a stretch below it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ars_core import (
    Compressor,
    FsspecBackend,
    Message,
    SummarizationEvent,
    ToolCall,
    message_to_dict,
    read_history,
)
from ars_core.engine import CallOutcome
from ars_core.testing import FakeSummarizer, ScriptedModel, capture_events

from .helpers import memory_backend, small_config


def _bytes(view: Sequence[Message]) -> list[str]:
    return [json.dumps(message_to_dict(m), sort_keys=True) for m in view]


@st.composite
def turns(draw: st.DrawFn) -> list[list[Message]]:
    """Agent turns, each a user message or a tool call with its result; tool
    results are sometimes large enough for L1 to offload them."""
    out: list[list[Message]] = []
    for t in range(draw(st.integers(5, 40))):
        if draw(st.booleans()):
            size = draw(st.integers(1, 60))
            out.append([Message(role="user", content=f"u{t} " + "ask " * size, id=f"u{t}")])
            continue
        size = draw(st.sampled_from([5, 40, 150, 400]))
        call = ToolCall(id=f"c{t}", name="bash", args={"command": f"cat f{t}"})
        out.append(
            [
                Message(role="assistant", content="", tool_calls=(call,), id=f"a{t}"),
                Message(
                    role="tool",
                    content=f"r{t} " + "line of output " * size,
                    tool_call_id=call.id,
                    name="bash",
                    id=f"t{t}",
                ),
            ]
        )
    return out


def _replay(
    compressor: Compressor, backend: FsspecBackend, conversation: list[list[Message]]
) -> list[tuple[list[str], str | None, bool]]:
    """Every request sent: (its messages as bytes, the level, whether the
    call was at or above T)."""
    state: list[Message] = []
    event: SummarizationEvent | None = None
    sent: list[tuple[list[str], str | None, bool]] = []
    for turn in conversation:
        state.extend(turn)
        model = ScriptedModel()
        outcome = compressor.call(
            state, model, event=event, summarizer=FakeSummarizer(), backend=backend
        )
        above = outcome.level is not None
        sent.append((_bytes(model.calls[-1]), outcome.level, above))
        if outcome.update is not None and outcome.update.event is not None:
            event = outcome.update.event
            # the archive stays lossless: raw state messages, never their sent forms
            assert event.file_path is not None
            _, archived = read_history(backend.read_text(event.file_path))
            assert _bytes(archived) == _bytes(state[event.previous_cutoff : event.cutoff])
    return sent


def _prefix_breaks(sent: list[tuple[list[str], str | None, bool]]) -> list[int]:
    breaks = []
    for i in range(1, len(sent)):
        previous, _, previous_above = sent[i - 1]
        view, level, above = sent[i]
        allowed = level == "L2" or (above and not previous_above)
        if view[: len(previous)] != previous and not allowed:
            breaks.append(i)
    return breaks


@pytest.mark.spec("R14", "R24")
@given(conversation=turns())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_request_starts_with_the_previous_one(conversation: list[list[Message]]) -> None:
    """Outside an L2 round and the first call at or above T after a stretch
    below it, a request's messages begin with the previous request's messages,
    byte for byte: offloaded tool results stay offloaded after an L2 round."""
    sent = _replay(Compressor(config=small_config()), memory_backend(), conversation)
    assert _prefix_breaks(sent) == []


def _after_l2_round(
    stable_views: bool, edit: dict[str, Message] | None = None
) -> tuple[list[Message], list[Message], Compressor]:
    """An L2 round whose kept window holds a large tool result, then one more
    call below T (after replacing the messages in ``edit`` by id); the two
    requests."""
    # FakeSummarizer's summary is tiny: a small bound leaves the kept window its tool result
    compressor = Compressor(config=small_config(summary_max_tokens=64), stable_views=stable_views)
    backend = memory_backend()
    call = ToolCall(id="c-big", name="bash", args={"command": "make"})
    state = [
        Message(role="user", content="build it " + "please " * 300, id="u0"),
        Message(role="assistant", content="on it " + "thinking " * 300, id="a0"),
        Message(role="user", content="and test it " + "now " * 200, id="u1"),
        Message(role="assistant", content="", tool_calls=(call,), id="a1"),
        Message(role="tool", content="log " * 600, tool_call_id="c-big", name="bash", id="t1"),
        Message(role="assistant", content="done", id="a2"),
        Message(role="user", content="thanks", id="u2"),
    ]
    first = ScriptedModel()
    outcome = compressor.call(state, first, summarizer=FakeSummarizer(), backend=backend)
    assert outcome.level == "L2" and outcome.update is not None
    event = SummarizationEvent.from_dict(outcome.update.event.to_dict())  # as persisted
    state = [(edit or {}).get(m.id or "", m) for m in state]
    state.append(Message(role="assistant", content="you are welcome", id="a3"))
    second = ScriptedModel()
    after = compressor.call(
        state, second, event=event, summarizer=FakeSummarizer(), backend=backend
    )
    assert after.level is None  # below T: no compression round
    return first.calls[-1], second.calls[-1], compressor


@pytest.mark.spec("R14", "R24", "R44")
def test_kept_tool_result_stays_offloaded_after_the_l2_round() -> None:
    """The persisted event records the offloaded form of the kept tool result;
    the next request (below T) sends that form, not the raw 600-word log."""
    l2_view, next_view, _ = _after_l2_round(stable_views=True)
    kept = next(m for m in l2_view if m.id == "t1")
    assert kept.text.startswith("[ARS: tool result offloaded")
    assert _bytes(next_view[: len(l2_view)]) == _bytes(l2_view)
    assert next_view[-1].text == "you are welcome"


@pytest.mark.spec("R1", "R14")
def test_literal_rule_sends_raw_messages_below_t() -> None:
    """``stable_views=False``: below T every state message goes out unchanged,
    so the kept tool result is sent raw again after the L2 round."""
    l2_view, next_view, _ = _after_l2_round(stable_views=False)
    assert next(m for m in l2_view if m.id == "t1").text.startswith("[ARS: tool result")
    assert next(m for m in next_view if m.id == "t1").text == "log " * 600


@pytest.mark.spec("R51", "R14")
def test_a_kept_message_edited_by_id_goes_out_as_edited() -> None:
    """Replacing the kept (offloaded) tool result by id, as ``update_state``
    does, sends the new text: a recorded sent form never hides an edit."""
    redacted = Message(role="tool", content="REDACTED", tool_call_id="c-big", name="bash", id="t1")
    l2_view, next_view, _ = _after_l2_round(stable_views=True, edit={"t1": redacted})
    assert next(m for m in l2_view if m.id == "t1").text.startswith("[ARS: tool result")
    assert next(m for m in next_view if m.id == "t1").text == "REDACTED"


def _forced_trim_of_the_first_kept_message() -> tuple[Compressor, list[Message], CallOutcome]:
    config = small_config(summary_keep_messages=1, summary_tool_result_token_limit=100)
    state = []
    for i in range(4):  # no ids: OpenAI dicts and LlamaIndex messages have none
        state.append(Message(role="user", content=f"q{i} " + "word " * 60))
        state.append(Message(role="assistant", content=f"a{i} " + "reply " * 60))
    # below T (a user message above T would be offloaded by L1), above the forced capacity
    state.append(Message(role="user", content="final " + "long paste line " * 250))
    compressor = Compressor(config, estimator="approx")
    return compressor, state, compressor.compact(state, force=True, summarizer=FakeSummarizer())


@pytest.mark.spec("R43", "R51")
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_summary_whose_first_kept_message_was_trimmed_survives_the_next_call(
    mode: str,
) -> None:
    """A forced round persists the first kept message trimmed (an id-less
    history); the event is anchored to that trimmed form, so the next call keeps
    the summary instead of dropping it and sending the whole history again."""
    compressor, state, outcome = _forced_trim_of_the_first_kept_message()
    assert outcome.update is not None and outcome.update.event is not None
    event = outcome.update.event
    assert [i for i, _ in outcome.update.replaced] == [event.cutoff]
    for i, message in outcome.update.replaced:
        state[i] = message
    state.append(Message(role="assistant", content="ok"))
    with capture_events() as captured:
        if mode == "sync":
            after = compressor.compact(state, event=event, summarizer=FakeSummarizer())
        else:
            after = anyio.run(
                lambda: compressor.acompact(state, event=event, summarizer=FakeSummarizer())
            )
    assert captured.events == []
    assert after.view == [event.summary_message, *state[event.cutoff :]]
