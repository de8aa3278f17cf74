"""Long chats: ``keep`` is honored and the task is the first and the newest request.

After an L2 round the view keeps at least the newest ``min(keep, the messages
that fit in half of the L2 threshold)`` verbatim, the newest user message among
them, and the summary is sized to share the room under the L2 threshold with
them, so the next call does not summarize again. A task larger than its budget
keeps its first and newest requests, each elided in the middle with a marker.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from ars_core import ApproxEstimator, Compressor, Message, SummaryConfig
from ars_core.budget import kept_tail_room, thresholds
from ars_core.estimate import message_tokens
from ars_core.retention import task_statement
from ars_core.summarize import REQUEST_ELIDED, parse_summary
from ars_core.testing import FakeSummarizer, ScriptedModel

from .helpers import assistant, memory_backend, user, words

EST = ApproxEstimator()
KEEP = 10
CHAT = SummaryConfig(summary_threshold=16, summary_keep_messages=KEEP)  # T 16,384


def chat(n: int = 121) -> list[Message]:
    """``n`` alternating user / assistant messages of 150-200 tokens, the user's first."""
    return [
        (user if i % 2 == 0 else assistant)(f"turn {i}: " + words(150 + (i * 37) % 51, f"w{i}"))
        for i in range(n)
    ]


async def _acall(engine: Compressor, state: list[Message], event: Any) -> Any:
    return await engine.acall(state, ScriptedModel(estimator=EST).acall, event=event)


def replay(
    engine: Compressor, conversation: list[Message], *, asynchronous: bool = False
) -> list[tuple[int, Any, list[Message]]]:
    """One request per user message, the next assistant message appended after it; the
    state update applied as an adapter would. Every call: (state length, outcome, view)."""
    state: list[Message] = []
    event = None
    calls = []
    for message in conversation:
        state.append(message)
        if message.role != "user":
            continue
        if asynchronous:
            outcome = anyio.run(_acall, engine, list(state), event)
        else:
            outcome = engine.call(list(state), ScriptedModel(estimator=EST), event=event)
        if outcome.update is not None and outcome.update.event is not None:
            event = outcome.update.event
        calls.append((len(state), outcome, list(outcome.view)))
    return calls


def fitting(messages: list[Message], room: int) -> int:
    """How many of the newest ``messages`` fit ``room`` tokens."""
    total, n = 0, 0
    for m in reversed(messages):
        total += message_tokens(EST, m)
        if total > room:
            break
        n += 1
    return n


@pytest.mark.spec("R21", "R59")
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_long_chat_keeps_the_newest_messages_after_every_round(asynchronous: bool) -> None:
    """121 messages of 150-200 tokens at T = 16K, keep 10: every L2 round's view is the
    summary and the newest 10 state messages, the same objects (10 is what fits in half
    of the L2 threshold, and more); the view falls under the L2 threshold, so the next
    call sends the state as it is, without a round."""
    conversation = chat()
    engine = Compressor(CHAT, estimator=EST, backend=memory_backend())
    calls = replay(engine, conversation, asynchronous=asynchronous)
    rounds = [i for i, (_, outcome, _) in enumerate(calls) if outcome.level == "L2"]
    assert rounds, "the chat is larger than T: it must be summarized"
    l2 = thresholds(CHAT, EST)[1]  # in the estimator's units (its safety margin applied)
    half = kept_tail_room(CHAT, l2)  # a chat has no system message or tools
    for i in rounds:
        length, outcome, view = calls[i]
        state = conversation[:length]
        kept = view[1:]
        assert view[0] is outcome.update.event.summary_message
        assert len(kept) >= min(KEEP, fitting(state, half)) == KEEP
        assert all(a is b for a, b in zip(kept, state[-len(kept) :], strict=True))
        assert kept[-1] is state[-1] and state[-1].role == "user"  # the newest user message
        assert EST.count(view) <= CHAT.l2_threshold_tokens
        if i + 1 < len(calls):  # the next call does not summarize again
            assert calls[i + 1][1].level is None


@pytest.mark.spec("R59")
def test_a_chat_summarizes_no_more_often_than_fixed_rounds() -> None:
    """Sizing the summary instead of dropping the kept tail: no more rounds on the chat
    than with ``lean_rounds=False``, and both keep 10 messages after every round."""
    conversation = chat(201)
    counts = {}
    for lean in (True, False):
        engine = Compressor(CHAT, estimator=EST, backend=memory_backend(), lean_rounds=lean)
        calls = replay(engine, conversation)
        views = [view for _, outcome, view in calls if outcome.level == "L2"]
        assert views and all(len(view) - 1 >= KEEP for view in views)
        counts[lean] = len(views)
    assert counts[True] <= counts[False]


@pytest.mark.spec("R59")
def test_a_user_summary_budget_leaves_the_tail_the_rest() -> None:
    """Keep 8 of ~340-token messages at T2 = 4,096: half of it (2,048) holds fewer, and
    those are kept; with ``summary_max_tokens=600`` the tail may take what that budget
    leaves under T2, and all 8 are kept."""
    conversation = [(user if i % 2 == 0 else assistant)(words(300, f"u{i}")) for i in range(31)]
    kept = {}
    for budget in (None, 600):
        config = SummaryConfig(
            summary_threshold=8,
            summary_keep_messages=8,
            summary_l2_trigger_ratio=0.5,
            summary_max_tokens=budget,
        )
        calls = replay(Compressor(config, estimator=EST, backend=memory_backend()), conversation)
        half = kept_tail_room(config, thresholds(config, EST)[1])
        kept[budget] = {
            (len(view) - 1, fitting(conversation[:length], half))
            for length, outcome, view in calls
            if outcome.level == "L2"
        }
    assert kept[None] and all(n == half < 8 for n, half in kept[None])
    assert kept[600] and all(n == 8 for n, _ in kept[600])


def _elided(section: str, request: str) -> None:
    assert section.startswith(request[:40]) and section.endswith(request[-40:])
    assert REQUEST_ELIDED in section and len(section) < len(request)


@pytest.mark.spec("R23", "R60")
def test_the_first_and_the_newest_request_survive_a_task_larger_than_its_budget() -> None:
    """Both the request that set the work and the newest summarized request are larger
    than the summary budget (a user budget of 600 tokens): the summary keeps the head
    and tail of each, with a marker that says how much was left out and that the whole
    is in the history file the summary names; the request in between is not the task."""
    first = "FIRST-HEAD " + words(2500, "first") + " FIRST-TAIL"
    middle = "MIDDLE " + words(200, "middle")
    newest = "NEWEST-HEAD " + words(2500, "newest") + " NEWEST-TAIL"
    state = [
        user(first),
        assistant(words(300, "a0")),
        user(middle),
        assistant(words(300, "a1")),
        user(newest),  # the newest request summarized: the 4 kept are answers and a question
        *[assistant(words(300, f"b{i}")) for i in range(6)],
        user("and now?"),
    ]
    config = SummaryConfig(summary_threshold=8, summary_keep_messages=4, summary_max_tokens=600)
    engine = Compressor(config, estimator=EST, backend=memory_backend())
    out = engine.call(state, ScriptedModel(estimator=EST), event=None)
    assert out.level == "L2"
    event = out.update.event
    assert task_statement(state[: event.cutoff])[0] == first
    text = event.summary_message.text
    tasks = [body for header, body in parse_summary(text) if header.startswith("Task")]
    _elided(tasks[0], first)
    assert any(body.startswith("NEWEST-HEAD") for body in tasks)
    _elided(next(body for body in tasks if body.startswith("NEWEST-HEAD")), newest)
    assert f"saved at {event.file_path}" in text
    assert EST.count_text(text) <= 600 + 100  # the budget, and the summary's frame


@pytest.mark.spec("R23", "R60")
def test_the_summary_model_reads_the_first_and_newest_request_elided() -> None:
    """The summary input (a model's) keeps the first and the newest request, head and
    tail with the marker, when they are larger than their room; the other user turns
    are content."""
    first = "FIRST-HEAD " + words(3000, "first") + " FIRST-TAIL"
    newest = "NEWEST-HEAD " + words(3000, "newest") + " NEWEST-TAIL"
    state = [
        user(first),
        *[
            m
            for i in range(8)
            for m in (assistant(words(200, f"a{i}")), user(f"aside {i} " + words(200, f"s{i}")))
        ],
        assistant("ok"),
        user(newest),  # the newest request summarized: the 4 kept are its answers and a question
        *[assistant(words(200, f"b{i}")) for i in range(5)],
        user("and now?"),
    ]
    summarizer = FakeSummarizer("THE SUMMARY")
    config = SummaryConfig(summary_threshold=8, summary_keep_messages=4)
    engine = Compressor(config, estimator=EST, summarizer=summarizer, summary_input_tokens=3000)
    out = engine.call(state, ScriptedModel(estimator=EST))
    assert out.level == "L2"
    ((history, _),) = summarizer.calls
    texts = [m.text for m in history]
    _elided(next(t for t in texts if t.startswith("FIRST-HEAD")), first)
    _elided(next(t for t in texts if t.startswith("NEWEST-HEAD")), newest)
    assert sum(message_tokens(EST, m) for m in history) <= 3000
