"""The controls users of the peers expect, on a real LangGraph agent
(``create_agent`` with real checkpointers): oversized user messages offloaded
in the view, T following the model's profile."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from ars_core import FsspecBackend, SummaryConfig, describe_event
from ars_langchain import ArsSummarizationMiddleware
from ars_langchain.testing import FakeToolChatModel
from tests.langchain.helpers import SYSTEM, Runner, build_agent, prose
from tests.langchain.test_scenarios import cfg, kind, runner

__all__ = ["kind", "runner"]  # fixtures: every checkpointer, sync and async


@pytest.mark.spec("R10", "R12", "R5")
def test_oversized_user_message_reaches_the_model_as_a_file_and_preview(
    runner: Runner, thread_id: str
) -> None:
    """A user message larger than T: the model gets the path and a head-and-tail
    preview, the file holds the exact text (named by its SHA-256), and the
    checkpoint keeps the original message."""
    text = prose("paste", 1500) + " LAST LINE: the error is here"
    model = FakeToolChatModel([AIMessage("read it", id="a1")])
    backend = FsspecBackend(f"memory://controls-{thread_id}")
    mw = ArsSummarizationMiddleware(SummaryConfig(summary_threshold=1), backend=backend)
    seed = [HumanMessage(text, id="h1")]
    result = runner.run(build_agent(model, mw), [{"messages": seed}], cfg(thread_id))
    assert result.runs[0].error is None

    digest = hashlib.sha256(text.encode()).hexdigest()
    path = f"outputs/large_user_messages/user-{digest}.txt"
    system, sent = model.main_calls[0]
    assert system == SystemMessage(SYSTEM)
    assert isinstance(sent, HumanMessage) and sent.id == "h1"
    assert sent.text.startswith(
        f"[ARS: user message offloaded: {len(text)} characters (~"
    ) and sent.text.split("\nPreview:\n")[0].endswith(
        f"tokens) saved to {path}. Read that file for the full message.]"
    )
    preview = sent.text.split("\nPreview:\n", 1)[1]
    assert text.startswith(preview.split("\n[... ")[0][:200])
    assert preview.endswith("LAST LINE: the error is here")
    assert len(sent.text) < len(text) // 5
    assert backend.scoped(thread_id).read_text(path) == text
    assert result.state["messages"][0] == HumanMessage(text, id="h1")
    assert "_summarization_event" not in result.state
    assert [(e["phase"], e["level"], e.get("offloaded")) for e in result.runs[0].compression] == [
        ("started", "L1", None),
        ("completed", "L1", [path]),
    ]


def _turns() -> list[dict[str, Any]]:
    """Four exchanges of ~200 tokens each: about 1,700 tokens with the system
    prompt and the tool schemas, no message above 300 tokens."""
    seed: list[Any] = []
    for i in range(4):
        seed += [HumanMessage(prose(f"q{i}", 150), id=f"h{i}"), AIMessage(prose(f"a{i}", 150))]
    return [{"messages": [*seed, HumanMessage("go on", id="h-last")]}]


@pytest.mark.spec("R2", "R35")
def test_threshold_follows_the_model_profile_when_not_configured(
    runner: Runner, thread_id: str
) -> None:
    """No ``summary_threshold``: T is 85% of the profile's ``max_input_tokens``
    (exactly 1,275 for 1,500), the events say where T came from; the same
    request under a 4,000-token window (T 3,400) triggers nothing."""
    events: dict[int, list[dict[str, Any]]] = {}
    for window in (1500, 4000):
        model = FakeToolChatModel(
            [AIMessage("S", id="s"), AIMessage("done", id="a")],
            profile={"max_input_tokens": window},
        )
        mw = ArsSummarizationMiddleware(SummaryConfig(summary_l2_trigger_ratio=1.0))
        result = runner.run(build_agent(model, mw), _turns(), cfg(f"{thread_id}-{window}"))
        assert result.runs[0].error is None
        events[window] = result.runs[0].compression
    started, completed = events[1500]
    source = "85% of the model's 1,500-token input window"
    assert (started["phase"], started["threshold"], started["threshold_source"]) == (
        "started",
        1275,
        source,
    )
    assert 1275 <= started["tokens_before"] < 3400
    assert describe_event(started) == (
        f"started L1: {started['tokens_before']:,} tokens ≥ T 1,275 ({source})"
    )
    assert completed["phase"] == "completed" and completed["threshold"] == 1275
    assert events[4000] == []


@pytest.mark.spec("R2", "R35")
def test_configured_threshold_wins_over_the_model_profile(runner: Runner, thread_id: str) -> None:
    """``summary_threshold=1`` with a 1,000,000-token profile: T is 1,024, and
    the events name no model source."""
    model = FakeToolChatModel(
        [AIMessage("S", id="s"), AIMessage("done", id="a")],
        profile={"max_input_tokens": 1_000_000},
    )
    mw = ArsSummarizationMiddleware(
        SummaryConfig(summary_threshold=1, summary_l2_trigger_ratio=1.0)
    )
    result = runner.run(build_agent(model, mw), _turns(), cfg(thread_id))
    started = result.runs[0].compression[0]
    assert started["phase"] == "started" and started["threshold"] == 1024
    assert "threshold_source" not in started
