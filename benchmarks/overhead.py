"""A. Per-call overhead of ARS and its peers below any trigger, and one L2 round.

ARS (its LangChain middleware, and the bare core ``Compressor.call``),
LangChain's ``SummarizationMiddleware`` and deepagents'
``SummarizationMiddleware``, each driven through its model-call hook with a
handler returning a canned reply, at several history lengths (runs
concatenated); and one L2 round at 1,000 messages with an instant fake
summarizer. LangChain's middleware has no ``wrap_model_call`` (it summarizes in
``before_model`` and rewrites ``state["messages"]``), so it is driven through
``before_model`` followed by the same handler.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ars_core import Compressor, FsspecBackend, Message, SummaryConfig

from .common import (
    LC,
    NO_TRIGGER_K,
    Context,
    DiskWait,
    InstantSummarizer,
    Timing,
    ars_middleware_available,
    balanced_orders,
    canned_handler,
    fake_chat_model,
    fmt_ms,
    fmt_ratio,
    table,
    target,
    tiled,
)

KEY = "A"
NEEDS: tuple[str, ...] = ()


class Policy:
    """One contender: ``setup(n)`` builds the request (not timed) and returns the timed call."""

    name = "?"

    def setup(self, n: int) -> Callable[[], Any]:
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
        keep: int = 10,
    ) -> None:
        self.system, self.history = system, history
        self.config = SummaryConfig(summary_threshold=threshold_k, summary_keep_messages=keep)
        self.compressor = Compressor(
            self.config, backend=FsspecBackend(backend_url), summarizer=InstantSummarizer()
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

    def note(self, calls: int) -> str:
        return f"{sum(level == 'L2' for level in self.levels)}/{calls} calls ran L2"


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
        agent_state: Any = state if state is not None else {"messages": messages}
        return ModelRequest(
            model=self.model,
            messages=messages,
            system_message=self.system,
            tools=[],
            state=agent_state,
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

    def note(self, calls: int) -> str:
        rounds = sum(e.phase == "completed" and e.level == "L2" for e in self.events)
        return f"{rounds}/{calls} calls ran L2"


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

    def note(self, calls: int) -> str:
        return f"{self.summaries}/{calls} calls summarized"


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
        self.root = root
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

    def note(self, calls: int) -> str:
        written = sum(1 for f in self.root.rglob("*") if f.is_file())
        return f"history appended to {written} file(s)"


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


def _policies(
    lc: LC,
    system: Message | None,
    history: list[Message],
    *,
    threshold_k: float,
    tmp: Path,
    tag: str,
    use_middleware: bool,
) -> list[Policy]:
    """ARS (middleware when importable, core) and both peers, triggering at ``threshold_k``."""
    trigger = int(threshold_k * 1024)
    policies: list[Policy] = []
    if use_middleware:
        policies.append(
            ArsMiddlewarePolicy(
                lc,
                system,
                history,
                threshold_k=threshold_k,
                backend_url=(tmp / f"mw-{tag}").as_uri(),
            )
        )
    policies.append(
        CorePolicy(
            system, history, threshold_k=threshold_k, backend_url=(tmp / f"core-{tag}").as_uri()
        )
    )
    policies.append(LangChainPolicy(lc, system, history, trigger_tokens=trigger))
    policies.append(
        DeepAgentsPolicy(lc, system, history, trigger_tokens=trigger, root=tmp / f"da-{tag}")
    )
    return policies


def _per_call(
    policies: Sequence[Policy], sizes: Sequence[int], ctx: Context
) -> dict[str, dict[int, Timing]]:
    args = ctx.args
    results: dict[str, dict[int, Timing]] = {p.name: {} for p in policies}
    for n in sizes:
        lengths = growing(n, args.repeat + args.warmup)
        for p in policies:
            results[p.name][n] = time_calls(p, lengths, args.warmup)
        ctx.log(
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
    return results


def _l2_round(policies: Sequence[Policy], ctx: Context) -> dict[str, dict[str, Timing]]:
    """L2 rounds at ``--l2-size`` messages and on, instant summarizer, files on the local
    disk: at each length every policy's round, one after the other, before the next
    length (a machine's load, and its disk's, drifts alike over every policy), in an
    order that turns with the length (:func:`balanced_orders`: the first round after
    the collection finds the CPU's caches cold, and a round finds warm what the round
    before it touched, the texts the policies share: every policy takes each place,
    and follows each other policy, as often); per policy the rounds' times, their wait
    on the disk barrier and the rest."""
    args = ctx.args
    lengths = [args.l2_size + j for j in range(args.warmup + args.l2_repeat)]
    rounds = {p.name: Timing() for p in policies}
    waits = {p.name: Timing() for p in policies}
    orders = balanced_orders(len(policies))
    with DiskWait().installed() as disk:
        for j, n in enumerate(lengths):
            order = orders[j % len(orders)]
            calls = [(policies[i], policies[i].setup(n)) for i in order]
            gc.collect()
            for p, call in calls:
                disk.seconds = 0.0
                t0 = time.perf_counter()
                call()
                dt = time.perf_counter() - t0
                if j >= args.warmup:
                    rounds[p.name].samples.append(dt)
                    waits[p.name].samples.append(disk.seconds)
    l2: dict[str, dict[str, Timing]] = {}
    for p in policies:
        timing, wait = rounds[p.name], waits[p.name]
        timing.note = p.note(len(lengths))  # type: ignore[attr-defined]
        rest = Timing([t - w for t, w in zip(timing.samples, wait.samples, strict=True)])
        l2[p.name] = {"round": timing, "wait": wait, "rest": rest}
        ctx.log(
            f"  L2 round at {args.l2_size}: {p.name} {timing.median_ms:.2f} ms, "
            f"disk barrier {wait.median_ms:.2f} ms ({timing.note})"
        )
    return l2


def quartiles_ms(timing: Timing) -> tuple[float, float]:
    """The first and third quartiles of ``timing`` (ms)."""
    q = statistics.quantiles(timing.samples, n=4, method="inclusive")
    return q[0] * 1000, q[2] * 1000


#: L2 rounds on a fresh history (every per-message cache cold) timed per policy
FIRST_ROUNDS = 3


def _first_round(lc: LC, ctx: Context, block: int, use_mw: bool) -> dict[str, Timing]:
    """One L2 round at ``--l2-size`` messages on a history no policy has seen (new
    message objects each time): ARS's per-message caches (token counts, L1 offloads,
    archive lines, audit parses) all start cold. The median round of
    :func:`_l2_round` runs on a history one message longer than the last, so those
    caches are warm there, as across a live agent's rounds."""
    args = ctx.args
    first: dict[str, Timing] = {}
    for rep in range(FIRST_ROUNDS):
        system, history = tiled(ctx.runs, args.l2_size + 1, block)
        policies = _policies(
            lc,
            system,
            history,
            threshold_k=args.l2_threshold,
            tmp=ctx.tmp,
            tag=f"first{rep}",
            use_middleware=use_mw,
        )
        for p in policies:
            timing = time_calls(p, [args.l2_size], 0)
            first.setdefault(p.name, Timing()).samples += timing.samples
    for name, timing in first.items():
        ctx.log(f"  first L2 round at {args.l2_size}: {name} {timing.median_ms:.2f} ms")
    return first


def measure(ctx: Context) -> dict[str, Any]:
    args = ctx.args
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    use_mw = args.ars == "middleware" or (args.ars == "auto" and ars_middleware_available())
    lc = LC()
    n_max = max([*sizes, args.l2_size]) + args.l2_repeat + args.warmup + 2
    # one stretch of the runs repeated: the messages appended in each timed window are
    # alike at every length (lengths are multiples of the block)
    block = math.gcd(*sizes) if len(sizes) > 1 else sizes[0]
    block = block if block >= args.repeat + args.warmup else max(sizes)
    system, history = tiled(ctx.runs, n_max, block)
    policies = _policies(
        lc, system, history, threshold_k=NO_TRIGGER_K, tmp=ctx.tmp, tag="0", use_middleware=use_mw
    )
    per_call = _per_call(policies, sizes, ctx)
    l2_policies = _policies(
        lc,
        system,
        history,
        threshold_k=args.l2_threshold,
        tmp=ctx.tmp,
        tag="1",
        use_middleware=use_mw,
    )
    return {
        "sizes": sizes,
        "per_call": per_call,
        "l2": _l2_round(l2_policies, ctx),
        "l2_first": _first_round(lc, ctx, block, use_mw),
        "l2_size": args.l2_size,
        "l2_threshold": int(args.l2_threshold * 1024),
        "policies": [p.name for p in policies],
    }


def _render_per_call(ctx: Context, data: dict[str, Any]) -> list[str]:
    names = data["policies"]
    ars = "ARS middleware" if "ARS middleware" in names else "ARS core"
    peers = [n for n in names if n in ("LangChain", "deepagents")]
    lines = ["## A. Per-call overhead, no trigger", ""]
    lines.append(
        "Median time of one wrapped model call (ms) at each history length, the handler "
        f"returning a canned reply; {ctx.args.repeat} calls per cell, each one message longer "
        f"than the last (a live agent loop), after {ctx.args.warmup} untimed warm-up calls. "
        f"Ratios are peer / {ars}."
        + (
            ""
            if "ARS middleware" in names
            else " The ARS LangChain middleware was not importable, so ARS is measured through "
            "the core `Compressor.call` doing the same work."
        )
        + " LangChain's middleware is driven through `before_model` + the handler (it has no "
        "`wrap_model_call`)."
    )
    lines.append("")
    header = ["history", *(f"{n} (ms)" for n in names), *(f"{p} / {ars}" for p in peers)]
    rows = []
    for n in data["sizes"]:
        med = {name: data["per_call"][name][n].median_ms for name in names}
        rows.append(
            [
                f"{n:,}",
                *(fmt_ms(med[name]) for name in names),
                *(fmt_ratio(med[p], med[ars]) for p in peers),
            ]
        )
    lines += [*table(header, rows), ""]
    big = [n for n in data["sizes"] if n >= 1000]
    if big:
        per_call = data["per_call"]
        ok = all(
            per_call[p][n].median_ms >= 5 * per_call[ars][n].median_ms for p in peers for n in big
        )
        lines.append(
            f"Target: {ars} at or below 1/5 of each peer at 1,000 messages and above: "
            f"**{'met' if ok else 'NOT met'}**."
        )
        lines.append("")
    return lines


def render(ctx: Context, data: dict[str, Any]) -> list[str]:
    lines = _render_per_call(ctx, data)
    lines += [f"### One L2 round at {data['l2_size']:,} messages", ""]
    lines.append(
        f"Threshold {data['l2_threshold']:,} tokens, keep 10 messages, an instant fake "
        "summarizer, files on the local disk (ARS: offloads and the history archive; "
        "deepagents: its history file; LangChain writes none). "
        f"{ctx.args.l2_repeat} rounds per policy, each on a history one message longer, "
        "after the warm-up rounds; at each length every policy's round runs in turn "
        "before the next length, so a drift of the machine's load (or its disk's) falls "
        "on every policy alike; the order turns with the length (a balanced Latin "
        "square): the first round after each length's garbage collection finds the "
        "CPU's caches cold, and a round finds warm what the round before it touched "
        "(the texts the policies share), so every policy takes each place, and follows "
        "each other policy, as often. State without a previous summary: what "
        "ARS keeps per message (token counts, L1 offloads, archive lines, audit parses) "
        "is warm there, as across a live agent's rounds. With no summary kept, each "
        "round archives the same first messages again: ARS writes only those new since "
        "its last archive, in a file naming the earlier one (a continuation); a new "
        "large tool result is offloaded. Every file is durable before the round returns: "
        "flushed (fsync) before its rename, its folder flushed after it (the archive's "
        "folder flush runs beside the summary and the round's next steps, and ends "
        'before the view naming the archive is sent). "disk barrier" is the median time '
        "a round's thread waited on those flushes; on this shared VM one flush takes from"
        " a fraction of a millisecond to tens of milliseconds, with the other tenants' "
        'writes. "without the wait" is the median of each round\'s time less its wait. '
        "**The target is judged on the median round, the disk barrier included**, over "
        "the rounds taken in turn with LangChain's; p25-p75 is the middle half of the "
        "rounds. "
        f"The first round is the median of {FIRST_ROUNDS} rounds on a history no policy "
        "has seen (every per-message cache cold, token counts included, the whole 2 MB "
        "archive written and fsynced)."
    )
    lines.append("")
    first = data.get("l2_first", {})
    rows = []
    for name, cells in data["l2"].items():
        t, p25_p75 = cells["round"], quartiles_ms(cells["round"])
        rows.append(
            [
                name,
                fmt_ms(t.median_ms),
                f"{fmt_ms(p25_p75[0])}-{fmt_ms(p25_p75[1])}",
                fmt_ms(t.p95_ms),
                fmt_ms(cells["wait"].median_ms),
                fmt_ms(cells["rest"].median_ms),
                fmt_ms(first[name].median_ms) if name in first else "-",
                t.note,
            ]
        )
    header = ["policy", "median (ms)", "p25-p75 (ms)", "p95 (ms)", "disk barrier (ms)"]
    header += ["without the wait (ms)", "first round (ms)", "checked"]
    lines += [*table(header, rows, "lrrrrrrl"), ""]
    l2 = data["l2"]
    if "LangChain" in l2:
        peer = l2["LangChain"]["round"].median_ms
        ars = [name for name in ("ARS middleware", "ARS core") if name in l2]
        ratios = ", ".join(f"{name} {l2[name]['round'].median_ms / peer:.2f}x" for name in ars)
        rests = ", ".join(f"{l2[name]['rest'].median_ms / peer:.2f}x" for name in ars)
        met = all(l2[name]["round"].median_ms <= 0.5 * peer for name in ars)
        lines.append(
            target(
                "one L2 round at or below 0.5x LangChain's, median rounds with the disk "
                f"barrier ({ratios}; without the wait {rests})",
                met,
            )
        )
        lines.append("")
    return lines


def raw(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "per_call_ms": {
            name: {str(n): {"median": t.median_ms, "p95": t.p95_ms} for n, t in cells.items()}
            for name, cells in data["per_call"].items()
        },
        "l2_ms": {
            name: {
                "median": c["round"].median_ms,
                "p25_p75": quartiles_ms(c["round"]),
                "p95": c["round"].p95_ms,
                "disk_barrier_median": c["wait"].median_ms,
                "without_wait_median": c["rest"].median_ms,
                "note": c["round"].note,
            }
            for name, c in data["l2"].items()
        },
        "l2_first_round_ms": {name: t.median_ms for name, t in data.get("l2_first", {}).items()},
    }
