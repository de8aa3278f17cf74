"""A history sized from its newest answer's known size (R1, R3).

The engine stamps its exact count of a request's effective messages on the answer
(:mod:`ars_core.known_size`); a later call on fresh objects (a checkpoint loaded by
another process) whose newest stamp matches the history takes the stamped count and
counts only the messages after it. Each test compares an engine that reads stamps
with the same engine ignoring them (counting as before): same level, view, events and
counts, at T around the exact size; and what was encoded (an estimator recording the
texts it encodes). Stale, foreign and hostile stamps are ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import pytest

import ars_core.known_size
from ars_core import Compressor, Message, TiktokenEstimator
from ars_core.known_size import (
    MARK_KNOWN_SIZE,
    fingerprint,
    read_stamp,
    stamp_history,
    stamp_of,
    stamped,
)
from ars_core.testing import FakeSummarizer, RecordingTiktoken

from .helpers import assistant, user
from .test_bounded_count import MODES, engine, exact_size, fresh, mixed_history, observed, run

pytestmark = pytest.mark.spec("R1", "R3")

SYSTEM = "You are a careful agent. 日本語も話せます。"


def history(tag: str = "k") -> list[Message]:
    """A stamped history as ARS leaves it, and a new question after its last answer."""
    return [*stamp_history(mixed_history(12, tag), TiktokenEstimator()), user(f"{tag} next 🙂")]


def texts_of(messages: Sequence[Message]) -> set[str]:
    return {m.content for m in messages if isinstance(m.content, str) and m.content}


def call(
    messages: Sequence[Message], threshold: int, mode: str, ignore: bool, monkeypatch: Any
) -> tuple[dict[str, Any], RecordingTiktoken, Any]:
    """One call by a new engine on fresh objects of ``messages``, stamps read or not."""
    est = RecordingTiktoken()
    compressor, emitter = engine(est, threshold)
    with monkeypatch.context() as m:
        if ignore:
            m.setattr(ars_core.known_size, "known_history", lambda size, *args: size)
        outcome = run(compressor, fresh(messages), mode)
    return observed(outcome, emitter), est, outcome


@MODES
@pytest.mark.parametrize("offset", [-400, -1, 0, 1, 400, 3000])
def test_a_stamped_history_decides_as_counting_it_whole(
    mode: str, offset: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T at the exact size plus ``offset`` (below it: a round; above: none, though the
    bound is far above T): the same call with and without the stamps; below T only
    the stamped answer's tail (the answer itself and the new question) is encoded."""
    messages = history()
    size = exact_size(messages, SYSTEM)
    seen, est, outcome = call(messages, size + offset, mode, False, monkeypatch)
    counted, all_est, _ = call(messages, size + offset, mode, True, monkeypatch)
    assert seen == counted
    assert seen["tokens"][0] == size
    assert texts_of(messages) <= set(all_est.texts)
    if offset > 0:
        assert seen["level"] is None
        assert texts_of(messages) & set(est.texts) == texts_of(messages[-2:])
        answer = outcome.known
        assert answer is not None and answer["covers"] == len(messages)
        assert answer["tokens"] + outcome._extra == size
    else:
        assert seen["level"] is not None


def test_a_call_that_makes_a_summary_stamps_nothing_and_the_next_call_stamps_its_view(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An L2 round's answer carries no stamp (the next effective messages start with
    its summary); the stamps before the summary no longer match (another basis): the
    next call counts the summary and the kept messages, and stamps them; the call
    after it, on fresh objects, counts only what follows that stamp."""
    messages = history("l2")
    size = exact_size(messages, SYSTEM)
    est = RecordingTiktoken()
    compressor, _ = engine(est, size // 2)
    compressor.summarizer = FakeSummarizer("SUMMARY")
    first = compressor.call(fresh(messages), lambda v: "done", system=SYSTEM)
    assert first.level == "L2" and first.known is None
    event = first.update.event
    state = [*messages, assistant("done"), user("and then? 🙂")]
    est2 = RecordingTiktoken()
    again, _ = engine(est2, size // 2)
    second = again.call(fresh(state), lambda v: "fine", system=SYSTEM, event=event)
    assert second.level is None and second.tokens_before  # read: counted (usage does)
    kept = state[event.cutoff :]
    assert texts_of(kept) <= set(est2.texts)  # the old stamps ignored: counted whole
    answer = second.known
    assert answer is not None and answer["basis"] == [event.cutoff, event.summary_message.id]
    state = [*state, stamped(Message(role="assistant", content="fine"), answer), user("last")]
    est3 = RecordingTiktoken()
    third_engine, _ = engine(est3, size // 2)
    third = third_engine.call(fresh(state), lambda v: "ok", system=SYSTEM, event=event)
    assert third.level is None
    assert texts_of(state[event.cutoff :]) & set(est3.texts) == {"fine", "last"}
    assert third.tokens_before == second.tokens_before + exact_size(state[-2:], "")


@pytest.mark.parametrize(
    "change",
    [
        {"tokens": "1000"},
        {"tokens": 1000.0},
        {"tokens": True},
        {"tokens": -5},
        {"tokens": 2**60},
        {"tokens": 10**9},  # above the byte bound of what it covers
        {"tokens": 1},  # below the messages' own overheads
        {"tokens": "big"},
        {"covers": 3},
        {"covers": -1},
        {"bytes": 10**9},
        {"ids": 12},
        {"ids": "0" * 32},
        {"basis": [0, "x"]},
        {"basis": "none"},
        {"estimator": "utf8-bytes"},
        "not a mapping",
        ["a", "list"],
        {"tokens": "\x00\ud800"},
    ],
)
def test_a_hostile_stamp_is_ignored(change: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stamp altered (wrong types, negative, huge, beyond the messages' byte bound,
    another position, ids, summary or estimator; not a mapping): the history is
    counted whole, the call as without stamps."""
    messages = history("h")
    last = messages[-2]
    record = dict(last.metadata[MARK_KNOWN_SIZE])
    record = {**record, **change} if isinstance(change, dict) else change
    messages[-2] = attrs.evolve(last, metadata={**last.metadata, MARK_KNOWN_SIZE: record})
    size = exact_size(messages, SYSTEM)
    seen, est, _ = call(messages, size + 1, "sync", False, monkeypatch)
    counted, _, _ = call(messages, size + 1, "sync", True, monkeypatch)
    assert seen == counted and seen["level"] is None
    assert texts_of(messages) <= set(est.texts)


def test_ids_with_nuls_and_lone_surrogates_are_read() -> None:
    """Any id string is digested unambiguously: a NUL or a lone surrogate in an id
    neither fails nor collides with its neighbours' ids."""
    base = [user("a"), assistant("b")]
    odd = [attrs.evolve(base[0], id="x\x00y"), attrs.evolve(base[1], id="\ud800")]
    swapped = [attrs.evolve(base[0], id="x"), attrs.evolve(base[1], id="\x00y\ud800")]
    est = TiktokenEstimator()
    assert fingerprint(odd, 2, est)[1] != fingerprint(swapped, 2, est)[1]
    record = stamp_of(odd, 10, est)
    assert record is not None and read_stamp(record, est) is not None


def test_an_understated_stamp_overshoots_t_by_no_more_than_its_byte_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A forged stamp whose fingerprint matches (made by someone who edits the state)
    is trusted: the request then goes above T by at most what the stamp could hide,
    the covered messages' byte bound minus the stamped count."""
    messages = history("f")
    last = messages[-2]
    record = dict(last.metadata[MARK_KNOWN_SIZE])
    floor = record["covers"] * 4  # the smallest count a stamp may claim
    messages[-2] = attrs.evolve(
        last, metadata={**last.metadata, MARK_KNOWN_SIZE: {**record, "tokens": floor}}
    )
    size = exact_size(messages, SYSTEM)
    threshold = size // 2
    seen, _, outcome = call(messages, threshold, "sync", False, monkeypatch)
    assert seen["level"] is None  # believed: below T
    assert outcome.tokens_before - threshold <= record["bytes"] - floor


@MODES
def test_a_prefix_of_a_seeded_history_is_counted(mode: str) -> None:
    """After a stamped call the engine keeps the stamped count as the total of the
    covered messages; a later call on a shorter history (messages removed from the
    end) is counted exactly, not read from that total."""
    messages = history("p")
    size = exact_size(messages, SYSTEM)
    compressor, _ = engine(RecordingTiktoken(), size + 10)
    objects = fresh(messages)
    assert run(compressor, objects, mode).tokens_before == size
    shorter = objects[:-5]
    assert run(compressor, shorter, mode).tokens_before == exact_size(shorter, SYSTEM)
    grown = [*objects, assistant("more"), user("again")]
    assert run(compressor, grown, mode).tokens_before == exact_size(grown, SYSTEM)


def test_a_warm_call_after_a_stamped_one_counts_only_what_was_appended() -> None:
    """The stamped count seeds the engine's totals: the next call on the same objects
    plus new ones (no new stamp on them) encodes only the new messages."""
    messages = history("w")
    size = exact_size(messages, SYSTEM)
    est = RecordingTiktoken()
    compressor: Compressor = engine(est, size + 500)[0]
    objects = fresh(messages)
    run(compressor, objects, "sync")
    est.texts.clear()
    grown = [*objects, assistant("plain answer"), user("plain question")]
    outcome = run(compressor, grown, "sync")
    assert outcome.tokens_before == exact_size(grown, SYSTEM)
    assert texts_of(grown) & set(est.texts) == {"plain answer", "plain question"}


def test_a_stamp_over_messages_already_counted_is_checked_by_their_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Messages of the covered part that hold a count (their bound is then that count,
    not their bytes) are measured in bytes for the check: the stamp still matches, and
    a stamp whose byte sum is off by one does not."""
    messages = fresh(history("c"))
    est = RecordingTiktoken()
    for m in messages[:7]:
        est.count_message(m)
    size = exact_size(messages, SYSTEM)
    compressor, _ = engine(est, size + 1)
    est.texts.clear()
    assert run(compressor, messages, "sync").tokens_before == size
    assert texts_of(messages) & set(est.texts) == texts_of(messages[-2:])
    last = messages[-2]
    record = dict(last.metadata[MARK_KNOWN_SIZE])
    off = attrs.evolve(
        last, metadata={**last.metadata, MARK_KNOWN_SIZE: {**record, "bytes": record["bytes"] - 1}}
    )
    shifted = fresh([*messages[:-2], off, messages[-1]])
    _, est2, _ = call(shifted, size + 1, "sync", False, monkeypatch)
    assert texts_of(shifted) <= set(est2.texts)
