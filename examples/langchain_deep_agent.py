"""ARS in a deepagents agent: it replaces the built-in summarization by name.

Needs the ``langchain`` extra (it brings deepagents): ``pip install "ars[langchain]"``.

``ArsSummarizationMiddleware.name == "SummarizationMiddleware"``, so
``create_deep_agent(middleware=[ars])`` puts ARS in the built-in's slot (after
the filesystem and task middleware) in the main agent and the general-purpose
sub-agent; a declarative sub-agent gets ``ars.for_subagent()``. With the
agent's own backend as ARS's backend, offloaded results are files the agent's
``read_file`` tool opens.

    python examples/langchain_deep_agent.py
"""

from __future__ import annotations

from deepagents import create_deep_agent
from deepagents.backends import StateBackend
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ars_core import SummaryConfig, describe_event
from ars_langchain import ArsSummarizationMiddleware
from ars_langchain.testing import FakeToolChatModel, tool_call


@tool
def build(target: str) -> str:
    """Build a target and return the build log."""
    return "".join(f"[{i:03d}] compiled {target}/module_{i}.c\n" for i in range(200))


def main() -> None:
    backend = StateBackend()
    ars = ArsSummarizationMiddleware(
        SummaryConfig(
            summary_threshold=3, summary_l2_trigger_ratio=1.0, summary_tool_result_token_limit=200
        ),
        backend=backend,
        on_event=lambda event: print("compression:", describe_event(event)),  # what ARS did
    )
    model = FakeToolChatModel(
        [
            AIMessage(
                "",
                tool_calls=[
                    tool_call(
                        "task",
                        {"description": "build the firmware", "subagent_type": "builder"},
                        "c-task",
                    )
                ],
            ),
            AIMessage("", tool_calls=[tool_call("build", {"target": "firmware"}, "c-build")]),
            AIMessage("Firmware built: 200 modules."),
            AIMessage("The builder reports 200 modules compiled."),
        ]
    )
    agent = create_deep_agent(
        model,
        tools=[build],
        middleware=[ars],
        backend=backend,
        checkpointer=InMemorySaver(),
        subagents=[
            {
                "name": "builder",
                "description": "Builds targets.",
                "system_prompt": "You build.",
                "middleware": [ars.for_subagent()],
            }
        ],
    )
    config = {"configurable": {"thread_id": "fw"}}
    result = agent.invoke({"messages": [HumanMessage("Build the firmware.")]}, config)
    print(result["messages"][-1].content)
    for path in agent.get_state(config).values.get("files", {}):
        print("file:", path)


if __name__ == "__main__":
    main()
