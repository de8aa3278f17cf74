"""Provider-true sizes through a real LangChain agent (``create_agent``, ``InMemorySaver``).

The fake chat model stands for a provider whose tokenizer counts 40% more than
o200k (``ProviderTokenizer(1.4)``) and whose window is T = 4,096 of its tokens; it
reports each request's count as ``usage_metadata["input_tokens"]`` (or not). ARS
decides with the exact o200k count. The oracle is the provider's own count of
every request the model received: with usage none is above T; without usage,
or in a new process that reads the thread back from the checkpointer without
the answers' stamps, some request is.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ars_core import ExtractiveSummarizer, FsspecBackend, SummaryConfig, TiktokenEstimator
from ars_core.provider_size import MARK_PROVIDER_COUNT
from ars_core.testing import ProviderTokenizer
from ars_langchain import ArsSummarizationMiddleware
from ars_langchain.convert import MARKERS_KEY, to_core, tool_schemas
from ars_langchain.testing import FakeToolChatModel, tool_call
from tests.core.helpers import words

pytestmark = pytest.mark.spec("R3", "R57")

T = 4096
SYSTEM = "You are a careful build agent."
THREAD = {"configurable": {"thread_id": "usage"}}


@tool
def build(step: int) -> str:
    """Run one build step and print its log."""
    return f"log {step}\n" + words(700, f"log{step}")


def _calls(steps: range) -> list[AIMessage]:
    return [
        AIMessage("", tool_calls=[tool_call("build", {"step": i}, f"call_{i}")], id=f"ai-{i}")
        for i in steps
    ]


def _model(replies: list[AIMessage], usage: bool) -> FakeToolChatModel:
    provider = ProviderTokenizer(1.4, TiktokenEstimator("o200k_base"))
    return FakeToolChatModel(replies, provider=provider, report_usage=usage)


def _agent(model: FakeToolChatModel, saver: InMemorySaver) -> Any:
    """A new middleware (a new estimator, nothing calibrated: a new process) on ``saver``."""
    middleware = ArsSummarizationMiddleware(
        SummaryConfig(summary_threshold=T / 1024, summary_keep_messages=4),
        backend=FsspecBackend("memory://provider-count"),
        summarizer=ExtractiveSummarizer(),
        estimator=TiktokenEstimator("o200k_base"),
    )
    return create_agent(
        model, tools=[build], system_prompt=SYSTEM, middleware=[middleware], checkpointer=saver
    )


@pytest.mark.parametrize("usage", [False, True])
def test_a_real_agent_keeps_every_request_in_a_window_that_counts_more(usage: bool) -> None:
    model = _model([*_calls(range(14)), AIMessage("done", id="ai-done")], usage)
    agent = _agent(model, InMemorySaver())
    agent.invoke({"messages": [HumanMessage("Build the project.", id="u0")]}, THREAD)
    sizes = model.main_sizes
    assert len(sizes) == 15 and all(s is not None for s in sizes)
    if usage:
        assert max(s for s in sizes if s is not None) <= T, sizes
        history = agent.get_state(THREAD).values["messages"]
        stamped = [m for m in history if isinstance(m, AIMessage)]
        assert all(MARK_PROVIDER_COUNT in m.response_metadata[MARKERS_KEY] for m in stamped)
        after_rounds = [  # requests after an L2 round: sized by the L2 request's reading
            i
            for i, sent in enumerate(model.main_calls)
            if any(m.additional_kwargs.get("lc_source") == "summarization" for m in sent)
        ]
        assert len(after_rounds) >= 3 and after_rounds[-1] == len(sizes) - 1
    else:
        assert max(s for s in sizes if s is not None) > T, sizes


def _first_run(usage: bool) -> InMemorySaver:
    """Two build steps and an answer, with or without usage: below T all along."""
    saver = InMemorySaver()
    model = _model([*_calls(range(2)), AIMessage("built", id="ai-built")], usage)
    _agent(model, saver).invoke({"messages": [HumanMessage("Build it.", id="u0")]}, THREAD)
    assert model.main_sizes[-1] is not None and model.main_sizes[-1] < T
    return saver


def _fill(agent: Any, target: int) -> HumanMessage:
    """A user message that brings the thread to ``target`` o200k tokens (system and tools
    included): below T for o200k, above T for the provider."""
    o200k = TiktokenEstimator("o200k_base")
    history = [to_core(m) for m in agent.get_state(THREAD).values["messages"]]
    size = o200k.count(history, system=SYSTEM, tools=tool_schemas([build]))
    return HumanMessage("Here is the log. " + words(target - size, "paste"), id="u1")


def _second_run(saver: InMemorySaver, edit: str | None = None) -> tuple[list[int | None], Any]:
    """A new process (new middleware and estimator) continues the thread from the
    checkpointer (new message objects); ``edit`` changes the thread first."""
    model = _model([AIMessage("looks fine", id="ai-fine")], usage=True)
    agent = _agent(model, saver)
    history = agent.get_state(THREAD).values["messages"]
    if edit == "remove":  # the first tool call and its result removed
        agent.update_state(THREAD, {"messages": [RemoveMessage(id=m.id) for m in history[1:3]]})
    elif edit == "replace":  # the newest answer replaced by one without the stamp
        agent.update_state(THREAD, {"messages": [AIMessage("built", id="ai-built")]})
    agent.invoke({"messages": [_fill(agent, 3300)]}, THREAD)
    return model.main_sizes, model.main_calls[-1]


@pytest.mark.parametrize("edit", [None, "remove"])
def test_a_cold_process_reads_the_last_answers_usage_back(edit: str | None) -> None:
    """The stamp travels with the answer in the checkpoint: the new process's first call
    is sized in the provider's tokens, after an edit of the thread too (the ratio
    measured the request it measured, whatever was removed since)."""
    sizes, sent = _second_run(_first_run(usage=True), edit)
    assert sizes[0] is not None and sizes[0] <= T, sizes
    assert any(isinstance(m, HumanMessage) and m.id == "u1" for m in sent)  # the new request


@pytest.mark.parametrize("usage, edit", [(False, None), (True, "replace")])
def test_without_a_stamp_the_request_is_sized_by_the_estimator_alone(
    usage: bool, edit: str | None
) -> None:
    """No usage in the thread, or the answer that carried it replaced: the fallback is
    the estimator's count, and the whole thread goes out (above the provider's T)."""
    saver = _first_run(usage)
    sizes, sent = _second_run(saver, edit)
    assert sizes[0] is not None and sizes[0] > T
    thread = [m.id for m in _agent(_model([], True), saver).get_state(THREAD).values["messages"]]
    assert [m.id for m in sent[1:]] == thread[:-1]  # sent whole (the system message first)
