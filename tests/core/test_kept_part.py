"""A call with a summary event reads the part the event keeps: while the event's
anchor (the last summarized message and the first kept one) sits where it was, the
summarized part is neither checked nor converted below T, so a call costs what was
appended, not the history. An L2 round reads the summarized part (its requests make
the task statement) and checks it then: the views, events and state updates are
those of the same history given as records throughout."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from ars_core import (
    CallOutcome,
    Compressor,
    ExtractiveSummarizer,
    Message,
    SummarizationEvent,
    message_to_dict,
    to_openai,
)

from .helpers import assistant, call, memory_backend, small_config, tool, user, words

pytestmark = pytest.mark.spec("R1", "R10", "R51", "R60")

MODES = pytest.mark.parametrize("mode", ["sync", "async"])


def turn(i: int) -> list[Message]:
    c = call("bash", command=f"make step{i}")
    return [
        user(f"request {i}: " + words(30, seed=f"r{i}")),
        assistant("", c),
        tool(c, f"output {i}: " + words(60, seed=f"o{i}")),
        assistant(f"answer {i}: " + words(20, seed=f"a{i}")),
    ]


def engine() -> Compressor:
    return Compressor(small_config(), backend=memory_backend(), summarizer=ExtractiveSummarizer())


def run(mode: str, c: Compressor, history: Sequence[Any], event: SummarizationEvent | None) -> Any:
    def model(view: Sequence[Message]) -> str:
        return "ok"

    if mode == "sync":
        return c.call(history, model, event=event)

    async def amodel(view: Sequence[Message]) -> str:
        return "ok"

    return anyio.run(lambda: c.acall(history, amodel, event=event))


def observed(outcome: CallOutcome) -> tuple[Any, ...]:
    """What a call gives back, without the parts that differ by run (ids, times)."""
    update = outcome.update
    event = update.event if update is not None else None
    return (
        [message_to_dict(m) for m in outcome.view],
        outcome.level,
        outcome.tokens_before,
        outcome.tokens_after,
        [(e.phase, e.level, e.tokens_before, e.tokens_after, e.cutoff) for e in outcome.events],
        None if event is None else (event.cutoff, event.summary_message.text, event.anchor),
        None if update is None else update.replaced,
    )


@MODES
def test_a_call_with_an_event_looks_at_the_kept_part_alone(mode: str) -> None:
    """After a round, a call below T looks at none of the messages (the summarized part
    is not checked, the kept part is read by the call itself): the count of messages
    checked stays where the round left it while the history grows, and each view is
    the summary and every message from the cutoff on."""
    c = engine()
    history: list[Message] = []
    event = None
    checked: list[int] = []
    levels: list[str | None] = []
    for i in range(14):
        history += turn(i)
        outcome = run(mode, c, history, event)
        levels.append(outcome.level)
        if outcome.update is not None and outcome.update.event is not None:
            event = outcome.update.event
        checked.append(c._as_messages.checked)
        if outcome.level is None and event is not None:
            assert [message_to_dict(m) for m in outcome.view] == [
                message_to_dict(m) for m in [event.summary_message, *history[event.cutoff :]]
            ]
    rounds = [i for i, level in enumerate(levels) if level == "L2"]
    assert len(rounds) >= 2
    quiet = [i for i in range(rounds[0] + 1, len(levels)) if levels[i] is None]
    assert quiet
    for i in quiet:  # no message looked at below T: the count is the last round's
        last_round = max(r for r in rounds if r < i)
        assert checked[i] == checked[last_round]
    # a round checks what was appended since the last check, not the whole history
    assert checked[rounds[-1]] == 4 * (rounds[-1] + 1)


@MODES
def test_a_summarized_part_given_as_dicts_is_read_when_a_round_reads_it(mode: str) -> None:
    """The same conversation, once as records and once with every summarized message
    as an OpenAI dict: below T the dicts are never read (the views are equal), and the
    next round reads them with ``from_openai`` (its task statement holds their
    requests): the same views, events, counts and state updates call after call."""
    records, mixed = engine(), engine()
    history: list[Message] = []
    event = None
    events_seen = 0
    for i in range(16):
        history += turn(i)
        given: list[Any] = list(history)
        if event is not None:  # what the event summarizes, as dicts
            given[: event.cutoff - 1] = [to_openai(m) for m in history[: event.cutoff - 1]]
        a = run(mode, records, history, event)
        b = run(mode, mixed, given, event)
        assert observed(a) == observed(b)
        if a.update is not None and a.update.event is not None:
            event = a.update.event
            events_seen += 1
    assert events_seen >= 2
