"""Section M, on a real checkpointer: one agent turn on a thread resumed cold.

A LangChain v1 agent (``create_agent``, a scripted model answering at once, no
tools) with ARS's middleware, LangChain's ``SummarizationMiddleware`` or none.
Each thread is first grown by one run whose input is the whole history (so its
checkpoint holds the history and the answer, stamped as ARS stamps answers when
ARS's middleware ran). Then one more turn (a new user question) is timed: the
whole ``invoke`` (the checkpoint read and deserialized, the middleware, the model
call, the checkpoint written), by

* a new agent in the same process, on an ``InMemorySaver`` (a thread new to a
  running worker: a new middleware; the saver hands out new message objects);
* a new process on a SQLite checkpointer (``SqliteSaver``; imports done, not timed).

The median over the threads, the first thread of each process left out (its run
pays for the first call of the process).
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ars_core import FsspecBackend, SummaryConfig
from ars_core.estimate import default_estimator

from .common import NO_TRIGGER_K, InstantSummarizer, Timing, fake_chat_model, run_section_child

__all__ = ["CONTENDERS", "measure_savers"]

#: the agents compared (their middleware)
CONTENDERS = ("ARS middleware", "LangChain", "no middleware")
#: where in T the history is in the second zone (its exact count / T)
ZONE = 0.6


def _agent(name: str, threshold_k: float, saver: Any, folder: Path, replies: int) -> Any:
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.messages import AIMessage

    from ars_langchain import ArsSummarizationMiddleware
    from ars_langchain.testing import FakeToolChatModel

    middleware: list[Any] = []
    if name == "ARS middleware":
        config = SummaryConfig(summary_threshold=threshold_k, summary_keep_messages=10)
        backend = FsspecBackend(folder.as_uri())
        summarizer = InstantSummarizer()
        middleware = [
            ArsSummarizationMiddleware(config, summarizer=summarizer, backend=backend, stream=False)
        ]
    elif name == "LangChain":
        middleware = [
            SummarizationMiddleware(
                fake_chat_model(),
                trigger=("tokens", int(threshold_k * 1024)),
                keep=("messages", 10),
                summarizer=lambda messages: "summary",  # type: ignore[call-arg]
            )
        ]
    model = FakeToolChatModel([AIMessage(f"answer {i}") for i in range(replies)])
    return create_agent(model, tools=[], middleware=middleware, checkpointer=saver)


def _question(i: int) -> dict[str, Any]:
    from langchain_core.messages import HumanMessage

    return {"messages": [HumanMessage(f"and now step {i}, please")]}


def _config(name: str, k: int) -> dict[str, Any]:
    return {"configurable": {"thread_id": f"{name}-{k}"}}


def _grow(agent: Any, name: str, histories: Sequence[list[Any]]) -> None:
    for k, history in enumerate(histories):
        agent.invoke({"messages": history}, _config(name, k))


def _timed_turns(agent: Any, name: str, threads: int) -> list[float]:
    out = []
    for k in range(threads):
        t0 = time.perf_counter()
        agent.invoke(_question(k), _config(name, k))
        out.append(time.perf_counter() - t0)
    return out


def _median_ms(samples: list[float]) -> float:
    """The median of ``samples`` but the first (the first thread of its process)."""
    return Timing(samples[1:] if len(samples) > 1 else samples).median_ms


def measure_savers(fresh: Any, threads: int, tmp: Path) -> dict[str, dict[str, float]]:
    """``{zone: {"<contender> / <saver>": ms}}`` for T far above the history and
    for the history at :data:`ZONE` of T."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.sqlite import SqliteSaver

    tmp.mkdir(parents=True, exist_ok=True)
    exact = default_estimator().count(fresh.core())
    zones = {"far below T": float(NO_TRIGGER_K), f"at {ZONE:.0%} of T": exact / ZONE / 1024}
    out: dict[str, dict[str, float]] = {}
    for zone, threshold_k in zones.items():
        row: dict[str, float] = {}
        for name in CONTENDERS:
            histories = [fresh.langchain() for _ in range(threads)]
            folder = tmp / f"saver-{zone[:3]}-{name[:3]}"
            memory = InMemorySaver()
            _grow(_agent(name, threshold_k, memory, folder, threads), name, histories)
            turns = _timed_turns(_agent(name, threshold_k, memory, folder, threads), name, threads)
            row[f"{name} / InMemorySaver"] = _median_ms(turns)
            db = tmp / f"{zone[:3]}-{name[:3]}.sqlite"
            conn = sqlite3.connect(db, check_same_thread=False)
            try:
                grower = _agent(name, threshold_k, SqliteSaver(conn), folder, threads)
                _grow(grower, name, histories)
            finally:
                conn.close()
            args = (name, str(threshold_k), str(db), str(folder), str(threads))
            child = run_section_child("cold_saver", *args)
            row[f"{name} / SQLite, new process"] = _median_ms(child["seconds"])
        out[zone] = row
    return out


def _child(argv: Sequence[str]) -> None:
    """``python -m benchmarks.cold_saver NAME T_K DB FOLDER THREADS``: the timed turns of
    a new process on the SQLite checkpointer, printed as JSON."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    name, threshold_k, db, folder, threads = argv
    conn = sqlite3.connect(db, check_same_thread=False)
    try:
        agent = _agent(name, float(threshold_k), SqliteSaver(conn), Path(folder), int(threads))
        print(json.dumps({"seconds": _timed_turns(agent, name, int(threads))}))
    finally:
        conn.close()


if __name__ == "__main__":
    _child(sys.argv[1:])
