"""On-demand compaction in the core: ``Compressor.compact_now`` and a model
call with ``requested=True`` run an L2 round whatever the size, with the
events of an automatic round (marked requested); with nothing to summarize
they change nothing and say so."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from ars_core import Compaction, Compressor, describe_event, message_to_dict, read_history
from ars_core.testing import FakeSummarizer, RecordingEmitter, ScriptedModel

from .helpers import assistant, memory_backend, small_config, user

MODES = pytest.mark.parametrize("mode", ["sync", "async"])


def conversation() -> list[Any]:
    """Eight short messages: far below T (1,024 tokens)."""
    out = []
    for i in range(4):
        out += [user(f"question {i}"), assistant(f"answer {i}")]
    return out


def compact_now(mode: str, engine: Compressor, state: list[Any], **kw: Any) -> Compaction:
    if mode == "sync":
        return engine.compact_now(state, **kw)
    return anyio.run(lambda: engine.acompact_now(state, **kw))


@pytest.mark.spec("R21", "R23", "R24", "R30", "R31")
@MODES
def test_compact_now_summarizes_below_the_threshold(mode: str) -> None:
    """keep=4: the first four messages are archived exactly and summarized; the
    view is the summary and the four latest; the events are marked requested."""
    state = conversation()
    before = [message_to_dict(m) for m in state]
    backend, emitter = memory_backend(), RecordingEmitter()
    engine = Compressor(small_config(), backend=backend, summarizer=FakeSummarizer("S-NOW"))
    result = compact_now(mode, engine, state, emitter=emitter, thread="t1")

    assert result.compacted and result.event is not None
    assert result.event.cutoff == 4
    assert list(result.view) == [result.event.summary_message, *state[4:]]
    assert "S-NOW" in result.event.summary_message.text
    assert result.update is not None and result.update.replaced == ()
    _, archived = read_history(backend.read_text(result.event.file_path or ""))
    assert [message_to_dict(m) for m in archived] == before[:4]
    assert [message_to_dict(m) for m in state] == before  # the state is never touched
    assert [(e.phase, e.level, e.requested, e.forced) for e in emitter.events] == [
        ("started", "L1", True, False),
        ("completed", "L2", True, False),
    ]
    assert describe_event(emitter.events[0]).startswith("started L1 (requested): ")
    assert emitter.events[1].to_dict()["requested"] is True
    tokens = f"({result.outcome.tokens_before:,} -> {result.outcome.tokens_after:,} tokens)"
    assert result.message == (
        f"Conversation compacted: messages 1-4 summarized {tokens}, history archived to "
        f"{result.event.file_path}."
    )


@pytest.mark.spec("R1", "R21")
@MODES
def test_compact_now_with_nothing_to_summarize_is_a_no_op(mode: str) -> None:
    """As many messages as ``summary_keep_messages`` (and, after a summary, only
    the kept ones): no round, no event, no file; the result says why."""
    state = conversation()[:4]
    backend, emitter = memory_backend(), RecordingEmitter()
    engine = Compressor(small_config(), backend=backend, summarizer=FakeSummarizer())
    result = compact_now(mode, engine, state, emitter=emitter)
    assert not result.compacted and result.event is None and result.update is None
    assert result.message == Compaction.nothing_to_compact(4)
    assert list(result.view) == state and emitter.events == []

    full = conversation()
    first = compact_now(mode, engine, full)
    again = compact_now(mode, engine, full, event=first.event, emitter=emitter)
    assert not again.compacted and list(again.view) == list(first.view)
    assert emitter.events == []


@pytest.mark.spec("R21", "R24", "R31")
def test_a_requested_model_call_sends_the_summary_at_once() -> None:
    """``call(requested=True)`` below T: the model's one request is already the
    summary and the kept messages; the update carries the event."""
    state = conversation()
    model = ScriptedModel(["ok"])
    engine = Compressor(small_config(), summarizer=FakeSummarizer("S-REQ"))
    outcome = engine.call(state, model, requested=True)
    (view,) = model.calls
    assert outcome.update is not None and outcome.update.event is not None
    assert view == [outcome.update.event.summary_message, *state[4:]]
    assert outcome.level == "L2" and outcome.response == "ok"
    plain = ScriptedModel(["ok"])
    assert engine.call(state, plain).update is None and plain.calls == [state]
