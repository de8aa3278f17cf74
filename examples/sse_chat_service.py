"""A chat service that streams an ARS agent run as server-sent events (R33, R44).

``POST /chat`` with ``{"thread_id": "...", "message": "..."}`` answers with
``text/event-stream``: ``event: token`` frames for the model's words,
``event: context_compression`` frames when ARS compresses the context, and a
final ``event: end`` (or ``event: error``). SSE is only a signal: the
persisted state is the source of truth, served by
``GET /threads/{thread_id}/compression`` from the checkpoint.

Run the offline demo (a scripted model, in-memory checkpointer)::

    python examples/sse_chat_service.py          # prints the frames of two requests
    uvicorn examples.sse_chat_service:app        # serves it, if uvicorn is installed

Swap ``build_demo_agent`` for your own ``create_agent(...)`` with a real model.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ars_core import FsspecBackend, SummaryConfig, sse_frame
from ars_langchain import DEFAULT_STREAM_MODES, ArsSummarizationMiddleware, asse_frames
from ars_langchain.testing import FakeToolChatModel, tool_call


def create_app(agent: Any) -> Starlette:
    """The ASGI app serving ``agent`` (any compiled LangGraph agent with a checkpointer)."""

    async def frames(message: str, thread_id: str) -> AsyncIterator[str]:
        config = {"configurable": {"thread_id": thread_id}}
        stream = agent.astream(
            {"messages": [HumanMessage(message)]}, config, stream_mode=list(DEFAULT_STREAM_MODES)
        )
        try:
            async for frame in asse_frames(stream, stream_mode=DEFAULT_STREAM_MODES):
                yield frame
        except Exception as exc:  # the client learns the run failed; the checkpoint says where
            yield sse_frame("error", {"error": f"{type(exc).__name__}: {exc}"})

    async def chat(request: Request) -> Response:
        body = await request.json()
        if (
            not isinstance(body, dict)
            or not body.get("thread_id")
            or not isinstance(body.get("message"), str)
        ):
            return JSONResponse({"error": "expected {thread_id, message}"}, status_code=400)
        return StreamingResponse(
            frames(body["message"], str(body["thread_id"])),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def compression(request: Request) -> Response:
        config = {"configurable": {"thread_id": request.path_params["thread_id"]}}
        snapshot = await agent.aget_state(config)
        values = snapshot.values or {}
        return JSONResponse(
            {
                "messages": len(values.get("messages", [])),
                "summarization_event": values.get("_summarization_event"),
            }
        )

    return Starlette(
        routes=[
            Route("/chat", chat, methods=["POST"]),
            Route("/threads/{thread_id}/compression", compression, methods=["GET"]),
        ]
    )


@tool
def run_tests(suite: str) -> str:
    """Run a test suite and return its log."""
    return "".join(f"{suite}::test_{i} PASSED\n" for i in range(400))


def build_demo_agent() -> Any:
    """An offline agent: a scripted model, a real tool, ARS with small thresholds."""
    model = FakeToolChatModel(
        [
            AIMessage("", tool_calls=[tool_call("run_tests", {"suite": "unit"}, "call-1")]),
            AIMessage("All 400 unit tests pass."),
            AIMessage(
                "Summary: the user ran the unit suite; all 400 tests passed."
            ),  # the summary call
            AIMessage("Nothing else is failing."),
        ]
    )
    middleware = ArsSummarizationMiddleware(
        SummaryConfig(
            summary_threshold=1,
            summary_keep_messages=2,
            summary_tool_result_token_limit=200,
            summary_l2_trigger_ratio=0.5,
        ),
        backend=FsspecBackend("memory://sse-demo"),
    )
    return create_agent(
        model,
        tools=[run_tests],
        middleware=[middleware],
        checkpointer=InMemorySaver(),
        system_prompt="You are a test runner.",
    )


app = create_app(build_demo_agent())


async def _demo() -> None:
    import httpx

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://demo") as client:
        ci_log = " ".join(f"job{i} ok" for i in range(200))
        for message in ("run the unit tests", f"anything else failing? The CI log: {ci_log}"):
            async with client.stream(
                "POST", "/chat", json={"thread_id": "demo", "message": message}
            ) as resp:
                async for chunk in resp.aiter_text():
                    print(chunk, end="")
        print((await client.get("/threads/demo/compression")).json())


if __name__ == "__main__":
    asyncio.run(_demo())
