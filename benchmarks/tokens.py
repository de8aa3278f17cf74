"""B. Tokens sent over whole replayed runs, at a few thresholds.

No compression, ARS (L1+L2), LangChain summarization, observation masking and
deepagents, every request counted with tiktoken ``o200k_base`` whatever
estimator the policy used; summary-call tokens are reported separately. ARS is
replayed through the replay library (:func:`ars_core.replay.replay_messages`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ars_core import (
    ApproxEstimator,
    Estimator,
    ExtractiveSummarizer,
    FsspecBackend,
    Message,
    SummaryConfig,
    SummaryResult,
    TiktokenEstimator,
    ToolCall,
    default_estimator,
)
from ars_core.engine import CallOutcome
from ars_core.replay import Run, replay_messages
from ars_core.summarize import render_prompt
from ars_core.testing import ProviderTokenizer

from .common import (
    LC,
    Context,
    canned_handler,
    fake_chat_model,
    split_system,
    table,
    target,
)

KEY = "B"
NEEDS: tuple[str, ...] = ()

POLICIES = (
    "no compression",
    "ARS",
    "ARS, without tiktoken",
    "ARS, o200k estimator",
    "ARS, usage-calibrated",
    "LangChain",
    "observation masking",
    "deepagents",
)
#: ARS with the provider's usage in the messages (the answers stamped as the adapters
#: stamp ``usage_metadata``), and a provider whose tokenizer counts 1.4x o200k, with
#: and without usage: a table of their own, requests counted in the provider's tokens
USAGE_POLICIES = (
    "ARS, usage (provider = o200k)",
    "ARS, without tiktoken, usage (provider = o200k)",
    "ARS, provider 1.4x o200k, no usage",
    "ARS, provider 1.4x o200k, usage",
)
#: the provider that counts more: 1.4 of its tokens per o200k token
PROVIDER_FACTOR = 1.4


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

    def add_summary(self, calls_before: int) -> None:
        """Count one summary round; a placeholder when the summarizer was not called during
        it (``calls_before``: :attr:`summary_calls` when the round began)."""
        self.summaries += 1
        self.placeholders += self.summary_calls == calls_before

    @property
    def total_cost(self) -> int:
        """Request tokens plus summary-call tokens (input and output)."""
        return self.total + self.summary_in + self.summary_out


class O200k:
    """o200k counting for every policy, the same way: a request is system + messages,
    per-message cached."""

    def __init__(self) -> None:
        self.est = TiktokenEstimator("o200k_base")

    def request(self, system: Message | None, view: Iterable[Message]) -> int:
        return self.est.count(list(view), system=system)

    def text(self, text: str) -> int:
        return self.est.count_text(text)

    def counts_call_ids(self) -> bool:
        """Whether a request's count includes tool-call ids (as a provider counts them)."""
        call = ToolCall(id="call_" + "x" * 40, name="f", args={})
        probe = Message(role="assistant", content="", tool_calls=(call,))
        bare = Message(role="assistant", content="", tool_calls=(ToolCall(id="", name="f"),))
        return self.est.count([probe]) > self.est.count([bare])


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

    def with_budget(
        self,
        summary_tokens: int,
        *,
        task_tokens: int | None = None,
        task: Sequence[str] | None = None,
    ) -> MeteredExtractive:
        """ARS's engine bounds its summarizer to its summary budget and the task's room
        in it, and tells it the task it writes beside the summary (one call at a time).
        What is metered is what the summarizer itself reads and writes."""
        self.inner = ExtractiveSummarizer(
            summary_tokens=summary_tokens, task_tokens=task_tokens, task=task
        )
        return self

    def reads_whole_history(self, history: Sequence[Message]) -> bool:
        """As ARS's built-in summarizer: a conversation is read whole (not condensed)."""
        return self.inner.reads_whole_history(history)

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


def default_without_tiktoken() -> Estimator:
    """The estimator the engine picks by default when tiktoken is not installed
    (``default_estimator()`` with ``import tiktoken`` failing)."""
    saved = sys.modules.get("tiktoken")
    sys.modules["tiktoken"] = None  # type: ignore[assignment]  # import tiktoken -> ImportError
    try:
        return default_estimator()
    finally:
        if saved is None:
            del sys.modules["tiktoken"]
        else:
            sys.modules["tiktoken"] = saved


# ================================================================== the policies


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
    options: dict[str, Any] | None = None,
    provider: ProviderTokenizer | None = None,
    usage: bool = False,
) -> None:
    """Replay ``run`` through ARS. With ``calibrate``, every request's o200k count is fed
    back as the provider's reported usage (what the adapters do with ``usage_metadata``);
    ``options`` are further :class:`~ars_core.Compressor` keyword arguments. ``provider``
    counts the requests instead of o200k (T is its window); with ``usage`` each answer
    carries that count of its request, as an adapter stamps the reported usage."""
    threshold = int(threshold_k * 1024)
    calls_before = [stats.summary_calls]  # summarizer calls when the previous call ended
    if calibrate and estimator is None:
        estimator = ApproxEstimator()

    def on_call(outcome: CallOutcome, sys_msg: Message | None) -> None:
        if outcome.level == "L2":
            stats.add_summary(calls_before[0])
        calls_before[0] = stats.summary_calls
        if provider is None:
            sent = o200k.request(sys_msg, outcome.view)
        else:
            sent = provider.count(outcome.view, system=sys_msg)
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
        compressor_options=options,
        provider=provider if usage else None,
    )


def tokens_langchain(
    run: Run,
    threshold: int,
    o200k: O200k,
    stats: TokenStats,
    keep: int,
    lc: LC,
    **options: Any,
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
        **options,
    )
    state: list[Any] = []
    for m in history:
        if m.role == "assistant":
            calls_before = stats.summary_calls
            update = mw.before_model({"messages": state}, None)  # type: ignore[arg-type]
            if update is not None:
                state = list(update["messages"][1:])
                stats.add_summary(calls_before)
            stats.add_request(o200k.request(system, [lc.to_core(x) for x in state]), threshold)
        state.append(lc.from_core(m))


class _DeepAgentsDriver:
    """deepagents' middleware driven through ``wrap_model_call``, its state updates applied."""

    def __init__(self, system: Message | None, lc: LC, summarizer: Any, **options: Any) -> None:
        from deepagents.middleware.summarization import SummarizationMiddleware

        self.lc = lc
        self.lc_system = lc.from_core(system) if system is not None else None
        self.model = fake_chat_model()
        self.mw = SummarizationMiddleware(self.model, summarizer=summarizer, **options)
        self.handler, self.seen = canned_handler()
        self.state: list[Any] = []
        self.extra: dict[str, Any] = {}

    def call(self) -> tuple[list[Any], Any]:
        """One model call; returns the messages sent and the new event (or ``None``)."""
        from langchain.agents.middleware.types import ExtendedModelResponse, ModelRequest

        request = ModelRequest(
            model=self.model,
            messages=list(self.state),
            system_message=self.lc_system,
            tools=[],
            state={"messages": self.state, **self.extra},  # type: ignore[arg-type]
        )
        result = self.mw.wrap_model_call(request, self.handler)
        event = None
        if isinstance(result, ExtendedModelResponse) and result.command is not None:
            update = dict(result.command.update or {})
            replaced = {x.id: x for x in update.pop("messages", [])}
            if replaced:
                self.state = [replaced.get(x.id, x) for x in self.state]
            if update.get("_summarization_event") is not self.extra.get("_summarization_event"):
                event = update["_summarization_event"]
            self.extra.update(update)
        return self.seen[-1].messages, event


def tokens_deepagents(
    run: Run,
    threshold: int,
    o200k: O200k,
    stats: TokenStats,
    keep: int,
    lc: LC,
    root: Path,
    **options: Any,
) -> None:
    from deepagents.backends import FilesystemBackend
    from deepagents.middleware.summarization import DEEPAGENTS_DEFAULT_SUMMARY_PROMPT

    system, history = split_system(run)
    driver = _DeepAgentsDriver(
        system,
        lc,
        MeteredExtractive(o200k, stats, lc, DEEPAGENTS_DEFAULT_SUMMARY_PROMPT),
        backend=FilesystemBackend(root_dir=root, virtual_mode=True),
        trigger=("tokens", threshold),
        keep=("messages", keep),
        **options,
    )
    for m in history:
        if m.role == "assistant":
            calls_before = stats.summary_calls
            sent, event = driver.call()
            if event is not None:
                stats.add_summary(calls_before)
            stats.add_request(o200k.request(system, [lc.to_core(x) for x in sent]), threshold)
        driver.state.append(lc.from_core(m))


def policy_replay(
    name: str, run: Run, k: float, keep: int, lc: LC, root: Path
) -> Callable[[O200k, TokenStats], None]:
    """How policy ``name`` replays ``run`` at ``k`` K tokens, counting with the o200k and the
    stats it is given: ``no compression``, ``observation masking``, ``ARS`` (its defaults),
    ``LangChain`` / ``deepagents`` (``..., trim None``: ``trim_tokens_to_summarize=None``)."""
    threshold = int(k * 1024)
    untrimmed = {"trim_tokens_to_summarize": None} if name.endswith("trim None") else {}
    if name == "no compression":
        return lambda o, t: tokens_none(run, threshold, o, t)
    if name == "observation masking":
        return lambda o, t: tokens_masking(run, threshold, o, t, keep)
    if name == "ARS":
        return lambda o, t: tokens_ars(run, k, o, t, keep)
    if name.startswith("LangChain"):
        return lambda o, t: tokens_langchain(run, threshold, o, t, keep, lc, **untrimmed)
    return lambda o, t: tokens_deepagents(run, threshold, o, t, keep, lc, root, **untrimmed)


# ================================================================== the section


def _row(
    run_list: Sequence[Run], k: float, keep: int, o200k: O200k, lc: LC, tmp: Path
) -> dict[str, TokenStats]:
    threshold = int(k * 1024)
    row = {name: TokenStats() for name in (*POLICIES, *USAGE_POLICIES)}
    same, more = ProviderTokenizer(1.0, o200k.est), ProviderTokenizer(PROVIDER_FACTOR, o200k.est)
    for i, run in enumerate(run_list):
        tokens_none(run, threshold, o200k, row["no compression"])
        tokens_ars(run, k, o200k, row["ARS"], keep)
        tokens_ars(run, k, o200k, row["ARS, without tiktoken"], keep, default_without_tiktoken())
        tokens_ars(run, k, o200k, row["ARS, o200k estimator"], keep, o200k.est)
        tokens_ars(run, k, o200k, row["ARS, usage-calibrated"], keep, calibrate=True)
        usage = row["ARS, usage (provider = o200k)"]
        tokens_ars(run, k, o200k, usage, keep, provider=same, usage=True)
        approx = row["ARS, without tiktoken, usage (provider = o200k)"]
        tokens_ars(
            run, k, o200k, approx, keep, default_without_tiktoken(), provider=same, usage=True
        )
        without = row["ARS, provider 1.4x o200k, no usage"]
        tokens_ars(run, k, o200k, without, keep, provider=more)
        tokens_ars(
            run, k, o200k, row["ARS, provider 1.4x o200k, usage"], keep, provider=more, usage=True
        )
        tokens_langchain(run, threshold, o200k, row["LangChain"], keep, lc)
        tokens_masking(run, threshold, o200k, row["observation masking"], keep)
        tokens_deepagents(run, threshold, o200k, row["deepagents"], keep, lc, tmp / f"tok-{k}-{i}")
    return row


def measure(ctx: Context) -> dict[str, Any]:
    args = ctx.args
    thresholds = [float(s) for s in args.thresholds.split(",") if s.strip()]
    runs = ctx.runs_by_size[: args.token_runs]
    o200k, lc = O200k(), LC()
    result: dict[float, dict[str, TokenStats]] = {}
    for k in thresholds:
        row = result[k] = _row(runs, k, args.keep, o200k, lc, ctx.tmp)
        base = row["no compression"].total or 1
        ctx.log(
            f"  tokens at {k:g}K: "
            + ", ".join(f"{n} {100 * s.total / base:.0f}%" for n, s in row.items())
        )
    return {
        "thresholds": thresholds,
        "table": result,
        "runs": [r.name for r in runs],
        "keep": args.keep,
        "call_ids_counted": o200k.counts_call_ids(),
    }


_INTRO = (
    "{n} runs (the largest available), every assistant turn one request, all requests counted "
    "with tiktoken o200k_base. ARS: L1+L2 with its defaults and keep {keep}; "
    'LangChain and deepagents `SummarizationMiddleware`: trigger `("tokens", T)`, keep {keep} '
    "messages, their default token counter and `trim_tokens_to_summarize`; observation masking: "
    "the last {keep} tool results kept, older ones replaced by a one-line placeholder. Every "
    "policy summarizes with the same built-in extractive summarizer; summary-call tokens are what "
    "a chat-model summarizer would have been sent (each policy's own prompt) plus the summary, "
    'counted apart from the requests; "total cost" adds them to the request tokens. '
    '"placeholders" are summary rounds in which the summarizer was not called (counted by the '
    "calls, not by the text). Every request of every policy is counted the same way{ids}. "
    '"ARS" is its default configuration (the engine\'s default estimator); '
    '"ARS, without tiktoken" is that configuration with tiktoken\'s import failing: the engine '
    "then picks the approx estimator and keeps its safety margin. "
    '"ARS, usage-calibrated" is ARS with its approx estimator calibrated, after each '
    "request, by that request's o200k count standing in for the provider's reported usage (as "
    'the adapters do with `usage_metadata`). "ARS, o200k estimator" is ARS deciding with '
    "tiktoken o200k."
)
HEADER = [
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
    "total cost",
    "cost % of none",
]


def render(ctx: Context, data: dict[str, Any]) -> list[str]:
    lines = ["## B. Tokens sent over whole replayed runs", ""]
    ids = (
        ", tool-call ids and types included (a provider counts them)"
        if data.get("call_ids_counted")
        else ""
    )
    lines += [_INTRO.format(n=len(data["runs"]), keep=data["keep"], ids=ids), ""]
    rows = []
    for k in data["thresholds"]:
        row = data["table"][k]
        base = row["no compression"].total or 1
        for name in POLICIES:
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
                    f"{s.total_cost:,}",
                    f"{100 * s.total_cost / base:.1f}%",
                ]
            )
    lines += [*table(HEADER, rows, "rlrrrrrrrrrr"), ""]
    for k in data["thresholds"]:
        row = data["table"][k]
        ars, base = row["ARS"], row["no compression"].total or 1
        lines.append(
            f"At T={int(k * 1024):,}: ARS sends {100 * ars.total / base:.1f}% of the "
            "uncompressed tokens (requests at or below T are sent whole, so the share "
            "grows with T; no issue or requirement sets a share)."
        )
    lines += ["", *_default_configuration(data), "", *_with_usage(data), ""]
    return lines


def _with_usage(data: dict[str, Any]) -> list[str]:
    """Requests above T with the provider's usage in the messages, and for a provider
    whose tokenizer counts more than o200k."""
    rows = []
    for k in data["thresholds"]:
        row = data["table"][k]
        for name in USAGE_POLICIES:
            s = row.get(name)
            if s is None:  # a result recorded before these rows existed
                continue
            figures = (s.total, s.peak, s.requests, s.over, s.summaries)
            rows.append([f"{int(k * 1024):,}", name, *(f"{f:,}" for f in figures)])
    met = all(
        data["table"][k][name].over == 0
        for k in data["thresholds"]
        for name in USAGE_POLICIES
        if not name.endswith("no usage") and name in data["table"][k]
    )
    header = ["T (tokens)", "policy", "total tokens", "peak", "requests", "over T", "summaries"]
    return [
        "### Requests above T with the provider's usage in the messages",
        "",
        "Each answer carries the provider's count of the request that produced it, stamped "
        "beside ARS's own count as the adapters stamp `usage_metadata` (`ars_core.provider_size`"
        "); the next call sizes its budgets by that ratio when the provider counted more. "
        '"provider = o200k": the provider counts as o200k (the requests counted in o200k); '
        f'"provider {PROVIDER_FACTOR}x o200k": a provider whose tokenizer counts '
        f"{PROVIDER_FACTOR} of its tokens per o200k token and whose window is T of its tokens "
        "(the requests counted in its tokens), ARS deciding with its default estimator.",
        "",
        *table(header, rows, "rlrrrrr"),
        "",
        target(
            "0 requests above T (in the provider's tokens) with usage in the messages, with "
            f"and without tiktoken, and for a provider counting {PROVIDER_FACTOR}x o200k",
            met,
        ),
    ]


def _default_configuration(data: dict[str, Any]) -> list[str]:
    """Requests above T with the default configuration, with and without tiktoken."""
    rows = []
    for k in data["thresholds"]:
        row = data["table"][k]
        rows.append(
            [
                f"{int(k * 1024):,}",
                f"{row['ARS'].over:,}",
                f"{row['ARS, without tiktoken'].over:,}",
                f"{row['ARS'].requests:,}",
            ]
        )
    met = all(
        data["table"][k][name].over == 0
        for k in data["thresholds"]
        for name in ("ARS", "ARS, without tiktoken")
    )
    return [
        "### Requests above T with the default configuration",
        "",
        *table(["T (tokens)", "ARS, defaults", "ARS, defaults without tiktoken", "requests"], rows),
        "",
        target("0 requests above T (counted in o200k) at every T, with and without tiktoken", met),
    ]


def raw(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "tokens": {
            f"{k:g}": {name: vars(s) for name, s in row.items()} for k, row in data["table"].items()
        }
    }
