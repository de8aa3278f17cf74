"""L2 does not churn: a round leaves the view under the L2 threshold, so the next
round waits for new messages to fill the window again (fewer than
``summary_keep_messages`` are kept when needed, never splitting a tool pair)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from ars_core import (
    MARK_SUMMARY,
    ApproxEstimator,
    Compressor,
    Message,
    SummaryConfig,
    read_messages,
)
from ars_core.estimate import message_tokens
from ars_core.l2 import select_cutoff
from ars_core.replay import replay_messages
from ars_core.summarize import summary_budget
from ars_core.testing import FakeSummarizer, ScriptedModel

from .helpers import assistant, call, tool, user, words

pytestmark = pytest.mark.spec("R21")

EST = ApproxEstimator()


def sized(*sizes: int) -> tuple[list[Message], object]:
    """Alternating user/assistant messages and a ``tokens(i)`` giving ``sizes[i]``."""
    msgs = [user(f"u{i}") if i % 2 == 0 else assistant(f"a{i}") for i in range(len(sizes))]
    return msgs, lambda i: sizes[i]


class TestCutoffWithABudget:
    """``select_cutoff`` with the tokens the kept messages may take."""

    @pytest.mark.spec("R21")
    def test_keeps_fewer_than_keep_when_they_do_not_fit(self) -> None:
        msgs, tokens = sized(*[100] * 10)
        assert select_cutoff(msgs, 4) == 6
        assert select_cutoff(msgs, 4, budget=250, tokens=tokens) == 8  # 2 kept: 200 tokens
        assert select_cutoff(msgs, 4, budget=400, tokens=tokens) == 6  # keep 4 fits
        assert select_cutoff(msgs, 4, budget=10_000, tokens=tokens) == 6  # never more than keep

    @pytest.mark.spec("R21")
    def test_never_splits_a_tool_pair_and_keeps_the_last_call_with_its_results(self) -> None:
        c1, c2 = call("read"), call("read")
        msgs = [user("u0"), assistant("a1"), user("u2"), assistant("", c1, c2)]
        msgs += [tool(c1, "r1"), tool(c2, "r2")]
        sizes = [100, 100, 100, 10, 10, 500]

        def tokens(i: int) -> int:
            return sizes[i]

        # 2 would be kept by count; no suffix fits 100 tokens: the smallest valid kept
        # part is the calling assistant with both results
        assert select_cutoff(msgs, 2, budget=100, tokens=tokens) == 3
        sizes[5] = 10  # now the results fit, but a window may not open with a result
        assert select_cutoff(msgs, 1, budget=25, tokens=tokens) == 3

    @pytest.mark.spec("R21", "R42")
    def test_cuts_keep_or_fewer_messages_only_when_they_do_not_fit(self) -> None:
        msgs, tokens = sized(1000, 10, 10)
        assert select_cutoff(msgs, 10) is None
        assert select_cutoff(msgs, 10, budget=100, tokens=tokens) == 1
        assert select_cutoff(msgs, 10, budget=2000, tokens=tokens) is None
        summary = Message(role="user", content="S", metadata={MARK_SUMMARY: True})
        # the previous summary is never cut; one message after it: nothing to summarize
        assert select_cutoff([summary, user("x")], 10, start=1, budget=0, tokens=tokens) is None


def growing_conversation(turns: int) -> list[Message]:
    """A task, then ``turns`` tool rounds: ~250-token results (under L1's 300-token
    limit, so L1 leaves them) and ~100-token notes."""
    out: list[Message] = [user("TASK: make the parser accept empty input. " + words(40, "task"))]
    for i in range(turns):
        c = call("bash", command=f"pytest -q tests/test_{i}.py")
        out += [
            assistant(f"step {i}", c),
            tool(c, words(250, f"r{i}")),
            user(f"note {i}: " + words(100, f"n{i}")),
        ]
    return out


def gaps(calls: list[tuple[str | None, int, int]]) -> list[int]:
    """Tokens of new messages between one L2 round's view and the next round's request."""
    rounds = [i for i, (level, _, _) in enumerate(calls) if level == "L2"]
    return [calls[b][1] - calls[a][2] for a, b in itertools.pairwise(rounds)]


def replay(engine: Compressor, conversation: list[Message]) -> list[tuple[str | None, int, int]]:
    """Call the engine at every assistant turn as an agent loop would (state update
    applied); ``(level, tokens_before, tokens_after)`` per call."""
    state: list[Message] = []
    event = None
    out = []
    for message in conversation:
        if message.role == "assistant":
            outcome = engine.call(state, ScriptedModel(), event=event)
            if outcome.update is not None and outcome.update.event is not None:
                event = outcome.update.event
            out.append((outcome.level, outcome.tokens_before, outcome.tokens_after))
        state.append(message)
    return out


@pytest.mark.spec("R5", "R21", "R25")
def test_a_long_run_at_a_small_t_summarizes_once_per_real_overflow() -> None:
    """T = 2K, L2 threshold 819: every L2 round leaves a view at most the L2 threshold,
    so two rounds are at least T - 819 tokens of new messages apart, and each round
    makes exactly one summary call. The same run with the fixed rounds (10 messages
    kept) churns: some rounds come after fewer new tokens, and it summarizes more."""
    config = SummaryConfig(summary_threshold=2, summary_keep_messages=10)
    l2 = config.l2_threshold_tokens
    conversation = growing_conversation(60)

    lean = FakeSummarizer("The agent ran the tests of the parser. " + words(60, "sum"))
    calls = replay(
        Compressor(config, estimator=EST, summarizer=lean, lean_rounds=True), conversation
    )
    rounds = [i for i, (level, _, _) in enumerate(calls) if level == "L2"]
    assert len(lean.calls) == len(rounds) >= 3
    assert all(calls[i][2] <= l2 for i in rounds)
    assert min(gaps(calls)) >= config.threshold_tokens - l2
    appended = sum(message_tokens(EST, m) for m in conversation)
    assert len(rounds) <= 1 + appended // (config.threshold_tokens - l2)

    fixed = FakeSummarizer("The agent ran the tests of the parser. " + words(60, "sum"))
    churn = replay(
        Compressor(config, estimator=EST, summarizer=fixed, lean_rounds=False), conversation
    )
    assert min(gaps(churn)) < config.threshold_tokens - l2
    assert len(fixed.calls) > len(lean.calls)


@pytest.mark.spec("R21", "R23")
def test_a_lean_round_keeps_the_task_whole_in_a_summary_sized_from_it() -> None:
    """The summary's bound is the task's room plus T/8: the extractive summary holds the
    whole task, and the view the round sends is under the L2 threshold."""
    config = SummaryConfig(summary_threshold=2, summary_keep_messages=10)
    conversation = growing_conversation(12)
    task = conversation[0].text
    out = None
    state: list[Message] = []
    for message in conversation:
        if message.role == "assistant" and out is None:
            outcome = Compressor(config, estimator=EST, lean_rounds=True).call(
                state, ScriptedModel()
            )
            if outcome.level == "L2":
                out = outcome
        state.append(message)
    assert out is not None and out.update is not None and out.update.event is not None
    summary = out.update.event.summary_message
    assert task in summary.text
    bound = summary_budget(config, EST.count_text(task))
    assert bound == -(-EST.count_text(task) * 4 // 3) + 2048 // 8
    assert out.tokens_after <= config.l2_threshold_tokens
    assert out.update.event.retention is not None and out.update.event.retention.task_kept


@pytest.mark.spec("R21", "R5")
def test_a_recorded_run_at_8k_never_summarizes_on_consecutive_calls(
    trajectories_dir: Path,
) -> None:
    """A real recorded run (the shared runs' django__django-15278) replayed at
    T = 8K: with the fixed rounds some L2 rounds follow each other on consecutive
    calls; with lean rounds none do, and fewer summaries are made."""
    run = read_messages(trajectories_dir / "django__django-15278.jsonl.gz")
    config = SummaryConfig(summary_threshold=8)
    levels: dict[bool, list[str | None]] = {True: [], False: []}
    summaries = {}
    for lean in (False, True):
        report = replay_messages(
            run,
            config=config,
            on_call=lambda outcome, _system, lean=lean: levels[lean].append(outcome.level),
            compressor_options={"lean_rounds": lean},
        )
        summaries[lean] = report.summary_calls

    def consecutive(seq: list[str | None]) -> int:
        return sum(1 for a, b in itertools.pairwise(seq) if a == b == "L2")

    assert consecutive(levels[False]) > 0
    assert consecutive(levels[True]) == 0
    assert 0 < summaries[True] < summaries[False]
