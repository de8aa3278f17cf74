"""G. Summary input budget: what the summarizer reads, against what the view keeps.

ARS condenses the history it summarizes to a token budget before the summary
call. A smaller budget makes every summary call cheaper; it must not cost
retention. The default (lean rounds) sizes the round from its task: the
summary model reads what it keeps whole (previous summary, the task's requests,
the newest message) plus T/12 of the rest, the summary may take the task's
room plus T/8, and the cutoff leaves the new view under the L2 threshold.
Beside it, the fixed rounds (``Compressor(lean_rounds=False)``: the latest
``keep`` messages, the summary bound of ``summary_token_limit``) with input
budgets of T/2 (their default), T/4 and T/8. The largest runs are replayed
through ARS with the built-in summarizer, and for every summarized view
(every request after the first L2 round) the share of the task statement it
still holds is measured with :func:`ars_core.retention.task_retention`. The
cost columns are those of section E (cached input at 0.1x, summary calls at
full price).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ars_core import FsspecBackend, Message, SummaryConfig
from ars_core.engine import CallOutcome
from ars_core.replay import Run, replay_messages
from ars_core.retention import TASK_KEPT, task_retention, task_statement

from .cache import CacheStats, _Prefix
from .common import Context, per_threshold, table
from .tokens import MeteredExtractive, O200k, TokenStats

KEY = "G"
NEEDS: tuple[str, ...] = ()

#: the fixed-round input budgets compared, as divisors of T
DIVISORS = (2, 4, 8)
#: the default: lean rounds (input: what is kept whole, i.e. the task, + T/12)
LEAN = "task + T/12"
#: the rows: the default, then the fixed rounds at each budget
ROWS: tuple[str | int, ...] = (LEAN, *DIVISORS)


@dataclass
class BudgetStats:
    cache: CacheStats = field(default_factory=CacheStats)
    summaries: int = 0  # summary calls
    views: int = 0  # summarized views
    task_kept: int = 0  # ... holding at least TASK_KEPT of the task statement
    task_share: float = 0.0  # sum of the task shares (mean = task_share / views)

    @property
    def kept_share(self) -> float:
        return self.task_kept / self.views if self.views else 1.0


def budget_ars(
    run: Run, k: float, divisor: str | int, base: O200k, stats: BudgetStats, keep: int
) -> None:
    """Replay ``run`` through ARS with its default lean rounds (``divisor`` is
    :data:`LEAN`) or fixed rounds reading at most T/``divisor`` tokens per summary."""
    threshold = int(k * 1024)
    task = task_statement(run.messages)
    tokens = TokenStats()
    prefix = _Prefix(base, stats.cache)
    summarized = [False]

    def on_call(outcome: CallOutcome, system: Message | None) -> None:
        prefix.add(system, outcome.view, summary_round=outcome.level is not None)
        summarized[0] = summarized[0] or outcome.level == "L2"
        if summarized[0]:
            share = task_retention(task, outcome.view)
            stats.views += 1
            stats.task_share += share
            stats.task_kept += share >= TASK_KEPT

    replay_messages(
        run.messages,
        config=SummaryConfig(summary_threshold=k, summary_keep_messages=keep),
        summarizer=MeteredExtractive(base, tokens),
        backend=FsspecBackend("memory://bench-budget"),
        on_call=on_call,
        compressor_options=(
            {}
            if isinstance(divisor, str)
            else {"summary_input_tokens": threshold // divisor, "lean_rounds": False}
        ),
    )
    stats.cache.summary += tokens.summary_in + tokens.summary_out
    stats.summaries += tokens.summary_calls


def _label(row: str | int, threshold: int) -> str:
    if isinstance(row, str):
        return f"{row} (default)"
    return f"T/{row} ({threshold // row:,}), fixed rounds"


def _row(runs: Sequence[Run], k: float, keep: int, base: O200k) -> dict[str | int, BudgetStats]:
    row: dict[str | int, BudgetStats] = {d: BudgetStats() for d in ROWS}
    for run in runs:
        for d in ROWS:
            budget_ars(run, k, d, base, row[d], keep)
    return row


def measure(ctx: Context) -> dict[str, Any]:
    base = O200k()

    def describe(row: dict[str | int, BudgetStats]) -> str:
        return "budget " + ", ".join(
            f"{d if isinstance(d, str) else f'T/{d}'} kept {100 * s.kept_share:.0f}%"
            for d, s in row.items()
        )

    return per_threshold(ctx, lambda runs, k: _row(runs, k, ctx.args.keep, base), describe)


HEADER = [
    "T (tokens)",
    "summary input",
    "summarized views",
    f"views keeping >= {TASK_KEPT:.0%} of the task",
    "mean task share",
    "summaries",
    "summary-call tokens",
    "effective cost",
]


def render(ctx: Context, data: dict[str, Any]) -> list[str]:
    lines = ["## G. Summary input budget against task retention", ""]
    lines.append(
        f"{data['runs']} runs (the largest), keep {data['keep']}, built-in summarizer; "
        "a summarized view is any request after the first L2 round of a run. "
        f'"{LEAN}" is the default (lean rounds): the summary model reads what it keeps '
        "whole (previous summary, the task's requests, the newest message) plus T/12 of the "
        "rest, the summary may take the task's room plus T/8, and the cutoff leaves the new "
        'view under the L2 threshold. "fixed rounds": `Compressor(lean_rounds=False)`, the '
        "latest `keep` messages and the summary bound `summary_token_limit`, with the summary "
        "input budget shown."
    )
    lines.append("")
    rows = []
    for k in data["thresholds"]:
        for d, s in data["table"][k].items():
            rows.append(
                [
                    f"{int(k * 1024):,}",
                    _label(d, int(k * 1024)),
                    f"{s.views:,}",
                    f"{100 * s.kept_share:.1f}%",
                    f"{100 * s.task_share / s.views:.1f}%" if s.views else "-",
                    f"{s.summaries:,}",
                    f"{s.cache.summary:,}",
                    f"{s.cache.effective:,.0f}",
                ]
            )
    lines += [*table(HEADER, rows, "rlrrrrrr"), ""]
    return lines


def raw(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "budget": {
            f"{k:g}": {
                (d if isinstance(d, str) else f"T/{d}"): {
                    "summaries": s.summaries,
                    "views": s.views,
                    "task_kept": s.task_kept,
                    "mean_task_share": s.task_share / s.views if s.views else 1.0,
                    "summary_tokens": s.cache.summary,
                    "effective": s.cache.effective,
                }
                for d, s in row.items()
            }
            for k, row in data["table"].items()
        }
    }
