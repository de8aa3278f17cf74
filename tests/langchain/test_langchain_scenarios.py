"""LangChain's own ``SummarizationMiddleware`` scenarios, run against ARS with the
import swapped.

The scenarios come from LangChain's test suite,
``libs/langchain_v1/tests/unit_tests/agents/middleware/implementations/test_summarization.py``
(langchain-ai/langchain at 52c2d1d7): the same arguments (``model``, ``trigger``,
``keep``, ``token_counter``, ``summary_prompt``, the deprecated names), the same
messages and the same expected outcome. They are written here in our own code and
run through a real agent (``create_agent``, a real checkpointer) instead of calling
``before_model`` directly, because ARS never rewrites the state: the oracle is the
view the main model receives (the summary, then exactly the messages LangChain
keeps) and the summary model's input.

What ARS shares with LangChain and these scenarios check: when to summarize
(tokens, a fraction of the model's window, a message count, several triggers),
what is kept (messages, tokens, a fraction; a tool result never kept without its
call), the validation errors, the deprecated arguments. What differs is
in ``docs/migrating.md`` (the state is never rewritten; ``trigger=None`` keeps
ARS's own threshold; ARS counts the whole request, tool schemas included). The
toy counters of LangChain's scenarios (``len(messages) * 200``...) would count
each tool schema as a message, so those scenarios leave out the ``read_ars_file``
tool (``read_tool=False``); the last one runs with every default.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from ars_langchain import ArsSummarizationMiddleware as SummarizationMiddleware
from ars_langchain.testing import FakeToolChatModel

pytestmark = pytest.mark.spec("R21", "R35")

SUMMARY = "Generated summary"


def summary_model(**kwargs: Any) -> FakeToolChatModel:
    """LangChain's ``MockChatModel`` (``ProfileChatModel`` with a profile)."""
    return FakeToolChatModel([AIMessage(SUMMARY)] * 4, **kwargs)


def profile_model() -> FakeToolChatModel:
    return summary_model(profile={"max_input_tokens": 1000})


def run(
    middleware: Any, messages: Sequence[BaseMessage], *, mode: str = "sync"
) -> list[BaseMessage]:
    """One turn of a real agent whose state holds ``messages``: the view its model got."""
    main = FakeToolChatModel([AIMessage("done", id="answer")])
    agent = create_agent(main, tools=[], middleware=[middleware], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    if mode == "sync":
        agent.invoke({"messages": list(messages)}, config)
    else:
        asyncio.run(agent.ainvoke({"messages": list(messages)}, config))
    (view,) = main.main_calls
    return view


def kept(view: Sequence[BaseMessage]) -> list[str] | None:
    """The contents kept after the summary, or ``None`` when nothing was summarized
    (the summary is ARS's message: the task, then the model's summary, which a counter
    of 300 tokens a text may cut to its bound)."""
    if not view or not str(view[0].content).startswith("Summary of the earlier conversation"):
        return None
    return [str(m.content) for m in view[1:]]


def humans(*texts: str) -> list[BaseMessage]:
    return [HumanMessage(t, id=f"h{i}") for i, t in enumerate(texts)]


def per_message(tokens: int) -> Any:
    """A token counter: ``tokens`` per message (LangChain's ``len(messages) * 200``)."""
    return lambda messages: len(list(messages)) * tokens


def workflow_middleware() -> Any:
    """The full workflow's middleware: 1,000 tokens, keep 2, 300 tokens a message."""
    return SummarizationMiddleware(
        model=summary_model(),
        trigger=("tokens", 1000),
        keep=("messages", 2),
        token_counter=per_message(300),
        read_tool=False,
    )


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_full_workflow(mode: str) -> None:
    """``test_summarization_middleware_full_workflow`` (and its async twin): over the
    token trigger, the summary plus the two newest messages ``"4"``, ``"5"``."""
    middleware = workflow_middleware()
    view = run(middleware, humans("1", "2", "3", "4", "5"), mode=mode)
    assert kept(view) == ["4", "5"]
    assert isinstance(view[0], HumanMessage)


def test_no_summarization_below_the_threshold() -> None:
    """``test_summarization_middleware_no_summarization_cases``: below the trigger the
    model gets the messages unchanged."""
    middleware = SummarizationMiddleware(
        model=summary_model(),
        trigger=("tokens", 1000),
        token_counter=per_message(250),
        read_tool=False,
    )
    view = run(middleware, humans("Hello", "Hi"))
    assert [m.content for m in view] == ["Hello", "Hi"]


def test_keep_messages_with_a_message_count_trigger() -> None:
    """``test_summarization_middleware_keep_messages``: ``("messages", 5)`` triggers at 5
    messages, not at 4; ``keep=("messages", 2)`` keeps the two newest."""

    def middleware() -> Any:
        return SummarizationMiddleware(
            model=summary_model(), trigger=("messages", 5), keep=("messages", 2)
        )

    assert kept(run(middleware(), humans("1", "2", "3", "4"))) is None
    assert kept(run(middleware(), humans("1", "2", "3", "4", "5"))) == ["4", "5"]
    assert kept(run(middleware(), humans("1", "2", "3", "4", "5", "6"))) == ["5", "6"]


def test_multiple_triggers_any_one_summarizes() -> None:
    """``test_summarization_middleware_multiple_triggers``: ``[("messages", 10),
    ("tokens", 500)]`` summarizes when either holds."""

    def middleware(tokens_each: int) -> Any:
        return SummarizationMiddleware(
            model=summary_model(),
            trigger=[("messages", 10), ("tokens", 500)],
            keep=("messages", 2),
            token_counter=per_message(tokens_each),
            read_tool=False,
        )

    five = humans(*map(str, range(5)))
    assert kept(run(middleware(20), five)) is None  # 100 tokens, 5 messages
    assert kept(run(middleware(20), humans(*map(str, range(10))))) == ["8", "9"]
    assert kept(run(middleware(120), five)) == ["3", "4"]  # 600 tokens


def test_an_and_clause_needs_all_its_conditions() -> None:
    """LangChain's ``TriggerClause``: ``{"tokens": 500, "messages": 6}`` holds only
    when both do."""

    def middleware(tokens_each: int) -> Any:
        return SummarizationMiddleware(
            model=summary_model(),
            trigger={"tokens": 500, "messages": 6},
            keep=("messages", 2),
            token_counter=per_message(tokens_each),
            read_tool=False,
        )

    assert kept(run(middleware(200), humans(*map(str, range(5))))) is None  # 5 messages
    assert kept(run(middleware(50), humans(*map(str, range(6))))) is None  # 300 tokens
    assert kept(run(middleware(100), humans(*map(str, range(6))))) == ["4", "5"]


@pytest.mark.parametrize(
    ("trigger", "keep", "expected"),
    [
        (("fraction", 0.81), ("fraction", 0.5), None),  # 810 > 800 tokens: no summary
        (("fraction", 0.80), ("fraction", 0.5), ["Message 3", "Message 4"]),
        (("fraction", 0.80), ("fraction", 0.6), ["Message 2", "Message 3", "Message 4"]),
        (("fraction", 0.80), ("fraction", 0.8), None),  # everything fits: nothing to do
        (("fraction", 0.80), ("tokens", 400), ["Message 3", "Message 4"]),
        (("fraction", 0.80), ("tokens", 600), ["Message 2", "Message 3", "Message 4"]),
    ],
)
def test_fractions_of_the_models_window(
    trigger: Any, keep: Any, expected: list[str] | None
) -> None:
    """``test_summarization_middleware_profile_inference_triggers_summary``: the model's
    profile says 1,000 input tokens, each message counts 200."""
    middleware = SummarizationMiddleware(
        model=profile_model(),
        trigger=trigger,
        keep=keep,
        token_counter=per_message(200),
        read_tool=False,
    )
    view = run(middleware, humans("Message 1", "Message 2", "Message 3", "Message 4"))
    assert kept(view) == expected


def test_token_retention_never_keeps_a_tool_result_without_its_call() -> None:
    """``test_summarization_middleware_token_retention_advances_past_tool_messages``:
    500 tokens (half the window) would keep the tool result, the cut moves past it."""
    messages: list[BaseMessage] = [
        HumanMessage("H" * 300, id="h0"),
        AIMessage("A" * 200, id="a1", tool_calls=[{"name": "test", "args": {}, "id": "call-1"}]),
        ToolMessage("T" * 50, tool_call_id="call-1", id="t2"),
        HumanMessage("H" * 180, id="h3"),
        HumanMessage("H" * 160, id="h4"),
    ]
    middleware = SummarizationMiddleware(
        model=profile_model(),
        trigger=("fraction", 0.1),
        keep=("fraction", 0.5),
        token_counter=lambda ms: sum(len(str(m.content)) for m in ms),
        read_tool=False,
    )
    assert kept(run(middleware, messages)) == ["H" * 180, "H" * 160]


@pytest.mark.parametrize(
    ("param_name", "param_value", "expected_error"),
    [
        ("trigger", ("fraction", 0.0), "Fractional trigger values must be between 0 and 1"),
        ("trigger", ("fraction", 1.5), "Fractional trigger values must be between 0 and 1"),
        ("keep", ("fraction", -0.1), "Fractional keep values must be between 0 and 1"),
        ("trigger", ("tokens", 0), "trigger thresholds must be greater than 0"),
        ("trigger", ("messages", -5), "trigger thresholds must be greater than 0"),
        ("keep", ("tokens", 0), "keep thresholds must be greater than 0"),
        ("trigger", ("invalid", 100), "Unsupported context size type"),
        ("keep", ("invalid", 100), "Unsupported context size type"),
    ],
)
def test_validation_edge_cases(param_name: str, param_value: Any, expected_error: str) -> None:
    """``test_summarization_middleware_validation_edge_cases``: the same ValueErrors."""
    with pytest.raises(ValueError, match=expected_error):
        SummarizationMiddleware(model=summary_model(), **{param_name: param_value})


def test_fractions_need_the_models_profile() -> None:
    """``test_summarization_middleware_initialization`` / ``..._missing_profile``."""
    with pytest.raises(ValueError, match="Model profile information is required"):
        SummarizationMiddleware(model=summary_model(), keep=("fraction", 0.5))
    with pytest.raises(ValueError, match="Model profile information is required"):
        SummarizationMiddleware(
            model=summary_model(), trigger=("fraction", 0.5), keep=("messages", 1)
        )


def test_initialization_keeps_the_arguments() -> None:
    """``test_summarization_middleware_initialization``: the arguments as given, the
    summary prompt used as the summary model's prompt."""
    model = summary_model()
    middleware = SummarizationMiddleware(
        model=model,
        trigger=("tokens", 1000),
        keep=("messages", 10),
        summary_prompt="Custom prompt: {messages}",
    )
    assert middleware.model is model
    assert middleware.trigger == ("tokens", 1000)
    assert middleware.keep == ("messages", 10)
    assert middleware.summary_prompt == "Custom prompt: {messages}"
    # positional, as LangChain's first argument
    assert SummarizationMiddleware(model, trigger=("tokens", 1000)).model is model


def test_deprecated_parameters() -> None:
    """``test_summarization_middleware_deprecated_parameters_with_defaults`` and the full
    workflow's ``max_tokens_before_summary=1000, messages_to_keep=2``."""
    with pytest.warns(DeprecationWarning, match="max_tokens_before_summary is deprecated"):
        middleware = SummarizationMiddleware(
            model=summary_model(), trigger=("tokens", 2000), max_tokens_before_summary=1000
        )
    assert middleware.trigger == ("tokens", 2000)
    with pytest.warns(DeprecationWarning, match="messages_to_keep is deprecated"):
        middleware = SummarizationMiddleware(
            model=summary_model(), keep=("messages", 5), messages_to_keep=10
        )
    assert middleware.keep == ("messages", 5)
    with (
        pytest.warns(DeprecationWarning, match="messages_to_keep is deprecated"),
        pytest.warns(DeprecationWarning, match="max_tokens_before_summary is deprecated"),
    ):
        middleware = SummarizationMiddleware(
            model=summary_model(),
            max_tokens_before_summary=1000,
            messages_to_keep=2,
            token_counter=per_message(300),
            read_tool=False,
        )
    assert kept(run(middleware, humans("1", "2", "3", "4", "5"))) == ["4", "5"]


def test_the_drop_in_with_every_default() -> None:
    """The import swapped and nothing else: LangChain's approximate counter, the
    custom prompt, the read-back tool. The summary model reads the older messages
    with the custom prompt, the main model gets the summary and the newest two."""
    from langchain_core.messages.utils import count_tokens_approximately

    model = summary_model()
    middleware = SummarizationMiddleware(
        model=model,
        trigger=("tokens", 1500),
        keep=("messages", 2),
        token_counter=count_tokens_approximately,
        summary_prompt="Summarize for the agent:\n{messages}",
    )
    texts = [f"{i}: " + "word " * 200 for i in range(6)]
    view = run(middleware, humans(*texts))
    assert kept(view) == texts[-2:]
    (prompt,) = model.summary_calls
    sent = "\n".join(str(m.content) for m in prompt)
    assert sent.startswith("Summarize for the agent:\n") and texts[0] in sent


def test_get_state_holds_every_message_and_model_view_what_the_model_got() -> None:
    """What changes for a LangChain user: after a summary, ``get_state()`` still holds
    all five messages (LangChain's would hold the summary and two);
    ``ars_langchain.model_view`` reads what the model got from it."""
    from ars_langchain import model_view

    main = FakeToolChatModel([AIMessage("done", id="answer")])
    middleware = workflow_middleware()
    agent = create_agent(main, tools=[], middleware=[middleware], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": humans("1", "2", "3", "4", "5")}, config)
    values = agent.get_state(config).values
    assert [m.content for m in values["messages"]] == ["1", "2", "3", "4", "5", "done"]
    (sent,) = main.main_calls
    view = model_view(values)
    assert [(m.type, m.content) for m in view[:3]] == [(m.type, m.content) for m in sent]
    assert [m.content for m in view[3:]] == ["done"]
