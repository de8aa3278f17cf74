"""Every view ARS sends pairs each tool call with its result (R62), on a real
LangGraph agent and every checkpointer, sync and async: an orphan tool result
is left out of the view (and the round's event counts it), a call without a
result is answered with a synthetic note in the view only; state keeps both
as they are."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from ars_core import SummaryConfig
from ars_core.testing import FakeSummarizer
from ars_langchain import ArsSummarizationMiddleware
from ars_langchain.testing import FakeToolChatModel, tool_call
from tests.langchain.helpers import SYSTEM, Runner, build_agent, prose
from tests.langchain.test_scenarios import cfg, kind, runner

__all__ = ["kind", "runner"]  # fixtures: every checkpointer, sync and async

pytestmark = pytest.mark.spec("R62", "R21")


def _ids(messages: list[Any]) -> list[str | None]:
    return [m.id for m in messages]


def test_an_orphan_tool_message_at_the_cut_is_not_kept(runner: Runner, thread_id: str) -> None:
    """LangChain's scenario with ``lean_rounds=False``: a tool message whose call is
    not in the history sits right after the cutoff. The L2 view leaves it out, the
    ``completed`` event says so, the checkpoint still holds it."""
    seed = [
        HumanMessage(prose("q0", 300), id="h0"),
        AIMessage(prose("a0", 300), id="a0"),
        HumanMessage(prose("q1", 300), id="h1"),
        AIMessage("a1", id="a1"),
        ToolMessage("stray result", tool_call_id="ghost", id="t-orphan"),
        HumanMessage("go on", id="h2"),
    ]
    model = FakeToolChatModel([AIMessage("ok", id="r1")])
    mw = ArsSummarizationMiddleware(
        SummaryConfig(summary_threshold=1, summary_keep_messages=3),
        summarizer=FakeSummarizer("S"),
        compressor_options={"lean_rounds": False},
    )
    result = runner.run(build_agent(model, mw), [{"messages": seed}], cfg(thread_id))
    assert result.runs[0].error is None
    (sent,) = model.main_calls
    assert sent[0] == SystemMessage(SYSTEM) and sent[1].id == "ars-summary-3"
    assert _ids(sent[2:]) == ["a1", "h2"]
    assert _ids(result.state["messages"]) == [*_ids(seed), "r1"]  # state untouched
    completed = result.runs[0].compression[-1]
    assert (completed["phase"], completed["level"]) == ("completed", "L2")
    assert completed["orphan_results"] == 1 and "unanswered_calls" not in completed


def test_a_call_without_a_result_is_answered_in_the_view_only(
    runner: Runner, thread_id: str
) -> None:
    """A tool call whose result never came (the run was cancelled while the tool
    ran) is answered with a synthetic result right after it in the request; no
    round runs, and the checkpoint keeps the call as it was."""
    dangling = AIMessage("", id="a-x", tool_calls=[tool_call("echo", {"text": "x"}, "call-x")])
    seed = [HumanMessage("run echo", id="h0"), dangling, HumanMessage("still there?", id="h1")]
    model = FakeToolChatModel([AIMessage("yes", id="r1")])
    mw = ArsSummarizationMiddleware(SummaryConfig(summary_keep_messages=2))
    result = runner.run(build_agent(model, mw), [{"messages": seed}], cfg(thread_id))
    assert result.runs[0].error is None
    (sent,) = model.main_calls
    assert _ids(sent[1:3]) == ["h0", "a-x"]
    note = sent[3]
    assert isinstance(note, ToolMessage) and note.tool_call_id == "call-x"
    assert "no result was recorded for this echo call" in note.text
    assert _ids(sent[4:]) == ["h1"]
    assert _ids(result.state["messages"]) == ["h0", "a-x", "h1", "r1"]
    assert result.runs[0].compression == []
