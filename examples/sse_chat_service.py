"""A chat page that shows ARS compressing the context live (server-sent events).

Needs the ``server`` and ``langchain`` extras::

    pip install -e ".[langchain,server]"
    python examples/sse_chat_service.py            # then open http://127.0.0.1:8000/
    python examples/sse_chat_service.py --demo     # no server: prints the SSE frames of two requests
    uvicorn examples.sse_chat_service:app          # the same app under your own ASGI server

The page (``GET /``) has a chat box, the streamed answer, a live panel of the
``context_compression`` events (phase, level, tokens before -> after against
T, links to the files ARS wrote, short names with the full path on hover and
when copied), the latest summary one click away, and a token gauge per thread
in plain words.

``POST /chat`` with ``{"thread_id": "...", "message": "..."}`` answers with
``text/event-stream``: ``event: token`` frames for the model's words,
``event: tool`` for tool results, ``event: context_compression`` when ARS
compresses the context, and a final ``event: end`` (or ``event: error``).
One run per thread at a time: a message sent while its thread is running
waits its turn (``event: queued`` first; ``409`` when 16 already wait), so
every user turn is kept; a run outlives a client that disconnects, so a tool
call it started always gets its result (see :class:`ThreadRuns`).
SSE is only a signal: the checkpoint is the source of truth, served by
``GET /threads/{thread_id}/compression`` and ``GET /threads/{thread_id}/messages``;
``GET /threads/{thread_id}/files/{path}`` opens a file ARS wrote for that thread.
Bad requests get a 4xx answer with a JSON ``{"error": ...}``.

Each thread has its own conversation and checkpoint. Offline, each thread gets
a fresh scripted model (``ars_langchain.testing``) that calls a log-search tool
and then answers. With ``ARS_CHAT_MODEL_URL`` set to an OpenAI-compatible
server (e.g. ``http://127.0.0.1:8080/v1``; model name from ``ARS_CHAT_MODEL``)
every thread talks to that model instead, which also writes the summaries.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from ars_core import (
    ApproxEstimator,
    ArsError,
    ExtractiveSummarizer,
    FileBackendError,
    FsspecBackend,
    PathBoundaryError,
    SummaryConfig,
    effective_messages,
    sse_frame,
)
from ars_langchain import (
    DEFAULT_STREAM_MODES,
    EVENT_KEY,
    ArsSummarizationMiddleware,
    asse_frames,
    event_from_state,
    to_core,
)
from ars_langchain.testing import FakeToolChatModel, tool_call

#: a thread id is used in URLs and file scopes: keep it to a safe alphabet
THREAD_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
MAX_MESSAGE_CHARS = 100_000
#: the longest POST body read (a message of MAX_MESSAGE_CHARS, each escaped, fits)
MAX_BODY_BYTES = 1 << 20


@dataclass
class ChatSetup:
    """What the service serves: an agent per thread, where ARS writes files, ARS's config.

    ``files`` is the (unscoped) fsspec backend given to the middleware; it scopes
    files by thread id, and so does the file route. ``None``: no file links.
    """

    agent_for: Callable[[str], Any]
    files: FsspecBackend | None = None
    config: SummaryConfig = field(default_factory=SummaryConfig)


class BadRequest(Exception):
    """A client error, answered with ``{"error": message}`` and ``status``."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


async def read_body(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The request's body, refused (413) as soon as it is longer than ``limit``
    bytes: by its ``Content-Length`` before reading, else while reading, so a
    large body is never held whole."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BadRequest(f"the body is longer than {limit:,} bytes", 413)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BadRequest(f"the body is longer than {limit:,} bytes", 413)
        chunks.append(chunk)
    return b"".join(chunks)


def chat_request(body: bytes) -> tuple[str, str]:
    """``(thread_id, message)`` from a POST body, or :class:`BadRequest` saying what is wrong."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadRequest(f"the body is not JSON ({exc})") from None
    except RecursionError:  # [[[[... 100,000 deep: the parser gives up
        raise BadRequest("the body is not JSON (nested too deeply)") from None
    if not isinstance(data, dict):
        raise BadRequest('expected a JSON object {"thread_id": ..., "message": ...}')
    thread_id, message = data.get("thread_id"), data.get("message")
    if not isinstance(thread_id, str) or not THREAD_ID.fullmatch(thread_id):
        raise BadRequest(
            "thread_id must be 1-128 characters of letters, digits, '.', '_', ':', '-'"
        )
    if not isinstance(message, str) or not message.strip():
        raise BadRequest("message must be a non-empty string")
    if len(message) > MAX_MESSAGE_CHARS:
        raise BadRequest(f"message is longer than {MAX_MESSAGE_CHARS:,} characters", 413)
    return thread_id, message


def path_thread(request: Request) -> str:
    thread_id: str = request.path_params["thread_id"]
    if not THREAD_ID.fullmatch(thread_id):
        raise BadRequest("no such thread id", 404)
    return thread_id


class ThreadRuns:
    """One run per thread at a time, and a run that outlives its client.

    A ``POST /chat`` on a thread that is already running waits its turn (its
    stream opens with ``event: queued``): LangGraph runs on one checkpoint do
    not merge, so two at once keep only one of their user turns. Beyond
    ``max_waiting`` waiting requests on one thread the answer is ``409``.
    Each run is a task of its own, not the response's: a client that
    disconnects (a closed tab, a dropped connection) stops receiving frames,
    while the run goes on to its end, so a tool call it started gets its result
    in the checkpoint (cancelling it there would leave a call without a result,
    which providers reject on every later request).
    """

    def __init__(self, max_waiting: int = 16) -> None:
        self.max_waiting = max_waiting
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}  # runs holding or waiting for each thread's lock
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, thread_id: str, run: Callable[[], AsyncIterator[str]]) -> asyncio.Queue[Any]:
        """Start ``run`` once the thread is free; its frames arrive on the queue,
        ``None`` after the last one."""
        users = self._users.get(thread_id, 0)
        if users > self.max_waiting:
            raise BadRequest(
                f"thread {thread_id!r} already has {users} runs waiting; try again later", 409
            )
        self._users[thread_id] = users + 1
        lock = self._locks.setdefault(thread_id, asyncio.Lock())
        queue: asyncio.Queue[Any] = asyncio.Queue()
        if users:  # another run holds the thread or waits for it
            queue.put_nowait(sse_frame("queued", {"thread_id": thread_id, "ahead": users}))
        task = asyncio.create_task(self._run(thread_id, lock, run, queue))
        self._tasks.add(task)  # a strong reference: the run lives on without its client
        task.add_done_callback(self._tasks.discard)
        return queue

    async def _run(
        self,
        thread_id: str,
        lock: asyncio.Lock,
        run: Callable[[], AsyncIterator[str]],
        queue: asyncio.Queue[Any],
    ) -> None:
        try:
            async with lock:
                async for frame in run():
                    queue.put_nowait(frame)
        finally:
            queue.put_nowait(None)
            self._users[thread_id] -= 1
            if not self._users[thread_id]:  # nothing runs or waits: forget the thread
                del self._users[thread_id], self._locks[thread_id]

    async def wait(self) -> None:
        """Until every run started so far has ended."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


def create_app(agent: Any) -> Starlette:
    """The ASGI app: ``agent`` is a :class:`ChatSetup`, or one compiled LangGraph agent
    (with a checkpointer) that serves every thread."""
    setup = agent if isinstance(agent, ChatSetup) else ChatSetup(agent_for=lambda _thread: agent)
    runs = ThreadRuns()

    async def frames(thread_id: str, message: str) -> AsyncIterator[str]:
        config = {"configurable": {"thread_id": thread_id}}
        try:
            stream = setup.agent_for(thread_id).astream(
                {"messages": [HumanMessage(message)]},
                config,
                stream_mode=list(DEFAULT_STREAM_MODES),
            )
            async for frame in asse_frames(stream, stream_mode=DEFAULT_STREAM_MODES):
                yield frame
        except Exception as exc:  # the client learns the run failed; the checkpoint says where
            yield sse_frame("error", {"error": f"{type(exc).__name__}: {exc}"})

    async def page(request: Request) -> Response:
        return HTMLResponse(PAGE)

    async def chat(request: Request) -> Response:
        thread_id, message = chat_request(await read_body(request))
        queue = runs.start(thread_id, lambda: frames(thread_id, message))

        async def relay() -> AsyncIterator[str]:  # ends with the client; the run does not
            while (frame := await queue.get()) is not None:
                yield frame

        return StreamingResponse(
            relay(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def thread_state(thread_id: str) -> dict[str, Any]:
        snapshot = await setup.agent_for(thread_id).aget_state(
            {"configurable": {"thread_id": thread_id}}
        )
        values: dict[str, Any] = snapshot.values or {}
        return values

    async def compression(request: Request) -> Response:
        values = await thread_state(path_thread(request))
        messages: list[BaseMessage] = values.get("messages", [])
        raw = values.get(EVENT_KEY)
        event = event_from_state(raw)
        state = [to_core(m) for m in messages]
        view = effective_messages(state, event)
        estimator = ApproxEstimator()
        return JSONResponse(
            {
                "messages": len(messages),
                "summarization_event": raw,
                # the summary's text, as the model reads it (None before the first summary)
                "summary": event.summary_message.text if event is not None else None,
                # what the next model call starts from (summary + later messages), before L1
                "tokens": estimator.count_messages(view),
                # every message of the conversation, as if nothing were compressed
                "conversation_tokens": estimator.count_messages(state),
                "threshold": setup.config.threshold_tokens,
            }
        )

    async def history(request: Request) -> Response:
        values = await thread_state(path_thread(request))
        return JSONResponse([{"role": m.type, "text": m.text} for m in values.get("messages", [])])

    async def thread_file(request: Request) -> Response:
        thread_id = path_thread(request)
        if setup.files is None:
            raise BadRequest("this service serves no files", 404)
        try:
            text = setup.files.scoped(thread_id).read_text(request.path_params["path"])
        except PathBoundaryError as exc:
            raise BadRequest(str(exc)) from None
        except FileBackendError as exc:
            raise BadRequest(str(exc), 404) from None
        return PlainTextResponse(text, headers={"X-Content-Type-Options": "nosniff"})

    async def bad_request(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, BadRequest)
        return JSONResponse({"error": str(exc)}, status_code=exc.status)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code)

    async def server_error(request: Request, exc: Exception) -> Response:
        detail = str(exc) if isinstance(exc, ArsError) else "internal error"
        return JSONResponse({"error": f"{type(exc).__name__}: {detail}"}, status_code=500)

    app = Starlette(
        routes=[
            Route("/", page, methods=["GET"]),
            Route("/chat", chat, methods=["POST"]),
            Route("/threads/{thread_id}/compression", compression, methods=["GET"]),
            Route("/threads/{thread_id}/messages", history, methods=["GET"]),
            Route("/threads/{thread_id}/files/{path:path}", thread_file, methods=["GET"]),
        ],
        exception_handlers={
            BadRequest: bad_request,
            HTTPException: http_error,
            Exception: server_error,
        },
    )
    app.state.runs = runs  # ``await app.state.runs.wait()``: every run started has ended
    return app


# ------------------------------------------------------------------ the demo agent


def log_lines(query: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", query.lower()).strip("-")[:24] or "all"
    return "".join(
        f"2026-11-30T09:{i % 60:02d} worker-{i % 8} GET /api/{slug}/{i} 200 in {i % 90} ms\n"
        for i in range(300)
    )


@tool
def search_logs(query: str) -> str:
    """Search the service logs; returns every matching line."""
    return log_lines(query)


def scripted_model() -> FakeToolChatModel:
    """A fresh scripted model for one thread: it answers a user message by calling
    ``search_logs`` and then reports on the result, for as many turns as you like."""
    ids = itertools.count(1)

    def reply(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if last.type != "tool":
            query = " ".join(last.text.split()[:8])[:60] or "everything"
            return AIMessage(
                "", tool_calls=[tool_call("search_logs", {"query": query}, f"call-{next(ids)}")]
            )
        asked = next(
            (
                c["args"]["query"]
                for m in reversed(messages)
                for c in getattr(m, "tool_calls", None) or ()
                if c["name"] == "search_logs"
            ),
            "everything",
        )
        return AIMessage(f"The logs for {asked!r} show 300 requests, all served in under 90 ms.")

    return FakeToolChatModel([reply] * 2_000)  # two replies a turn: 1,000 turns


#: for a small real model: a short English prompt leaves room in a 2,048-token window
REAL_MODEL_SUMMARY_PROMPT = (
    "Summarize the conversation below in a few short sentences. Keep names and numbers."
    "\n\n{messages}\n\nSummary:"
)


def real_model(base_url: str, name: str, max_tokens: int) -> Any:
    """A model behind an OpenAI-compatible server (``langchain-openai``, in the e2e extra)."""
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        base_url=base_url,
        model=name,
        api_key="not-needed",
        max_tokens=max_tokens,
        # sent as `max_completion_tokens`, which llama-cpp-python's server ignores
        extra_body={"max_tokens": max_tokens},
        temperature=0,
        stream_usage=True,
    )


def build_demo(
    model_url: str | None = None,
    *,
    model_name: str = "local",
    max_tokens: int = 128,
    threshold_k: float = 1,
    max_threads: int = 256,
) -> ChatSetup:
    """The demo service: small ARS thresholds so compression shows within a few messages.

    ``model_url``: an OpenAI-compatible server (serving ``model_name``) every thread
    talks to, which also writes the summaries; ``None``: a scripted model per thread
    with a log-search tool, and the built-in extractive summarizer. ``threshold_k``
    is ARS's ``summary_threshold`` (T = threshold_k x 1,024 tokens).
    """
    config = SummaryConfig(
        summary_threshold=threshold_k,
        summary_keep_messages=2,
        summary_tool_result_token_limit=200,
        summary_l2_trigger_ratio=0.5,
        **({"summary_prompt": REAL_MODEL_SUMMARY_PROMPT} if model_url else {}),
    )
    files = FsspecBackend(f"memory://ars-chat-{uuid.uuid4().hex[:8]}")
    middleware = ArsSummarizationMiddleware(
        config,
        backend=files,
        # no read_ars_file tool: the scripted model never reads files back, and a small
        # local model gets no tools at all (see build below)
        read_tool=False,
        summarizer=None if model_url else ExtractiveSummarizer(),
    )
    checkpointer = InMemorySaver()

    def build(model: Any) -> Any:
        return create_agent(
            model,
            # a small local model does not call tools reliably: it just chats
            tools=[] if model_url else [search_logs],
            middleware=[middleware],
            checkpointer=checkpointer,
            system_prompt="You are an operations assistant. Answer in a few sentences."
            if model_url
            else "You are an operations assistant. Use search_logs to answer.",
        )

    if model_url:
        shared = build(real_model(model_url, model_name, max_tokens))
        return ChatSetup(agent_for=lambda _thread: shared, files=files, config=config)

    agents: OrderedDict[str, Any] = OrderedDict()

    def agent_for(thread_id: str) -> Any:
        agent = agents.get(thread_id)
        if agent is None:  # the checkpoint keeps the conversation; the model has no memory
            agent = agents[thread_id] = build(scripted_model())
            while len(agents) > max_threads:
                agents.popitem(last=False)
        agents.move_to_end(thread_id)
        return agent

    return ChatSetup(agent_for=agent_for, files=files, config=config)


app = create_app(
    build_demo(
        os.environ.get("ARS_CHAT_MODEL_URL") or None,
        model_name=os.environ.get("ARS_CHAT_MODEL", "local"),
    )
)


# ------------------------------------------------------------------ the page

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>ARS chat</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 0; display: grid;
         grid-template-columns: minmax(0, 3fr) minmax(0, 2fr);
         grid-template-rows: auto minmax(0, 1fr); height: 100vh; }
  header { grid-column: 1 / 3; padding: 8px 16px; background: #1f2937; color: #fff;
           display: flex; gap: 12px; align-items: center; }
  header input { width: 14em; }
  main { display: flex; flex-direction: column; min-height: 0; border-right: 1px solid #ddd; }
  #conversation { flex: 1; overflow-y: auto; padding: 12px 16px; }
  .msg { margin: 6px 0; padding: 6px 10px; border-radius: 6px; white-space: pre-wrap; }
  .msg.user { background: #dbeafe; margin-left: 20%; }
  .msg.assistant { background: #f3f4f6; margin-right: 20%; }
  .msg.tool { color: #6b7280; font-size: 12px; }
  form { display: flex; gap: 8px; padding: 8px 16px; border-top: 1px solid #ddd; }
  textarea { flex: 1; height: 3.2em; }
  aside { overflow-y: auto; padding: 12px 16px; }
  #gauge-label, #gauge-note, #history-tokens { margin: 4px 0; }
  #gauge-note { font-size: 12px; color: #4b5563; }
  #gauge { position: relative; height: 22px; background: #e5e7eb; border-radius: 4px; }
  #gauge-fill { position: absolute; inset: 0 auto 0 0; background: #60a5fa; border-radius: 4px; }
  #gauge-fill.over { background: #f87171; }
  #gauge-text { position: relative; padding-left: 6px; line-height: 22px; }
  #events { padding-left: 20px; }
  .event { margin: 6px 0; }
  a.file { font-family: ui-monospace, monospace; font-size: 12px; white-space: nowrap; }
  a.summary-link { cursor: pointer; text-decoration: underline dotted; }
  #summary { margin: 8px 0; border: 1px solid #e5e7eb; border-radius: 4px; padding: 4px 8px; }
  #summary > summary { cursor: pointer; font-weight: 600; }
  #summary-text { white-space: pre-wrap; font-size: 12px; max-height: 40vh; overflow-y: auto;
                  margin: 6px 0 0; }
  .event.started { color: #92400e; }
  .event.completed { color: #065f46; }
  .event.failed { color: #991b1b; }
  #status { font-size: 12px; color: #d1d5db; }
</style>
</head>
<body>
<header>
  <strong>ARS chat</strong>
  <label>thread <input id="thread" autocomplete="off"></label>
  <button id="new-thread" type="button">New thread</button>
  <span id="status" data-state="loading">loading</span>
</header>
<main>
  <div id="conversation"></div>
  <form id="chat-form">
    <textarea id="message" placeholder="Ask about the logs..."></textarea>
    <button id="send" type="submit">Send</button>
  </form>
</main>
<aside>
  <h2>Context</h2>
  <p id="gauge-label">Next request, before ARS compresses it</p>
  <div id="gauge" title="estimated tokens of the request, against the size at which ARS compresses">
    <div id="gauge-fill"></div><span id="gauge-text">-</span>
  </div>
  <p id="gauge-note"></p>
  <p id="history-tokens"></p>
  <details id="summary" hidden>
    <summary id="summary-title">Summary</summary>
    <div id="summary-text"></div>
  </details>
  <h2>Compression events</h2>
  <ol id="events"></ol>
  <p id="persisted"></p>
</aside>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
let thread = params.get("thread") || "thread-" + Math.random().toString(36).slice(2, 8);
let sawRound = false;  // the gauge shows the last compressed request once a round was seen
$("thread").value = thread;

function fmt(n) { return Number.isInteger(n) ? n.toLocaleString("en-US") : "?"; }
function fileUrl(path) {
  return "/threads/" + encodeURIComponent(thread) + "/files/" +
    path.split("/").map(encodeURIComponent).join("/");
}
// The words of ars_core.describe_event; file paths become links.
function describe(e) {
  const out = [];
  let head = e.phase + " " + e.level;
  if (e.forced) head += " (forced by a context overflow)";
  const before = e.tokens_before, after = e.tokens_after, T = e.threshold;
  if (e.phase === "started") {
    if (Number.isInteger(before) && Number.isInteger(T)) {
      out.push(head + ": " + fmt(before) + " tokens " + (before >= T ? "\u2265" : "<") + " T " + fmt(T));
    } else {
      out.push(head + ": " + fmt(before) + " tokens");
    }
    return out;
  }
  const bound = Number.isInteger(T) ? " (T " + fmt(T) + ")" : "";
  if (e.phase === "failed") {
    out.push(head + ": " + fmt(before) + " tokens" + bound + ", " + (e.error || "unknown error"));
    return out;
  }
  out.push(head + ": " + fmt(before) + " \u2192 " + fmt(after) + " tokens" + bound);
  const off = e.offloaded || [];
  if (off.length) {
    out.push(", " + off.length + (off.length === 1 ? " tool result" : " tool results") + " offloaded to ");
    off.forEach((p, i) => { if (i) out.push(", "); out.push({path: p}); });
  }
  if (e.truncated_args) {
    out.push(", " + e.truncated_args + " large " + (e.truncated_args === 1 ? "argument" : "arguments") + " truncated");
  }
  if (e.level === "L2" && e.cutoff !== undefined && e.cutoff !== null) {
    if (e.file_path) { out.push(", history archived to "); out.push({path: e.file_path}); }
    else out.push(", history archive not written");
    out.push(", "); out.push({summary: "summary covers messages 1-" + e.cutoff});
  }
  return out;
}
// A file's short name: its base name with long hex digests cut to 8 characters
// (the full path is the link's title, and what copying the link's text gives).
function shortName(path) {
  const base = path.split("/").pop();
  return base.replace(/[0-9a-f]{12,}/g, (hex) => hex.slice(0, 8) + "\u2026");
}
function link(path) {
  const a = document.createElement("a");
  a.href = fileUrl(path); a.target = "_blank"; a.textContent = shortName(path);
  a.className = "file"; a.title = path; a.dataset.path = path;
  return a;
}
// "summary covers messages 1-n" opens the summary below the gauge
function summaryLink(text) {
  const a = document.createElement("a");
  a.className = "summary-link"; a.textContent = text; a.href = "#summary";
  a.title = "read the summary";
  a.addEventListener("click", (ev) => { ev.preventDefault(); openSummary(); });
  return a;
}
function openSummary() {
  const d = $("summary");
  if (d.hidden) return;
  d.open = true; d.scrollIntoView({block: "nearest"});
}
// Copying text that holds file links copies their full paths.
document.addEventListener("copy", (ev) => {
  const sel = document.getSelection();
  if (!sel || sel.rangeCount === 0 || sel.isCollapsed) return;
  const range = sel.getRangeAt(0);
  let node = range.commonAncestorContainer;
  if (node.nodeType !== 1) node = node.parentElement;
  const inside = node && node.closest("a.file");
  let text;
  if (inside) {
    text = inside.dataset.path;
  } else {
    const part = range.cloneContents();
    if (!part.querySelector("a.file")) return;
    part.querySelectorAll("a.file").forEach((a) => a.replaceWith(a.dataset.path));
    text = part.textContent;
  }
  ev.clipboardData.setData("text/plain", text);
  ev.preventDefault();
});
function addEvent(e) {
  const li = document.createElement("li");
  li.className = "event " + e.phase;
  li.dataset.phase = e.phase; li.dataset.level = e.level; li.dataset.round = e.round_id;
  li.dataset.event = JSON.stringify(e);
  for (const part of describe(e)) {
    li.append(typeof part === "string" ? part : part.path ? link(part.path) : summaryLink(part.summary));
  }
  $("events").append(li);
  if (e.phase === "completed" && Number.isInteger(e.tokens_after)) {
    sawRound = true; gauge(e.tokens_after, e.threshold);
  }
}
// The gauge: the last request ARS sent once a round was seen, else the next one as it
// stands; in tokens against the size at which ARS compresses (T).
function gauge(tokens, T) {
  const g = $("gauge");
  g.dataset.tokens = tokens; g.dataset.threshold = T;
  const fill = $("gauge-fill");
  fill.style.width = Math.min(100, 100 * tokens / T) + "%";
  fill.classList.toggle("over", tokens >= T);
  $("gauge-label").textContent = sawRound
    ? "Last request sent to the model" : "Next request, before ARS compresses it";
  $("gauge-text").textContent = fmt(tokens) + " of " + fmt(T) + " tokens";
  $("gauge-note").textContent = "ARS compresses a request once it reaches " + fmt(T) +
    " tokens: large tool results go to files, older messages into a summary.";
}
function bubble(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role; div.textContent = text;
  $("conversation").append(div);
  $("conversation").scrollTop = $("conversation").scrollHeight;
  return div;
}
function status(state, text) { $("status").dataset.state = state; $("status").textContent = text || state; }

async function refresh() {
  const r = await fetch("/threads/" + encodeURIComponent(thread) + "/compression");
  if (!r.ok) return;
  const s = await r.json();
  if (!sawRound) gauge(s.tokens, s.threshold);
  $("history-tokens").textContent = "Whole conversation: " + s.messages +
    (s.messages === 1 ? " message" : " messages") + ", about " + fmt(s.conversation_tokens) +
    " tokens" + (s.summary ? " (the model gets a summary of the older ones)" : "") + ".";
  const d = $("summary");
  d.hidden = !s.summary;
  if (s.summary) {
    $("summary-title").textContent = "Summary of messages 1-" + s.summarization_event.cutoff;
    $("summary-text").textContent = s.summary;
  }
  const ev = s.summarization_event, p = $("persisted");
  p.textContent = "";
  if (ev) {
    p.append("checkpoint: " + s.messages + " messages, summary covers 1-" + ev.cutoff);
    if (ev.file_path) { p.append(", history in "); p.append(link(ev.file_path)); }
  } else {
    p.append("checkpoint: " + s.messages + " messages, no summary yet");
  }
}
async function load() {
  status("loading");
  $("conversation").textContent = ""; $("events").textContent = ""; sawRound = false;
  $("summary").hidden = true; $("summary").open = false;
  const r = await fetch("/threads/" + encodeURIComponent(thread) + "/messages");
  if (r.ok) {
    for (const m of await r.json()) {
      if (m.role === "human") bubble("user", m.text);
      else if (m.role === "ai" && m.text) bubble("assistant", m.text);
    }
  }
  await refresh();
  status("idle");
}

// One SSE frame ("event: x\\ndata: ...") -> [event, data]
function parseFrame(frame) {
  let event = "message"; const data = [];
  for (const line of frame.split("\\n")) {
    if (line.startsWith("event:")) event = line.slice(6).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
  }
  return [event, data.join("\\n")];
}

async function send(message) {
  bubble("user", message);
  let answer = null;
  status("streaming", "streaming\u2026");
  const resp = await fetch("/chat", {
    method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify({thread_id: thread, message: message}),
  });
  if (!resp.ok) {
    const err = await resp.json().catch(() => ({error: resp.statusText}));
    status("error", "error: " + err.error);
    return;
  }
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "", failed = null;
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buffer += value;
    let cut;
    while ((cut = buffer.indexOf("\\n\\n")) >= 0) {
      const [event, data] = parseFrame(buffer.slice(0, cut));
      buffer = buffer.slice(cut + 2);
      const d = data ? JSON.parse(data) : {};
      if (event === "token") {
        if (!answer) answer = bubble("assistant", "");
        answer.textContent += d.content;
      } else if (event === "tool") {
        bubble("tool", "tool " + d.name + ": " + d.content.split("\\n").filter(Boolean).length + " lines");
        answer = null;
      } else if (event === "context_compression") {
        addEvent(d);
      } else if (event === "error") {
        failed = d.error;
      }
    }
  }
  await refresh();
  if (failed) status("error", "error: " + failed); else status("idle");
}

$("chat-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("message").value.trim();
  if (!text || $("status").dataset.state === "streaming") return;
  $("message").value = "";
  send(text).catch((err) => status("error", "error: " + err));
});
$("message").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); $("chat-form").requestSubmit(); }
});
function switchTo(id) {
  thread = id; history.replaceState(null, "", "?thread=" + encodeURIComponent(id)); load();
}
$("thread").addEventListener("change", () => { if ($("thread").value) switchTo($("thread").value); });
$("new-thread").addEventListener("click", () => {
  const id = "thread-" + Math.random().toString(36).slice(2, 8);
  $("thread").value = id; switchTo(id);
});
load();
</script>
</body>
</html>
"""


# ------------------------------------------------------------------ command line


async def _demo() -> None:
    import httpx

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://demo") as client:
        for message in ("latency of the checkout API", "and the payment API?"):
            async with client.stream(
                "POST", "/chat", json={"thread_id": "demo", "message": message}
            ) as resp:
                async for chunk in resp.aiter_text():
                    print(chunk, end="")
        print((await client.get("/threads/demo/compression")).json())


def main() -> None:
    parser = argparse.ArgumentParser(description="ARS chat page (see the module docstring)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--demo", action="store_true", help="print two requests' frames, no server")
    args = parser.parse_args()
    if args.demo:
        asyncio.run(_demo())
        return
    import uvicorn

    print(f"ARS chat page on http://{args.host}:{args.port}/")
    uvicorn.run(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
