"""``ars replay --plot``: tokens sent per call, with and without ARS (matplotlib)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..replay import CallRecord, RunReport

__all__ = ["write_plot"]

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


def _draw(ax: Any, panel: Panel, threshold: int) -> None:
    title, calls, bounds = panel
    x = list(range(1, len(calls) + 1))
    ax.plot(x, [c.tokens_without for c in calls], color="0.6", lw=1.2, label="without ARS")
    ax.plot(x, [c.tokens_sent for c in calls], color="tab:blue", lw=1.5, label="with ARS")
    ax.axhline(threshold, color="tab:red", ls="--", lw=0.8, label="threshold")
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
    ax.set_title(title, fontsize=9)
    ax.set_ylabel("tokens sent")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")


def write_plot(
    reports: Sequence[RunReport], path: Path, *, threshold: int, max_panels: int = 6
) -> None:
    """Tokens sent per call, with and without ARS, L1/L2 rounds marked (matplotlib, Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = _panels(reports, max_panels)
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 2.8 * len(panels) + 0.6), squeeze=False)
    for ax, panel in zip(axes[:, 0], panels, strict=True):
        _draw(ax, panel, threshold)
    axes[-1, 0].set_xlabel("model call")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
