"""A LangGraph server graph with ARS: ``create_agent`` + ``ArsSummarizationMiddleware``.

Needs: ``pip install -e ".[langchain,s3]" "langgraph-cli[inmem]" langgraph-sdk`` (from a
clone); run ``langgraph dev --no-browser`` in this folder.

Served by ``langgraph dev`` (or any LangGraph server) through ``langgraph.json``
next to this file. The server owns the checkpointer (in memory for ``langgraph
dev``, PostgreSQL in production); this module only builds the graph.

Environment:

``ARS_FILES_URL``
    Where ARS writes offloaded tool results and history archives: any fsspec URL
    (``file:///srv/ars``, ``s3://bucket/ars``, ...). Each thread gets its own
    ``threads/<thread id>/`` folder under it. Unset: the server's own store
    (``runtime.store``; PostgreSQL-backed in production, so the files live as long
    as the threads), one namespace per thread; the agent reads them back with the
    middleware's ``read_ars_file`` tool.
``ARS_FILES_OPTIONS``
    fsspec storage options as JSON, e.g.
    ``{"client_kwargs": {"endpoint_url": "http://127.0.0.1:9000"}}`` for an
    S3-compatible store. Credentials come from the usual AWS variables.
``ARS_OPENAI_BASE_URL`` / ``ARS_OPENAI_MODEL``
    An OpenAI-compatible server (``http://127.0.0.1:8000/v1``) and its model
    name. When unset the graph answers with a scripted model from
    ``ars_langchain.testing`` (no network, no API key), so the example runs anywhere.

The ``summary_*`` fields of the run's ``context`` configure ARS per run (admin-only
fields; unset ones use ARS's defaults), e.g. from ``langgraph_sdk``::

    client.runs.stream(thread_id, "agent", input=..., context={"summary_threshold": 1},
                       stream_mode=["custom", "values"])

The ``context_compression`` events arrive as ``custom`` stream parts; the
persisted summary is ``_summarization_event`` in the thread's state.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import BaseMessage

from ars_core import FsspecBackend
from ars_langchain import ArsSummarizationMiddleware
from ars_langchain.testing import FakeToolChatModel

SYSTEM_PROMPT = "You are a helpful assistant. Answer briefly."
#: replies the scripted model can give before the server must be restarted
SCRIPTED_REPLIES = 100_000


@dataclass
class Context:
    """The run's context: ARS's five admin-only fields (``None``: ARS's default)."""

    summary_threshold: float | None = None
    summary_keep_messages: int | None = None
    summary_prompt: str | None = None
    summary_tool_result_token_limit: int | None = None
    summary_l2_trigger_ratio: float | None = None


def scripted_reply(messages: list[BaseMessage]) -> str:
    """The scripted model's answer: it repeats the start of the last message."""
    last = messages[-1].text if messages else ""
    first_line = last.strip().splitlines()[0] if last.strip() else ""
    return f"({len(messages)} messages read) About: {first_line[:80]}"


def make_model() -> Any:
    """A real chat model when ``ARS_OPENAI_BASE_URL`` is set, else the scripted one."""
    base_url = os.environ.get("ARS_OPENAI_BASE_URL")
    if base_url:
        from langchain_openai import ChatOpenAI

        max_tokens = int(os.environ.get("ARS_OPENAI_MAX_TOKENS", "256"))
        return ChatOpenAI(
            base_url=base_url,
            model=os.environ.get("ARS_OPENAI_MODEL", "default"),
            api_key=os.environ.get("OPENAI_API_KEY", "not-needed"),  # type: ignore[arg-type]
            max_tokens=max_tokens,
            # sent as `max_completion_tokens`; servers that only read `max_tokens`
            # (llama-cpp-python's) get it here
            extra_body={"max_tokens": max_tokens},
            stream_usage=True,
        )
    return FakeToolChatModel([scripted_reply] * SCRIPTED_REPLIES)


def make_backend() -> FsspecBackend | None:
    """The file backend of ``ARS_FILES_URL`` (scoped to each thread by the middleware);
    ``None`` when it is unset: the middleware then writes into the server's store."""
    url = os.environ.get("ARS_FILES_URL")
    if not url:
        return None
    options: dict[str, Any] = json.loads(os.environ.get("ARS_FILES_OPTIONS") or "{}")
    return FsspecBackend(url, storage_options=options)


graph = create_agent(
    make_model(),
    tools=[],
    system_prompt=SYSTEM_PROMPT,
    middleware=[ArsSummarizationMiddleware(backend=make_backend())],
    context_schema=Context,
)
