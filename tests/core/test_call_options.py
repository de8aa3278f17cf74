"""One typed ``CallOptions`` for every engine entry point: the record gives the
same view, update and events as the keywords one by one, a keyword given
beside it wins, and a held round delivers to the record's emitter."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from ars_core import CallOptions, Compressor, message_to_dict
from ars_core.testing import FakeSummarizer, RecordingEmitter, ScriptedModel

from .helpers import assistant, memory_backend, small_config, user, words

MODES = pytest.mark.parametrize("mode", ["sync", "async"])


def history() -> list[Any]:
    out = []
    for i in range(6):
        out += [user(f"step {i}: {words(120, f's{i}')}"), assistant(words(120, f"a{i}"))]
    return out


def engine(summary: str) -> Compressor:
    return Compressor(small_config(), backend=memory_backend(), summarizer=FakeSummarizer(summary))


def _call(mode: str, eng: Compressor, state: list[Any], **kw: Any) -> Any:
    model = ScriptedModel(["done"])
    if mode == "sync":
        return eng.call(state, model, **kw)
    return anyio.run(lambda: eng.acall(state, model, **kw))


def _shape(outcome: Any) -> tuple[Any, ...]:
    update = outcome.update
    event = update.event if update is not None else None
    return (
        [message_to_dict(m) for m in outcome.view],
        event.cutoff if event is not None else None,
        [(e.phase, e.level, e.requested) for e in outcome.events],
    )


@pytest.mark.spec("R2", "R21", "R30")
@MODES
def test_call_options_match_the_keywords(mode: str) -> None:
    state = history()
    by_keywords, by_options = RecordingEmitter(), RecordingEmitter()
    kw = _call(mode, engine("S"), state, system="be brief", thread="t", emitter=by_keywords)
    options = CallOptions(system="be brief", thread="t", emitter=by_options)
    rec = _call(mode, engine("S"), state, options=options)

    assert kw.level == "L2" and _shape(rec) == _shape(kw)
    assert [e.phase for e in by_options.events] == ["started", "completed"]
    assert [e.to_dict()["tokens_before"] for e in by_options.events] == [
        e.to_dict()["tokens_before"] for e in by_keywords.events
    ]


@pytest.mark.spec("R21", "R30")
@MODES
def test_a_keyword_wins_over_the_record(mode: str) -> None:
    """``requested=True`` beside options that do not request: an L2 round below T;
    the keyword emitter gets the events, not the record's."""
    state = [user("question 0"), assistant("answer 0"), user("q1"), assistant("a1"), user("q2")]
    state += [assistant("a2"), user("q3"), assistant("a3")]
    record, given = RecordingEmitter(), RecordingEmitter()
    options = CallOptions(emitter=record, thread="t")
    out = _call(mode, engine("S-NOW"), state, options=options, requested=True, emitter=given)

    assert out.level == "L2" and out.update is not None and out.update.event is not None
    assert [(e.phase, e.requested) for e in given.events] == [
        ("started", True),
        ("completed", True),
    ]
    assert record.events == []


@pytest.mark.spec("R30", "R31")
@MODES
def test_a_held_round_delivers_to_the_records_emitter(mode: str) -> None:
    state = history()
    emitter = RecordingEmitter()
    eng, options = engine("S"), CallOptions(emitter=emitter, thread="t")
    if mode == "sync":
        rnd = eng.compact_round(state, options=options)
    else:
        rnd = anyio.run(lambda: eng.acompact_round(state, options=options))
    assert emitter.events == []  # held until the caller's model call answers
    rnd.succeeded()
    assert [e.phase for e in emitter.events] == ["started", "completed"]
    now = eng.compact_now(state, options=CallOptions(thread="t", emitter=emitter))
    assert now.compacted is True


def test_merge_keeps_the_record_where_nothing_is_given() -> None:
    options = CallOptions(system="s", thread="t", force=True)
    assert CallOptions.merge(options) is options
    assert CallOptions.merge(None, thread="u") == CallOptions(thread="u")
    assert CallOptions.merge(options, thread="u", requested=False, event=None) == CallOptions(
        system="s", thread="u", force=True
    )
    assert options.replace(force=False) == CallOptions(system="s", thread="t")
