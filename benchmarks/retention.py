"""F. Does the summary keep the task? Retention of the task statement after each summary.

Over the replayed runs at each threshold, every request a summary round
produced (the view right after the summary) is checked for the task
statement: the request(s) that set the work and the newest request so far
(:func:`ars_core.retention.task_statement`),
measured by :func:`ars_core.retention.task_retention` (the share of its words
in 5-word runs found verbatim in the view). A view keeps the task when it holds
at least 90% of it. Target for ARS with its built-in summarizer: at least 95%
of summarized views. The peers' policies run with the same summarizer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ars_core import Message
from ars_core.replay import Run
from ars_core.retention import TASK_KEPT, task_retention, task_statement

from .common import LC, Context, per_threshold, split_system, table
from .tokens import O200k, TokenStats, policy_replay

KEY = "F"
NEEDS: tuple[str, ...] = ()

#: the share of summarized views that must keep the task, for ARS
TARGET = 0.95

POLICIES = (
    "ARS",
    "LangChain",
    "LangChain, trim None",
    "deepagents",
    "deepagents, trim None",
)


@dataclass
class RetentionStats:
    """Summarized views of one policy and how much of the task each one kept."""

    fractions: list[float] = field(default_factory=list)

    @property
    def views(self) -> int:
        return len(self.fractions)

    @property
    def kept(self) -> int:
        return sum(f >= TASK_KEPT for f in self.fractions)

    @property
    def share(self) -> float:
        return self.kept / self.views if self.views else 1.0


class _Probe(O200k):
    """o200k counting that also measures task retention on every request a summary round
    produced (the policy counted a new summary since its previous request)."""

    def __init__(self, base: O200k, run: Run, tokens: TokenStats, out: RetentionStats) -> None:
        self.est = base.est
        _, history = split_system(run)
        replies = [i for i, m in enumerate(history) if m.role == "assistant"]
        self._tasks = [task_statement(history[:i]) for i in replies]
        self._tokens, self._out = tokens, out
        self._requests = 0
        self._summaries = 0

    def request(self, system: Message | None, view: Iterable[Message]) -> int:
        view = list(view)
        if self._tokens.summaries != self._summaries:
            self._summaries = self._tokens.summaries
            self._out.fractions.append(task_retention(self._tasks[self._requests], view))
        self._requests += 1
        return super().request(system, view)


def _row(
    runs: Sequence[Run], k: float, keep: int, base: O200k, lc: LC, tmp: Path
) -> dict[str, RetentionStats]:
    row = {name: RetentionStats() for name in POLICIES}
    for i, run in enumerate(runs):
        for j, name in enumerate(POLICIES):
            tokens = TokenStats()
            probe = _Probe(base, run, tokens, row[name])
            policy_replay(name, run, k, keep, lc, tmp / f"retention-{k}-{i}-{j}")(probe, tokens)
    return row


def measure(ctx: Context) -> dict[str, Any]:
    base, lc = O200k(), LC()

    def describe(row: dict[str, RetentionStats]) -> str:
        return "task kept " + ", ".join(f"{n} {s.kept}/{s.views}" for n, s in row.items())

    return per_threshold(
        ctx, lambda runs, k: _row(runs, k, ctx.args.keep, base, lc, ctx.tmp), describe
    )


def render(ctx: Context, data: dict[str, Any]) -> list[str]:
    lines = ["## F. Task retention after each summary", ""]
    lines.append(
        f"{data['runs']} runs (the largest), keep {data['keep']}, every policy summarizing with "
        "the built-in extractive summarizer. A summarized view is the request a summary round "
        "produced; it keeps the task when it holds at least "
        f"{100 * TASK_KEPT:.0f}% of the task statement (the requests that set the work and the "
        "newest one, measured in "
        '5-word runs found verbatim). "trim None": the peer with '
        "`trim_tokens_to_summarize=None`."
    )
    lines.append("")
    rows = []
    for k in data["thresholds"]:
        for name in POLICIES:
            s = data["table"][k][name]
            worst = min(s.fractions) if s.fractions else 1.0
            rows.append(
                [
                    f"{int(k * 1024):,}",
                    name,
                    f"{s.views:,}",
                    f"{s.kept:,}",
                    f"{100 * s.share:.1f}%",
                    f"{100 * worst:.0f}%",
                ]
            )
    header = ["T (tokens)", "policy", "summarized views", "task kept", "share", "worst view"]
    lines += [*table(header, rows, "rlrrrr"), ""]
    met = all(data["table"][k]["ARS"].share >= TARGET for k in data["thresholds"])
    lines.append(
        f"Target: ARS keeps the task in at least {100 * TARGET:.0f}% of summarized views at every "
        f"T: **{'met' if met else 'NOT met'}**."
    )
    lines.append("")
    return lines


def raw(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "retention": {
            f"{k:g}": {
                name: {"views": s.views, "kept": s.kept, "fractions": s.fractions}
                for name, s in row.items()
            }
            for k, row in data["table"].items()
        }
    }
