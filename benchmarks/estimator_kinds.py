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
from typing import Any

from ars_core import ApproxEstimator, TiktokenEstimator

from . import fit_approx
from .common import Context, table

KEY = "H"
NEEDS: tuple[str, ...] = ()


def _kinds(ctx: Context) -> dict[str, list[str]]:
    texts = {r.name: [[m.text] for m in r.messages] for r in ctx.runs}
    out: dict[str, list[str]] = {
        "agent messages": [m.text for r in ctx.runs for m in r.messages if m.role != "tool"],
        "tool outputs": [m.text for r in ctx.runs for m in r.messages if m.role == "tool"],
    }
    out.update(fit_approx.kinds(1, texts))  # the held-out half of each extra kind
    return {k: [t for t in v if t] for k, v in out.items()}


def _cpu_mb_s(texts: Sequence[str], count: Any) -> float:
    nbytes = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        for t in texts:
            count(t)
        best = min(best, time.process_time() - t0)
    return nbytes / max(best, 1e-9) / 1e6


def measure(ctx: Context) -> dict[str, Any]:
    approx, exact = ApproxEstimator(), TiktokenEstimator("o200k_base")
    rows = []
    for kind, texts in _kinds(ctx).items():
        truth = [exact.count_text(t) for t in texts]
        guess = [approx.count_text(t) for t in texts]
        big = [(g - t) / t for g, t in zip(guess, truth, strict=True) if t >= 20]
        rows.append(
            {
                "kind": kind,
                "n": len(texts),
                "mb": sum(len(t.encode("utf-8", "surrogatepass")) for t in texts) / 1e6,
                "total_error": sum(guess) / max(1, sum(truth)) - 1,
                "mean_abs": sum(abs(e) for e in big) / len(big) if big else 0.0,
                "approx_mb_s": _cpu_mb_s(texts, approx.count_text),
                "o200k_mb_s": _cpu_mb_s(texts, exact.count_text),
            }
        )
        ctx.log(f"  {kind}: approx {rows[-1]['approx_mb_s']:.0f} MB/s")
    everything = ["\n".join(t for texts in _kinds(ctx).values() for t in texts)]
    rows.append(
        {
            "kind": "all of the above, as one text",
            "n": 1,
            "mb": len(everything[0].encode("utf-8", "surrogatepass")) / 1e6,
            "total_error": approx.count_text(everything[0]) / exact.count_text(everything[0]) - 1,
            "mean_abs": 0.0,
            "approx_mb_s": _cpu_mb_s(everything, approx.count_text),
            "o200k_mb_s": _cpu_mb_s(everything, exact.count_text),
        }
    )
    _, fit_lines = fit_approx.fit_and_report()
    return {"rows": rows, "fit": fit_lines}


def render(ctx: Context, data: dict[str, Any]) -> list[str]:
    lines = ["## H. Estimator speed and error per content kind", ""]
    lines.append(
        "The approximate estimator (the default without tiktoken) against tiktoken "
        "`o200k_base` (the default with it). Error: (approx - o200k) / o200k over the whole "
        "sample, and the mean absolute error of its texts of >= 20 tokens. Speed: "
        "`count_text` in MB of UTF-8 per second of CPU time, best of 3 (many short texts "
        "pay a per-call cost; the last row is the throughput on one long text)."
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
        "and arguments). The worst undercount of a large request is the estimator's safety "
        "margin (`ApproxEstimator.error_margin`).",
        "",
        *data["fit"],
        "",
    ]
    return lines


def raw(data: dict[str, Any]) -> dict[str, Any]:
    return {"estimator_kinds": data["rows"]}
