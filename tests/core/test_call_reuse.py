"""An engine call works out once what it reads several times: the first messages of
the history it checked, taken as a part of it (:func:`ars_core.per_call.head`), are
not compared again, message by message, by the memos that track them; and the
summarized part a round reads when it cuts and again when it summarizes takes the
first answer (:func:`ars_core.per_call.once_per_call`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from ars_core import ApproxEstimator, Compressor, Message, cutoff, flow, l1_user, memo, per_call
from ars_core.l1 import L1Plan, plan_l1
from ars_core.l1_user import offload_oversized_user_messages
from ars_core.l2 import select_cutoff
from ars_core.memo import L1_USER, Memo, active
from ars_core.testing import FakeSummarizer

from .helpers import memory_backend, small_config
from .test_round_memo import EST, agent_run, fresh

pytestmark = pytest.mark.spec("R51", "R21", "R23")


def _rounds(monkeypatch: pytest.MonkeyPatch, take_head: Any) -> list[tuple[int, int]]:
    """L2 rounds over a growing agent run (a new list each call, one message longer),
    the parts taken by ``take_head``: per round, how many heads were taken and how
    many comparisons :func:`~ars_core.memo.unchanged_prefix` made with one of them."""
    taken: list[Sequence[Message]] = []
    compared: list[Sequence[Any]] = []

    def spy_head(messages: Sequence[Message], start: int, end: int) -> Sequence[Message]:
        part = take_head(messages, start, end)
        taken.append(part)
        return part

    real = memo.unchanged_prefix

    def spy_compare(known: Sequence[object], messages: Sequence[object]) -> bool:
        compared.append(messages)
        return real(known, messages)

    monkeypatch.setattr(cutoff, "head", spy_head)
    monkeypatch.setattr(flow, "head", spy_head)
    monkeypatch.setattr(memo, "unchanged_prefix", spy_compare)
    engine = Compressor(small_config(), backend=memory_backend(), summarizer=FakeSummarizer("S"))
    history, out = agent_run(40), []
    for step in range(40, 60):
        history = history + agent_run(step + 1)[step:]
        if select_cutoff(history, 4) is None:
            continue
        taken.clear()
        compared.clear()
        outcome = engine.compact(history)
        assert outcome.level == "L2"
        heads = {id(p): p for p in taken if p}
        out.append((len(heads), sum(1 for m in compared if heads.get(id(m)) is m)))
    return out


def test_heads_of_the_checked_history_are_not_compared_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every round takes the summarized part (to cut, archive, audit it, write its task)
    as heads of the history it checked: once the memos met the history (its first two
    rounds), a memo compares a head with what it remembers only when it remembers more
    than the head holds (what lies past the head may have parted from the history: it
    is not taken on trust): some rounds compare none, and heads are compared less than
    half as often as a plain slice of the same messages, which is compared in every
    round (the counting sees it)."""
    rounds = _rounds(monkeypatch, per_call.head)[2:]
    assert len(rounds) > 10 and all(taken >= 3 for taken, _ in rounds)
    assert any(compared == 0 for _, compared in rounds)
    monkeypatch.undo()
    sliced = _rounds(monkeypatch, lambda messages, start, end: messages[start:end])[2:]
    assert all(compared >= 3 for _, compared in sliced)
    assert sum(c for _, c in rounds) * 2 <= sum(c for _, c in sliced)


def test_a_head_is_known_only_for_the_history_the_call_checked() -> None:
    """A head of the checked history (or of such a head) is known as its first
    messages; a part not from its start, a part of another list, or a part taken
    outside an engine call is not."""
    history = agent_run(30)
    other = list(history)
    with active(Memo()) as m:
        m.checked(history)
        first = per_call.head(history, 0, 20)
        assert memo._checked_this_call(first) is not None
        assert memo._checked_this_call(per_call.head(first, 0, 10)) is not None
        assert memo._checked_this_call(per_call.head(history, 1, 20)) is None
        assert memo._checked_this_call(per_call.head(other, 0, 20)) is None
        assert memo._checked_this_call(history[:20]) is None
    assert memo._checked_this_call(per_call.head(history, 0, 20)) is None


def test_a_round_reads_its_summarized_part_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The round's cut and its summary input read the same part of the L1 view (the
    very sequence): its conversation's turns are worked out once a round."""
    calls: list[int] = []
    real = cutoff.turn_messages

    def counting(messages: Sequence[Message]) -> list[Message]:
        calls.append(len(messages))
        return real(messages)

    monkeypatch.setattr(cutoff, "turn_messages", counting)
    engine = Compressor(small_config(), backend=memory_backend(), summarizer=FakeSummarizer("S"))
    history, rounds = agent_run(40), 0
    for step in range(40, 50):
        history = history + agent_run(step + 1)[step:]
        if select_cutoff(history, 4) is None:
            continue
        calls.clear()
        assert engine.compact(history).level == "L2"
        assert len(calls) == 1
        rounds += 1
    assert rounds > 5


def test_once_per_call_answers_the_very_same_objects_once() -> None:
    """Within an engine call the same sequence (at the same length) with the same other
    arguments gets the first answer; an equal copy, the sequence grown, or another
    argument is worked out again; outside an engine call, every time."""
    seen: list[tuple[int, object]] = []

    @per_call.once_per_call
    def answer(messages: Sequence[object], of: object) -> int:
        seen.append((len(messages), of))
        return len(seen)

    est, other = ApproxEstimator(), ApproxEstimator()
    items: list[object] = [1, 2, 3]
    with active(Memo()):
        assert answer(items, est) == answer(items, est) == 1
        assert answer(list(items), est) == 2
        assert answer(items, other) == 3
        items.append(4)
        assert answer(items, est) == 4
    assert answer(items, est) == 5 and answer(items, est) == 6
    assert seen == [(3, est), (3, est), (3, other), (4, est), (4, est), (4, est)]


def test_a_longer_view_has_only_its_new_user_messages_looked_at(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The user messages L1 makes smaller are found as the view grows: a view one
    message longer looks up the offload of its new message (when a user's) and of
    those already found, not of every user message; its plan equals a fresh memo's."""
    looked: list[Message] = []

    class Counting:  # L1's family of user offloads, its reads counted
        def __getattr__(self, name: str) -> Any:
            return getattr(L1_USER, name)

        def get(self, m: Message, key: Any = None) -> Any:
            looked.append(m)
            return L1_USER.get(m, key)

    monkeypatch.setattr(l1_user, "L1_USER", Counting())

    def offload(history: Sequence[Message]) -> L1Plan:
        plan = plan_l1(history, estimator=EST, tool_token_limit=40, arg_char_limit=6)
        return offload_oversized_user_messages(plan, estimator=EST, threshold=12, preview_tokens=8)

    history, engine = agent_run(80), Memo()
    for n in range(40, 81):
        looked.clear()
        with active(engine):
            planned = offload(history[:n])
        read = len(looked)
        assert planned == fresh(offload, history[:n])
        found = sum(m.role == "user" for m in planned.replaced.values())
        if n > 40:  # the new message, and each user message found above the threshold
            assert read <= found + 1
    assert found + 1 < sum(m.role == "user" for m in history)  # not every user message
