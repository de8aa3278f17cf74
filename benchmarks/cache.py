"""E. Prompt-cache cost: what each policy costs as providers bill it.

Providers bill input tokens that repeat the previous request's prefix at about
a tenth of the price (OpenAI and Anthropic prompt caching). Every request of a
replayed run is compared with the request before it, message by message: the
longest common prefix (system message included) counts as cached. Effective
cost = uncached input + 0.1 x cached input + the summary calls' input and
output at full price. A "prefix rewrite" is a request that does not start with
the previous request's messages although no summary round happened on it (for
ARS, the first call at or above T after a stretch below it is reported apart:
L1 has to start there).

Policies: no compression, observation masking, LangChain and deepagents
``SummarizationMiddleware`` (their default ``trim_tokens_to_summarize`` and
``None``, which makes them really summarize), and ARS with its defaults. All
use the built-in extractive summarizer, metered as a chat model would be.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ars_core import FsspecBackend, Message, SummaryConfig
from ars_core.engine import CallOutcome
from ars_core.replay import Run, replay_messages

from .common import LC, Context, per_threshold, table
from .tokens import MeteredExtractive, O200k, TokenStats, policy_replay

KEY = "E"
NEEDS: tuple[str, ...] = ()

#: the price of a cached input token, relative to an uncached one
CACHED_PRICE = 0.1

POLICIES = (
    "no compression",
    "observation masking",
    "LangChain",
    "LangChain, trim None",
    "deepagents",
    "deepagents, trim None",
    "ARS",
)


@dataclass
class CacheStats:
    """Totals of one policy over the runs."""

    input: int = 0
    cached: int = 0
    summary: int = 0  # summary-call input + output tokens
    rewrites: int = 0  # prefix rewrites outside a summary round
    l1_starts: int = 0  # ARS: prefix changes on the first call at/above T after a stretch below
    requests: int = 0

    @property
    def hit_share(self) -> float:
        return self.cached / self.input if self.input else 0.0

    @property
    def effective(self) -> float:
        return self.input - self.cached + CACHED_PRICE * self.cached + self.summary


class _Prefix:
    """Compares each request with the previous one of the same run."""

    def __init__(self, o200k: O200k, stats: CacheStats) -> None:
        self.o200k, self.stats = o200k, stats
        self.previous: list[Message] = []
        self.previous_system: Message | None = None

    def add(self, system: Message | None, view: Sequence[Message], *, summary_round: bool) -> bool:
        """Count one request; ``True`` when it rewrote the previous request's prefix."""
        view = list(view)
        total = self.o200k.request(system, view)
        shared = 0
        if self.previous and system == self.previous_system:
            while (
                shared < min(len(view), len(self.previous))
                and view[shared] == self.previous[shared]
            ):
                shared += 1
            cached = total - self.o200k.request(None, view[shared:])  # system + shared prefix
        else:
            cached = 0
        rewrote = bool(self.previous) and shared < len(self.previous)
        self.stats.input += total
        self.stats.cached += cached
        self.stats.requests += 1
        if rewrote and not summary_round:
            self.stats.rewrites += 1
        self.previous, self.previous_system = view, system
        return rewrote


class _MeteredO200k(O200k):
    """o200k counting that also feeds every request to a :class:`_Prefix`; a
    request is a summary round when the policy summarized since the last one."""

    def __init__(self, base: O200k, stats: CacheStats, tokens: TokenStats) -> None:
        self.est = base.est
        self.prefix = _Prefix(base, stats)
        self.tokens = tokens
        self._seen = 0

    def request(self, system: Message | None, view: Iterable[Message]) -> int:
        view = list(view)
        rounds = self.tokens.summaries + self.tokens.summary_calls
        self.prefix.add(system, view, summary_round=rounds != self._seen)
        self._seen = rounds
        return super().request(system, view)


def _metered(base: O200k, stats: CacheStats) -> tuple[_MeteredO200k, TokenStats]:
    tokens = TokenStats()
    return _MeteredO200k(base, stats, tokens), tokens


def cache_ars(
    run: Run, k: float, base: O200k, stats: CacheStats, keep: int, **options: Any
) -> None:
    """ARS with its defaults (``options`` go to the compressor)."""
    tokens = TokenStats()
    prefix = _Prefix(base, stats)
    previous_level: list[str | None] = [None]

    def on_call(outcome: CallOutcome, system: Message | None) -> None:
        l1_start = outcome.level == "L1" and previous_level[0] is None
        rewrote = prefix.add(system, outcome.view, summary_round=outcome.level == "L2" or l1_start)
        stats.l1_starts += rewrote and l1_start
        previous_level[0] = outcome.level

    replay_messages(
        run.messages,
        config=SummaryConfig(summary_threshold=k, summary_keep_messages=keep),
        summarizer=MeteredExtractive(base, tokens),
        backend=FsspecBackend("memory://bench-cache"),
        on_call=on_call,
        compressor_options=options,
    )
    stats.summary += tokens.summary_in + tokens.summary_out


def _row(
    runs: Sequence[Run], k: float, keep: int, base: O200k, lc: LC, tmp: Path
) -> dict[str, CacheStats]:
    row = {name: CacheStats() for name in POLICIES}
    for i, run in enumerate(runs):
        for name in POLICIES[:-1]:
            metered, tokens = _metered(base, row[name])
            root = tmp / f"cache-{k}-{i}-{POLICIES.index(name)}"
            policy_replay(name, run, k, keep, lc, root)(metered, tokens)
            row[name].summary += tokens.summary_in + tokens.summary_out
        cache_ars(run, k, base, row["ARS"], keep)
    return row


def measure(ctx: Context) -> dict[str, Any]:
    base, lc = O200k(), LC()

    def describe(row: dict[str, CacheStats]) -> str:
        none = row["no compression"].effective or 1
        return "cache cost " + ", ".join(
            f"{n} {100 * s.effective / none:.0f}%" for n, s in row.items()
        )

    return per_threshold(
        ctx, lambda runs, k: _row(runs, k, ctx.args.keep, base, lc, ctx.tmp), describe
    )


HEADER = [
    "T (tokens)",
    "policy",
    "cache-hit share",
    "effective cost",
    "vs none",
    "rewrites outside a summary round",
    "L1 starts",
]


def render(ctx: Context, data: dict[str, Any]) -> list[str]:
    lines = ["## E. Prompt-cache cost (cost as providers bill it)", ""]
    lines.append(
        f"{data['runs']} runs (the largest), keep {data['keep']}; a request's cached part is "
        "its longest common message prefix with the previous request (o200k); effective "
        f"cost = uncached + {CACHED_PRICE:g} x cached + summary-call input and output. "
        '"L1 starts": ARS prefix changes on the first call at or above T after a stretch '
        "below it (allowed: L1 has to start there)."
    )
    lines.append("")
    rows = []
    for k in data["thresholds"]:
        row = data["table"][k]
        none = row["no compression"].effective or 1
        for name in POLICIES:
            s = row[name]
            rows.append(
                [
                    f"{int(k * 1024):,}",
                    name,
                    f"{100 * s.hit_share:.1f}%",
                    f"{s.effective:,.0f}",
                    f"{100 * s.effective / none:.1f}%",
                    f"{s.rewrites:,}",
                    f"{s.l1_starts:,}" if name == "ARS" else "",
                ]
            )
    lines += [*table(HEADER, rows, "rlrrrrr"), ""]
    for k in data["thresholds"]:
        row = data["table"][k]
        ars = row["ARS"]
        peers = min(row["LangChain"].effective, row["deepagents"].effective)
        verdict = "met" if ars.effective <= peers else "NOT met"
        lines.append(
            f"At T={int(k * 1024):,}: ARS has {ars.rewrites} prefix rewrites outside summary "
            f"rounds and L1 starts (target 0: **{'met' if ars.rewrites == 0 else 'NOT met'}**); "
            f"its effective cost is {100 * ars.effective / peers:.1f}% of the cheaper peer "
            f"default (target <= 100%: **{verdict}**)."
        )
    lines.append("")
    return lines


def raw(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "cache": {
            f"{k:g}": {
                name: {**vars(s), "hit_share": s.hit_share, "effective": s.effective}
                for name, s in row.items()
            }
            for k, row in data["table"].items()
        }
    }
