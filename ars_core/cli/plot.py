"""``ars replay --plot``: the tokens of every request before and after ARS (matplotlib).

Each panel draws the request as the history stands ("before ARS") and as ARS
sent it ("after ARS"), the entry threshold T (labelled with its value) and the
L2 trigger (T x ratio), L1 and L2 rounds marked; token axes use thousands
separators.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..replay import CallRecord, RunReport

__all__ = ["build_figure", "write_plot"]

Panel = tuple[str, list[CallRecord], list[int]]  # title, calls, run boundaries


def _panels(reports: Sequence[RunReport], max_panels: int) -> list[Panel]:
    if len(reports) <= max_panels:
        return [(r.name, r.calls, []) for r in reports]
    calls: list[CallRecord] = []  # one aggregate panel: all runs one after the other
    bounds: list[int] = []
    for r in reports:
        calls.extend(r.calls)
        bounds.append(len(calls))
    return [(f"{len(reports)} runs, one after the other", calls, bounds[:-1])]


def _thousands(value: float, _position: int) -> str:
    return f"{value:,.0f}"


def _limits(ax: Any, threshold: int, l2_threshold: int) -> None:
    """The threshold and the L2 trigger as labelled horizontal lines."""
    ax.axhline(threshold, color="tab:red", ls="--", lw=1.0, label=f"threshold T = {threshold:,}")
    ax.axhline(
        l2_threshold, color="tab:purple", ls=":", lw=1.0, label=f"L2 trigger = {l2_threshold:,}"
    )
    ax.annotate(
        f"T = {threshold:,}",
        xy=(1.0, threshold),
        xycoords=("axes fraction", "data"),
        xytext=(-4, 3),
        textcoords="offset points",
        ha="right",
        va="bottom",
        fontsize=7,
        color="tab:red",
    )


def _draw(ax: Any, panel: Panel, threshold: int, l2_threshold: int, counted_with: str) -> None:
    from matplotlib.ticker import FuncFormatter

    title, calls, bounds = panel
    x = list(range(1, len(calls) + 1))
    ax.plot(x, [c.tokens_without for c in calls], color="0.6", lw=1.2, label="before ARS")
    ax.plot(x, [c.tokens_sent for c in calls], color="tab:blue", lw=1.5, label="after ARS (sent)")
    _limits(ax, threshold, l2_threshold)
    for level, marker, color, size, label in (
        ("L1", "^", "tab:orange", 22, "L1 round"),
        ("L2", "o", "tab:red", 26, "L2 round (summary)"),
    ):
        points = [(k, c.tokens_sent) for k, c in zip(x, calls, strict=True) if c.level == level]
        if points:
            ax.scatter(
                *zip(*points, strict=True),
                marker=marker,
                color=color,
                s=size,
                zorder=3,
                label=label,
            )
    for b in bounds:
        ax.axvline(b + 0.5, color="0.85", lw=0.8)
    ax.yaxis.set_major_formatter(FuncFormatter(_thousands))
    ax.xaxis.set_major_formatter(FuncFormatter(_thousands))
    ax.set_title(title, fontsize=9)
    ax.set_ylabel(f"request tokens ({counted_with})", fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")


def build_figure(
    reports: Sequence[RunReport],
    *,
    threshold: int,
    l2_threshold: int,
    counted_with: str = "estimated",
    max_panels: int = 6,
) -> Any:
    """The matplotlib figure (Agg backend): one panel per run, or one for all runs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = _panels(reports, max_panels)
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 2.8 * len(panels) + 0.6), squeeze=False)
    for ax, panel in zip(axes[:, 0], panels, strict=True):
        _draw(ax, panel, threshold, l2_threshold, counted_with)
    axes[-1, 0].set_xlabel("model call")
    fig.tight_layout()
    return fig


def write_plot(
    reports: Sequence[RunReport],
    path: Path,
    *,
    threshold: int,
    l2_threshold: int,
    counted_with: str = "estimated",
    max_panels: int = 6,
) -> None:
    """Draw :func:`build_figure` into ``path`` (PNG)."""
    import matplotlib.pyplot as plt

    fig = build_figure(
        reports,
        threshold=threshold,
        l2_threshold=l2_threshold,
        counted_with=counted_with,
        max_panels=max_panels,
    )
    try:
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)
