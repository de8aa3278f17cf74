"""One owner for what an engine remembers (``ars_core.memo``): a history edited
anywhere (a message replaced by id, a dict in place of a message, removals) is
either seen or recounted whole, never counted stale, never a crash.

Each test compares the engine that saw the earlier histories with a fresh engine
given only the current one: same counts, same view, same events."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ars_core import (
    ApproxEstimator,
    CallOutcome,
    Compressor,
    Message,
    SummarizationEvent,
    SummaryConfig,
    from_openai,
    message_to_dict,
)
from ars_core.memo import FAMILIES, estimator_key, unchanged_prefix
from ars_core.resolve import CallableEstimator
from ars_core.testing import RecordingEmitter, ScriptedModel

from .helpers import memory_backend, words

pytestmark = pytest.mark.spec("R51", "R3")


def conversation(n: int) -> list[Message]:
    """``n`` short messages (about 7 tokens each), users and answers in turn, with ids."""
    return [
        Message(
            role="user" if i % 2 == 0 else "assistant", content=f"message {i} short", id=f"m{i}"
        )
        for i in range(n)
    ]


def engine(threshold: float = 8) -> tuple[Compressor, RecordingEmitter]:
    emitter = RecordingEmitter()
    compressor = Compressor(
        SummaryConfig(summary_threshold=threshold, summary_keep_messages=10),
        estimator=ApproxEstimator(),
        backend=memory_backend(),
        emitter=emitter,
    )
    return compressor, emitter


def run(
    compressor: Compressor,
    messages: Sequence[Message | Mapping[str, Any]],
    mode: str,
    event: SummarizationEvent | None = None,
) -> tuple[CallOutcome, ScriptedModel]:
    model = ScriptedModel(["ok"])
    if mode == "sync":
        return compressor.call(messages, model, event=event), model

    async def go() -> CallOutcome:
        return await compressor.acall(messages, model.acall, event=event)

    return anyio.run(go), model


def dicts(view: Sequence[Message | dict[str, Any]]) -> list[dict[str, Any]]:
    """A view as dicts: the engine sends OpenAI dicts when the history's first and last
    messages are dicts (``view_format="auto"``), records otherwise."""
    return [m if isinstance(m, dict) else message_to_dict(m) for m in view]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_message_replaced_by_id_in_the_middle_is_counted(mode: str) -> None:
    """Message 40 of 300 replaced by id with a 9,000-token text: the next call counts
    it (a 300-message history of about 2,100 tokens is now far above T = 8,192) and
    compresses, exactly as an engine that never saw the earlier history does."""
    compressor, _ = engine()
    history = conversation(300)
    first, _ = run(compressor, history, mode)
    assert first.level is None and first.tokens_before < 3_000
    big = Message(role="user", content=words(9_000, "replaced"), id="m40")
    history[40] = big  # in place, in the caller's own list
    outcome, model = run(compressor, history, mode)
    fresh, fresh_model = run(engine()[0], list(history), mode)
    assert outcome.tokens_before == fresh.tokens_before
    assert outcome.tokens_before > 8_192 + first.tokens_before
    assert outcome.level is not None  # compressed: the big message is not sent whole
    assert dicts(model.calls[-1]) == dicts(fresh_model.calls[-1])
    assert all(m.text != big.text for m in model.calls[-1])
    # a copy of the list with the same edit is seen the same way
    again, _ = run(compressor, [*history[:40], big, *history[41:]], mode)
    assert again.tokens_before == fresh.tokens_before


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_dict_in_place_of_a_seen_message_is_read_not_a_crash(mode: str) -> None:
    """After an engine saw a list of records, a middle message replaced by an OpenAI
    dict (a documented input) is read with ``from_openai``: every later call works
    and sends the history as it now is."""
    compressor, emitter = engine()
    history: list[Any] = conversation(300)
    run(compressor, history, mode)
    replacement = {"role": "assistant", "content": "now an OpenAI dict", "id": "m151"}
    history[151] = replacement
    for _ in range(2):
        outcome, model = run(compressor, history, mode)
        expected = [m if isinstance(m, Message) else from_openai(m) for m in history]
        assert dicts(model.calls[-1]) == dicts(expected)
        assert outcome.tokens_before == run(engine()[0], list(history), mode)[0].tokens_before
        history.append(Message(role="user", content="one more", id=f"n{len(history)}"))
    assert emitter.events == []  # below T: no round, no unpaired event


def test_the_rule_is_one_comparison_of_the_known_messages() -> None:
    """``unchanged_prefix``: the remembered messages are, position for position, the
    first messages of the new history (same objects or equal ones); a replacement, a
    removal or a dict anywhere breaks it."""
    known = conversation(50)
    assert unchanged_prefix(known, [*known, *conversation(3)])
    assert unchanged_prefix(known, known[:20])  # a prefix of a remembered one
    assert unchanged_prefix(known, list(known))
    assert not unchanged_prefix(known, [*known[:25], *known[26:]])
    swapped: list[Any] = list(known)
    swapped[25] = message_to_dict(known[25])
    assert not unchanged_prefix(known, swapped)
    assert not unchanged_prefix([], known)


class Slices(list[Any]):
    """A list that records the slices taken of it (``(start, stop)``)."""

    def __init__(self, items: Sequence[Any]) -> None:
        super().__init__(items)
        self.slices: list[tuple[int | None, int | None]] = []

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            self.slices.append((key.start, key.stop))
        return super().__getitem__(key)


def test_the_rule_copies_only_the_appended_messages() -> None:
    """``unchanged_prefix`` on a remembered list: the same answer as a comparison of
    copies for every case, the remembered list as it was afterwards, and of a longer
    history only its appended messages are taken (no copy of the first ones)."""
    known = conversation(50)
    extra = conversation(3)
    cases: list[list[Any]] = [
        [*known, *extra],
        known[:20],
        list(known),
        [*known[:25], *known[26:], *extra],
        [*known[:49], *extra],
        [*known[:10], message_to_dict(known[10]), *known[11:], *extra],
    ]
    for case in cases:
        mine = list(known)
        history = Slices(case)
        common = min(len(known), len(case))
        assert unchanged_prefix(mine, history) == (known[:common] == case[:common])
        assert mine == known and all(a is b for a, b in zip(mine, known, strict=True))
        assert all(start == len(known) for start, _ in history.slices)
    assert not unchanged_prefix([], known)


def test_estimators_keep_counts_by_identity_not_by_name() -> None:
    """Two plain counters (both named ``callable:<lambda>``) never share what is kept
    on a message; the built-in estimators of one class and encoding do."""
    a = CallableEstimator(lambda ms: 1)
    b = CallableEstimator(lambda ms: 2)
    assert a.name == b.name
    assert estimator_key(a) != estimator_key(b)
    assert estimator_key(a) == estimator_key(a)
    assert ApproxEstimator().cache_key == ApproxEstimator().cache_key
    assert len({f.name for f in FAMILIES}) == len(FAMILIES)


def test_two_engines_with_different_counters_do_not_share_l1_plans() -> None:
    """The same messages through two engines whose plain counters (both named
    ``callable:<lambda>``) differ: each plans L1 with its own counts (the tool result
    the second counts as large is offloaded by it, not by the first)."""
    from .helpers import call, tool

    c = call("bash", "c1", command="cat big.txt")
    history = [
        Message(role="user", content="read it", id="u1"),
        Message(role="assistant", content="", tool_calls=(c,), id="a1"),
        tool(c, "x " * 3000),
        Message(role="assistant", content="done", id="a2"),
        Message(role="user", content="next", id="u2"),
    ]
    config = SummaryConfig(
        summary_threshold=1, summary_tool_result_token_limit=500, summary_keep_messages=10
    )
    flat = Compressor(
        config, estimator=lambda ms: 5 * len(ms), backend=memory_backend(), lean_rounds=False
    )
    by_size = Compressor(
        config,
        estimator=lambda ms: sum(len(m.text) // 4 + 5 for m in ms),
        backend=memory_backend(),
        lean_rounds=False,
    )
    for_flat = flat.compact(history, force=True).view
    for_size = by_size.compact(history, force=True).view
    assert [m.id for m in for_flat if m.role == "tool"] == [history[2].id]
    assert "ars_offloaded" not in next(m for m in for_flat if m.role == "tool").metadata
    assert "ars_offloaded" in next(m for m in for_size if m.role == "tool").metadata


HISTORY_SIZE = 40


@st.composite
def edits(draw: st.DrawFn) -> list[tuple[str, int, int]]:
    ops = st.tuples(
        st.sampled_from(["append", "append_big", "replace", "remove", "to_dict", "to_message"]),
        st.integers(0, 10_000),
        st.integers(0, 10_000),
    )
    return draw(st.lists(ops, min_size=1, max_size=12))


def _apply(history: list[Any], op: str, a: int, b: int, serial: int) -> None:
    n = len(history)
    if op == "append" or n == 0:
        history.append(
            Message(role="user", content=f"added {serial} " * (1 + b % 20), id=f"x{serial}")
        )
    elif op == "append_big":
        history.append(
            Message(role="user", content=words(3_000 + b % 3_000, f"b{serial}"), id=f"x{serial}")
        )
    elif op == "replace":
        i = a % n
        old = history[i]
        old_id = old.id if isinstance(old, Message) else old.get("id")
        size = 2 + b % 4_000
        history[i] = Message(role="user", content=words(size, f"r{serial}"), id=old_id)
    elif op == "remove":
        del history[a % n]
    elif op == "to_dict":
        i = a % n
        if isinstance(history[i], Message):
            history[i] = message_to_dict(history[i])
    elif op == "to_message":
        i = a % n
        if not isinstance(history[i], Message):
            history[i] = from_openai(history[i])


@pytest.mark.parametrize("mode", ["sync", "async"])
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(steps=edits())
# the first and the last message turned into dicts: both engines send the view as dicts
@example(steps=[("append", 0, 0)] * 3 + [("remove", 0, 0), ("to_dict", 0, 0), ("to_dict", 1504, 0)])
def test_every_call_matches_a_fresh_engine(mode: str, steps: list[tuple[str, int, int]]) -> None:
    """Appends, replacements by id, removals and dict/record swaps in any order: after
    each edit the engine that saw every earlier history counts and sends exactly what
    a fresh engine given only the current history does."""
    compressor, _ = engine(threshold=4)
    history: list[Any] = [
        Message(role="user" if i % 2 == 0 else "assistant", content=words(20, f"h{i}"), id=f"h{i}")
        for i in range(HISTORY_SIZE)
    ]
    event: SummarizationEvent | None = None
    for serial, (op, a, b) in enumerate([("append", 0, 0), *steps]):
        _apply(history, op, a, b, serial)
        if not history:
            break
        fresh_engine, _ = engine(threshold=4)
        outcome, model = run(compressor, history, mode, event)
        fresh, fresh_model = run(fresh_engine, list(history), mode, event)
        assert outcome.tokens_before == fresh.tokens_before, (op, serial)
        assert outcome.tokens_after == fresh.tokens_after
        assert outcome.level == fresh.level
        assert dicts(model.calls[-1]) == dicts(fresh_model.calls[-1])
        assert [(e.phase, e.level) for e in outcome.events] == [
            (e.phase, e.level) for e in fresh.events
        ]
        assert persisted(outcome) == persisted(fresh)
        event = persist(history, event, outcome)


def persisted(outcome: CallOutcome) -> tuple[Any, ...] | None:
    """What an outcome asks to persist, but for what differs run to run (ids, times)."""
    update = outcome.update
    if update is None:
        return None
    event = update.event
    summary = None if event is None else (event.cutoff, dicts([event.summary_message]))
    return summary, dicts([m for _, m in update.replaced]), update.clear_event


def persist(
    history: list[Any], event: SummarizationEvent | None, outcome: CallOutcome
) -> SummarizationEvent | None:
    """What an adapter persists: the new event (or none) and the trimmed tail."""
    update = outcome.update
    if update is None:
        return event
    for index, message in update.replaced:
        history[index] = message
    return update.event if update.event is not None or update.clear_event else event
