#!/usr/bin/env python
"""ARS side by side with its peers, on recorded agent runs; a markdown report.

    python benchmarks/run.py                      # the full report (a few minutes)
    python benchmarks/run.py --quick              # small sizes, a few runs (seconds)
    python benchmarks/run.py --out report.md      # also write the report to a file
    nox -s benchmarks -- --quick

Sections:

A. Per-call overhead of ARS (its LangChain middleware, and the bare core
   ``Compressor.call``), LangChain's ``SummarizationMiddleware`` and deepagents'
   ``SummarizationMiddleware``, each driven through its model-call hook with a
   handler returning a canned reply, at several history lengths (runs
   concatenated), below any trigger; and one L2 round at 1,000 messages with an
   instant fake summarizer.
B. Tokens sent over whole replayed runs at a few thresholds: no compression,
   ARS (L1+L2), LangChain summarization, observation masking, deepagents.
   Every request is counted with tiktoken ``o200k_base`` whatever estimator the
   policy used; summary-call tokens are reported separately.
C. Estimator accuracy (against o200k) and speed: ``approx`` vs tiktoken
   ``o200k_base`` / ``cl100k_base`` on the runs, Chinese prose, JSON and code.
D. Issue 4's target: the core's per-call overhead (median, p95) against history
   length below the threshold must stay flat (5,000 messages <= 1.5x the cost at
   500).

The peers are used through their public constructors; nothing of theirs is
copied. LangChain's middleware has no ``wrap_model_call`` (it summarizes in
``before_model`` and rewrites ``state["messages"]``), so it is driven through
``before_model`` followed by the same handler.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # runnable from a checkout without installing
    sys.path.insert(0, str(REPO))

import attrs  # noqa: E402

from ars_core import (  # noqa: E402
    ApproxEstimator,
    Compressor,
    ExtractiveSummarizer,
    FsspecBackend,
    Message,
    SummaryConfig,
    SummaryResult,
    TiktokenEstimator,
    to_openai,
)
from ars_core.cli import SAMPLE_DIR, Run, load_runs, replay_messages  # noqa: E402
from ars_core.engine import CallOutcome  # noqa: E402
from ars_core.summarize import render_prompt  # noqa: E402

DEFAULT_RUNS_DIR = REPO.parent / "shared" / "data" / "trajectories"
#: a threshold no history here reaches (K tokens): the "no trigger" measurements
NO_TRIGGER_K = 1_000_000
PLACEHOLDERS = (
    "Previous conversation was too long to summarize.",
    "No previous conversation history.",
)


# ================================================================== data


def read_runs(folder: Path) -> list[Run]:
    return load_runs([folder])


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
                calls = tuple(attrs.evolve(c, id=prefix + c.id) for c in m.tool_calls)
                out.append(
                    attrs.evolve(
                        m,
                        tool_calls=calls,
                        id=f"{prefix}{len(out)}",
                        tool_call_id=(prefix + m.tool_call_id) if m.tool_call_id else None,
                    )
                )
                if len(out) >= n:
                    return system, out
        copy += 1
    return system, out


def tiled(runs: Sequence[Run], n: int, block: int) -> tuple[Message | None, list[Message]]:
    """``n`` messages made of one ``block``-message stretch of the runs, repeated
    (fresh message objects and ids for every copy).

    With every history length a multiple of ``block``, the messages appended
    in the timed window are the same at every length, so the timings compare
    the cost of the history, not the sizes of whichever messages happen to be
    appended there.
    """
    system, base = concatenated(runs, block)
    out: list[Message] = []
    copy = 0
    while len(out) < n:
        prefix = f"t{copy}_"
        for m in base:
            calls = tuple(attrs.evolve(c, id=prefix + c.id) for c in m.tool_calls)
            # a copy marker in the text: no count is served from a content cache
            content = f"{m.content} [{copy}]" if isinstance(m.content, str) else m.content
            out.append(
                attrs.evolve(
                    m,
                    content=content,
                    tool_calls=calls,
                    id=f"{prefix}{m.id}",
                    tool_call_id=(prefix + m.tool_call_id) if m.tool_call_id else None,
                )
            )
            if len(out) >= n:
                break
        copy += 1
    return system, out


# ------------------------------------------------------------------ LangChain messages


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
    """An ARS summarizer that answers at once."""

    name = "instant"

    def summarize(self, messages: Sequence[Message], prompt: str) -> SummaryResult:
        return SummaryResult(text="summary")


def ars_middleware_available() -> bool:
    try:
        from ars_langchain.middleware import ArsSummarizationMiddleware  # noqa: F401
    except Exception:
        return False
    return True


# ================================================================== A + D: per-call overhead


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


class Policy:
    """One contender in the overhead benchmark: ``call(prefix_index)`` is timed."""

    name = "?"

    def setup(self, n: int) -> Callable[[], Any]:
        """Build the request at history length ``n`` (not timed); return the timed call."""
        raise NotImplementedError


class CorePolicy(Policy):
    name = "ARS core"

    def __init__(
        self,
        system: Message | None,
        history: list[Message],
        *,
        threshold_k: float,
        backend_url: str,
        summarizer: Any = None,
        keep: int = 10,
    ) -> None:
        self.system, self.history = system, history
        self.config = SummaryConfig(summary_threshold=threshold_k, summary_keep_messages=keep)
        self.compressor = Compressor(
            self.config,
            backend=FsspecBackend(backend_url),
            summarizer=summarizer or InstantSummarizer(),
        )
        self.reply = Message(role="assistant", content="done")
        self.levels: list[str | None] = []

    def setup(self, n: int) -> Callable[[], Any]:
        messages = self.history[:n]

        def call() -> Any:
            outcome = self.compressor.call(messages, lambda view: self.reply, system=self.system)
            self.levels.append(outcome.level)
            return outcome

        return call


class LangChainPeerBase(Policy):
    def __init__(self, lc: LC, system: Message | None, history: list[Message]) -> None:
        self.lc = lc
        self.system = lc.from_core(system) if system is not None else None
        self.history = [lc.from_core(m) for m in history]
        self.model = fake_chat_model()
        self.handler, self.seen = canned_handler()

    def request(self, n: int, state: dict[str, Any] | None = None) -> Any:
        from langchain.agents.middleware.types import ModelRequest

        messages = self.history[:n]
        return ModelRequest(
            model=self.model,
            messages=messages,
            system_message=self.system,
            tools=[],
            state=state if state is not None else {"messages": messages},
        )


class ArsMiddlewarePolicy(LangChainPeerBase):
    name = "ARS middleware"

    def __init__(
        self,
        lc: LC,
        system: Message | None,
        history: list[Message],
        *,
        threshold_k: float,
        backend_url: str,
        keep: int = 10,
    ) -> None:
        from ars_langchain.middleware import ArsSummarizationMiddleware

        super().__init__(lc, system, history)
        self.events: list[Any] = []
        self.mw = ArsSummarizationMiddleware(
            SummaryConfig(summary_threshold=threshold_k, summary_keep_messages=keep),
            summarizer=InstantSummarizer(),
            backend=FsspecBackend(backend_url),
            stream=False,
            on_event=self.events.append,
        )

    def setup(self, n: int) -> Callable[[], Any]:
        request = self.request(n)
        return lambda: self.mw.wrap_model_call(request, self.handler)


class LangChainPolicy(LangChainPeerBase):
    name = "LangChain"

    def __init__(
        self,
        lc: LC,
        system: Message | None,
        history: list[Message],
        *,
        trigger_tokens: int,
        keep: int = 10,
    ) -> None:
        from langchain.agents.middleware import SummarizationMiddleware

        super().__init__(lc, system, history)
        self.summaries = 0
        self.mw = SummarizationMiddleware(
            self.model,
            trigger=("tokens", trigger_tokens),
            keep=("messages", keep),
            summarizer=lambda messages: "summary",
        )

    def setup(self, n: int) -> Callable[[], Any]:
        from langchain.agents.middleware.types import ModelRequest

        state = {"messages": self.history[:n]}
        request = self.request(n, state)

        def call() -> Any:
            update = self.mw.before_model(state, None)  # type: ignore[arg-type]
            if update is None:
                return self.handler(request)
            self.summaries += 1
            messages = update["messages"][1:]  # after RemoveMessage(REMOVE_ALL_MESSAGES)
            return self.handler(
                ModelRequest(
                    model=self.model,
                    messages=messages,
                    system_message=self.system,
                    tools=[],
                    state={"messages": messages},
                )
            )

        return call


class DeepAgentsPolicy(LangChainPeerBase):
    name = "deepagents"

    def __init__(
        self,
        lc: LC,
        system: Message | None,
        history: list[Message],
        *,
        trigger_tokens: int,
        root: Path,
        keep: int = 10,
    ) -> None:
        from deepagents.backends import FilesystemBackend
        from deepagents.middleware.summarization import SummarizationMiddleware

        super().__init__(lc, system, history)
        self.mw = SummarizationMiddleware(
            self.model,
            backend=FilesystemBackend(root_dir=root, virtual_mode=True),
            trigger=("tokens", trigger_tokens),
            keep=("messages", keep),
            summarizer=lambda messages: "summary",
        )

    def setup(self, n: int) -> Callable[[], Any]:
        request = self.request(n)
        return lambda: self.mw.wrap_model_call(request, self.handler)


def time_calls(policy: Policy, lengths: Sequence[int], warmup: int) -> Timing:
    """Call ``policy`` at each history length in order; the first ``warmup`` are not timed."""
    timing = Timing()
    gc.collect()
    for j, n in enumerate(lengths):
        call = policy.setup(n)
        t0 = time.perf_counter()
        call()
        dt = time.perf_counter() - t0
        if j >= warmup:
            timing.samples.append(dt)
    return timing


def growing(n: int, count: int) -> list[int]:
    """``count`` history lengths ending at ``n``, each one message longer (a live agent loop)."""
    start = max(1, n - count + 1)
    return list(range(start, n + 1))


def bench_overhead(
    runs: Sequence[Run],
    sizes: Sequence[int],
    repeat: int,
    warmup: int,
    l2_size: int,
    l2_repeat: int,
    l2_threshold_k: float,
    tmp: Path,
    use_middleware: bool,
    log: Callable[[str], None],
) -> dict[str, Any]:
    lc = LC()
    n_max = max([*sizes, l2_size]) + l2_repeat + warmup + 2
    # one stretch of the runs repeated: the messages appended in each timed window are
    # alike at every length (lengths are multiples of the block)
    block = math.gcd(*sizes) if len(sizes) > 1 else sizes[0]
    block = block if block >= repeat + warmup else max(sizes)
    system, history = tiled(runs, n_max, block)
    no_trigger_tokens = NO_TRIGGER_K * 1024
    policies: list[Policy] = []
    if use_middleware:
        policies.append(
            ArsMiddlewarePolicy(
                lc, system, history, threshold_k=NO_TRIGGER_K, backend_url="memory://bench-mw"
            )
        )
    policies.append(
        CorePolicy(system, history, threshold_k=NO_TRIGGER_K, backend_url="memory://bench-core")
    )
    policies.append(LangChainPolicy(lc, system, history, trigger_tokens=no_trigger_tokens))
    policies.append(
        DeepAgentsPolicy(lc, system, history, trigger_tokens=no_trigger_tokens, root=tmp / "da0")
    )
    results: dict[str, dict[int, Timing]] = {p.name: {} for p in policies}
    for n in sizes:
        lengths = growing(n, repeat + warmup)
        for p in policies:
            results[p.name][n] = time_calls(p, lengths, warmup)
        log(
            f"  overhead at {n} messages: "
            + ", ".join(f"{p.name} {results[p.name][n].median_ms:.3f} ms" for p in policies)
        )
    for p in policies:
        if isinstance(p, CorePolicy):
            assert all(level is None for level in p.levels), (
                "the no-trigger benchmark triggered ARS"
            )
        if isinstance(p, LangChainPolicy):
            assert p.summaries == 0, "the no-trigger benchmark triggered LangChain"

    # one L2 round at l2_size messages, instant summarizer, files on the local disk
    l2: dict[str, Timing] = {}
    trigger = int(l2_threshold_k * 1024)
    lengths = [l2_size + j for j in range(warmup + l2_repeat)]
    l2_policies: list[Policy] = []
    if use_middleware:
        l2_policies.append(
            ArsMiddlewarePolicy(
                lc,
                system,
                history,
                threshold_k=l2_threshold_k,
                backend_url=(tmp / "ars-mw").as_uri(),
            )
        )
    l2_policies.append(
        CorePolicy(
            system, history, threshold_k=l2_threshold_k, backend_url=(tmp / "ars-core").as_uri()
        )
    )
    l2_policies.append(LangChainPolicy(lc, system, history, trigger_tokens=trigger))
    l2_policies.append(
        DeepAgentsPolicy(lc, system, history, trigger_tokens=trigger, root=tmp / "da1")
    )
    for p in l2_policies:
        timing = time_calls(p, lengths, warmup)
        if isinstance(p, CorePolicy):
            rounds = sum(level == "L2" for level in p.levels)
            timing.note = f"{rounds}/{len(lengths)} calls ran L2"
        elif isinstance(p, ArsMiddlewarePolicy):
            rounds = sum(e.phase == "completed" and e.level == "L2" for e in p.events)
            timing.note = f"{rounds}/{len(lengths)} calls ran L2"
        elif isinstance(p, LangChainPolicy):
            timing.note = f"{p.summaries}/{len(lengths)} calls summarized"
        elif isinstance(p, DeepAgentsPolicy):
            written = sum(1 for f in (tmp / "da1").rglob("*") if f.is_file())
            timing.note = f"history appended to {written} file(s)"
        l2[p.name] = timing
        log(f"  L2 round at {l2_size}: {p.name} {timing.median_ms:.2f} ms ({timing.note})")
    return {
        "sizes": list(sizes),
        "per_call": results,
        "l2": l2,
        "l2_size": l2_size,
        "l2_threshold": trigger,
        "policies": [p.name for p in policies],
    }


# ================================================================== B: tokens over whole runs


@dataclass
class TokenStats:
    total: int = 0
    peak: int = 0
    requests: int = 0
    over: int = 0
    summaries: int = 0
    summary_calls: int = 0
    placeholders: int = 0
    summary_in: int = 0
    summary_out: int = 0

    def add_request(self, tokens: int, threshold: int) -> None:
        self.total += tokens
        self.peak = max(self.peak, tokens)
        self.requests += 1
        self.over += tokens > threshold


class O200k:
    """o200k counting for every policy: a request is system + messages, per-message cached."""

    def __init__(self) -> None:
        self.est = TiktokenEstimator("o200k_base")

    def request(self, system: Message | None, view: Iterable[Message]) -> int:
        return self.est.count(list(view), system=system)

    def text(self, text: str) -> int:
        return self.est.count_text(text)


class MeteredExtractive:
    """The extractive summarizer for everyone, its calls and o200k tokens counted.

    ``prompt`` is what a chat model would have been sent: ARS's rendered
    ``summary_prompt`` for ARS, the peer's default prompt with the history as
    ``get_buffer_string(..., format="xml")`` for the peers.
    """

    def __init__(
        self, o200k: O200k, stats: TokenStats, lc: LC | None = None, peer_prompt: str = ""
    ) -> None:
        self.inner = ExtractiveSummarizer()
        self.o200k, self.stats, self.lc, self.peer_prompt = o200k, stats, lc, peer_prompt

    def summarize(self, messages: Sequence[Message], prompt: str) -> SummaryResult:  # ARS
        result = self.inner.summarize(messages, prompt)
        self.stats.summary_calls += 1
        self.stats.summary_in += self.o200k.text(render_prompt(prompt, messages))
        self.stats.summary_out += self.o200k.text(result.text)
        return result

    def __call__(self, lc_messages: list[Any]) -> str:  # the peers' ``summarizer=`` callable
        from langchain_core.messages import get_buffer_string

        assert self.lc is not None
        core = [self.lc.to_core(m) for m in lc_messages]
        text = self.inner.summarize(core, "{messages}").text
        self.stats.summary_calls += 1
        rendered = self.peer_prompt.format(messages=get_buffer_string(lc_messages, format="xml"))
        self.stats.summary_in += self.o200k.text(rendered)
        self.stats.summary_out += self.o200k.text(text)
        return text


def split_system(run: Run) -> tuple[Message | None, list[Message]]:
    msgs = list(run.messages)
    if msgs and msgs[0].role == "system":
        return msgs[0], msgs[1:]
    return None, msgs


def tokens_none(run: Run, threshold: int, o200k: O200k, stats: TokenStats) -> None:
    system, history = split_system(run)
    for i, m in enumerate(history):
        if m.role == "assistant":
            stats.add_request(o200k.request(system, history[:i]), threshold)


def tokens_masking(
    run: Run, threshold: int, o200k: O200k, stats: TokenStats, keep: int = 10
) -> None:
    system, history = split_system(run)
    masked: dict[int, Message] = {}
    for i, m in enumerate(history):
        if m.role != "assistant":
            continue
        tools = [j for j in range(i) if history[j].role == "tool"]
        old = set(tools[:-keep]) if keep else set(tools)
        view = []
        for j in range(i):
            if j in old:
                if j not in masked:
                    masked[j] = history[j].with_content(
                        f"[output of {history[j].name or 'tool'} omitted]"
                    )
                view.append(masked[j])
            else:
                view.append(history[j])
        stats.add_request(o200k.request(system, view), threshold)


def tokens_ars(
    run: Run,
    threshold_k: float,
    o200k: O200k,
    stats: TokenStats,
    keep: int,
    estimator: Any = None,
    *,
    calibrate: bool = False,
) -> None:
    """Replay ``run`` through ARS. With ``calibrate``, every request's o200k count is fed
    back as the provider's reported usage (what the adapters do with ``usage_metadata``)."""
    threshold = int(threshold_k * 1024)
    levels: list[str | None] = []
    if calibrate and estimator is None:
        estimator = ApproxEstimator()

    def on_call(outcome: CallOutcome, sys_msg: Message | None) -> None:
        levels.append(outcome.level)
        sent = o200k.request(sys_msg, outcome.view)
        stats.add_request(sent, threshold)
        if calibrate:
            estimator.calibrate(estimated=outcome.tokens_after, actual=sent)

    replay_messages(
        run.messages,
        config=SummaryConfig(summary_threshold=threshold_k, summary_keep_messages=keep),
        estimator=estimator,
        summarizer=MeteredExtractive(o200k, stats),
        backend=FsspecBackend("memory://bench-tokens"),
        on_call=on_call,
    )
    stats.summaries += sum(level == "L2" for level in levels)


def tokens_langchain(
    run: Run, threshold: int, o200k: O200k, stats: TokenStats, keep: int, lc: LC
) -> None:
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain.agents.middleware.summarization import DEFAULT_SUMMARY_PROMPT

    system, history = split_system(run)
    summarizer = MeteredExtractive(o200k, stats, lc, DEFAULT_SUMMARY_PROMPT)
    mw = SummarizationMiddleware(
        fake_chat_model(),
        trigger=("tokens", threshold),
        keep=("messages", keep),
        summarizer=summarizer,
    )
    state: list[Any] = []
    for m in history:
        if m.role == "assistant":
            update = mw.before_model({"messages": state}, None)  # type: ignore[arg-type]
            if update is not None:
                state = list(update["messages"][1:])
                stats.summaries += 1
                summary_text = (
                    state[0].text if isinstance(state[0].text, str) else str(state[0].content)
                )
                if any(p in summary_text for p in PLACEHOLDERS):
                    stats.placeholders += 1
            stats.add_request(o200k.request(system, [lc.to_core(x) for x in state]), threshold)
        state.append(lc.from_core(m))


def tokens_deepagents(
    run: Run, threshold: int, o200k: O200k, stats: TokenStats, keep: int, lc: LC, root: Path
) -> None:
    from deepagents.backends import FilesystemBackend
    from deepagents.middleware.summarization import (
        DEEPAGENTS_DEFAULT_SUMMARY_PROMPT,
        SummarizationMiddleware,
    )
    from langchain.agents.middleware.types import ExtendedModelResponse, ModelRequest

    system, history = split_system(run)
    lc_system = lc.from_core(system) if system is not None else None
    summarizer = MeteredExtractive(o200k, stats, lc, DEEPAGENTS_DEFAULT_SUMMARY_PROMPT)
    model = fake_chat_model()
    mw = SummarizationMiddleware(
        model,
        backend=FilesystemBackend(root_dir=root, virtual_mode=True),
        trigger=("tokens", threshold),
        keep=("messages", keep),
        summarizer=summarizer,
    )
    handler, seen = canned_handler()
    state: list[Any] = []
    extra: dict[str, Any] = {}
    for m in history:
        if m.role == "assistant":
            request = ModelRequest(
                model=model,
                messages=list(state),
                system_message=lc_system,
                tools=[],
                state={"messages": state, **extra},
            )
            result = mw.wrap_model_call(request, handler)
            sent = seen[-1].messages
            if isinstance(result, ExtendedModelResponse) and result.command is not None:
                update = dict(result.command.update or {})
                replaced = {x.id: x for x in update.pop("messages", [])}
                if replaced:
                    state = [replaced.get(x.id, x) for x in state]
                if update.get("_summarization_event") is not extra.get("_summarization_event"):
                    event = update["_summarization_event"]
                    stats.summaries += 1
                    text = event["summary_message"].text
                    if any(
                        p in (text if isinstance(text, str) else str(text)) for p in PLACEHOLDERS
                    ):
                        stats.placeholders += 1
                extra.update(update)
            stats.add_request(o200k.request(system, [lc.to_core(x) for x in sent]), threshold)
        state.append(lc.from_core(m))


TOKEN_POLICIES = (
    "no compression",
    "ARS",
    "ARS, o200k estimator",
    "ARS, usage-calibrated",
    "LangChain",
    "observation masking",
    "deepagents",
)


def bench_tokens(
    runs: Sequence[Run],
    thresholds: Sequence[float],
    keep: int,
    tmp: Path,
    log: Callable[[str], None],
) -> dict[str, Any]:
    o200k = O200k()
    lc = LC()
    table: dict[float, dict[str, TokenStats]] = {}
    for k in thresholds:
        threshold = int(k * 1024)
        row = {name: TokenStats() for name in TOKEN_POLICIES}
        for i, run in enumerate(runs):
            tokens_none(run, threshold, o200k, row["no compression"])
            tokens_ars(run, k, o200k, row["ARS"], keep)
            tokens_ars(run, k, o200k, row["ARS, o200k estimator"], keep, o200k.est)
            tokens_ars(run, k, o200k, row["ARS, usage-calibrated"], keep, calibrate=True)
            tokens_langchain(run, threshold, o200k, row["LangChain"], keep, lc)
            tokens_masking(run, threshold, o200k, row["observation masking"], keep)
            tokens_deepagents(
                run, threshold, o200k, row["deepagents"], keep, lc, tmp / f"tok-{k}-{i}"
            )
        table[k] = row
        base = row["no compression"].total or 1
        log(
            f"  tokens at {k:g}K: "
            + ", ".join(f"{n} {100 * s.total / base:.0f}%" for n, s in row.items())
        )
    return {
        "thresholds": list(thresholds),
        "table": table,
        "runs": [r.name for r in runs],
        "keep": keep,
    }


# ================================================================== C: estimators


def estimator_samples(runs: Sequence[Run]) -> dict[str, list[str]]:
    samples: dict[str, list[str]] = {
        "agent messages": [],
        "JSON": [],
        "code": [],
        "Chinese prose": [],
    }
    for run in runs:
        for m in run.messages:
            if len(m.text) >= 200:
                samples["agent messages"].append(m.text)
        doc = [to_openai(m) for m in run.messages[:40]]
        samples["JSON"].append(json.dumps(doc, ensure_ascii=False, indent=1))
    sources = sorted((REPO / "ars_core").glob("*.py"))
    import argparse as _a
    import json.decoder as _jd

    sources += [Path(_a.__file__), Path(_jd.__file__)]
    samples["code"] = [p.read_text(encoding="utf-8") for p in sources]
    for name in ("chinese.txt", "chinese_prose.txt"):
        path = REPO / "tests" / "data" / name
        if path.is_file():
            paras = [
                p for p in path.read_text(encoding="utf-8").split("\n\n") if len(p.strip()) >= 40
            ]
            samples["Chinese prose"].extend(paras)
    return {k: v for k, v in samples.items() if v}


def bench_estimators(runs: Sequence[Run], log: Callable[[str], None]) -> dict[str, Any]:
    ests: dict[str, Any] = {
        "approx": ApproxEstimator(),
        "o200k": TiktokenEstimator("o200k_base"),
        "cl100k": TiktokenEstimator("cl100k_base"),
    }
    samples = estimator_samples(runs)
    errors: dict[str, dict[str, list[float]]] = {}
    for cat, texts in samples.items():
        errors[cat] = {"approx": [], "cl100k": []}
        for t in texts:
            ref = ests["o200k"].count_text(t)
            if ref < 20:
                continue
            for name in ("approx", "cl100k"):
                errors[cat][name].append((ests[name].count_text(t) - ref) / ref)
    # whole runs, as requests (system + messages), fresh estimators (no cache)
    errors["whole runs"] = {"approx": [], "cl100k": []}
    for run in runs:
        ref = TiktokenEstimator("o200k_base").count(list(run.messages))
        for name, cls in (
            ("approx", lambda: ApproxEstimator()),
            ("cl100k", lambda: TiktokenEstimator("cl100k_base")),
        ):
            errors["whole runs"][name].append((cls().count(list(run.messages)) - ref) / ref)
    # speed: count_text over every sample text (count_text never caches)
    corpus = [t for texts in samples.values() for t in texts]
    nbytes = sum(len(t.encode("utf-8")) for t in corpus)
    speed: dict[str, float] = {}
    for name, est in ests.items():
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            for t in corpus:
                est.count_text(t)
            best = min(best, time.perf_counter() - t0)
        speed[name] = nbytes / best / 1e6
    log("  estimator speed: " + ", ".join(f"{n} {v:.1f} MB/s" for n, v in speed.items()))
    counts = {cat: len(next(iter(v.values()))) for cat, v in errors.items()}
    return {"errors": errors, "speed": speed, "bytes": nbytes, "counts": counts}


# ================================================================== the report


def fmt_ms(x: float) -> str:
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def fmt_ratio(peer: float, ars: float) -> str:
    return f"{peer / ars:.1f}x" if ars > 0 else "-"


def table(header: Sequence[str], rows: Iterable[Sequence[str]], align: str = "") -> list[str]:
    align = align or "l" + "r" * (len(header) - 1)
    out = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(":---" if a == "l" else "---:" for a in align) + "|",
    ]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def report(
    args: argparse.Namespace,
    env: dict[str, str],
    overhead: dict[str, Any] | None,
    tokens: dict[str, Any] | None,
    estimators: dict[str, Any] | None,
) -> str:
    lines = ["# ARS benchmark report", ""]
    lines += [f"- {k}: {v}" for k, v in env.items()]
    lines.append("")
    if overhead is not None:
        names = overhead["policies"]
        ars = "ARS middleware" if "ARS middleware" in names else "ARS core"
        peers = [n for n in names if n in ("LangChain", "deepagents")]
        lines += ["## A. Per-call overhead, no trigger", ""]
        lines.append(
            "Median time of one wrapped model call (ms) at each history length, the handler "
            "returning a canned "
            f"reply; {args.repeat} calls per cell, each one message longer than the last (a "
            "live agent loop), "
            f"after {args.warmup} untimed warm-up calls. Ratios are peer / {ars}."
            + (
                ""
                if "ARS middleware" in names
                else " The ARS LangChain middleware was not importable, so ARS is measured "
                "through the core "
                "`Compressor.call` doing the same work."
            )
            + " LangChain's middleware is driven through `before_model` + the handler (it has no "
            "`wrap_model_call`)."
        )
        lines.append("")
        header = ["history", *(f"{n} (ms)" for n in names), *(f"{p} / {ars}" for p in peers)]
        rows = []
        for n in overhead["sizes"]:
            med = {name: overhead["per_call"][name][n].median_ms for name in names}
            rows.append(
                [
                    f"{n:,}",
                    *(fmt_ms(med[name]) for name in names),
                    *(fmt_ratio(med[p], med[ars]) for p in peers),
                ]
            )
        lines += table(header, rows)
        lines.append("")
        big = [n for n in overhead["sizes"] if n >= 1000]
        if big:
            ok = all(
                overhead["per_call"][p][n].median_ms >= 5 * overhead["per_call"][ars][n].median_ms
                for p in peers
                for n in big
            )
            lines.append(
                f"Target (issue 5): {ars} at or below 1/5 of each peer at 1,000 messages and "
                "above: "
                f"**{'met' if ok else 'NOT met'}**."
            )
            lines.append("")
        lines += [f"### One L2 round at {overhead['l2_size']:,} messages", ""]
        lines.append(
            f"Threshold {overhead['l2_threshold']:,} tokens, keep 10 messages, an instant fake "
            "summarizer, "
            "files on the local disk (ARS: offloads and the history archive; deepagents: its "
            "history "
            f"file; LangChain writes none). Median of {args.l2_repeat} rounds, each on a "
            "history one "
            "message longer, state without a previous summary."
        )
        lines.append("")
        l2 = overhead["l2"]
        lines += table(
            ["policy", "median (ms)", "p95 (ms)", "checked"],
            [[name, fmt_ms(t.median_ms), fmt_ms(t.p95_ms), t.note] for name, t in l2.items()],
            "lrrl",
        )
        lines.append("")
    if tokens is not None:
        lines += ["## B. Tokens sent over whole replayed runs", ""]
        lines.append(
            f"{len(tokens['runs'])} runs (the largest available), every assistant turn one "
            "request, all "
            "requests counted with tiktoken o200k_base. ARS: L1+L2 with its defaults (approx "
            "estimator) "
            f"and keep {tokens['keep']}; LangChain and deepagents `SummarizationMiddleware`: "
            "trigger "
            f'`("tokens", T)`, keep {tokens["keep"]} messages, their default token counter and '
            f"`trim_tokens_to_summarize`; observation masking: the last {tokens['keep']} tool "
            "results kept, "
            "older ones replaced by a one-line placeholder. Every policy summarizes with the "
            "same built-in "
            "extractive summarizer; summary-call tokens are what a chat-model summarizer would "
            "have been "
            "sent (each policy's own prompt) plus the summary, counted apart from the requests. "
            '"placeholders" are summaries produced without calling the summarizer. '
            '"ARS, usage-calibrated" is ARS with its approx estimator calibrated, after each '
            "request, by that request's o200k count standing in for the provider's reported "
            "usage (as the adapters do with `usage_metadata`). "
            '"ARS, o200k estimator" is ARS deciding with tiktoken o200k instead of its default '
            "approx estimator."
        )
        lines.append("")
        header = [
            "T (tokens)",
            "policy",
            "total tokens",
            "% of none",
            "peak",
            "requests",
            "over T",
            "summaries",
            "placeholders",
            "summary-call tokens",
        ]
        rows = []
        for k in tokens["thresholds"]:
            row = tokens["table"][k]
            base = row["no compression"].total or 1
            for name in TOKEN_POLICIES:
                s = row[name]
                rows.append(
                    [
                        f"{int(k * 1024):,}",
                        name,
                        f"{s.total:,}",
                        f"{100 * s.total / base:.1f}%",
                        f"{s.peak:,}",
                        f"{s.requests:,}",
                        f"{s.over:,}",
                        f"{s.summaries:,}",
                        f"{s.placeholders:,}",
                        f"{s.summary_in + s.summary_out:,}",
                    ]
                )
        lines += table(header, rows, "rlrrrrrrrr")
        lines.append("")
        for k in tokens["thresholds"]:
            row = tokens["table"][k]
            ars, base = row["ARS"], row["no compression"].total or 1
            lines.append(
                f"Target at T={int(k * 1024):,}: ARS sends {100 * ars.total / base:.1f}% of the "
                "uncompressed tokens (target <= 30%: "
                f"**{'met' if ars.total <= 0.3 * base else 'NOT met'}**) "
                f"and {ars.over} requests over T counted in o200k (ARS decides with its approx "
                "estimator)."
            )
        lines.append("")
    if estimators is not None:
        lines += ["## C. Estimators against tiktoken o200k_base", ""]
        lines.append(
            'Relative error (estimate - o200k) / o200k per sample; "agent messages" are '
            "messages of at "
            'least 200 characters, "whole runs" count each run as one request (fresh estimators).'
        )
        lines.append("")
        rows = []
        for cat, errs in estimators["errors"].items():
            for name in ("approx", "cl100k"):
                e = errs[name]
                if not e:
                    continue
                rows.append(
                    [
                        cat,
                        name,
                        f"{estimators['counts'][cat]:,}",
                        f"{100 * statistics.mean(e):+.1f}%",
                        f"{100 * statistics.mean(abs(x) for x in e):.1f}%",
                        f"{100 * max(abs(x) for x in e):.1f}%",
                    ]
                )
        lines += table(
            ["samples", "estimator", "n", "mean error", "mean abs error", "max abs error"],
            rows,
            "llrrrr",
        )
        lines.append("")
        lines += table(
            ["estimator", "MB/s"], [[n, f"{v:.1f}"] for n, v in estimators["speed"].items()], "lr"
        )
        lines.append("")
        lines.append(
            f"Speed: `count_text` over all {estimators['bytes'] / 1e6:.2f} MB of samples, best "
            "of 3."
        )
        lines.append("")
    if overhead is not None:
        lines += ["## D. Core per-call overhead against history length (issue 4)", ""]
        lines.append("`Compressor.call` below the threshold (the same calls as in A).")
        lines.append("")
        core = overhead["per_call"]["ARS core"]
        mw = overhead["per_call"].get("ARS middleware")
        header = ["history", "core median (ms)", "core p95 (ms)"] + (
            ["middleware median (ms)", "middleware p95 (ms)"] if mw else []
        )
        rows = []
        for n in overhead["sizes"]:
            r = [f"{n:,}", fmt_ms(core[n].median_ms), fmt_ms(core[n].p95_ms)]
            if mw:
                r += [fmt_ms(mw[n].median_ms), fmt_ms(mw[n].p95_ms)]
            rows.append(r)
        lines += table(header, rows)
        lines.append("")
        sizes = overhead["sizes"]
        lo, hi = (500, 5000) if 500 in sizes and 5000 in sizes else (min(sizes), max(sizes))
        ratio = core[hi].median_ms / core[lo].median_ms
        verdict = "met" if ratio <= 1.5 else "NOT met"
        lines.append(
            f"Flatness: median at {hi:,} / median at {lo:,} = **{ratio:.2f}x** "
            "(target <= "
            f"1.5x{'' if (lo, hi) == (500, 5000) else ', sizes differ from the target'}): "
            f"**{verdict}**."
        )
        if mw:
            ratio_mw = mw[hi].median_ms / mw[lo].median_ms
            lines.append(f"Middleware: {ratio_mw:.2f}x.")
        lines.append("")
    return "\n".join(lines)


def environment(runs_dir: Path, n_runs: int) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    def v(pkg: str) -> str:
        try:
            return version(pkg)
        except PackageNotFoundError:
            return "not installed"

    return {
        "machine": f"{platform.machine()}, {platform.processor() or platform.system()}, "
        f"Python {platform.python_version()}",
        "versions": ", ".join(
            f"{p} {v(p)}"
            for p in ("ars", "langchain", "langchain-core", "langgraph", "deepagents", "tiktoken")
        ),
        "runs": f"{n_runs} recorded runs from {runs_dir}",
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--runs-dir",
        type=Path,
        default=None,
        help=f"recorded runs (default {DEFAULT_RUNS_DIR}, else the samples in ars_core/data)",
    )
    p.add_argument("--sizes", default="100,500,1000,5000", help="history lengths for A and D")
    p.add_argument(
        "--repeat", type=int, default=30, help="timed calls per cell in A (default %(default)s)"
    )
    p.add_argument("--warmup", type=int, default=3, help="untimed calls before each cell")
    p.add_argument("--l2-size", type=int, default=1000, help="history length of the L2 round")
    p.add_argument("--l2-repeat", type=int, default=10, help="L2 rounds timed")
    p.add_argument("--l2-threshold", type=float, default=16, help="threshold (K) of the L2 round")
    p.add_argument("--thresholds", default="8,16,32", help="thresholds (K tokens) for B")
    p.add_argument("--token-runs", type=int, default=20, help="how many (largest) runs B replays")
    p.add_argument("--estimator-runs", type=int, default=30, help="how many runs C samples")
    p.add_argument(
        "--keep", type=int, default=10, help="messages kept by the summarizing policies in B"
    )
    p.add_argument("--sections", default="A,B,C,D", help="which sections to run (D needs A)")
    p.add_argument(
        "--ars",
        choices=("auto", "middleware", "core"),
        default="auto",
        help="measure ARS in A through its LangChain middleware (auto: when importable)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: sizes 50,100, 5 calls, 2 runs, threshold 4K",
    )
    p.add_argument("--out", type=Path, default=None, help="also write the markdown report here")
    p.add_argument(
        "--json", type=Path, default=None, help="also write the raw numbers here as JSON"
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    args = p.parse_args(argv)
    if args.quick:
        args.sizes, args.repeat, args.warmup = "50,100", 5, 1
        args.l2_size, args.l2_repeat, args.l2_threshold = 100, 3, 2
        args.thresholds, args.token_runs, args.estimator_runs = "4", 2, 2
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    log: Callable[[str], None] = (
        (lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    )
    runs_dir = args.runs_dir or (DEFAULT_RUNS_DIR if DEFAULT_RUNS_DIR.is_dir() else SAMPLE_DIR)
    runs = read_runs(runs_dir)
    sections = {s.strip().upper() for s in args.sections.split(",") if s.strip()}
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    thresholds = [float(s) for s in args.thresholds.split(",") if s.strip()]
    use_mw = args.ars == "middleware" or (args.ars == "auto" and ars_middleware_available())
    by_size = sorted(runs, key=lambda r: sum(len(m.text) for m in r.messages), reverse=True)
    overhead = tokens = estimators = None
    with tempfile.TemporaryDirectory(prefix="ars-bench-") as tmp_name:
        tmp = Path(tmp_name)
        if sections & {"A", "D"}:
            log("A/D: per-call overhead")
            overhead = bench_overhead(
                runs,
                sizes,
                args.repeat,
                args.warmup,
                args.l2_size,
                args.l2_repeat,
                args.l2_threshold,
                tmp,
                use_mw,
                log,
            )
        if "B" in sections:
            log("B: tokens sent over whole runs")
            tokens = bench_tokens(by_size[: args.token_runs], thresholds, args.keep, tmp, log)
        if "C" in sections:
            log("C: estimators")
            step = max(1, len(runs) // max(1, args.estimator_runs))
            estimators = bench_estimators(runs[::step][: args.estimator_runs], log)
    text = report(args, environment(runs_dir, len(runs)), overhead, tokens, estimators)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    if args.json:
        args.json.write_text(
            json.dumps(raw_numbers(overhead, tokens, estimators), indent=2), encoding="utf-8"
        )
    return 0


def raw_numbers(
    overhead: dict[str, Any] | None,
    tokens: dict[str, Any] | None,
    estimators: dict[str, Any] | None,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if overhead:
        out["per_call_ms"] = {
            name: {str(n): {"median": t.median_ms, "p95": t.p95_ms} for n, t in cells.items()}
            for name, cells in overhead["per_call"].items()
        }
        out["l2_ms"] = {
            name: {"median": t.median_ms, "p95": t.p95_ms, "note": t.note}
            for name, t in overhead["l2"].items()
        }
    if tokens:
        out["tokens"] = {
            f"{k:g}": {name: vars(s) for name, s in row.items()}
            for k, row in tokens["table"].items()
        }
    if estimators:
        out["estimator_speed_mb_s"] = estimators["speed"]
    return out


if __name__ == "__main__":
    raise SystemExit(main())
