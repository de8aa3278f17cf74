"""The round handle: a runtime that calls the model itself gets the view with
the round's events held, and reports how its model call went."""

from __future__ import annotations

import pytest

from ars_core import CompressionRound, Compressor, ContextOverflowError, Message
from ars_core.testing import FakeSummarizer, RecordingEmitter, capture_events

from .helpers import assistant, small_config, user, words


def long_history(n_pairs: int) -> list[Message]:
    out: list[Message] = []
    for i in range(n_pairs):
        out += [user(f"q{i} " + words(60, f"q{i}")), assistant(f"a{i} " + words(60, f"a{i}"))]
    return out


def engine(emitter: RecordingEmitter | None = None) -> Compressor:
    return Compressor(small_config(), summarizer=FakeSummarizer("S"), emitter=emitter)


@pytest.mark.spec("R30", "R31")
def test_events_wait_until_the_model_call_succeeded() -> None:
    """Nothing is delivered while the caller's model runs; ``started`` and
    ``completed`` are delivered when the ``with`` block ends normally."""
    emitter = RecordingEmitter()
    rnd = engine(emitter).compact_round(long_history(8))
    assert isinstance(rnd, CompressionRound)
    assert [(e.phase, e.level) for e in rnd.events] == [("started", "L1"), ("completed", "L2")]
    with rnd:
        assert emitter.events == []
        view = rnd.outcome.view
    assert view[0] is rnd.outcome.update.event.summary_message
    assert emitter.events == list(rnd.events)
    rnd.failed(ValueError("late"))  # a settled round stays settled
    assert emitter.events == list(rnd.events)


@pytest.mark.spec("R4", "R32")
def test_a_failing_model_call_ends_the_round_with_failed() -> None:
    """``failed`` replaces ``completed`` and carries what the round measured."""
    emitter = RecordingEmitter()
    rnd = engine(emitter).compact_round(long_history(8), force=True)
    completed = rnd.events[-1]
    with pytest.raises(ContextOverflowError), rnd:
        raise ContextOverflowError("still too long")
    assert emitter.phases == [("started", "L2"), ("failed", "L2")]
    failed = emitter.events[1]
    assert failed.round_id == rnd.events[0].round_id and failed.forced
    assert (failed.cutoff, failed.file_path, failed.tokens_after) == (
        completed.cutoff,
        completed.file_path,
        completed.tokens_after,
    )
    assert failed.error == "ContextOverflowError: still too long"


@pytest.mark.spec("R1", "R32")
def test_below_threshold_a_round_has_nothing_to_report() -> None:
    emitter = RecordingEmitter()
    rnd = engine(emitter).compact_round([user("hi")])
    rnd.failed(RuntimeError("boom"))
    assert rnd.events == () and emitter.events == []


@pytest.mark.spec("R32", "R55")
def test_cancellation_inside_the_round_reports_failed() -> None:
    """Not only ``Exception``: a cancelled model call ends the round too."""
    emitter = RecordingEmitter()
    rnd = engine(emitter).compact_round(long_history(8))
    with pytest.raises(KeyboardInterrupt), rnd:
        raise KeyboardInterrupt
    assert emitter.phases == [("started", "L1"), ("failed", "L2")]
    assert emitter.events[1].error == "KeyboardInterrupt"


@pytest.mark.spec("R32")
def test_failing_fails_the_round_only_when_the_block_raises() -> None:
    emitter = RecordingEmitter()
    rnd = engine(emitter).compact_round(long_history(8))
    with rnd.failing():
        pass
    assert emitter.events == []  # still open
    with pytest.raises(OSError), rnd.failing():
        raise OSError("could not persist the event")
    assert emitter.phases == [("started", "L1"), ("failed", "L2")]


@pytest.mark.spec("R30", "R31")
@pytest.mark.anyio
async def test_async_round_holds_events_the_same_way() -> None:
    with capture_events() as captured:
        rnd = await engine().acompact_round(long_history(8))
        assert captured.events == []
        with rnd:
            pass
    assert captured.phases == [("started", "L1"), ("completed", "L2")]


@pytest.mark.spec("R30")
def test_capture_events_records_what_any_engine_delivers_inside_the_block() -> None:
    """Events of every engine reach the capture, with or without an emitter of
    their own; nothing after the block."""
    emitter = RecordingEmitter()
    with capture_events() as captured:
        engine(emitter).call(long_history(8), lambda view: "ok")
        engine().call(long_history(8), lambda view: "ok")
    assert captured.phases == [("started", "L1"), ("completed", "L2")] * 2
    assert captured.events[:2] == emitter.events
    engine().call(long_history(8), lambda view: "ok")
    assert len(captured.events) == 4
