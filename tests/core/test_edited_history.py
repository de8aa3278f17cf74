"""The summarization event survives edited histories (R51, R24, R25).

The event is anchored to the messages around its cutoff. After the history
is edited (messages removed, replaced by id, cleared) it is re-anchored, or
dropped with a visible warning when the messages it summarized are gone; the
model always receives every state message the summary does not cover. A
stateful property test drives random appends, L2 rounds, removals and
replacements through :class:`~ars_core.Compressor`.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

import anyio
import attrs
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from ars_core import (
    ArsError,
    CallOutcome,
    Compressor,
    Message,
    SummarizationEvent,
    ToolCall,
)
from ars_core.events import ANCHOR_WINDOW, message_key
from ars_core.testing import FakeSummarizer, RecordingEmitter, ScriptedModel

from .helpers import assistant, memory_backend, small_config, tool, user, words

pytestmark = pytest.mark.spec("R51", "R24", "R25")


def apply(
    state: list[Message], event: SummarizationEvent | None, outcome: CallOutcome
) -> SummarizationEvent | None:
    """Persist an outcome the way an adapter does: the new event (or none), and
    the tail messages replaced under overflow."""
    update = outcome.update
    if update is None:
        return event
    for index, message in update.replaced:
        state[index] = message
    if update.event is not None or update.clear_event:
        return update.event
    return event


def history(pairs: int, size: int = 60) -> list[Message]:
    out: list[Message] = []
    for i in range(pairs):
        out.append(user(f"question {i}: " + words(size, f"q{i}")))
        out.append(assistant(f"answer {i}: " + words(size, f"a{i}")))
    return out


def engine(**kw: Any) -> tuple[Compressor, RecordingEmitter]:
    emitter = RecordingEmitter()
    # FakeSummarizer's summary is tiny: a small summary bound leaves the kept tail its 4 messages
    config = small_config(summary_keep_messages=4, **{"summary_max_tokens": 64, **kw})
    return Compressor(
        config, backend=memory_backend(), summarizer=FakeSummarizer("SUMMARY"), emitter=emitter
    ), emitter


def l2_round(
    compressor: Compressor, state: list[Message]
) -> tuple[SummarizationEvent, list[Message]]:
    model = ScriptedModel(["ok"])
    outcome = compressor.call(state, model)
    assert outcome.level == "L2" and outcome.update is not None
    event = outcome.update.event
    assert event is not None
    return event, model.calls[-1]


class TestEditedHistory:
    @pytest.mark.parametrize("mode", ["sync", "async"])
    def test_new_chat_after_clearing_the_history_reaches_the_model(
        self, mode: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """After an L2 round the history is cleared ("new chat"): the new question
        reaches the model, the stale summary is dropped with a warning and a
        ``started``/``failed`` notice, and the update clears the stored event."""
        compressor, emitter = engine()
        state = history(8)
        event, _ = l2_round(compressor, state)
        emitter.events.clear()

        new_state = [user("NEW QUESTION")]
        model = ScriptedModel(["fresh"])
        with caplog.at_level(logging.WARNING, logger="ars"):
            if mode == "sync":
                outcome = compressor.call(new_state, model, event=event)
            else:

                async def run() -> CallOutcome:
                    return await compressor.acall(new_state, model.acall, event=event)

                outcome = anyio.run(run)
        assert model.calls == [new_state]
        assert outcome.response == "fresh" and outcome.view == new_state
        assert outcome.update is not None
        assert outcome.update.event is None and outcome.update.clear_event
        assert "no longer matches" in caplog.text
        assert [(e.phase, e.level) for e in emitter.events] == [("started", "L2"), ("failed", "L2")]
        failed = emitter.events[1]
        assert failed.round_id == emitter.events[0].round_id
        assert failed.error is not None and "summary" in failed.error
        assert failed.cutoff == event.cutoff

    @pytest.mark.parametrize("mode", ["sync", "async"])
    def test_removing_the_oldest_messages_skips_no_unsummarized_message(self, mode: str) -> None:
        """Removing the 4 oldest (summarized) messages re-anchors the event: the
        model gets the summary and every message after the ones it covers."""
        compressor, _ = engine()
        state = history(8)
        event, _ = l2_round(compressor, state)
        covered = state[: event.cutoff]
        kept = state[event.cutoff :]
        state = [*state[4:], user("next question")]
        model = ScriptedModel(["ok"])
        if mode == "sync":
            outcome = compressor.call(state, model, event=event)
        else:

            async def run() -> CallOutcome:
                return await compressor.acall(state, model.acall, event=event)

            outcome = anyio.run(run)
        assert model.calls[-1] == [event.summary_message, *kept, state[-1]]
        assert outcome.update is not None and outcome.update.event is not None
        moved = outcome.update.event
        assert moved.cutoff == event.cutoff - 4
        assert moved.summary_message == event.summary_message
        assert moved.anchor is not None
        assert moved.anchor.last == message_key(covered[-1])
        assert moved.anchor.next == message_key(kept[0])
        # persisted: the next call takes the constant-time path, no new update
        again = compressor.call(state, ScriptedModel(["ok"]), event=moved)
        assert again.update is None

    def test_removing_the_first_kept_then_the_last_summarized_message_keeps_the_summary(
        self,
    ) -> None:
        """Each removal moves the anchor to the messages now around the cutoff,
        so a later removal of the other side still finds it."""
        compressor, _ = engine()
        state = history(8)
        event, _ = l2_round(compressor, state)
        cut = event.cutoff
        covered, kept = state[:cut], state[cut:]
        state = [*covered, *kept[1:], user("q1")]  # the first kept message removed
        first = compressor.call(state, ScriptedModel(["ok"]), event=event)
        assert first.update is not None and first.update.event is not None
        event = first.update.event
        assert event.anchor is not None and event.anchor.next == message_key(kept[1])
        state = [*covered[:-1], *kept[1:], state[-1], user("q2")]  # the last summarized one
        model = ScriptedModel(["ok"])
        second = compressor.call(state, model, event=event)
        assert model.calls[-1] == [event.summary_message, *kept[1:], *state[-2:]]
        assert second.update is not None and second.update.event is not None
        assert second.update.event.cutoff == cut - 1

    def test_replacing_a_kept_message_by_id_keeps_the_event(self) -> None:
        compressor, _ = engine()
        state = history(8)
        event, _ = l2_round(compressor, state)
        edited = attrs.evolve(state[event.cutoff + 1], content="edited answer")
        state[event.cutoff + 1] = edited
        model = ScriptedModel(["ok"])
        outcome = compressor.call(state, model, event=event)
        assert model.calls[-1] == [event.summary_message, *state[event.cutoff :]]
        assert outcome.update is None

    def test_messages_without_ids_are_anchored_by_content(self) -> None:
        """A history without ids (LlamaIndex chat stores) is anchored by a
        content hash; removing the oldest messages re-anchors it."""
        compressor, _ = engine()
        state = [attrs.evolve(m, id=None) for m in history(8)]
        event, _ = l2_round(compressor, state)
        assert event.anchor is not None and event.anchor.last is not None
        assert event.anchor.last.startswith("sha:")
        model = ScriptedModel(["ok"])
        shorter = state[2:]
        compressor.call(shorter, model, event=event)
        assert model.calls[-1] == [event.summary_message, *state[event.cutoff :]]


def _call(
    compressor: Compressor,
    state: list[Message],
    model: ScriptedModel,
    mode: str,
    event: SummarizationEvent | None,
) -> CallOutcome:
    if mode == "sync":
        return compressor.call(state, model, event=event)

    async def run() -> CallOutcome:
        return await compressor.acall(state, model.acall, event=event)

    return anyio.run(run)


def _plain(role: str, text: str) -> Message:
    return Message(role=role, content=text)  # no id: known by its content hash


def look_alike_history() -> list[Message]:
    """Prose without ids, ending ``A"ok", U"continue", U"IMPORTANT: use postgres",
    A"ok", U"continue"``: an L2 round keeps the last four, so the pair around its
    cutoff (``A"ok", U"continue"``) occurs again three messages later."""
    prose = [attrs.evolve(m, id=None) for m in history(10, 120)]
    tail = [
        ("assistant", "ok"),
        ("user", "continue"),
        ("user", "IMPORTANT: use postgres"),
        ("assistant", "ok"),
        ("user", "continue"),
    ]
    return [*prose, *(_plain(role, text) for role, text in tail)]


class TestLookAlikeAnchors:
    """Messages without ids are known by content hashes, which look-alike messages
    share: the event is moved only where its place is certain, else dropped."""

    @pytest.mark.parametrize("mode", ["sync", "async"])
    def test_removing_the_oldest_never_anchors_on_a_look_alike_pair(
        self, mode: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """After the 3 oldest (summarized) messages are removed, the look-alike pair
        sits where the cutoff was. ARS does not trust it (the history no longer starts
        with the same message; the pair occurs twice): the summary is dropped with a
        warning and every message, "use postgres" included, reaches the model."""
        compressor, _ = engine()
        state = look_alike_history()
        event, view = l2_round(compressor, state)
        assert [m.text for m in view[1:]] == [
            "continue",
            "IMPORTANT: use postgres",
            "ok",
            "continue",
        ]
        edited = [*state[3:], _plain("assistant", "ok"), _plain("user", "which database?")]
        later, emitter = engine(summary_threshold=50)  # no new L2 round after the edit
        model = ScriptedModel(["postgres"])
        with caplog.at_level(logging.WARNING, logger="ars"):
            outcome = _call(later, edited, model, mode, event)
        assert model.calls[-1] == edited
        assert outcome.update is not None and outcome.update.clear_event
        assert "no longer matches" in caplog.text
        assert [e.phase for e in emitter.events] == ["started", "failed"]

    @pytest.mark.parametrize("mode", ["sync", "async"])
    def test_a_unique_look_alike_after_the_real_pair_went_is_not_trusted(self, mode: str) -> None:
        """The first kept message is removed, so the real pair is gone and the
        look-alike pair is the only one left: the summarized messages before it are
        not the ones the event remembers, so it is dropped, not moved past "use
        postgres"."""
        compressor, _ = engine()
        state = look_alike_history()
        event, _ = l2_round(compressor, state)
        edited = [*state[: event.cutoff], *state[event.cutoff + 1 :], _plain("user", "db?")]
        later, _ = engine(summary_threshold=50)
        model = ScriptedModel(["postgres"])
        outcome = _call(later, edited, model, mode, event)
        assert model.calls[-1] == edited
        assert outcome.update is not None and outcome.update.clear_event

    @pytest.mark.parametrize("mode", ["sync", "async"])
    def test_an_unedited_history_of_look_alikes_keeps_its_summary(self, mode: str) -> None:
        """Nothing edited: the anchor (pair, window, first message) is where it was,
        the summary stays and nothing is persisted."""
        compressor, _ = engine()
        state = look_alike_history()
        event, _ = l2_round(compressor, state)
        assert event.anchor is not None and len(event.anchor.window) == 4
        state = [*state, _plain("assistant", "ok"), _plain("user", "continue")]
        later, _ = engine(summary_threshold=50)
        model = ScriptedModel(["ok"])
        outcome = _call(later, state, model, mode, event)
        assert model.calls[-1] == [event.summary_message, *state[event.cutoff :]]
        assert outcome.update is None

    def test_an_anchor_stored_before_windows_is_moved_only_when_unique(self) -> None:
        """An event stored by an older version (a pair without window) is not moved
        onto one of two look-alike pairs either."""
        compressor, _ = engine()
        state = look_alike_history()
        event, _ = l2_round(compressor, state)
        raw = event.to_dict()
        raw["anchor"] = {"last": raw["anchor"]["last"], "next": raw["anchor"]["next"]}
        legacy = SummarizationEvent.from_dict(raw)
        # the oldest removed and the pair found twice at or before the old place
        edited = [*state[3:], _plain("user", "db?")]
        later, _ = engine(summary_threshold=50)
        model = ScriptedModel(["ok"])
        later.call(edited, model, event=legacy)
        assert model.calls[-1][-4:] == edited[-4:]
        assert any(m.text == "IMPORTANT: use postgres" for m in model.calls[-1])


class TestBadCutoffs:
    """An event whose cutoff is outside the history is dropped, never applied."""

    @pytest.mark.parametrize("cutoff", [-1, 6, 9], ids=["negative", "equal", "beyond"])
    def test_cutoff_outside_the_history_is_dropped_not_summary_only(
        self, cutoff: int, caplog: pytest.LogCaptureFixture
    ) -> None:
        compressor, emitter = engine(summary_threshold=50)
        state = history(3)
        stale = SummarizationEvent(
            cutoff=cutoff, summary_message=Message(role="user", content="old summary")
        )
        model = ScriptedModel(["ok"])
        with caplog.at_level(logging.WARNING, logger="ars"):
            outcome = compressor.call(state, model, event=stale)
        assert model.calls == [state]
        assert outcome.update is not None and outcome.update.clear_event
        assert f"cutoff {cutoff} is outside" in caplog.text
        assert [e.phase for e in emitter.events] == ["started", "failed"]

    def test_event_without_anchor_keeps_working_and_adopts_one(self) -> None:
        """An event persisted by an older version (no anchor) is used by its
        position and gains an anchor, persisted once."""
        compressor, emitter = engine(summary_threshold=50)
        state = history(4)
        legacy = SummarizationEvent.from_dict(
            {
                "cutoff": 4,
                "summary_message": {"role": "user", "content": "old summary"},
                "file_path": None,
            }
        )
        assert legacy.anchor is None
        model = ScriptedModel(["ok"])
        outcome = compressor.call(state, model, event=legacy)
        assert model.calls == [[legacy.summary_message, *state[4:]]]
        assert outcome.update is not None and outcome.update.event is not None
        adopted = outcome.update.event
        assert adopted.cutoff == 4 and adopted.anchor is not None
        assert adopted.anchor.last == message_key(state[3])
        assert emitter.events == []  # nothing was dropped: no notice

    def test_orphan_tool_result_never_opens_the_kept_window(self) -> None:
        """A cutoff that lands on a tool result whose call was summarized moves
        forward past it (the provider would reject an orphan result)."""
        compressor, _ = engine(summary_threshold=50)
        c = ToolCall(id="call-1", name="echo", args={"text": "x"})
        state = [user("task"), assistant("", c), tool(c, "echo: x"), user("and?"), assistant("ok")]
        legacy = SummarizationEvent(cutoff=2, summary_message=Message(role="user", content="S"))
        model = ScriptedModel(["ok"])
        outcome = compressor.call(state, model, event=legacy)
        assert model.calls == [[legacy.summary_message, *state[3:]]]
        assert outcome.update is not None and outcome.update.event is not None
        assert outcome.update.event.cutoff == 3

    @pytest.mark.parametrize(
        "raw",
        [
            {"cutoff": "x", "summary_message": {"role": "user", "content": "s"}},
            {"cutoff": 1},
            {"cutoff": 1, "summary_message": {"role": "robot", "content": "s"}},
            {"cutoff": 1.5, "summary_message": {"role": "user", "content": "s"}},
            {"cutoff": 1, "summary_message": {"role": "user"}, "anchor": "nope"},
            ["not", "a", "mapping"],
        ],
    )
    def test_from_dict_raises_ars_error(self, raw: Any) -> None:
        with pytest.raises(ArsError):
            SummarizationEvent.from_dict(raw)


# ------------------------------------------------------------------ stateful


class EditedHistoryMachine(RuleBasedStateMachine):
    """Random appends, L2 rounds, removals (oldest, middle, all) and
    replacements by id. After every call the model's view is the summary (if
    it is still valid) followed by every state message it does not cover, in
    order, with every tool call next to its results."""

    def __init__(self) -> None:
        super().__init__()
        self.compressor = Compressor(
            small_config(summary_keep_messages=3, summary_tool_result_token_limit=300),
            backend=memory_backend(),
            summarizer=FakeSummarizer("SUMMARY"),
        )
        self.state: list[Message] = []
        self.event: SummarizationEvent | None = None
        self.covered: set[str] = set()  # identities of the messages the summary covers
        # the last covered and first uncovered message when the summary was last seen valid
        self.boundary: tuple[str | None, str | None] = (None, None)
        self.window: tuple[str, ...] = ()  # the summarized messages just before the boundary
        self.with_ids = True
        # per machine, so that every example replays identically
        self.counter = itertools.count(100_000)

    def _new(self, role: str, text: str, **kw: Any) -> Message:
        n = next(self.counter)
        return Message(
            role=role,
            content=f"{text} #{n}",
            id=f"h{n}" if self.with_ids else None,
            **kw,
        )

    def _units(self) -> list[list[int]]:
        """State indices grouped so that a tool call and its results stay together."""
        units: list[list[int]] = []
        for i, m in enumerate(self.state):
            if m.role == "tool" and units:
                units[-1].append(i)
            else:
                units.append([i])
        return units

    @rule(ids=st.booleans())
    @precondition(lambda self: not self.state)
    def choose_ids(self, ids: bool) -> None:
        self.with_ids = ids

    @rule(size=st.integers(5, 80), kind=st.sampled_from(["user", "assistant", "tool_pair"]))
    def append(self, size: int, kind: str) -> None:
        body = words(size, f"w{len(self.state)}")
        if kind == "tool_pair":
            n = next(self.counter)
            c = ToolCall(id=f"call-{n}", name="echo", args={"text": "x"})
            self.state.append(self._new("assistant", "", tool_calls=(c,)))
            self.state.append(self._new("tool", body, tool_call_id=c.id, name="echo"))
        else:
            self.state.append(self._new(kind, body))

    @rule(size=st.integers(5, 150))
    def call_model(self, size: int) -> None:
        self.state.append(self._new("user", words(size, "ask")))
        self._call()

    @rule(count=st.integers(1, 4))
    @precondition(lambda self: len(self.state) > 0)
    def remove_oldest(self, count: int) -> None:
        units = self._units()[:count]
        self._remove({i for u in units for i in u})

    @rule(data=st.data())
    @precondition(lambda self: len(self._units()) > 2)
    def remove_middle(self, data: st.DataObject) -> None:
        units = self._units()
        u = data.draw(st.integers(1, len(units) - 2))
        self._remove(set(units[u]))

    @rule()
    def remove_all(self) -> None:
        self._remove(set(range(len(self.state))))

    @rule(data=st.data())
    @precondition(lambda self: self.with_ids and any(m.role == "user" for m in self.state))
    def replace_by_id(self, data: st.DataObject) -> None:
        users = [i for i, m in enumerate(self.state) if m.role == "user"]
        i = data.draw(st.sampled_from(users))
        self.state[i] = attrs.evolve(self.state[i], content=f"replaced #{next(self.counter)}")

    def _remove(self, indices: set[int]) -> None:
        self.state = [m for i, m in enumerate(self.state) if i not in indices]

    def _call(self) -> None:
        model = ScriptedModel(["ok"])
        outcome = self.compressor.call(list(self.state), model, event=self.event)
        view = model.calls[-1]
        keys = [message_key(m) for m in self.state]
        uncovered = [m for m, k in zip(self.state, keys, strict=True) if k not in self.covered]
        had_covered = any(k in self.covered for k in keys)
        if outcome.level == "L2":
            new = outcome.update.event if outcome.update else None
            assert new is not None
            assert view[0] == new.summary_message
            assert view[1:] == self.state[new.cutoff :]
            # the new summary covers the old one and the messages up to its cutoff
            self.covered = set(keys[: new.cutoff])
            self.event = new
        else:
            had_event = self.event is not None
            self.event = apply(self.state, self.event, outcome)
            if self.event is None:
                assert view == self.state
                if had_event and had_covered and uncovered:
                    # dropped although covered and uncovered messages remain: only
                    # when the messages on both sides of the old boundary are gone
                    # (by id), or one of them or of the summarized messages just before
                    # the boundary (by content hash: look-alike messages share a hash,
                    # so ARS moves the event only where the window around it matches)
                    present = set(self.boundary) & set(keys)
                    if self.with_ids:
                        assert not present
                    else:
                        window_gone = not set(self.window) <= set(keys)
                        assert present != set(self.boundary) or window_gone
                self.covered = set()
            else:
                assert view == [self.event.summary_message, *uncovered]
        if self.event is not None:
            last = max(i for i, k in enumerate(keys) if k in self.covered)
            self.boundary = (keys[last], keys[last + 1] if last + 1 < len(keys) else None)
            self.window = tuple(keys[max(0, last + 1 - ANCHOR_WINDOW) : last + 1])
        assert view[-1] == self.state[-1], "the newest message did not reach the model"
        self._pairs_intact(view)

    @staticmethod
    def _pairs_intact(view: list[Message]) -> None:
        calls = {c.id for m in view for c in m.tool_calls}
        for m in view:
            if m.role == "tool":
                assert m.tool_call_id in calls, "a tool result reached the model without its call"


TestEditedHistoryMachine = EditedHistoryMachine.TestCase
TestEditedHistoryMachine.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
