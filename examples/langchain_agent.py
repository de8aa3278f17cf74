"""ARS in a LangChain v1 agent: one middleware in ``create_agent``.

Needs the ``langchain`` extra: ``pip install "ars[langchain]"`` (from a clone:
``pip install -e ".[langchain]"``).

Runs offline with a scripted model (swap in ``init_chat_model("openai:...")``
or any chat model). Shows: the compression events on the custom stream, the
persisted ``_summarization_event`` in the checkpoint, and the files ARS wrote.

    python examples/langchain_agent.py
"""

from __future__ import annotations

from dataclasses import dataclass

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ars_core import FsspecBackend, describe_event
from ars_langchain import ArsSummarizationMiddleware, is_compression_event
from ars_langchain.testing import FakeToolChatModel, tool_call


@dataclass
class Context:
    """The agent's runtime context; the summary_* fields configure ARS (admin-only)."""

    user_id: str
    summary_threshold: float | None = 1  # K tokens (x1024); the default is 100
    summary_keep_messages: int | None = 2
    summary_tool_result_token_limit: int | None = 200
    summary_l2_trigger_ratio: float | None = 0.5


@tool
def grep_logs(pattern: str) -> str:
    """Search the service logs."""
    return "".join(
        f"2026-11-30T09:{i % 60:02d} worker-{i} {pattern}: request served in {i} ms\n"
        for i in range(300)
    )


def main() -> None:
    model = FakeToolChatModel(
        [
            AIMessage("", tool_calls=[tool_call("grep_logs", {"pattern": "latency"}, "call-1")]),
            AIMessage("Latency is fine: at most 299 ms."),
            AIMessage(
                "The user asked: How is latency? The logs show at most 299 ms."
            ),  # ARS's summary call
            AIMessage("Yes, nothing above 300 ms."),
        ]
    )
    backend = FsspecBackend(
        "memory://example"
    )  # any fsspec URL: file:///srv/ars, s3://bucket/ars...
    ars = ArsSummarizationMiddleware(
        backend=backend
    )  # config from the Context; summary by the main model
    agent = create_agent(
        model,
        tools=[grep_logs],
        middleware=[ars],
        context_schema=Context,
        checkpointer=InMemorySaver(),
        system_prompt="You are an SRE assistant.",
    )
    config = {"configurable": {"thread_id": "demo"}}
    context = Context(user_id="u1")
    for text in ("How is latency?", "Sure? " + "Please double-check everything. " * 60):
        for mode, chunk in agent.stream(
            {"messages": [HumanMessage(text)]},
            config,
            context=context,
            stream_mode=["custom", "updates"],
        ):
            if mode == "custom" and is_compression_event(chunk):
                print("compression:", describe_event(chunk))
    event = agent.get_state(config).values.get("_summarization_event")
    if event:
        print("persisted event: cutoff", event["cutoff"], "history file", event["file_path"])
        print(event["summary_message"]["content"])
    scoped = backend.scoped("demo")
    print("files:", sorted(p.split("/threads/demo/", 1)[1] for p in scoped.fs.find(scoped.root)))


if __name__ == "__main__":
    main()
