"""One fleet worker: a process running the agent graph with ``ArsSummarizationMiddleware``.

A worker takes runs from the coordinator (:mod:`tests.soak.fleet`) over a pipe,
one at a time, the way a LangGraph server worker takes runs from its queue: any
thread's next run. It shares nothing with the other workers but the stores: a
PostgreSQL checkpointer (its own connection pool) and, for ARS's files, an S3
bucket (its own client, through the coordinator's fault-injecting proxy) or, for
a fifth of the threads, LangGraph's PostgreSQL store (the graph's
``runtime.store``, where the middleware puts its files when it is given no
backend, as on LangGraph's server).

Everything the invariants need is written to the worker's own log (one JSON
line per record, flushed at once, so a SIGKILL loses at most the line being
written): each view the model received (message ids, the files it names, its
size), each compression event, ARS's own time per model call, and the run's end.

A run may carry a kill point (``kill_at``): the worker SIGKILLs itself there, as
the OOM killer or a deploy would at an unlucky moment:

* ``archive`` / ``offload``: just before or just after writing a history archive
  / an offloaded tool result (the side is random), to S3 or into the store;
* ``summary``: inside the summary call;
* ``checkpoint``: after an L2 round completed, before the checkpoint is saved.

``Settings.broken`` (the soak's own tests only) breaks one guarantee on purpose,
so the soak shows its checks bite: ``scope`` writes every thread's files into one shared folder,
``archive`` drops history archives while reporting them written.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from ars_core import FsspecBackend

#: the system prompt of every worker's agent
SYSTEM = "You are a release engineer. Use fetch_report for build reports."
#: a path ARS names to the model
FILE_RE = re.compile(r"outputs/[a-z_]+/[A-Za-z0-9_.\-]*[A-Za-z0-9_\-]")


@dataclass
class Settings:
    """What a worker needs to know, from the coordinator."""

    name: str
    pg_url: str
    s3_url: str
    s3_options: dict[str, Any]
    log_path: str
    threshold_k: float
    keep: int
    broken: str = ""


def report_text(thread: str, turn: int, size: int) -> str:
    """The large tool result of one turn: deterministic, distinct per thread and turn."""
    lines = [
        f"[{thread} turn {turn}] step {i}: module m{i % 97} built in {i * 7 % 1000} ms, "
        f"checksum {(i * 2654435761 + turn) % 2**32:08x}"
        for i in range(size // 80 + 1)
    ]
    return "\n".join(lines)[:size]


class Log:
    """The worker's JSON-lines log (append, flushed after every record)."""

    def __init__(self, path: str, worker: str) -> None:
        self.file = open(path, "a", encoding="utf-8")  # closed when the process ends
        self.worker = worker

    def write(self, kind: str, **fields: Any) -> None:
        self.file.write(json.dumps({"kind": kind, "worker": self.worker, **fields}) + "\n")
        self.file.flush()


def die() -> None:
    """SIGKILL this process (nothing runs after it: no finally, no flush)."""
    os.kill(os.getpid(), signal.SIGKILL)


def build(
    settings: Settings, current: dict[str, Any], log: Log
) -> tuple[dict[str, Any], Callable[[], Any]]:
    """The agents (graphs compiled with a PostgreSQL checkpointer), by where their files
    go: ``s3`` (an fsspec backend on the bucket) or ``store`` (no backend: the graph's
    PostgreSQL store, as on LangGraph's server); and a pool closer."""
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
    from langchain_core.tools import tool
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    from ars_core import SummaryConfig, default_estimator
    from ars_core.testing import FakeSummarizer
    from ars_langchain import ArsSummarizationMiddleware, to_core
    from ars_langchain.testing import FakeToolChatModel

    estimator = default_estimator()

    @tool
    def fetch_report(section: str) -> str:
        """Fetch the build report of a section."""
        return report_text(current["thread"], current["turn"], current["report_size"])

    def answer(messages: list[BaseMessage]) -> AIMessage:
        view = [to_core(m) for m in messages]
        names = sorted({p for m in messages for p in FILE_RE.findall(str(m.content))})
        log.write(
            "view",
            run=current["run"],
            thread=current["thread"],
            turn=current["turn"],
            ids=[m.id for m in messages],
            files=names,
            tokens=estimator.count_messages(view)
            + estimator.count_tools(current[f"tools-{current['files']}"]),
        )
        last = messages[-1]
        if isinstance(last, ToolMessage) or isinstance(last, AIMessage):
            return AIMessage(
                f"Turn {current['turn']} of {current['thread']}: the report is read; "
                "the release can go ahead once the flaky module is rebuilt. " * 3
            )
        return AIMessage(
            "",
            tool_calls=[
                {
                    "name": "fetch_report",
                    "args": {"section": f"turn-{current['turn']}"},
                    "id": f"call-{current['thread']}-{current['turn']}-{random.randrange(10**9)}",
                    "type": "tool_call",
                }
            ],
        )

    def summary_text(rendered: str) -> str:
        if current.get("kill_at") == "summary":
            die()
        return f"Summary of {current['thread']} before turn {current['turn']}: {rendered[-400:]}"

    def on_event(event: Any) -> None:
        data = event if isinstance(event, dict) else _event_dict(event)
        log.write("event", run=current["run"], thread=current["thread"], event=data)
        if (
            current.get("kill_at") == "checkpoint"
            and data.get("phase") == "completed"
            and data.get("level") == "L2"
        ):
            die()

    KillingBackend.current = current
    KillingBackend.settings = settings
    backend = KillingBackend(settings.s3_url, storage_options=settings.s3_options)
    config = SummaryConfig(
        summary_threshold=settings.threshold_k,
        summary_keep_messages=settings.keep,
        summary_tool_result_token_limit=300,
    )

    class TimedMiddleware(ArsSummarizationMiddleware):  # type: ignore[misc]
        """ARS's own time per model call: the whole wrap less the model's handler."""

        def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
            inner = 0.0

            def timed(req: Any) -> Any:
                nonlocal inner
                t = time.perf_counter()
                try:
                    return handler(req)
                finally:
                    inner += time.perf_counter() - t

            start = time.perf_counter()
            try:
                return super().wrap_model_call(request, timed)
            finally:
                own = time.perf_counter() - start - inner
                log.write("ars_time", run=current["run"], seconds=own)

    def middleware(files: Any) -> Any:
        return TimedMiddleware(
            config, backend=files, summarizer=FakeSummarizer(text=summary_text), on_event=on_event
        )

    class KillingStore(PostgresStore):
        """The graph's store, dying at the kill point of the file being put."""

        def put(self, namespace: tuple[str, ...], key: str, *args: Any, **kwargs: Any) -> None:
            put = super().put
            killing_write(key, current, lambda: put(namespace, key, *args, **kwargs), settings)

    pool = ConnectionPool(
        settings.pg_url,
        min_size=1,
        max_size=2,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        check=ConnectionPool.check_connection,
        open=True,
    )
    saver = PostgresSaver(pool)
    model = FakeToolChatModel([answer] * 1_000_000)
    tools = [fetch_report]
    agents = {}
    for files, store in (("s3", None), ("store", KillingStore(pool))):  # type: ignore[arg-type]
        mw = middleware(backend if files == "s3" else None)
        # what the model is sent: the agent's tool and any the middleware adds (read-back)
        current[f"tools-{files}"] = [
            t.tool_call_schema.model_json_schema() for t in [*tools, *mw.tools]
        ]
        agents[files] = create_agent(
            model,
            tools=tools,
            system_prompt=SYSTEM,
            middleware=[mw],
            checkpointer=saver,
            store=store,
        )
    return agents, pool.close


def _event_dict(event: Any) -> dict[str, Any]:
    to_dict = getattr(event, "to_dict", None)
    if callable(to_dict):
        return dict(to_dict())
    import attrs

    return attrs.asdict(event) if attrs.has(type(event)) else dict(vars(event))


class KillingBackend(FsspecBackend):
    """An fsspec backend that dies at a kill point, or breaks a guarantee on purpose.

    One worker per process: the run in progress and the settings are class-wide."""

    current: dict[str, Any] = {}  # noqa: RUF012 - the process's one run in progress
    settings: Settings | None = None

    def scoped(self, scope: str) -> FsspecBackend:
        broken = self.settings is not None and self.settings.broken == "scope"
        # "scope" break: every thread in one folder (the isolation check must see it)
        child = super().scoped("shared" if broken else scope)
        child.__class__ = KillingBackend
        return child

    def write_text(self, path: str, text: str) -> str:
        write = super().write_text
        return str(killing_write(path, self.current, lambda: write(path, text), self.settings))

    def write_bytes(self, path: str, data: bytes) -> str:
        write = super().write_bytes
        return str(killing_write(path, self.current, lambda: write(path, data), self.settings))


def killing_write(
    path: str, current: dict[str, Any], write: Callable[[], Any], settings: Settings | None = None
) -> Any:
    """``write()``, unless the run's kill point is this file's kind: then SIGKILL just
    before or just after it (at random); the ``archive`` break drops archives."""
    point = (
        "archive"
        if "conversation_history/" in path
        else "offload"
        if "large_tool_results/" in path
        else None
    )
    kill = point is not None and current.get("kill_at") == point
    if kill and random.random() < 0.5:
        die()
    if point == "archive" and settings is not None and settings.broken == "archive":
        return path  # "written": the file never reaches the store
    result = write()
    if kill:
        die()
    return result


def run_one(agents: dict[str, Any], job: dict[str, Any]) -> str:
    """One run of ``job``'s turn on its thread: ``ok``, or ``disconnected`` when the
    client went away after ``disconnect_after`` stream chunks."""
    from langchain_core.messages import HumanMessage

    turn = HumanMessage(job["text"], id=job["message_id"])
    config = {"configurable": {"thread_id": job["thread"]}, "recursion_limit": 12}
    stream = agents[job["files"]].stream({"messages": [turn]}, config, stream_mode="updates")
    limit = job.get("disconnect_after")
    for i, _ in enumerate(stream):
        if limit is not None and i + 1 >= limit:
            stream.close()  # the client disconnected: the run is cancelled with it
            return "disconnected"
    return "ok"


def main(settings: Settings, conn: Connection) -> None:
    """The worker loop: a job in, its result out, until the pipe closes."""
    log = Log(settings.log_path, settings.name)
    current: dict[str, Any] = {"run": None, "thread": None, "turn": 0}
    agents, close = build(settings, current, log)
    conn.send({"ready": settings.name})
    try:
        while True:
            try:
                job = conn.recv()
            except EOFError:
                return
            if job is None:
                return
            current.update(job)
            log.write("start", run=job["run"], thread=job["thread"], turn=job["turn"])
            try:
                status = run_one(agents, job)
                error = None
            except Exception as exc:  # a failed run is retried by the coordinator
                status, error = "error", f"{type(exc).__name__}: {str(exc)[:300]}"
            log.write("end", run=job["run"], thread=job["thread"], status=status, error=error)
            conn.send({"run": job["run"], "status": status, "error": error})
    finally:
        close()
