"""I. The event loop while ``acall`` handles a 10 MB tool result.

A coroutine ticks every millisecond; the largest gap between two ticks while
``Compressor.acall`` counts, offloads and sends a request holding a new 10 MB tool
result is the longest the loop was blocked. The same request through the sync
``call`` made from the loop shows what blocking would look like. Then the extra
memory (tracemalloc's peak) of counting that 10 MB message.
"""

from __future__ import annotations

import time
import tracemalloc
from typing import Any

import anyio

from ars_core import (
    ApproxEstimator,
    Compressor,
    FsspecBackend,
    Message,
    ToolCall,
    default_estimator,
)

from .common import Context, table, target

KEY = "I"
NEEDS: tuple[str, ...] = ()
#: characters of the tool result
RESULT_CHARS = 10_000_000
#: the issue's target for ``acall``'s largest loop stall (ms)
STALL_TARGET_MS = 50


def _request(seed: int) -> list[Message]:
    line = "FAILED tests/test_io.py::test_case_%d - AssertionError: expected 0x%08x, got 0x%08x\n"
    text = "".join(line % (i, i * 2654435761 % 2**32, seed) for i in range(RESULT_CHARS // 70))
    call = ToolCall(id=f"call_{seed}", name="bash", args={"command": "pytest -q"})
    return [
        Message(role="user", content="Run the tests and fix what fails."),
        Message(role="assistant", content="", tool_calls=(call,)),
        Message(role="tool", content=text[:RESULT_CHARS], tool_call_id=call.id, name="bash"),
    ]


async def _stall(engine: Compressor, state: list[Message], blocking: bool) -> tuple[float, float]:
    gaps: list[float] = []
    done = anyio.Event()

    async def tick() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await anyio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    async def model(view: list[Message]) -> str:
        return "ok"

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        tg.start_soon(tick)
        await anyio.sleep(0.01)
        started = time.perf_counter()
        if blocking:
            engine.call(state, lambda view: "ok")
        else:
            await engine.acall(state, model)
        elapsed = time.perf_counter() - started
        done.set()
    return max(gaps), elapsed


def measure(ctx: Context) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for label, make in (
        ("o200k (default with tiktoken)", default_estimator),
        ("approx (default without)", ApproxEstimator),
    ):
        for blocking in (False, True):
            engine = Compressor(estimator=make(), backend=FsspecBackend("memory://bench-stall"))
            stall, elapsed = anyio.run(_stall, engine, _request(len(rows)), blocking)
            rows.append(
                {
                    "estimator": label,
                    "path": "sync call on the loop" if blocking else "acall",
                    "max_stall_ms": 1000 * stall,
                    "seconds": elapsed,
                }
            )
            ctx.log(f"  {label} {rows[-1]['path']}: max stall {1000 * stall:.1f} ms")
    longest = max(float(r["seconds"]) for r in rows)
    idle = anyio.run(_idle, longest)
    return {"rows": rows, "memory": _counting_memory(), "idle_ms": 1000 * idle}


async def _idle(seconds: float) -> float:
    """The largest gap between ticks of the same coroutine with nothing else to run:
    what the machine itself adds (a shared machine deschedules the process)."""
    gap, last = 0.0, time.perf_counter()
    end = last + seconds
    while last < end:
        await anyio.sleep(0.001)
        now = time.perf_counter()
        gap, last = max(gap, now - last), now
    return gap


def _counting_memory() -> list[dict[str, Any]]:
    """The extra memory (tracemalloc's peak) of counting the 10 MB message, per estimator."""
    out = []
    for make in (default_estimator, ApproxEstimator):
        est, tool = make(), _request(99)[-1]
        nbytes = len(tool.text.encode("utf-8"))
        tracemalloc.start()
        try:
            est.count([tool])
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        out.append({"estimator": est.name, "text_mb": nbytes / 1e6, "peak_mb": peak / 1e6})
    return out


def render(ctx: Context, data: dict[str, Any]) -> list[str]:
    lines = ["## I. Event loop stall while a 10 MB tool result is handled", ""]
    lines.append(
        f"One request whose tool result is {RESULT_CHARS / 1e6:.0f} MB of new text, default "
        "configuration. A coroutine ticks every 1 ms; the largest gap between ticks is the "
        "longest the event loop was blocked (target for `acall`: <= 50 ms). `acall` counts and "
        "offloads large new content in a worker thread; the sync `call` made from the loop is "
        "shown for contrast."
    )
    lines.append("")
    lines += table(
        ["estimator", "path", "max loop stall", "request handled in"],
        [
            [r["estimator"], r["path"], f"{r['max_stall_ms']:.1f} ms", f"{r['seconds']:.2f} s"]
            for r in data["rows"]
        ],
        "llrr",
    )
    stall = max(r["max_stall_ms"] for r in data["rows"] if r["path"] == "acall")
    lines += [
        "",
        target(
            f"the largest loop stall while `acall` handles a 10 MB result <= "
            f"{STALL_TARGET_MS} ms ({stall:.1f} ms, both default estimators)",
            stall <= STALL_TARGET_MS,
        ),
        "",
        f"The same coroutine ticking with nothing else to run, as long as the slowest "
        f"request, saw a largest gap of {data['idle_ms']:.1f} ms (what the machine adds).",
        "",
        "Counting memory: the extra memory (tracemalloc's peak) of counting the 10 MB "
        "message once, fresh.",
        "",
    ]
    memory = data["memory"]
    lines += table(
        ["estimator", "text", "extra memory", "of the text"],
        [
            [r["estimator"], f"{r['text_mb']:.1f} MB", f"{r['peak_mb']:.2f} MB",
             f"{r['peak_mb'] / r['text_mb']:.2f}x"]
            for r in memory
        ],
        "lrrr",
    )  # fmt: skip
    worst = max(r["peak_mb"] / r["text_mb"] for r in memory)
    lines += [
        "",
        target(
            "counting memory proportional to the text, not a multiple of it (at most "
            f"{worst:.2f}x the text, within 1x)",
            worst <= 1,
        ),
        "",
    ]
    return lines


def raw(data: dict[str, Any]) -> dict[str, Any]:
    return {"loop_stall": data["rows"], "counting_memory": data["memory"]}
