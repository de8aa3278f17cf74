"""A history nothing has counted is sized by a bound first (R3): the default
o200k estimator declares ``token_bound`` (``BoundedEstimator``, a message's UTF-8
bytes plus the same overheads, since a BPE token covers at least one byte) and the
engine encodes the history only when that bound reaches T. The decisions are those
of the exact count: each test compares an engine with the bound against one whose
estimator counts the same o200k tokens without declaring a bound (counted exactly,
from the newest message back as far as a decision needs): same level, same view,
same events, same reported counts, at T just above, at and below the exact size, on
histories of non-ASCII text, emoji, CJK, images and tool calls, sync and async. An
estimator without a bound (the approximate one) sizes a cold history the same way,
and decides as it does with every message counted beforehand."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import anyio
import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ars_core import (
    ApproxEstimator,
    CachingEstimator,
    CallOutcome,
    CompressionEvent,
    Compressor,
    ContentPart,
    Message,
    SummaryConfig,
    TiktokenEstimator,
    ToolCall,
    message_from_dict,
    message_to_dict,
)
from ars_core.bounds import json_bytes, utf8_length
from ars_core.capabilities import BoundedEstimator, has
from ars_core.provider_text import json_text
from ars_core.testing import RecordingEmitter, ScriptedModel

from .helpers import CountingBytes, assistant, call, memory_backend, png, tool, user, words

pytestmark = pytest.mark.spec("R1", "R2", "R3")

O200K = TiktokenEstimator()
MODES = pytest.mark.parametrize("mode", ["sync", "async"])


class ExactOnly(CachingEstimator):
    """o200k counts, with no bound declared: an estimator without the capability."""

    name = "exact-only"

    def count_text(self, text: str) -> int:
        return O200K.count_text(text)


def image(seed: str) -> ContentPart:
    url = "data:image/png;base64," + base64.b64encode(png(64, 48, seed)).decode("ascii")
    return ContentPart(type="image", data={"type": "image_url", "image_url": {"url": url}})


def mixed_history(n_rounds: int, tag: str) -> list[Message]:
    """Rounds of a user turn (ASCII, emoji, CJK, an image), a tool call whose
    arguments hold quotes, newlines, control characters and non-ASCII text, its
    result, and an answer; every message a new object (``tag`` makes texts distinct)."""
    out: list[Message] = []
    for i in range(n_rounds):
        texts = [
            f"{tag} {i}: " + words(60, seed=f"s{i}"),
            f"{tag} {i}: 表情 🙂🚀👩‍💻 " * 12 + "汉字の文章、テスト。" * 20,
            f"{tag} {i}: " + "naïve café — “quoted” ½ ∑ " * 15,
        ]
        u = user(texts[i % 3])
        if i % 4 == 1:
            u = Message(
                role="user",
                content=(ContentPart(type="text", text=texts[0]), image(f"{tag}{i}")),
                id=u.id,
            )
        c = call("bash", command=f'echo "{tag} {i}"\n\x01\tgrep -r "ü中文" .', timeout=30)
        out += [
            u,
            assistant(f"{tag} looking {i}", c),
            tool(c, (f"{tag} line {i}: ok ✓ 結果\n" + words(40, seed=f"r{i}")) * 3),
            assistant(f"{tag} answer {i}: 完了 ✅"),
        ]
    return out


def fresh(history: Sequence[Message]) -> list[Message]:
    """New objects of ``history`` (equal messages nothing has counted)."""
    return [message_from_dict(message_to_dict(m)) for m in history]


def engine(estimator: Any, threshold_tokens: int) -> tuple[Compressor, RecordingEmitter]:
    emitter = RecordingEmitter()
    config = SummaryConfig(
        summary_threshold=(threshold_tokens + 0.5) / 1024,
        summary_keep_messages=4,
        summary_tool_result_token_limit=200,
    )
    return Compressor(
        config, estimator=estimator, backend=memory_backend(), emitter=emitter
    ), emitter


def run(compressor: Compressor, messages: Sequence[Message], mode: str) -> CallOutcome:
    model = ScriptedModel(["ok"])
    system = "You are a careful agent. 日本語も話せます。"
    if mode == "sync":
        return compressor.call(messages, model, system=system)

    async def go() -> CallOutcome:
        return await compressor.acall(messages, model.acall, system=system)

    return anyio.run(go)


def observed(outcome: CallOutcome, emitter: RecordingEmitter) -> dict[str, Any]:
    """Everything a caller sees of a call (the lazy counts read last)."""
    events = [
        (e.phase, e.level, e.tokens_before, e.tokens_after, e.offloaded) for e in emitter.events
    ]
    return {
        "level": outcome.level,
        "view": [message_to_dict(m) for m in outcome.view],
        "events": events,
        "update": outcome.update is not None,
        "tokens": (outcome.tokens_before, outcome.tokens_after),
    }


def exact_size(history: Sequence[Message], system: str) -> int:
    return ExactOnly().count(history, system=system)


def test_the_default_estimator_declares_the_bound_and_others_do_not() -> None:
    """The capability is declared by the class: o200k has it; the approximate
    estimator and a CachingEstimator subclass counting o200k do not (counted as before)."""
    assert has(O200K, BoundedEstimator)
    assert not has(ApproxEstimator(), BoundedEstimator)
    assert not has(ExactOnly(), BoundedEstimator)


@MODES
@pytest.mark.parametrize("offset", [-400, -1, 0, 1, 400, 10**6])
def test_near_t_the_bound_decides_as_the_exact_count(mode: str, offset: int) -> None:
    """T at the history's exact size plus ``offset`` (just below it: a round; at it: a
    round, T is not "below"; just above: no round, though the bound is far above T).
    Fresh objects for each engine, as a worker loading a checkpoint builds them."""
    history = mixed_history(12, "near")
    size = exact_size(history, "You are a careful agent. 日本語も話せます。")
    seen = []
    for estimator in (TiktokenEstimator(), ExactOnly()):
        compressor, emitter = engine(estimator, size + offset)
        outcome = run(compressor, fresh(history), mode)
        seen.append(observed(outcome, emitter))
    assert seen[0] == seen[1]
    assert seen[0]["tokens"][0] == size
    assert (seen[0]["level"] is None) == (offset > 0)


@MODES
def test_far_below_t_nothing_is_encoded_until_a_count_is_read(mode: str) -> None:
    """Far below T the bound decides: the request goes out as it came, no message is
    encoded (none holds a count), and the outcome's counts, read later, are exact;
    reading them leaves the counts with the engine, so the next call on the grown
    history counts only what was appended."""
    history = mixed_history(8, "far")
    compressor, emitter = engine(TiktokenEstimator(), 10**7)
    outcome = run(compressor, history, mode)
    assert outcome.level is None and list(outcome.view) == history and not emitter.events
    assert not outcome.counted
    assert not any(O200K.cache_key in m._cache for m in history)
    system = "You are a careful agent. 日本語も話せます。"
    assert outcome.tokens_before == outcome.tokens_after == exact_size(history, system)
    assert outcome.counted
    grown = [*history, user("one more 🙂")]
    nxt = run(compressor, grown, mode)
    assert nxt.counted and nxt.tokens_before == exact_size(grown, system)


@pytest.mark.parametrize("cold", [True, False])
def test_a_growing_history_decides_as_the_exact_count_call_after_call(cold: bool) -> None:
    """One conversation grown round by round across T, the counts never read between
    calls (the bounded engine only bounds it until the bound reaches T): each call's
    level, view and events are the exact engine's, rounds persisted as an adapter does;
    with new objects every call (``cold``, a checkpoint loaded each turn) or the same
    ones grown (the bounds kept with the history, extended by the appended messages)."""
    rounds = mixed_history(14, "grow")
    size = exact_size(rounds[:40], "You are a careful agent. 日本語も話せます。")
    bounded, b_events = engine(TiktokenEstimator(), size)
    exact, e_events = engine(ExactOnly(), size)
    events: list[Any] = [None, None]
    for end in range(4, len(rounds) + 1, 4):
        seen = []
        for k, (compressor, emitter) in enumerate(((bounded, b_events), (exact, e_events))):
            emitter.events.clear()
            model = ScriptedModel(["ok"])
            system = "You are a careful agent. 日本語も話せます。"
            history = fresh(rounds[:end]) if cold else rounds[:end]
            outcome = compressor.call(history, model, system=system, event=events[k])
            if outcome.update is not None and outcome.update.event is not None:
                events[k] = outcome.update.event
            seen.append(
                (
                    outcome.level,
                    [message_to_dict(m) for m in outcome.view],
                    [(e.phase, e.level, e.tokens_before, e.tokens_after) for e in emitter.events],
                )
            )
        assert seen[0] == seen[1], end
    assert any(s is not None for s in events)  # the history did cross T


_text = st.text(alphabet=st.characters(codec=None, exclude_categories=()), min_size=0, max_size=300)
_args = st.dictionaries(
    st.text(max_size=12), st.one_of(_text, st.integers(), st.none(), st.lists(_text, max_size=3))
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    content=st.one_of(_text, st.lists(_text, max_size=3)),
    calls=st.lists(st.tuples(st.text(max_size=20), _args), max_size=3),
    name=st.one_of(st.none(), st.text(max_size=10)),
)
def test_the_bound_is_never_below_the_count(
    content: str | list[str], calls: list[tuple[str, dict[str, Any]]], name: str | None
) -> None:
    """Any text (lone surrogates, control characters, emoji, CJK), text blocks, tool
    calls with any arguments, a name: ``token_bound`` is at least ``count_message``."""
    body: Any = content
    if isinstance(content, list):
        body = tuple(ContentPart(type="text", text=t) for t in content)
    message = Message(
        role="assistant",
        content=body,
        name=name or None,
        tool_calls=tuple(ToolCall(id=f"c{i}", name=n, args=a) for i, (n, a) in enumerate(calls)),
    )
    bound = O200K.token_bound(message)
    assert bound >= O200K.count_message(message)
    assert O200K.token_bound(message) == O200K.count_message(message)  # kept count read


_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), _text),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.one_of(_text, st.integers()), inner)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(value=st.one_of(_json, st.dictionaries(_text, _json, max_size=6)))
def test_tool_arguments_are_measured_as_their_json(value: Any) -> None:
    """The bound reads a tool call's arguments as the bytes of the JSON the exact count
    encodes (flat mappings measured piece by piece, anything else rendered)."""
    assert json_bytes(value) == utf8_length(json_text(value))


@MODES
def test_a_count_read_late_is_of_the_history_the_call_saw(mode: str) -> None:
    """The outcome's count read after the caller appended to its list, and after the
    engine saw an edited history starting with the same message (its remembered totals
    then describe another history): each count is that of the messages its call saw,
    and the engine's next counts are those of an engine that never saw the others."""
    system = "You are a careful agent. 日本語も話せます。"
    history = mixed_history(6, "late")
    compressor, _ = engine(TiktokenEstimator(), 10**7)
    first = run(compressor, history, mode)
    size = exact_size(history, system)
    history.append(user("appended after the call"))
    edited = [history[0], user("an edit 🙂"), *history[2:]]
    second = run(compressor, edited, mode)
    assert not first.counted and not second.counted
    assert second.tokens_before == exact_size(edited, system)
    assert first.tokens_before == size
    grown = [*edited, user("next")]
    third = run(compressor, grown, mode)
    assert third.tokens_before == exact_size(grown, system)


class ExactEncoding(ExactOnly):
    """:class:`ExactOnly` naming its encoding: previews are fitted on its token offsets
    as the default estimator's are (a search by counts may end a token apart)."""

    encoding_name = "o200k_base"


def agent_run(n_steps: int, tag: str) -> list[Message]:
    """One request, then ``n_steps`` tool calls with their results (every third far
    above L1's limit, the others small) and a last answer: an agent run nothing has
    counted (every message a new object)."""
    out: list[Message] = [user(f"{tag}: fix the failing test 🙂 " + words(80, seed=tag))]
    for i in range(n_steps):
        c = call("bash", command=f"pytest -x tests/test_{i}.py  # {tag} ü")
        body = words(900 if i % 3 == 0 else 60, seed=f"{tag}{i}")
        out += [assistant(f"{tag} step {i}", c), tool(c, f"{tag} {i} 結果\n{body}")]
    return [*out, assistant(f"{tag}: done ✅")]


@MODES
def test_a_cold_round_counts_only_what_its_decisions_read(mode: str) -> None:
    """An L2 round on an agent run far above T that nothing has counted: its level,
    view, events and update are those of the engine that counts everything; the
    round counted the newest messages until they passed each threshold, the kept
    tail and what the summary input reads, not the small messages it summarized
    (the older tool calls hold no count after it); the events' ``tokens_before``,
    read afterwards, is the exact size of the request."""
    history = agent_run(40, "cold")
    system = "You are a careful agent. 日本語も話せます。"
    size = exact_size(history, system)
    seen, bounded_history = [], fresh(history)
    for estimator, messages in (
        (TiktokenEstimator(), bounded_history),
        (ExactEncoding(), fresh(history)),
    ):
        compressor, emitter = engine(estimator, size // 6)
        outcome = run(compressor, messages, mode)
        if not isinstance(estimator, ExactOnly):
            calls = [m for m in messages[:40] if m.tool_calls]
            uncounted = [m for m in calls if O200K.cache_key not in m._cache]
            assert len(uncounted) >= len(calls) // 2
        assert outcome.update is not None and outcome.update.event is not None
        seen.append(observed(outcome, emitter))
    assert seen[0] == seen[1]
    assert seen[0]["level"] == "L2"
    assert [e[2] for e in seen[0]["events"]] == [size, size]


@MODES
def test_an_estimator_without_a_bound_counts_a_cold_history_newest_first(mode: str) -> None:
    """The approximate estimator declares no bound: an L2 round on an agent run far above
    T that nothing has counted counts from the newest message back as far as each
    decision needs, so the older tool calls it summarizes are never counted; its level,
    view, events and update are those of the same round on the same history with every
    message counted before the call (the reported sizes too, read afterwards)."""
    history = agent_run(40, "approx")
    system = "You are a careful agent. 日本語も話せます。"
    size = ApproxEstimator().count(fresh(history), system=system)
    counter = ApproxEstimator()  # its counts are kept on the messages for every instance
    key = counter.cache_key
    seen = []
    for counted_first in (False, True):
        messages = fresh(history)
        if counted_first:
            for m in messages:
                counter.count_message(m)
        compressor, emitter = engine(ApproxEstimator(), size // 6)
        outcome = run(compressor, messages, mode)
        calls = [m for m in messages[:40] if m.tool_calls]
        uncounted = [m for m in calls if key not in m._cache]
        assert (len(uncounted) >= len(calls) // 2) is not counted_first
        assert outcome.update is not None and outcome.update.event is not None
        seen.append(observed(outcome, emitter))
    assert seen[0] == seen[1]
    assert seen[0]["level"] == "L2"
    assert [e[2] for e in seen[0]["events"]] == [size, size]


def test_an_event_counted_when_read_is_the_event_of_its_count() -> None:
    """A ``started`` event of a round the bound decided carries its size uncounted: it
    equals (and hashes as) the event built with the exact count, its dict and the
    dict read back hold that count, and its repr counts nothing."""
    history = agent_run(12, "event")
    system = "You are a careful agent. 日本語も話せます。"
    size = exact_size(history, system)
    compressor, emitter = engine(TiktokenEstimator(), size // 4)
    run(compressor, history, "sync")
    started = emitter.events[0]
    assert started.phase == "started"
    assert "counted when read" in repr(started)
    exact = CompressionEvent(
        phase="started",
        level=started.level,
        round_id=started.round_id,
        tokens_before=size,
        threshold=started.threshold,
        timestamp=started.timestamp,
    )
    assert started == exact and hash(started) == hash(exact)
    assert started.tokens_before == size and started.to_dict()["tokens_before"] == size
    assert CompressionEvent.from_dict(started.to_dict()) == exact
    assert f"tokens_before={size}" in repr(started)


@pytest.mark.spec("R1", "R2", "R3", "R20")
@MODES
def test_a_view_within_t_by_its_bound_is_counted_when_read(mode: str) -> None:
    """An L2 round whose new view (the summary message and the kept tail) is within T
    by the bound of what nothing counted yet (the new summary message): the call does
    not encode the summary message; the ``completed`` event and the outcome carry the
    view's size uncounted, and read it as the exact size of the request sent (the
    completed event equals, and hashes as, the event built with that count). Level,
    view, events and update are those of the engine that counts everything."""
    history = agent_run(40, "after")
    system = "You are a careful agent. 日本語も話せます。"
    size = exact_size(history, system)
    seen = []
    for estimator in (TiktokenEstimator(), ExactEncoding()):
        compressor, emitter = engine(estimator, size // 6)
        outcome = run(compressor, fresh(history), mode)
        assert outcome.level == "L2"
        (completed,) = [e for e in emitter.events if e.phase == "completed"]
        if isinstance(estimator, TiktokenEstimator):
            assert O200K.cache_key not in outcome.view[0]._cache  # the summary message
            assert not outcome.counted and "counted when read" in repr(completed)
            exact = attrs.evolve(completed, tokens_after=exact_size(outcome.view, system))
            assert completed == exact and hash(completed) == hash(exact)
        assert outcome.tokens_after == completed.tokens_after == exact_size(outcome.view, system)
        # the size before: counted when read by either (a history above T by its bound, or
        # one an estimator without a bound counts newest first only as far as T)
        assert outcome.tokens_before == exact_size(history, system)
        assert outcome.counted
        seen.append(observed(outcome, emitter))
    assert seen[0] == seen[1]


@MODES
def test_a_cold_round_measures_each_message_once(mode: str) -> None:
    """The bound of a message (its UTF-8 bytes) is read several times in an L2 round
    (sizing the history, in L1, in L2) and measured once: the round's level, view,
    events and update are those of an engine that measures at every read; outside
    an engine call each read measures."""
    history = agent_run(40, "once")
    size = exact_size(history, "You are a careful agent. 日本語も話せます。")
    seen = []
    for kept in (True, False):
        estimator = TiktokenEstimator()
        estimator.utf8_bytes = counting = CountingBytes()
        if not kept:  # every read measures
            estimator.utf8_bytes.bytes_of = counting.measure  # type: ignore[method-assign]
        compressor, emitter = engine(estimator, size // 6)
        outcome = run(compressor, fresh(history), mode)
        measured = [id(m) for m in counting.measured]
        assert (len(set(measured)) == len(measured)) is kept
        seen.append(observed(outcome, emitter))
    assert seen[0] == seen[1] and seen[0]["level"] == "L2"
    counting = CountingBytes()
    message = history[1]
    assert counting.bytes_of(message) == counting.bytes_of(message) == counting.measure(message)
    assert counting.measured == [message] * 3
