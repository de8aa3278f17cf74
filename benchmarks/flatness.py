"""D. The core's per-call overhead against history length, below the threshold.

Target: flat, the median at 5,000 messages at most 1.5x the median at 500.
Uses the timings of section A (the same calls).
"""

from __future__ import annotations

from typing import Any

from .common import Context, fmt_ms, table

KEY = "D"
NEEDS: tuple[str, ...] = ("A",)


def measure(ctx: Context) -> dict[str, Any]:
    data: dict[str, Any] = ctx.results["A"]
    return data


def render(ctx: Context, data: dict[str, Any]) -> list[str]:
    lines = ["## D. Core per-call overhead against history length", ""]
    lines.append("`Compressor.call` below the threshold (the same calls as in A).")
    lines.append("")
    core = data["per_call"]["ARS core"]
    mw = data["per_call"].get("ARS middleware")
    header = ["history", "core median (ms)", "core p95 (ms)"] + (
        ["middleware median (ms)", "middleware p95 (ms)"] if mw else []
    )
    rows = []
    for n in data["sizes"]:
        r = [f"{n:,}", fmt_ms(core[n].median_ms), fmt_ms(core[n].p95_ms)]
        if mw:
            r += [fmt_ms(mw[n].median_ms), fmt_ms(mw[n].p95_ms)]
        rows.append(r)
    lines += [*table(header, rows), ""]
    sizes = data["sizes"]
    lo, hi = (500, 5000) if 500 in sizes and 5000 in sizes else (min(sizes), max(sizes))
    ratio = core[hi].median_ms / core[lo].median_ms
    verdict = "met" if ratio <= 1.5 else "NOT met"
    lines.append(
        f"Flatness: median at {hi:,} / median at {lo:,} = **{ratio:.2f}x** (target <= "
        f"1.5x{'' if (lo, hi) == (500, 5000) else ', sizes differ from the target'}): "
        f"**{verdict}**."
    )
    if mw:
        lines.append(f"Middleware: {mw[hi].median_ms / mw[lo].median_ms:.2f}x.")
    lines.append("")
    return lines


def raw(data: dict[str, Any]) -> dict[str, Any]:
    return {}  # section A's numbers
