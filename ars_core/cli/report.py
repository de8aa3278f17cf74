"""The text reports of ``ars replay`` and ``ars estimate``."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from typing import Any

from ..config import SummaryConfig
from ..replay import CACHED_PRICE, RunReport
from ..retention import TASK_KEPT
from .common import printable

__all__ = ["format_estimates", "format_report"]

#: (group title, column title, minimum width, value of a report)
Column = tuple[str, str, int, Callable[[RunReport], str]]


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def format_report(
    reports: Sequence[RunReport],
    total: RunReport,
    *,
    config: SummaryConfig,
    estimator: str,
    summarizer: str,
    out: str,
    samples: bool,
    demo_threshold: bool = False,
    counted_with: str | None = None,
) -> str:
    """The human-readable replay report (every line fits 100 columns)."""
    counted_with = counted_with or estimator
    lines = _preamble(
        len(reports), config, estimator, summarizer, out, samples, demo_threshold, counted_with
    )
    lines += _table(CALL_COLUMNS, reports, total)
    lines += _wrap(
        "L1: calls where L1 alone was enough; L2: calls that also summarized older history "
        "(L1 runs first); over T: requests above the threshold; task kept: summary rounds whose "
        f"view kept at least {100 * TASK_KEPT:.0f}% of the task statement (retention audit)."
    )
    lines += _lost_task(reports)
    lines.append("")
    lines += _table(TOKEN_COLUMNS, reports, total)
    lines += _wrap(
        f"tokens counted with {counted_with}; cache hits: request tokens repeating the previous "
        f"request's prefix (prompt caching); effective cost: uncached + {CACHED_PRICE:g} x "
        "cached request tokens + summary calls, its share of the same without ARS."
    )
    lines.append("")
    for line in _story(total, config.threshold_tokens, out):
        lines += _wrap(line)
    lines += _last_summaries(reports)
    return "\n".join(lines)


def _lost_task(reports: Sequence[RunReport]) -> list[str]:
    """One line for each run in which a summary lost the task."""
    lines = []
    for r in reports:
        lost = [c.task_fraction for c in r.calls if c.task_fraction is not None]
        lost = [f for f in lost if f < TASK_KEPT]
        if lost:
            lines += _wrap(
                f"  {r.name} lost its task in {len(lost)} of {r.retention_rounds} summaries "
                f"(the worst view kept {100 * min(lost):.0f}% of it)."
            )
    return lines


def _wrap(line: str) -> list[str]:
    indent = " " * (len(line) - len(line.lstrip()))
    return textwrap.wrap(line, width=TEXT_WIDTH, subsequent_indent=indent + "  ") or [""]


def _last_summaries(reports: Sequence[RunReport], chars: int = 200) -> list[str]:
    """The last summary of each run, its first ``chars`` characters, wrapped to the width."""
    lines = []
    for r in reports:
        if r.last_summary is None:
            continue
        text = printable(" ".join(r.last_summary.split()))
        if len(text) > chars:
            text = text[: chars - 1] + "…"
        lines += textwrap.wrap(
            f"Last summary of {r.name}: {text}", width=TEXT_WIDTH, subsequent_indent="    "
        )
    return ["", *lines] if lines else []


def _preamble(
    n: int,
    config: SummaryConfig,
    estimator: str,
    summarizer: str,
    out: str,
    samples: bool,
    demo_threshold: bool,
    counted_with: str,
) -> list[str]:
    t, t2 = config.threshold_tokens, config.l2_threshold_tokens
    what = (
        f"{n} sample run{'s' if n != 1 else ''} shipped with ars"
        if samples
        else f"{n} recorded run{'s' if n != 1 else ''}"
    )
    thr = f"threshold {t / 1024:g}K = {t:,} tokens"
    if demo_threshold:
        thr += " (a demo value for these short runs; the default is 100K, set with --threshold)"
    counted = "" if counted_with == estimator else f"; counted with {counted_with}"
    lines = [
        f"ARS replay of {what}: each assistant turn is one model call through ARS,",
        "the recorded reply standing in for the model.",
        f"  {thr}",
        f"  L2 when above {t2:,} tokens after L1 (ratio {config.summary_l2_trigger_ratio:g}); keep "
        f"{config.summary_keep_messages} messages; tool results over "
        f"{config.summary_tool_result_token_limit} "
        "tokens go to files",
        f"  decided with {estimator}{counted}; summarizer {summarizer}; files under {out}",
    ]
    return [*(w for line in lines for w in _wrap(line)), ""]


#: the first table: what happened to the requests
CALL_COLUMNS: list[Column] = [
    ("", "calls", 5, lambda r: f"{r.model_calls}"),
    ("rounds", "L1", 3, lambda r: f"{r.l1_rounds}"),
    ("rounds", "L2", 3, lambda r: f"{r.l2_rounds}"),
    ("largest request", "ARS", 7, lambda r: f"{r.tokens_sent_peak:,}"),
    ("largest request", "no ARS", 7, lambda r: f"{r.tokens_without_peak:,}"),
    ("over T", "ARS", 3, lambda r: f"{r.over_threshold}"),
    ("over T", "no ARS", 6, lambda r: f"{r.over_threshold_without}"),
    ("", "files", 5, lambda r: f"{r.files_written}"),
    ("summaries", "n", 3, lambda r: f"{r.summary_calls}"),
    ("summaries", "task kept", 9, lambda r: f"{r.task_kept_rounds}/{r.retention_rounds}"),
]
#: the second table: what it cost
TOKEN_COLUMNS: list[Column] = [
    ("all request tokens", "ARS", 9, lambda r: f"{r.tokens_sent_total:,}"),
    ("all request tokens", "no ARS", 9, lambda r: f"{r.tokens_without_total:,}"),
    ("all request tokens", "share", 5, lambda r: _pct(r.tokens_sent_total, r.tokens_without_total)),
    ("", "summary tokens", 7, lambda r: f"{r.summary_input_tokens + r.summary_output_tokens:,}"),
    ("", "cache hits", 5, lambda r: _pct(r.tokens_cached_total, r.tokens_sent_total)),
    ("effective cost", "ARS", 9, lambda r: f"{round(r.effective_cost):,}"),
    ("effective cost", "share", 5, lambda r: _pct(r.effective_cost, r.effective_cost_without)),
]
#: the widest run name shown (longer names are cut with "…"); every line fits 100 columns
NAME_WIDTH = 26
#: where the sentences below the tables wrap
TEXT_WIDTH = 100


def _widths(cols: Sequence[Column], rows: Sequence[RunReport]) -> list[int]:
    widths = [max(w, len(title), *(len(v(r)) for r in rows)) for _, title, w, v in cols]
    # widen the last column of a group whose title is wider than its columns
    for group in dict.fromkeys(g for g, _, _, _ in cols if g):
        idx = [i for i, c in enumerate(cols) if c[0] == group]
        span = sum(widths[i] for i in idx) + 2 * (len(idx) - 1)
        widths[idx[-1]] += max(0, len(group) + 2 - span)
    return widths


def _group_line(cols: Sequence[Column], widths: Sequence[int], name_w: int) -> str:
    groups: list[tuple[str, int]] = []  # (group title, width incl. inner gaps)
    for (group, _, _, _), w in zip(cols, widths, strict=True):
        if groups and groups[-1][0] == group and group:
            groups[-1] = (group, groups[-1][1] + 2 + w)
        else:
            groups.append((group, w))
    top = " " * name_w + "".join(
        "  " + (f" {g} ".center(w, "-") if g else " " * w) for g, w in groups
    )
    return top.rstrip()


def _table(cols: Sequence[Column], reports: Sequence[RunReport], total: RunReport) -> list[str]:
    rows = [*reports, total]
    name_w = min(NAME_WIDTH, max([len("run"), *(len(r.name) for r in reports)]))
    widths = _widths(cols, rows)
    head = f"{'run':<{name_w}}" + "".join(
        f"  {title:>{w}}" for (_, title, _, _), w in zip(cols, widths, strict=True)
    )
    lines = [_group_line(cols, widths, name_w), head, "-" * len(head)]
    for r in rows:
        if r is total:
            lines.append("-" * len(head))
        name = r.name if len(r.name) <= name_w else r.name[: name_w - 1] + "…"
        lines.append(
            f"{name:<{name_w}}"
            + "".join(f"  {v(r):>{w}}" for (_, _, _, v), w in zip(cols, widths, strict=True))
        )
    return lines


def _story(total: RunReport, threshold: int, out: str) -> list[str]:
    """A few plain sentences about the totals."""
    calls = total.model_calls
    if calls == 0:
        return ["No assistant turns in these runs: nothing was sent."]
    if total.l1_rounds + total.l2_rounds == 0:
        return [
            f"No request reached the threshold ({threshold:,} tokens; the largest was "
            f"{total.tokens_without_peak:,}), so ARS changed nothing. Try a lower --threshold."
        ]
    lines = [
        f"Without ARS: {calls} requests, {total.tokens_without_total:,} tokens in all; "
        f"the largest was {total.tokens_without_peak:,} tokens and "
        f"{total.over_threshold_without} went over the threshold.",
        f"With ARS: {total.tokens_sent_total:,} tokens "
        f"({_pct(total.tokens_sent_total, total.tokens_without_total)} "
        f"of that); the largest request was {total.tokens_sent_peak:,} tokens and "
        f"{total.over_threshold} went over the threshold.",
        "  L1 alone (large tool results moved to files, huge write_file/edit_file arguments "
        f"cut) was enough for {total.l1_rounds} calls; L2 summarized older history "
        f"{total.l2_rounds} times ({total.summary_calls} summary calls, "
        f"{total.summary_input_tokens + total.summary_output_tokens:,} "
        f"tokens, counted separately).",
        _files_sentence(total, out),
        f"Billed with prompt caching (cached input at {CACHED_PRICE:g}x, summary calls at full "
        f"price): {round(total.effective_cost):,} token-equivalents with ARS, "
        f"{_pct(total.effective_cost, total.effective_cost_without)} of the "
        f"{round(total.effective_cost_without):,} without it "
        f"({_pct(total.tokens_cached_total, total.tokens_sent_total)} of ARS's request tokens "
        "were cache hits).",
    ]
    if total.summary_retries:
        lines.append(
            f"  {total.summary_retries} summary calls were retries (an overflowing input "
            "halved, or a transient provider error); the engine's warnings name each."
        )
    if total.summary_errors:
        lines.append(
            f"  {total.summary_errors} summaries failed; they hold the error text "
            "and a built-in extractive fallback."
        )
    if total.warnings:
        lines.append(f"  {len(total.warnings)} warnings from the engine (run with -v to see them).")
    lines.append("More: ars replay --help (your own runs, --threshold, --plot tokens.png, --json).")
    return lines


def _files_sentence(total: RunReport, out: str) -> str:
    kinds = total.files_by_kind
    trimmed = kinds.get("trimmed_messages", 0)
    return (
        f"  {total.files_written} files written under {out}: "
        f"{kinds.get('large_tool_results', 0)} offloaded tool results, "
        f"{kinds.get('conversation_history', 0)} history archives"
        + (f", {trimmed} trimmed messages" if trimmed else "")
        + (". The text taken out of the requests is in those files." if not total.warnings else ".")
    )


_SHORT = {"approx": "approx", "tiktoken:o200k_base": "o200k", "tiktoken:cl100k_base": "cl100k"}


def format_estimates(
    rows: Sequence[dict[str, Any]], names: Sequence[str], reference: str | None
) -> str:
    """The ``ars estimate`` table: one row per transcript, one column per estimator."""
    cols = [_SHORT.get(n, n) for n in names]
    name_w = min(48, max([len("file"), *(len(r["name"]) for r in rows)]))
    head = f"{'file':<{name_w}}  {'messages':>8}  " + "  ".join(f"{c:>9}" for c in cols)
    if reference:
        head += "  " + "  ".join(
            f"{c + ' err':>10}" for n, c in zip(names, cols, strict=True) if n != reference
        )
    head += f"  {'spread':>6}"
    lines = [head, "-" * len(head)]
    for r in rows:
        name = r["name"] if len(r["name"]) <= name_w else r["name"][: name_w - 1] + "…"
        line = f"{name:<{name_w}}  {r['messages']:>8}  " + "  ".join(
            f"{r['tokens'][n]:>9,}" for n in names
        )
        if reference:
            line += "  " + "  ".join(
                f"{100 * r['error_vs_o200k'][n]:>+9.1f}%" for n in names if n != reference
            )
        line += f"  {100 * r['spread']:>5.1f}%"
        lines.append(line)
    if reference is None:
        lines.append(
            "tiktoken is not installed: only the approximate estimator ran "
            '(pip install "ars[tiktoken]").'
        )
    else:
        lines.append(
            "err: relative to tiktoken o200k_base; spread: (largest - smallest) / smallest count."
        )
    return "\n".join(lines)
