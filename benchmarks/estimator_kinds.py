"""H. Estimator speed and error per content kind, and the approximate estimator's fit.

The approximate estimator against tiktoken ``o200k_base`` on the kinds of text an
agent sends: its messages, tool outputs, JSON, Python, Chinese prose, hex hashes,
base64 and punctuation rules, with the speed of both (CPU time: the machine may be
shared). Then the held-out report of ``benchmarks/fit_approx.py``: the weights are
fitted on every other run and reported on the others.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ars_core import ApproxEstimator, TiktokenEstimator

from . import fit_approx
from .common import Context, table, target

KEY = "H"
NEEDS: tuple[str, ...] = ()
#: the issue's targets for the approximate estimator
SPEED_TARGET_MB_S = 100
RUN_MEAN_TARGET, RUN_WORST_TARGET, MESSAGE_TARGET = 0.03, 0.10, 0.05
KIND_TARGET = 0.10
#: 1,000 ``=`` are 16 o200k tokens; the approximate count may be off by this many
RULE_SLACK = 2


def _kinds(ctx: Context) -> dict[str, list[str]]:
    """The texts of each kind, from the held-out half only (what the fit never saw)."""
    half = fit_approx.halves([Path(r.source).name for r in ctx.runs])
    held_out = [r for r in ctx.runs if half[Path(r.source).name] == 1] or ctx.runs
    texts = {r.name: [[m.text] for m in r.messages] for r in ctx.runs}
    out: dict[str, list[str]] = {
        "agent messages": [m.text for r in held_out for m in r.messages if m.role != "tool"],
        "tool outputs": [m.text for r in held_out for m in r.messages if m.role == "tool"],
    }
    out.update(fit_approx.kinds(1, texts))  # the held-out half of each extra kind
    return {k: [t for t in v if t] for k, v in out.items()}


def _cpu_seconds(texts: Sequence[str], count: Any) -> float:
    """CPU seconds to count every text one at a time, best of 5 (a shared machine
    only ever adds time)."""
    best = float("inf")
    for _ in range(5):
        t0 = time.process_time()
        for t in texts:
            count(t)
        best = min(best, time.process_time() - t0)
    return max(best, 1e-9)


def _row(kind: str, texts: Sequence[str], approx: Any, exact: Any) -> dict[str, Any]:
    truth = [exact.count_text(t) for t in texts]
    guess = [approx.count_text(t) for t in texts]
    big = [(g - t) / t for g, t in zip(guess, truth, strict=True) if t >= 20]
    nbytes = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
    approx_s, exact_s = (
        _cpu_seconds(texts, approx.count_text),
        _cpu_seconds(texts, exact.count_text),
    )
    return {
        "kind": kind,
        "n": len(texts),
        "mb": nbytes / 1e6,
        "total_error": sum(guess) / max(1, sum(truth)) - 1,
        "mean_abs": sum(abs(e) for e in big) / len(big) if big else 0.0,
        "approx_mb_s": nbytes / approx_s / 1e6,
        "o200k_mb_s": nbytes / exact_s / 1e6,
        "approx_s": approx_s,
    }


def measure(ctx: Context) -> dict[str, Any]:
    approx, exact = ApproxEstimator(), TiktokenEstimator("o200k_base")
    kinds = _kinds(ctx)
    rows = []
    for kind, texts in kinds.items():
        rows.append(_row(kind, texts, approx, exact))
        ctx.log(f"  {kind}: approx {rows[-1]['approx_mb_s']:.0f} MB/s")
    # every text above counted one at a time: the throughput the engine sees
    speed = sum(r["mb"] for r in rows) / sum(r["approx_s"] for r in rows)
    everything = "\n".join(t for texts in kinds.values() for t in texts)
    rows.append(_row("all of the above, as one text", [everything], approx, exact))
    rule = "=" * 1000
    corpus = _fit_corpus(ctx)
    ctx.log(f"  fitting the approximate estimator's weights on {corpus}")
    coef, fit_lines, fit = fit_approx.fit_and_report(corpus)
    shipped = [round(float(c), 4) for c in coef] == list(ApproxEstimator.WEIGHTS)
    return {
        "rows": rows,
        "fit": fit_lines,
        "measures": fit,
        "shipped": shipped,
        "speed": speed,
        "rule": (approx.count_text(rule), exact.count_text(rule)),
        "corpus": str(corpus),
    }


def _fit_corpus(ctx: Context) -> Path:
    """Where the fit is reproduced: the runs the shipped weights were fitted on when they are
    here (``fit_approx.DEFAULT_RUNS``), else the runs this report measures (the samples shipped
    in ``ars_core/data`` on a bare clone), so the section runs anywhere."""
    if fit_approx.DEFAULT_RUNS.is_dir():
        return fit_approx.DEFAULT_RUNS
    if ctx.runs_dir is not None:
        return ctx.runs_dir
    return Path(ctx.runs[0].source).parent


def _targets(data: dict[str, Any]) -> list[str]:
    """The issue's target lines for the approximate estimator."""
    m, speed = data["measures"], data["speed"]
    rule_approx, rule_exact = data["rule"]
    kinds = {
        k: m[k] for k in ("chinese", "json", "python", "hex", "base64", "punct_runs") if k in m
    }
    checks = [
        (
            f"at least {SPEED_TARGET_MB_S} MB/s of text, every text above counted one at a "
            f"time ({speed:.0f} MB/s of CPU time)",
            speed >= SPEED_TARGET_MB_S,
        ),
        (
            f"held-out mean abs error per run <= {RUN_MEAN_TARGET:.0%} ({m['run_mean']:.2%}), "
            f"worst run <= {RUN_WORST_TARGET:.0%} ({m['run_worst']:.2%}), messages of >= 20 "
            f"tokens <= {MESSAGE_TARGET:.0%} mean ({m['message_mean']:.2%})",
            m["run_mean"] <= RUN_MEAN_TARGET
            and m["run_worst"] <= RUN_WORST_TARGET
            and m["message_mean"] <= MESSAGE_TARGET,
        ),
        (
            f"1,000 `=` counted {rule_approx} (o200k: {rule_exact}, within {RULE_SLACK})",
            abs(rule_approx - rule_exact) <= RULE_SLACK,
        ),
        (
            "Chinese, JSON, Python, hex hashes, base64 and punctuation runs within "
            f"±{KIND_TARGET:.0%} (" + ", ".join(f"{k} {v:+.1%}" for k, v in kinds.items()) + ")",
            all(abs(v) <= KIND_TARGET for v in kinds.values()),
        ),
    ]
    return [target(text, ok) for text, ok in checks]


def render(ctx: Context, data: dict[str, Any]) -> list[str]:
    lines = ["## H. Estimator speed and error per content kind", ""]
    lines.append(
        "The approximate estimator (the default without tiktoken) against tiktoken "
        "`o200k_base` (the default with it). Error: (approx - o200k) / o200k over the whole "
        "sample, and the mean absolute error of its texts of >= 20 tokens. Speed: "
        "`count_text` in MB of UTF-8 per second of CPU time, best of 5 (many short texts "
        "pay a per-call cost; the last row is the throughput on one long text). The runs' "
        "messages and the extra kinds are the held-out half, which the fit never saw."
    )
    lines.append("")
    lines += table(
        [
            "kind",
            "texts",
            "MB",
            "approx error",
            "mean abs (>= 20 tok)",
            "approx MB/s",
            "o200k MB/s",
        ],
        [
            [
                r["kind"],
                f"{r['n']:,}",
                f"{r['mb']:.2f}",
                f"{100 * r['total_error']:+.1f}%",
                f"{100 * r['mean_abs']:.1f}%",
                f"{r['approx_mb_s']:.0f}",
                f"{r['o200k_mb_s']:.0f}",
            ]
            for r in data["rows"]
        ],
        "lrrrrrr",
    )
    lines += [
        "",
        "The approximate estimator's fit (`python benchmarks/fit_approx.py`): weights fitted on "
        "every other run (by name) plus one half of each extra kind, measured on the other "
        "runs, counted per message as the estimator counts them (text, tool-call ids, names "
        "and arguments, plus the per-message overhead a provider adds, so a message's error is "
        "smaller than its bare text's in the table above). The worst undercount of a large "
        "request is the estimator's safety margin (`ApproxEstimator.error_margin`). "
        f"Runs fitted and measured: `{data['corpus']}`.",
        "",
        *data["fit"],
        "",
        "The shipped weights (`ApproxEstimator.WEIGHTS`) "
        + ("are this fit's, to 4 decimals." if data["shipped"] else "are NOT this fit's."),
        "",
    ]
    for line in _targets(data):
        lines += [line, ""]
    return lines


def raw(data: dict[str, Any]) -> dict[str, Any]:
    return {"estimator_kinds": data["rows"]}
