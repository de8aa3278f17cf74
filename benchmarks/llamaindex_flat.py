"""K. The LlamaIndex memory's per-call overhead against history length, below the threshold.

``ArsMemory.get()`` (the view a LlamaIndex agent reads before each model call)
on a ``SimpleChatStore``, and ``aget()`` on a ``SQLAlchemyChatStore`` on SQLite,
each call one message longer than the last (the message is appended untimed,
as an agent's ``put`` would), at several history lengths. Target: flat, the
median at 5,000 messages at most 1.5x the median at 500 (``SimpleChatStore``;
the SQLite row is shown for reference).
"""

from __future__ import annotations

import asyncio
import gc
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from ars_core import Message

from .common import (
    NO_TRIGGER_K,
    Context,
    Timing,
    fmt_ms,
    table,
    target,
    tiled,
    unanswered_calls,
)

KEY = "K"
NEEDS: tuple[str, ...] = ()
#: the history lengths the flatness target compares
LOW, HIGH = 500, 5000
#: the length of the view ARS sends for a history of a given length
Sizes = Callable[[int], int]


def _chat(ctx: Context, n: int, block: int) -> tuple[list[Message], list[Any]]:
    from ars_llamaindex import from_core

    _, history = tiled(ctx.runs, n, block)
    return history, [from_core(m) for m in history]


def _memory(store: Any) -> Any:
    from ars_llamaindex import ArsMemory

    return ArsMemory.from_defaults(
        chat_store=store, chat_store_key="bench", summary_threshold=NO_TRIGGER_K
    )


def _lengths(n: int, count: int) -> list[int]:
    return list(range(max(1, n - count + 1), n + 1))


def _simple(chat: Sequence[Any], n: int, count: int, warmup: int, sent: Sizes) -> Timing:
    from llama_index.core.storage.chat_store import SimpleChatStore

    memory = _memory(SimpleChatStore())
    lengths = _lengths(n, count)
    memory.put_messages(list(chat[: lengths[0] - 1]))
    timing = Timing()
    gc.collect()
    for j, length in enumerate(lengths):
        memory.put(chat[length - 1])
        t0 = time.perf_counter()
        view = memory.get()
        dt = time.perf_counter() - t0
        assert len(view) == sent(length), "the no-trigger benchmark changed the view"
        if j >= warmup:
            timing.samples.append(dt)
    return timing


async def _sqlite(
    chat: Sequence[Any], n: int, count: int, warmup: int, sent: Sizes, uri: str
) -> Timing:
    from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

    memory = _memory(SQLAlchemyChatStore(table_name=f"bench_{n}", async_database_uri=uri))
    lengths = _lengths(n, count)
    await memory.aput_messages(list(chat[: lengths[0] - 1]))
    timing = Timing()
    gc.collect()
    for j, length in enumerate(lengths):
        await memory.aput(chat[length - 1])
        t0 = time.perf_counter()
        view = await memory.aget()
        dt = time.perf_counter() - t0
        assert len(view) == sent(length), "the no-trigger benchmark changed the view"
        if j >= warmup:
            timing.samples.append(dt)
    return timing


def measure(ctx: Context) -> dict[str, Any]:
    try:
        import ars_llamaindex  # noqa: F401
    except ImportError:
        return {"sizes": [], "simple": {}, "sqlite": {}}
    args = ctx.args
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    count = args.repeat + args.warmup
    # one stretch of the runs repeated, as in A: the messages appended in each timed
    # window are alike at every length
    block = math.gcd(*sizes) if len(sizes) > 1 else sizes[0]
    block = block if block >= count else max(sizes)
    history, chat = _chat(ctx, max(sizes) + 1, block)

    def sent(length: int) -> int:
        return length + len(unanswered_calls(history[:length]))

    simple: dict[int, Timing] = {}
    sqlite: dict[int, Timing] = {}
    for n in sizes:
        simple[n] = _simple(chat, n, count, args.warmup, sent)
        uri = f"sqlite+aiosqlite:///{ctx.tmp / f'llamaindex-{n}.db'}"
        sqlite[n] = asyncio.run(_sqlite(chat, n, count, args.warmup, sent, uri))
        ctx.log(
            f"  LlamaIndex get() at {n} messages: SimpleChatStore "
            f"{simple[n].median_ms:.3f} ms, SQLite {sqlite[n].median_ms:.3f} ms"
        )
    return {"sizes": sizes, "simple": simple, "sqlite": sqlite}


def render(ctx: Context, data: dict[str, Any]) -> list[str]:
    lines = ["## K. LlamaIndex memory per-call overhead against history length", ""]
    if not data["sizes"]:
        return [*lines, "ars_llamaindex is not importable: not measured.", ""]
    lines.append(
        "`ArsMemory.get()` below the threshold, each call one message longer than the last "
        f"(appended untimed); {ctx.args.repeat} calls per cell after {ctx.args.warmup} "
        "warm-up calls."
    )
    lines.append("")
    simple, sqlite, sizes = data["simple"], data["sqlite"], data["sizes"]
    header = [
        "history",
        "SimpleChatStore median (ms)",
        "p95 (ms)",
        "SQLite aget median (ms)",
        "p95 (ms)",
    ]
    rows = [
        [
            f"{n:,}",
            fmt_ms(simple[n].median_ms),
            fmt_ms(simple[n].p95_ms),
            fmt_ms(sqlite[n].median_ms),
            fmt_ms(sqlite[n].p95_ms),
        ]
        for n in sizes
    ]
    lines += [*table(header, rows), ""]
    lo, hi = (LOW, HIGH) if LOW in sizes and HIGH in sizes else (min(sizes), max(sizes))
    ratio = simple[hi].median_ms / simple[lo].median_ms
    lines.append(
        target(f"SimpleChatStore median at {hi:,} / at {lo:,} = {ratio:.2f}x <= 1.5x", ratio <= 1.5)
    )
    lines.append(
        f"SQLite: {sqlite[hi].median_ms / sqlite[lo].median_ms:.2f}x (each call reads the rows "
        "added since the last one, by row id)."
    )
    lines.append("")
    return lines


def raw(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "llamaindex_per_call_ms": {
            store: {str(n): t.median_ms for n, t in data[store].items()}
            for store in ("simple", "sqlite")
        }
    }
