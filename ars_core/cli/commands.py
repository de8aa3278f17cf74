"""The ``ars replay`` and ``ars estimate`` commands."""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from .. import __version__
from ..config import SummaryConfig
from ..errors import ArsError
from ..estimate import Estimator
from ..files import FsspecBackend
from ..plugins import plugin_report
from ..replay import (
    DEMO_THRESHOLD,
    SAMPLE_DIR,
    Run,
    RunReport,
    load_runs,
    replay_messages,
    total_report,
)
from ..summarize import render_history
from .common import CliError, display_path, one_line
from .components import installed_estimators, make_estimator, make_summarizer, summarizer_name
from .plot import write_plot
from .report import format_estimates, format_report

__all__ = ["cmd_estimate", "cmd_plugins", "cmd_replay"]

log = logging.getLogger("ars")


# ------------------------------------------------------------------ replay


def _config(args: argparse.Namespace, threshold: float) -> SummaryConfig:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config = SummaryConfig(
            summary_threshold=threshold,
            summary_keep_messages=args.keep,
            summary_tool_result_token_limit=args.tool_limit,
            summary_l2_trigger_ratio=args.ratio,
        )
    for w in caught:
        print(f"ars: warning: {one_line(str(w.message))}", file=sys.stderr)
    return config


def _progress(items: Sequence[Run]) -> Iterator[Run]:
    try:
        tqdm: Any = importlib.import_module("tqdm").tqdm
    except ImportError:
        yield from items
        return
    # disable=None: no bar when stderr is not a terminal
    yield from tqdm(items, desc="replaying", unit="run", file=sys.stderr, disable=None, leave=False)


def _check_plot(plot: Path | None) -> None:
    if plot is None:
        return
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise CliError('--plot needs matplotlib: pip install "ars[cli]"') from exc
    if plot.parent and not plot.parent.is_dir():
        raise CliError(f"--plot {plot}: folder {plot.parent} does not exist")


def _out_dir(raw: str) -> Path:
    out = Path(raw).expanduser().resolve()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"--out {raw}: cannot create the folder: {exc.strerror or exc}") from exc
    return out


def _replay_all(
    runs: Sequence[Run], config: SummaryConfig, estimator: Estimator, summarizer: Any, out: Path
) -> list[RunReport]:
    reports: list[RunReport] = []
    for run in _progress(runs):
        backend = FsspecBackend((out / run.name).as_uri())
        try:
            reports.append(
                replay_messages(
                    run.messages,
                    config=config,
                    estimator=estimator,
                    summarizer=summarizer,
                    backend=backend,
                    name=run.name,
                    source=run.source,
                )
            )
        except ArsError:
            raise
        except Exception as exc:  # a summarizer or backend failing in a way the engine re-raised
            raise CliError(
                f"{run.source}: replay failed: {type(exc).__name__}: {one_line(exc)}"
            ) from exc
    return reports


def _json_doc(
    args: argparse.Namespace,
    config: SummaryConfig,
    reports: Sequence[RunReport],
    *,
    estimator: Estimator,
    summarizer: Any,
    out: Path,
) -> dict[str, Any]:
    return {
        "ars_version": __version__,
        "command": "replay",
        "samples": not args.runs,
        "config": {
            "summary_threshold": config.summary_threshold,
            "summary_keep_messages": config.summary_keep_messages,
            "summary_tool_result_token_limit": config.summary_tool_result_token_limit,
            "summary_l2_trigger_ratio": config.summary_l2_trigger_ratio,
            "threshold_tokens": config.threshold_tokens,
            "l2_threshold_tokens": config.l2_threshold_tokens,
        },
        "estimator": estimator.name,
        "summarizer": summarizer_name(summarizer),
        "out": str(out),
        "plot": args.plot,
        "runs": [r.to_dict() for r in reports],
        "total": total_report(reports).to_dict(calls=False),
    }


def cmd_replay(args: argparse.Namespace, stdout: IO[str]) -> int:
    """``ars replay``: replay runs through ARS, print the report, draw the plot."""
    samples = not args.runs
    default_k = DEMO_THRESHOLD if samples else SummaryConfig().summary_threshold
    config = _config(args, args.threshold if args.threshold is not None else default_k)
    estimator = make_estimator(args.estimator)
    summarizer = make_summarizer(args.summarizer)
    plot = Path(args.plot) if args.plot else None
    _check_plot(plot)
    if samples and not SAMPLE_DIR.is_dir():
        raise CliError(f"the shipped sample runs are missing ({SAMPLE_DIR}); pass RUN files")
    runs = load_runs([SAMPLE_DIR] if samples else args.runs)
    out = _out_dir(args.out)
    if args.verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("ars: %(levelname)s: %(message)s"))
        log.addHandler(handler)
    log.propagate = False  # the engine's warnings are collected per run, not dumped on stderr
    reports = _replay_all(runs, config, estimator, summarizer, out)
    if args.json:
        doc = _json_doc(args, config, reports, estimator=estimator, summarizer=summarizer, out=out)
        json.dump(doc, stdout, indent=2, ensure_ascii=False)
        stdout.write("\n")
    else:
        summ = summarizer_name(summarizer)
        if summ == "extractive":
            summ = "extractive (built in: no model, no API key)"
        text = format_report(
            reports,
            total_report(reports),
            config=config,
            estimator=estimator.name,
            summarizer=summ,
            out=display_path(out),
            samples=samples,
            demo_threshold=samples and args.threshold is None,
        )
        stdout.write(text + "\n")
    if plot is not None:
        try:
            write_plot(reports, plot, threshold=config.threshold_tokens)
        except OSError as exc:
            raise CliError(f"--plot {plot}: cannot write: {exc.strerror or exc}") from exc
        if not args.json:
            stdout.write(f"Plot written to {plot}\n")
    return 0


# ------------------------------------------------------------------ estimate


def _estimate_row(
    run: Run, estimators: Sequence[Estimator], reference: str | None
) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for est in estimators:
        counts[est.name] = est.count(run.messages)
    row: dict[str, Any] = {
        "file": run.source,
        "name": run.name,
        "messages": len(run.messages),
        "characters": len(render_history(run.messages)),
        "tokens": counts,
    }
    if reference is not None:
        ref = counts[reference]
        row["error_vs_o200k"] = {
            n: round((c - ref) / ref, 4) if ref else 0.0
            for n, c in counts.items()
            if n != reference
        }
    row["spread"] = round(
        (max(counts.values()) - min(counts.values())) / max(1, min(counts.values())), 4
    )
    return row


def cmd_estimate(args: argparse.Namespace, stdout: IO[str]) -> int:
    """``ars estimate``: token counts of transcripts per installed estimator."""
    runs = load_runs(args.files)
    estimators = installed_estimators()
    names = [e.name for e in estimators]
    reference = "tiktoken:o200k_base" if "tiktoken:o200k_base" in names else None
    rows = [_estimate_row(run, estimators, reference) for run in runs]
    if args.json:
        doc = {
            "ars_version": __version__,
            "command": "estimate",
            "estimators": names,
            "reference": reference,
            "files": rows,
        }
        json.dump(doc, stdout, indent=2, ensure_ascii=False)
        stdout.write("\n")
    else:
        stdout.write(format_estimates(rows, names, reference) + "\n")
    return 0


# ------------------------------------------------------------------ plugins


def cmd_plugins(args: argparse.Namespace, stdout: IO[str]) -> int:
    """``ars plugins``: the registered plugins as JSON."""
    json.dump(plugin_report(), stdout, indent=2, ensure_ascii=False)
    stdout.write("\n")
    return 0
