"""What every benchmark section shares: the runs, the peers' plumbing, timing, tables."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import attrs

from ars_core import Message, SummaryResult
from ars_core.replay import Run

REPO = Path(__file__).resolve().parents[1]
DEFAULT_RUNS_DIR = REPO.parent / "shared" / "data" / "trajectories"
#: a threshold no history here reaches (K tokens): the "no trigger" measurements
NO_TRIGGER_K = 1_000_000


@dataclass
class Context:
    """What a section gets: the options, the runs, a scratch folder, a progress log and
    the data of the sections measured before it."""

    args: argparse.Namespace
    runs: list[Run]
    tmp: Path
    log: Callable[[str], None]
    results: dict[str, Any] = field(default_factory=dict)
    #: the folder the runs were read from
    runs_dir: Path | None = None

    @property
    def runs_by_size(self) -> list[Run]:
        """The runs, largest (in characters) first."""
        return sorted(self.runs, key=lambda r: sum(len(m.text) for m in r.messages), reverse=True)


# ================================================================== histories


def per_threshold(
    ctx: Context,
    row: Callable[[Sequence[Run], float], dict[Any, Any]],
    describe: Callable[[dict[Any, Any]], str],
) -> dict[str, Any]:
    """A section measured over the largest runs at every threshold of
    ``--thresholds``: ``row(runs, k)`` for each ``k``, logged with ``describe``."""
    args = ctx.args
    thresholds = [float(s) for s in args.thresholds.split(",") if s.strip()]
    runs = ctx.runs_by_size[: args.token_runs]
    table: dict[float, dict[Any, Any]] = {}
    for k in thresholds:
        table[k] = row(runs, k)
        ctx.log(f"  at {k:g}K: {describe(table[k])}")
    return {"thresholds": thresholds, "table": table, "runs": len(runs), "keep": args.keep}


def split_system(run: Run) -> tuple[Message | None, list[Message]]:
    msgs = list(run.messages)
    if msgs and msgs[0].role == "system":
        return msgs[0], msgs[1:]
    return None, msgs


def _copy(m: Message, prefix: str, *, msg_id: str, content: Any = None) -> Message:
    calls = tuple(attrs.evolve(c, id=prefix + c.id) for c in m.tool_calls)
    return attrs.evolve(
        m,
        content=m.content if content is None else content,
        tool_calls=calls,
        id=msg_id,
        tool_call_id=(prefix + m.tool_call_id) if m.tool_call_id else None,
    )


def concatenated(runs: Sequence[Run], n: int) -> tuple[Message | None, list[Message]]:
    """``n`` messages of runs one after the other (cycled if needed).

    System messages are dropped (the first run's becomes the system message)
    and tool-call ids are prefixed per run copy so pairs never collide.
    """
    system = next(
        (r.messages[0] for r in runs if r.messages and r.messages[0].role == "system"), None
    )
    out: list[Message] = []
    copy = 0
    while len(out) < n:
        for k, run in enumerate(runs):
            prefix = f"c{copy}r{k}_"
            for m in run.messages:
                if m.role == "system":
                    continue
                out.append(_copy(m, prefix, msg_id=f"{prefix}{len(out)}"))
                if len(out) >= n:
                    return system, out
        copy += 1
    return system, out


def unanswered_calls(history: Sequence[Message]) -> list[str]:
    """The ids of the tool calls of the history's last assistant turn that have no result
    in it (a history cut between a call and its results). ARS answers each one with a
    note in the view it sends."""
    end = len(history)
    while end and history[end - 1].role == "tool":
        end -= 1
    if not end:
        return []
    answered = {m.tool_call_id for m in history[end:]}
    return [c.id for c in history[end - 1].tool_calls if c.id not in answered]


def _closed(block: list[Message]) -> list[Message]:
    """``block`` with the calls its last turn leaves unanswered taken out of that message,
    so that repeating it never leaves a call without its result inside a history."""
    missing = set(unanswered_calls(block))
    if not missing:
        return block
    end = max(i for i, m in enumerate(block) if m.role != "tool")
    calls = tuple(c for c in block[end].tool_calls if c.id not in missing)
    return [*block[:end], attrs.evolve(block[end], tool_calls=calls), *block[end + 1 :]]


def tiled(runs: Sequence[Run], n: int, block: int) -> tuple[Message | None, list[Message]]:
    """``n`` messages made of one ``block``-message stretch of the runs, repeated
    (fresh message objects and ids for every copy; a call the stretch cuts from its
    result is taken out of the stretch's last assistant message).

    With every history length a multiple of ``block``, the messages appended
    in the timed window are the same at every length, so the timings compare
    the cost of the history, not the sizes of whichever messages happen to be
    appended there.
    """
    system, base = concatenated(runs, block)
    base = _closed(base)  # each copy a whole conversation: no call left unanswered inside
    out: list[Message] = []
    copy = 0
    while len(out) < n:
        prefix = f"t{copy}_"
        for m in base:
            # a copy marker in the text: no count is served from a content cache
            content = f"{m.content} [{copy}]" if isinstance(m.content, str) else m.content
            out.append(_copy(m, prefix, msg_id=f"{prefix}{m.id}", content=content))
            if len(out) >= n:
                break
        copy += 1
    return system, out


def run_section_child(module: str, *args: str) -> dict[str, Any]:
    """``python -m benchmarks.<module> ARGS`` in a fresh interpreter (its memory and
    caches its own), from the repository; returns the JSON of its last output line."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# ================================================================== the peers' plumbing


class LC:
    """Core <-> LangChain message conversion for the peers: ``ars_langchain.convert``,
    memoised both ways so repeated conversions cost a lookup."""

    def __init__(self) -> None:
        from ars_langchain import convert

        self._convert = convert
        self._to_core: dict[int, tuple[Any, Message]] = {}
        self._serial = 0

    def from_core(self, m: Message) -> Any:
        if m.id is None:  # LangChain's reducers want ids
            self._serial += 1
            m = attrs.evolve(m, id=f"lc{self._serial}")
        out = self._convert.from_core(m)
        self._to_core[id(out)] = (out, m)
        return out

    def to_core(self, msg: Any) -> Message:
        hit = self._to_core.get(id(msg))
        if hit is not None and hit[0] is msg:
            return hit[1]
        core: Message = self._convert.to_core(msg)
        self._to_core[id(msg)] = (msg, core)
        return core


def fake_chat_model() -> Any:
    """A LangChain chat model that is never called (the peers need one for their profile)."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    class Fake(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    return Fake(messages=iter([AIMessage(content="never used")]))


def canned_handler() -> tuple[Callable[[Any], Any], list[Any]]:
    """A model-call handler returning one prebuilt reply; records the requests it saw."""
    from langchain.agents.middleware.types import ModelResponse
    from langchain_core.messages import AIMessage

    response = ModelResponse(result=[AIMessage(content="done", id="canned")])
    seen: list[Any] = []

    def handler(request: Any) -> Any:
        seen.append(request)
        return response

    return handler, seen


class InstantSummarizer:
    """An ARS summarizer that answers at once, in process (like the peers'
    ``summarizer=`` callables, called inline)."""

    name = "instant"
    runs_inline = True

    def summarize(self, messages: Sequence[Message], prompt: str) -> SummaryResult:
        return SummaryResult(text="summary")


def ars_middleware_available() -> bool:
    try:
        from ars_langchain.middleware import ArsSummarizationMiddleware  # noqa: F401
    except Exception:
        return False
    return True


# ================================================================== timing and tables


def balanced_orders(n: int) -> list[list[int]]:
    """Orders of ``n`` policies (a Williams design) in which each policy takes each place
    as often, and follows each other policy as often: ``n`` orders for an even ``n``,
    ``2n`` (each with its mirror) for an odd one."""
    first = [0]
    for k in range(1, n):
        first.append((k + 1) // 2 if k % 2 else n - k // 2)
    orders = [[(i + shift) % n for i in first] for shift in range(n)]
    return orders if n % 2 == 0 else orders + [order[::-1] for order in orders]


@dataclass
class Timing:
    samples: list[float] = field(default_factory=list)  # seconds
    note: str = ""

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples) * 1000 if self.samples else float("nan")

    @property
    def p95_ms(self) -> float:
        if not self.samples:
            return float("nan")
        s = sorted(self.samples)
        return s[min(len(s) - 1, round(0.95 * (len(s) - 1)))] * 1000


class DiskWait:
    """How long the timing thread waits on the disk barrier: inside ARS's flushes of a
    step's files and of their folders (its own ``fsync`` calls, or waiting for its
    flushing threads), and while it waits for what ran beside the round (the history
    archive's write and its folder's flush, the offloads' barrier). :meth:`installed` wraps those
    functions while the rounds run (nothing else is changed: every fsync still
    happens in the round)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._thread = threading.get_ident()
        self._inside = False

    def _timed(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if self._inside or threading.get_ident() != self._thread:
                return fn(*args, **kwargs)
            self._inside, t0 = True, time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0
                self._inside = False

        return timed

    @contextmanager
    def installed(self) -> Iterator[DiskWait]:
        from ars_core import _local_files, effects, files

        targets: list[tuple[Any, str]] = [
            (_local_files, "_flush_all"),
            (_local_files, "flush_folders"),
            (files, "flush_folders"),
            (effects.SyncEffects, "wait_named"),  # the archive's write, begun beside
            (effects.SyncEffects, "settle_archive"),
            (effects.SyncEffects, "settle_writes"),  # the offloads' barrier, beside the round
        ]
        saved = [(obj, name, getattr(obj, name)) for obj, name in targets if hasattr(obj, name)]
        for obj, name, fn in saved:
            setattr(obj, name, self._timed(fn))
        try:
            yield self
        finally:
            for obj, name, fn in saved:
                setattr(obj, name, fn)


def fmt_ms(x: float) -> str:
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def fmt_ratio(peer: float, ars: float) -> str:
    return f"{peer / ars:.1f}x" if ars > 0 else "-"


def target(text: str, met: bool) -> str:
    """A report's target line: ``Target: <text>: **met**.`` (or ``**NOT met**``)."""
    return f"Target: {text}: **{'met' if met else 'NOT met'}**."


def table(header: Sequence[str], rows: Iterable[Sequence[str]], align: str = "") -> list[str]:
    """A markdown table; ``align`` is one ``l`` or ``r`` per column (default: first left)."""
    align = align or "l" + "r" * (len(header) - 1)
    out = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(":---" if a == "l" else "---:" for a in align) + "|",
    ]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out
