"""The ``ars replay`` and ``ars estimate`` commands."""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import attrs

from .. import __version__
from ..config import DEFAULT_THRESHOLD_K, SummaryConfig
from ..engine import CallOutcome, Compressor
from ..errors import ArsError, ConfigError
from ..estimate import Estimator
from ..files import FsspecBackend
from ..messages import Message
from ..plugins import failed_plugins, plugin_report, skipped_plugins
from ..replay import (
    CACHED_PRICE,
    DEMO_THRESHOLD,
    SAMPLE_DIR,
    Run,
    RunReport,
    load_runs,
    replay_messages,
    total_report,
)
from ..summarize import render_history
from .common import USAGE, CliError, display_path, one_line
from .components import installed_estimators, make_estimator, make_summarizer, summarizer_name
from .plot import write_plot
from .report import format_estimates, format_report

__all__ = ["cmd_estimate", "cmd_plugins", "cmd_replay"]

log = logging.getLogger("ars")


# ------------------------------------------------------------------ replay


#: the option that sets each configuration field
_OPTION_OF = {
    "summary_threshold": "--threshold",
    "summary_keep_messages": "--keep",
    "summary_tool_result_token_limit": "--tool-limit",
    "summary_l2_trigger_ratio": "--ratio",
}


def _config(args: argparse.Namespace, threshold: float) -> SummaryConfig:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            config = SummaryConfig(
                summary_threshold=threshold,
                summary_keep_messages=args.keep,
                summary_tool_result_token_limit=args.tool_limit,
                summary_l2_trigger_ratio=args.ratio,
            )
        except ConfigError as exc:  # a value out of range is a usage error, as a bad type is
            option = _OPTION_OF.get(exc.field, exc.field)
            raise CliError(f"{option}: {one_line(exc)}", USAGE) from exc
    for w in caught:
        print(f"ars: warning: {one_line(str(w.message))}", file=sys.stderr)
    return config


class _Progress:
    """A per-call progress bar on stderr (tqdm) for long replays; nothing when stderr is not
    a terminal or tqdm is not installed."""

    def __init__(self, runs: Sequence[Run]) -> None:
        calls = sum(m.role == "assistant" for run in runs for m in run.messages)
        self.bar: Any = None
        try:
            tqdm: Any = importlib.import_module("tqdm").tqdm
        except ImportError:
            return
        # disable=None: no bar when stderr is not a terminal
        self.bar = tqdm(
            total=calls, desc="replaying", unit="call", file=sys.stderr, disable=None, leave=False
        )

    def run(self, run: Run) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(run.name, refresh=False)

    def call(self, outcome: CallOutcome, system: Message | None) -> None:
        if self.bar is not None:
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _check_plot(plot: Path | None) -> None:
    if plot is None:
        return
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise CliError('--plot needs matplotlib: pip install "ars[cli]"') from exc
    from matplotlib.backend_bases import FigureCanvasBase

    formats = sorted(FigureCanvasBase.get_supported_filetypes())
    if plot.suffix.lstrip(".").lower() not in formats:  # a wrong value, found before the replay
        raise CliError(
            f"--plot {plot}: the file name must end in an image format matplotlib writes "
            f"(.{', .'.join(formats)})",
            USAGE,
        )
    if plot.parent and not plot.parent.is_dir():
        raise CliError(f"--plot {plot}: folder {plot.parent} does not exist")


def _out_dir(raw: str) -> Path:
    out = Path(raw).expanduser().resolve()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"--out {raw}: cannot create the folder: {exc.strerror or exc}") from exc
    return out


@attrs.frozen
class _Setup:
    """What every run of one ``ars replay`` is replayed with."""

    config: SummaryConfig
    estimator: Estimator  #: decides
    counter: Estimator  #: counts the report's figures
    summarizer: Any
    out: Path


def _replay_all(runs: Sequence[Run], setup: _Setup) -> list[RunReport]:
    reports: list[RunReport] = []
    progress = _Progress(runs)
    try:
        for run in runs:
            progress.run(run)
            reports.append(_replay_one(run, setup, progress))
    finally:
        progress.close()
    return reports


def _replay_one(run: Run, setup: _Setup, progress: _Progress) -> RunReport:
    try:
        return replay_messages(
            run.messages,
            config=setup.config,
            estimator=setup.estimator,
            counter=setup.counter,
            summarizer=setup.summarizer,
            backend=FsspecBackend((setup.out / run.name).as_uri()),
            name=run.name,
            source=run.source,
            on_call=progress.call,
        )
    except ArsError:
        raise
    except Exception as exc:  # a summarizer or backend failing in a way the engine re-raised
        raise CliError(
            f"{run.source}: replay failed: {type(exc).__name__}: {one_line(exc)}"
        ) from exc


def _exact_counter(estimator: Estimator) -> Estimator:
    """tiktoken o200k when it is installed (exact counts whatever estimator decides), else
    the deciding estimator."""
    if estimator.name == "tiktoken:o200k_base":
        return estimator
    try:
        return make_estimator("o200k")
    except CliError:
        return estimator


def _json_doc(
    args: argparse.Namespace, setup: _Setup, reports: Sequence[RunReport]
) -> dict[str, Any]:
    config = setup.config
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
        "estimator": setup.estimator.name,
        "counted_with": setup.counter.name,
        "cached_price": CACHED_PRICE,
        "summarizer": summarizer_name(setup.summarizer),
        "out": str(setup.out),
        "plot": args.plot,
        "runs": [r.to_dict() for r in reports],
        "total": total_report(reports).to_dict(calls=False),
    }


def _setup(args: argparse.Namespace) -> _Setup:
    samples = not args.runs
    default_k = DEMO_THRESHOLD if samples else DEFAULT_THRESHOLD_K
    config = _config(args, args.threshold if args.threshold is not None else default_k)
    estimator = (
        make_estimator(args.estimator) if args.estimator is not None else Compressor().estimator
    )
    summarizer = make_summarizer(args.summarizer)
    _check_plot(Path(args.plot) if args.plot else None)
    if not args.out.strip():  # Path("") is the working directory: never taken by accident
        raise CliError("--out: name a folder (an empty name is not one)", USAGE)
    if samples and not SAMPLE_DIR.is_dir():
        raise CliError(f"the shipped sample runs are missing ({SAMPLE_DIR}); pass RUN files")
    return _Setup(config, estimator, _exact_counter(estimator), summarizer, Path(args.out))


def _print_report(
    args: argparse.Namespace, setup: _Setup, reports: Sequence[RunReport], stdout: IO[str]
) -> None:
    if args.json:
        json.dump(_json_doc(args, setup, reports), stdout, indent=2, ensure_ascii=False)
        stdout.write("\n")
        return
    summ = summarizer_name(setup.summarizer)
    if summ == "extractive":
        summ = "extractive (built in: no model, no API key)"
    text = format_report(
        reports,
        total_report(reports),
        config=setup.config,
        estimator=setup.estimator.name,
        counted_with=setup.counter.name,
        summarizer=summ,
        out=display_path(setup.out),
        samples=not args.runs,
        demo_threshold=not args.runs and args.threshold is None,
    )
    stdout.write(text + "\n")


def cmd_replay(args: argparse.Namespace, stdout: IO[str]) -> int:
    """``ars replay``: replay runs through ARS, print the report, draw the plot. Exits 1
    when summaries failed, unless ``--allow-summary-errors``."""
    setup = _setup(args)
    runs = load_runs([SAMPLE_DIR] if not args.runs else args.runs)
    setup = attrs.evolve(setup, out=_out_dir(args.out))
    _announce(runs, setup.out, samples=not args.runs)
    if args.verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("ars: %(levelname)s: %(message)s"))
        log.addHandler(handler)
    log.propagate = False  # the engine's warnings are collected per run, not dumped on stderr
    reports = _replay_all(runs, setup)
    _print_report(args, setup, reports, stdout)
    if args.plot:
        _write_plot(args, setup, reports, stdout)
    total = total_report(reports)
    if total.summary_errors and not args.allow_summary_errors:
        print(
            f"ars: error: {total.summary_errors} of {total.l2_rounds} summaries failed "
            "(they hold the error text; see the report); pass "
            "--allow-summary-errors to accept that",
            file=sys.stderr,
        )
        return 1
    return 0


def _announce(runs: Sequence[Run], out: Path, *, samples: bool) -> None:
    """Say on stderr, before the first call, what is replayed and where the files go."""
    count = f"{len(runs)} run" + ("" if len(runs) == 1 else "s")
    what = f"the {count} shipped with ars as samples" if samples else count
    print(
        f"ars: replaying {what}; ARS writes its files (offloaded tool results, history "
        f"archives) under {display_path(out)}, one folder per run (--out DIR to change)",
        file=sys.stderr,
        flush=True,
    )


def _write_plot(
    args: argparse.Namespace, setup: _Setup, reports: Sequence[RunReport], stdout: IO[str]
) -> None:
    plot = Path(args.plot)
    try:
        write_plot(
            reports,
            plot,
            threshold=setup.config.threshold_tokens,
            l2_threshold=setup.config.l2_threshold_tokens,
            counted_with=setup.counter.name,
        )
    except OSError as exc:
        raise CliError(f"--plot {plot}: cannot write: {exc.strerror or exc}") from exc
    if not args.json:
        stdout.write(f"Plot written to {plot}\n")


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
    runs = load_runs(args.files or [SAMPLE_DIR])
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
    """``ars plugins``: the plugins that loaded, as JSON; one line on stderr for each
    plugin left out because its import failed, saying why."""
    json.dump(plugin_report(), stdout, indent=2, ensure_ascii=False)
    stdout.write("\n")
    for name, reason in sorted(skipped_plugins().items()):
        print(f"ars: plugin {name!r} skipped: {reason}", file=sys.stderr)
    for name, reason in sorted(failed_plugins().items()):
        print(f"ars: plugin {name!r} failed: {reason}", file=sys.stderr)
    return 0
