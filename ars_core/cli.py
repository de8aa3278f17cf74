"""The ``ars`` command: see what ARS would do to recorded agent runs.

::

    ars replay [RUN ...] [--threshold K] [--keep N] [--tool-limit T] [--ratio R]
               [--estimator NAME] [--summarizer NAME] [--out DIR] [--plot FILE.png] [--json]
    ars estimate FILE ... [--json]

``ars replay`` reads recorded runs (OpenAI chat-completions JSON / JSONL, gzip
too; a folder means every run in it) and replays each one call by call: the
request at each assistant turn is the history before it, sent through the real
:class:`~ars_core.engine.Compressor` with real files written under ``--out``,
the recorded reply standing in for the model. The state update of every call
(a new summary event, tail messages trimmed under overflow) is applied to the
replayed state, exactly as an adapter persists it. With no ``RUN`` it replays
the sample runs shipped in ``ars_core/data/`` with the built-in extractive
summarizer: no model, no API key, no download.

``ars estimate`` counts the tokens of transcripts with every available
estimator and shows how far they disagree.

Bad input (an unreadable file, something that is not a chat transcript, an
orphan tool message, an invalid option value) prints one line on stderr and
exits non-zero; set ``ARS_DEBUG=1`` to get the traceback instead.

The replay machinery is public (:func:`replay_messages`, :func:`load_runs`,
:class:`RunReport`) so the benchmarks and tests use the same code path.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import os
import sys
import textwrap
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, NoReturn

import attrs

from . import __version__
from .config import SummaryConfig
from .engine import CallOutcome, Compressor
from .errors import ArsError, PluginError
from .estimate import ApproxEstimator, Estimator, message_tokens
from .files import FileBackend, FsspecBackend
from .l1 import LARGE_TOOL_RESULTS_DIR
from .l2 import HISTORY_DIR, TRIMMED_DIR
from .messages import Message, read_messages
from .summarize import ExtractiveSummarizer, SummaryResult, Usage, render_history, render_prompt

__all__ = [
    "DEMO_THRESHOLD",
    "SAMPLE_DIR",
    "CallRecord",
    "CliError",
    "Run",
    "RunReport",
    "find_runs",
    "load_runs",
    "main",
    "make_estimator",
    "make_summarizer",
    "replay_messages",
]

#: the sample runs shipped with the package (``ars replay`` with no RUN)
SAMPLE_DIR = Path(__file__).resolve().parent / "data"
#: the entry threshold (K tokens) used when replaying the shipped samples without
#: ``--threshold``: they are 20-85K tokens long, so the production default (100K)
#: would never trigger on them
DEMO_THRESHOLD = 16
#: file name endings read as recorded runs when a folder is given
RUN_SUFFIXES: tuple[str, ...] = (".jsonl.gz", ".json.gz", ".jsonl", ".json")
#: other spellings ``--estimator`` accepts, mapped to registered estimator names
ESTIMATOR_ALIASES: dict[str, str] = {
    "o200k_base": "o200k",
    "tiktoken:o200k_base": "o200k",
    "cl100k_base": "cl100k",
    "tiktoken:cl100k_base": "cl100k",
}

log = logging.getLogger("ars")


class CliError(Exception):
    """A problem the user can fix; printed as one line, exit status ``code``."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


# ------------------------------------------------------------------ estimators, summarizers


def make_estimator(name: str) -> Estimator:
    """The estimator registered as ``name`` (built-ins: ``approx``, ``tiktoken``/``o200k``,
    ``cl100k``; plugins add more)."""
    from .plugins import get_estimator

    key = name.strip()
    key = ESTIMATOR_ALIASES.get(key.lower(), key)
    try:
        estimator: Estimator = get_estimator(key)
    except PluginError as exc:
        raise CliError(f"--estimator: {_one_line(exc)}", 2) from exc
    return estimator


class ChatModelSummarizer:
    """A summarizer over any LangChain chat model (``--summarizer provider:model``).

    Renders ``summary_prompt`` with the history, calls the model tagged
    ``nostream`` (R27) and reports the provider's usage when it gives one.
    """

    def __init__(self, model: Any, name: str) -> None:
        self.model = model
        self.name = name

    def summarize(self, messages: Sequence[Message], prompt: str) -> SummaryResult:
        response = self.model.invoke(render_prompt(prompt, messages), config={"tags": ["nostream"]})
        text = getattr(response, "text", None)
        if callable(text) and not isinstance(text, str):  # older langchain-core: a method
            text = text()
        if not isinstance(text, str):
            text = str(getattr(response, "content", response))
        meta = getattr(response, "usage_metadata", None) or {}
        usage = None
        if meta:
            usage = Usage(
                input_tokens=int(meta.get("input_tokens", 0)),
                output_tokens=int(meta.get("output_tokens", 0)),
            )
        return SummaryResult(text=text.strip(), usage=usage, model=self.name)


def make_summarizer(name: str) -> Any:
    """A registered summarizer (``extractive``, the built-in default, or a plugin's) or a
    LangChain chat-model string ``provider:model`` (needs the ``langchain`` extra)."""
    from .plugins import available, get_summarizer

    key = name.strip()
    if key.lower() in ("default", "builtin", "built-in"):
        key = "extractive"
    if key in available("summarizer"):
        try:
            return get_summarizer(key)
        except PluginError as exc:
            raise CliError(f"--summarizer: {_one_line(exc)}") from exc
    if ":" not in key:
        names = ", ".join(sorted(available("summarizer")))
        raise CliError(
            f"--summarizer: unknown summarizer {name!r} (registered: {names}; or a LangChain "
            "chat-model string such as 'openai:gpt-4o-mini')",
            2,
        )
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as exc:
        raise CliError(
            f'--summarizer {name!r} needs LangChain: pip install "ars[langchain]"'
        ) from exc
    try:
        model = init_chat_model(key)
    except Exception as exc:  # provider packages raise anything: ImportError, ValueError...
        raise CliError(f"--summarizer: cannot load chat model {name!r}: {_one_line(exc)}") from exc
    try:  # the adapter's summarizer when it is installed (same contract)
        from ars_langchain.summarizer import ChatModelSummarizer as AdapterSummarizer
    except ImportError:
        return ChatModelSummarizer(model, key)
    summarizer = AdapterSummarizer(model)
    summarizer.name = key  # type: ignore[attr-defined]
    return summarizer


def _summarizer_name(summarizer: Any) -> str:
    return str(getattr(summarizer, "name", None) or type(summarizer).__name__)


# ------------------------------------------------------------------ reading runs


@attrs.frozen
class Run:
    """A recorded run: a display name, where it came from, and its messages."""

    name: str
    source: str
    messages: tuple[Message, ...]


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (*RUN_SUFFIXES, ".gz"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def find_runs(paths: Sequence[str | Path]) -> list[Path]:
    """Expand ``paths``: a folder means every run file in it (sorted)."""
    found: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            inside = sorted(c for c in p.iterdir() if c.is_file() and c.name.endswith(RUN_SUFFIXES))
            if not inside:
                raise CliError(
                    f"{p}: no recorded runs in this folder (expected *.jsonl, *.json, "
                    "optionally .gz)"
                )
            found.extend(inside)
        elif p.exists():
            found.append(p)
        else:
            raise CliError(f"{p}: no such file or folder")
    return found


def load_runs(paths: Sequence[str | Path]) -> list[Run]:
    """Read every run named by ``paths`` (see :func:`find_runs`); names are made unique."""
    runs: list[Run] = []
    seen: dict[str, int] = {}
    for path in find_runs(paths):
        messages = read_messages(path)  # MessageFormatError for anything that is not a transcript
        name = _stem(path)
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name = f"{name}-{seen[name]}"
        runs.append(Run(name=name, source=str(path), messages=tuple(messages)))
    return runs


# ------------------------------------------------------------------ replay


@attrs.frozen
class CallRecord:
    """One replayed model call."""

    call: int  #: 1-based model call number
    message_index: int  #: index in the run of the recorded reply this call produced
    level: str | None  #: ``None`` (below threshold), ``"L1"`` or ``"L2"``
    forced: bool
    tokens_sent: int  #: estimated tokens of the request ARS sent
    tokens_without: int  #: estimated tokens of the same request without ARS
    cutoff: int | None = None  #: the new cumulative cutoff after an L2 round


@attrs.define
class RunReport:
    """What happened when one run was replayed through ARS."""

    name: str
    source: str
    messages: int
    model_calls: int = 0
    l1_rounds: int = 0  #: compression rounds where L1 alone was enough
    l2_rounds: int = 0  #: compression rounds that summarized history (L1 ran first)
    tokens_sent_total: int = 0
    tokens_sent_peak: int = 0
    tokens_without_total: int = 0
    tokens_without_peak: int = 0
    over_threshold: int = 0  #: requests sent above the entry threshold
    over_threshold_without: int = 0  #: requests above it without ARS
    files_written: int = 0
    files_by_kind: dict[str, int] = attrs.field(factory=dict)
    summary_calls: int = 0
    summary_input_tokens: int = 0
    summary_output_tokens: int = 0
    summary_errors: int = 0
    warnings: list[str] = attrs.field(factory=list)
    seconds: float = 0.0
    calls: list[CallRecord] = attrs.field(factory=list)

    @property
    def sent_ratio(self) -> float:
        return (
            self.tokens_sent_total / self.tokens_without_total if self.tokens_without_total else 1.0
        )

    def to_dict(self, *, calls: bool = True) -> dict[str, Any]:
        out = attrs.asdict(self, recurse=True)
        out["sent_ratio"] = round(self.sent_ratio, 4)
        out["summary_tokens"] = self.summary_input_tokens + self.summary_output_tokens
        out["seconds"] = round(self.seconds, 3)
        if not calls:
            del out["calls"]
        return out


_SUM_FIELDS = (
    "messages",
    "model_calls",
    "l1_rounds",
    "l2_rounds",
    "tokens_sent_total",
    "tokens_without_total",
    "over_threshold",
    "over_threshold_without",
    "files_written",
    "summary_calls",
    "summary_input_tokens",
    "summary_output_tokens",
    "summary_errors",
    "seconds",
)


def total_report(reports: Sequence[RunReport]) -> RunReport:
    """The runs added up (peaks are the maximum); ``calls`` stays empty."""
    total = RunReport(name="total", source="", messages=0)
    for r in reports:
        for f in _SUM_FIELDS:
            setattr(total, f, getattr(total, f) + getattr(r, f))
        total.tokens_sent_peak = max(total.tokens_sent_peak, r.tokens_sent_peak)
        total.tokens_without_peak = max(total.tokens_without_peak, r.tokens_without_peak)
        for kind, n in r.files_by_kind.items():
            total.files_by_kind[kind] = total.files_by_kind.get(kind, 0) + n
        total.warnings.extend(f"{r.name}: {w}" for w in r.warnings)
    return total


class _RecordingBackend:
    """Delegates to a real backend and remembers every path written."""

    def __init__(self, inner: FileBackend) -> None:
        self.inner = inner
        self.written: dict[str, None] = {}

    def write_text(self, path: str, text: str) -> str:
        written = self.inner.write_text(path, text)
        self.written[written] = None
        return written

    def read_text(self, path: str) -> str:
        return self.inner.read_text(path)

    def exists(self, path: str) -> bool:
        return self.inner.exists(path)


class _MeteredSummarizer:
    """Delegates to a summarizer and adds up its calls and token usage.

    When the summarizer reports no usage, the rendered prompt and the summary
    are counted with ``estimator``.
    """

    def __init__(self, inner: Any, estimator: Estimator) -> None:
        self.inner = inner
        self.estimator = estimator
        self.calls = 0
        self.errors = 0
        self.input_tokens = 0
        self.output_tokens = 0

    def summarize(self, messages: Sequence[Message], prompt: str) -> SummaryResult:
        self.calls += 1
        try:
            result = self.inner.summarize(messages, prompt)
        except Exception:
            self.errors += 1
            raise
        if isinstance(result, str):
            result = SummaryResult(text=result)
        usage = result.usage
        if usage is None:
            usage = Usage(
                input_tokens=self.estimator.count_text(render_prompt(prompt, messages)),
                output_tokens=self.estimator.count_text(result.text),
            )
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        return SummaryResult(text=result.text, usage=usage, model=result.model)


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            self.records.append(record.getMessage())


@contextlib.contextmanager
def _collect_warnings() -> Iterator[_Collect]:
    handler = _Collect()
    log.addHandler(handler)
    try:
        yield handler
    finally:
        log.removeHandler(handler)


def _file_kind(path: str) -> str:
    for prefix, kind in (
        (LARGE_TOOL_RESULTS_DIR, "large_tool_results"),
        (HISTORY_DIR, "conversation_history"),
        (TRIMMED_DIR, "trimmed_messages"),
    ):
        if path.startswith(prefix + "/"):
            return kind
    return "other"


def _recorded(reply: Message) -> Callable[[list[Message]], Message]:
    """The stand-in model: whatever the view, the recorded reply."""

    def call_model(view: list[Message]) -> Message:
        return reply

    return call_model


def replay_messages(
    messages: Sequence[Message],
    *,
    config: SummaryConfig,
    estimator: Estimator | None = None,
    summarizer: Any = None,
    backend: FileBackend | None = None,
    name: str = "run",
    source: str = "",
    on_call: Callable[[CallOutcome, Message | None], None] | None = None,
) -> RunReport:
    """Replay one recorded run through a fresh :class:`~ars_core.engine.Compressor`.

    At every assistant message, the request is the history before it (a
    leading system message goes in ``system=``); the recorded assistant
    message is the model's reply. The outcome's state update (new event,
    replaced tail messages) is applied before the reply is appended, as an
    adapter would persist it. Token figures are ``estimator``'s. ``on_call``
    receives every call's outcome and the system message (benchmarks count
    the views with their own tokenizer).
    """
    est = estimator or ApproxEstimator()
    recording = _RecordingBackend(
        backend if backend is not None else FsspecBackend("memory://ars-replay")
    )
    metered = _MeteredSummarizer(
        summarizer if summarizer is not None else ExtractiveSummarizer(), est
    )
    compressor = Compressor(config, estimator=est, backend=recording, summarizer=metered)

    history = list(messages)
    system: Message | None = None
    offset = 0
    if history and history[0].role == "system":
        system, history = history[0], history[1:]
        offset = 1
    extra = est.count([], system=system)
    threshold = config.threshold_tokens
    report = RunReport(name=name, source=source, messages=len(messages))

    state: list[Message] = []
    event = None
    without = extra  # running size of the uncompressed request
    started = time.perf_counter()
    with _collect_warnings() as collected:
        for i, message in enumerate(history):
            if message.role == "assistant":
                reply = message
                outcome = compressor.call(state, _recorded(reply), event=event, system=system)
                cutoff = None
                if outcome.update is not None:
                    if outcome.update.event is not None:
                        event = outcome.update.event
                        cutoff = event.cutoff
                    for index, replacement in outcome.update.replaced:  # R43: persisted by index
                        state[index] = replacement
                sent = extra + sum(message_tokens(est, m) for m in outcome.view)
                report.model_calls += 1
                if outcome.level == "L1":
                    report.l1_rounds += 1
                elif outcome.level == "L2":
                    report.l2_rounds += 1
                report.tokens_sent_total += sent
                report.tokens_sent_peak = max(report.tokens_sent_peak, sent)
                report.tokens_without_total += without
                report.tokens_without_peak = max(report.tokens_without_peak, without)
                report.over_threshold += sent > threshold
                report.over_threshold_without += without > threshold
                report.calls.append(
                    CallRecord(
                        call=report.model_calls,
                        message_index=i + offset,
                        level=outcome.level,
                        forced=outcome.forced,
                        tokens_sent=sent,
                        tokens_without=without,
                        cutoff=cutoff,
                    )
                )
                if on_call is not None:
                    on_call(outcome, system)
            state.append(message)
            without += message_tokens(est, message)
    report.seconds = time.perf_counter() - started
    report.warnings = collected.records
    report.files_written = len(recording.written)
    for path in recording.written:
        kind = _file_kind(path)
        report.files_by_kind[kind] = report.files_by_kind.get(kind, 0) + 1
    report.summary_calls = metered.calls
    report.summary_errors = metered.errors
    report.summary_input_tokens = metered.input_tokens
    report.summary_output_tokens = metered.output_tokens
    return report


# ------------------------------------------------------------------ output


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
) -> str:
    """The human-readable replay report."""
    t, t2 = config.threshold_tokens, config.l2_threshold_tokens
    n = len(reports)
    what = (
        f"{n} sample run{'s' if n != 1 else ''} shipped with ars"
        if samples
        else f"{n} recorded run{'s' if n != 1 else ''}"
    )
    thr = f"threshold {config.summary_threshold:g}K = {t:,} tokens"
    if demo_threshold:
        thr += " (a demo value for these short runs; the default is 100K, set with --threshold)"
    lines = [
        f"ARS replay of {what}: each assistant turn is one model call through ARS,",
        "the recorded reply standing in for the model.",
        f"  {thr}",
        f"  L2 when above {t2:,} tokens after L1 (ratio {config.summary_l2_trigger_ratio:g}); keep "
        f"{config.summary_keep_messages} messages; tool results over "
        f"{config.summary_tool_result_token_limit} "
        "tokens go to files",
        f"  estimator {estimator}; summarizer {summarizer}; files under {out}",
        "",
    ]
    name_w = min(40, max([len("run"), *(len(r.name) for r in reports)]))
    cols: list[tuple[str, str, int, Callable[[RunReport], str]]] = [  # group, title, width, value
        ("", "calls", 5, lambda r: f"{r.model_calls}"),
        ("rounds", "L1", 3, lambda r: f"{r.l1_rounds}"),
        ("rounds", "L2", 3, lambda r: f"{r.l2_rounds}"),
        ("largest", "ARS", 7, lambda r: f"{r.tokens_sent_peak:,}"),
        ("largest", "no ARS", 7, lambda r: f"{r.tokens_without_peak:,}"),
        ("all tokens", "ARS", 9, lambda r: f"{r.tokens_sent_total:,}"),
        ("all tokens", "no ARS", 9, lambda r: f"{r.tokens_without_total:,}"),
        (
            "all tokens",
            "share",
            5,
            lambda r: _pct(r.tokens_sent_total, r.tokens_without_total),
        ),
        ("over T", "ARS", 3, lambda r: f"{r.over_threshold}"),
        ("over T", "no ARS", 6, lambda r: f"{r.over_threshold_without}"),
        ("", "files", 5, lambda r: f"{r.files_written}"),
        ("summaries", "n", 3, lambda r: f"{r.summary_calls}"),
        (
            "summaries",
            "tokens",
            7,
            lambda r: f"{r.summary_input_tokens + r.summary_output_tokens:,}",
        ),
    ]
    widths = [
        max(w, len(title), *(len(v(r)) for r in [*reports, total])) for _, title, w, v in cols
    ]
    # widen the last column of a group whose title is wider than its columns
    for group in dict.fromkeys(g for g, _, _, _ in cols if g):
        idx = [i for i, c in enumerate(cols) if c[0] == group]
        span = sum(widths[i] for i in idx) + 2 * (len(idx) - 1)
        widths[idx[-1]] += max(0, len(group) + 2 - span)
    groups: list[tuple[str, int]] = []  # (group title, width incl. inner gaps)
    for (group, _, _, _), w in zip(cols, widths, strict=True):
        if groups and groups[-1][0] == group and group:
            groups[-1] = (group, groups[-1][1] + 2 + w)
        else:
            groups.append((group, w))
    top = " " * name_w + "".join(
        "  " + (f" {g} ".center(w, "-") if g else " " * w) for g, w in groups
    )
    head = f"{'run':<{name_w}}" + "".join(
        f"  {title:>{w}}" for (_, title, _, _), w in zip(cols, widths, strict=True)
    )
    lines += [top.rstrip(), head, "-" * len(head)]
    for r in [*reports, total]:
        if r is total:
            lines.append("-" * len(head))
        name = r.name if len(r.name) <= name_w else r.name[: name_w - 1] + "…"
        lines.append(
            f"{name:<{name_w}}"
            + "".join(f"  {v(r):>{w}}" for (_, _, _, v), w in zip(cols, widths, strict=True))
        )
    lines.append(
        "L1: calls where L1 alone was enough; L2: calls that also summarized older history "
        "(L1 runs first);"
    )
    lines.append("over T: requests above the threshold; tokens are estimates.")
    lines.append("")
    for line in _story(total, t, out):
        indent = " " * (len(line) - len(line.lstrip()))
        lines.extend(
            textwrap.wrap(line, width=110, initial_indent="", subsequent_indent=indent + "  ")
            or [""]
        )
    return "\n".join(lines)


def _story(total: RunReport, threshold: int, out: str) -> list[str]:
    """A few plain sentences about the totals."""
    calls = total.model_calls
    if calls == 0:
        return ["No assistant turns in these runs: nothing was sent."]
    lines: list[str] = []
    if total.l1_rounds + total.l2_rounds == 0:
        lines.append(
            f"No request reached the threshold ({threshold:,} tokens; the largest was "
            f"{total.tokens_without_peak:,}), so ARS changed nothing. Try a lower --threshold."
        )
        return lines
    lines.append(
        f"Without ARS: {calls} requests, {total.tokens_without_total:,} tokens in all; "
        f"the largest was {total.tokens_without_peak:,} tokens and "
        f"{total.over_threshold_without} went over the threshold."
    )
    kinds = total.files_by_kind
    offloaded = kinds.get("large_tool_results", 0)
    lines.append(
        f"With ARS: {total.tokens_sent_total:,} tokens "
        f"({_pct(total.tokens_sent_total, total.tokens_without_total)} "
        f"of that); the largest request was {total.tokens_sent_peak:,} tokens and "
        f"{total.over_threshold} went over the threshold."
    )
    lines.append(
        "  L1 alone (large tool results moved to files, huge write_file/edit_file arguments "
        "cut) was "
        f"enough for {total.l1_rounds} calls; L2 summarized older history {total.l2_rounds} times "
        f"({total.summary_calls} summary calls, "
        f"{total.summary_input_tokens + total.summary_output_tokens:,} "
        f"tokens, counted separately)."
    )
    lines.append(
        f"  {total.files_written} files written under {out}: {offloaded} offloaded tool results, "
        f"{kinds.get('conversation_history', 0)} history archives"
        + (
            f", {kinds['trimmed_messages']} trimmed messages"
            if kinds.get("trimmed_messages")
            else ""
        )
        + (". The text taken out of the requests is in those files." if not total.warnings else ".")
    )
    if total.summary_errors:
        lines.append(
            f"  {total.summary_errors} summary calls failed; their summaries hold the error text "
            "and a built-in extractive fallback."
        )
    if total.warnings:
        lines.append(f"  {len(total.warnings)} warnings from the engine (run with -v to see them).")
    lines.append("More: ars replay --help (your own runs, --threshold, --plot tokens.png, --json).")
    return lines


def write_plot(
    reports: Sequence[RunReport], path: Path, *, threshold: int, max_panels: int = 6
) -> None:
    """Tokens sent per call, with and without ARS, L1/L2 rounds marked (matplotlib, Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels: list[tuple[str, list[CallRecord], list[int]]]
    if len(reports) <= max_panels:
        panels = [(r.name, r.calls, []) for r in reports]
    else:  # one aggregate panel: all runs one after the other
        calls: list[CallRecord] = []
        bounds: list[int] = []
        for r in reports:
            calls.extend(r.calls)
            bounds.append(len(calls))
        panels = [(f"{len(reports)} runs, one after the other", calls, bounds[:-1])]
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 2.8 * len(panels) + 0.6), squeeze=False)
    for ax, (title, calls, bounds) in zip(axes[:, 0], panels, strict=True):
        x = list(range(1, len(calls) + 1))
        ax.plot(x, [c.tokens_without for c in calls], color="0.6", lw=1.2, label="without ARS")
        ax.plot(x, [c.tokens_sent for c in calls], color="tab:blue", lw=1.5, label="with ARS")
        ax.axhline(threshold, color="tab:red", ls="--", lw=0.8, label="threshold")
        l1 = [(k, c.tokens_sent) for k, c in zip(x, calls, strict=True) if c.level == "L1"]
        l2 = [(k, c.tokens_sent) for k, c in zip(x, calls, strict=True) if c.level == "L2"]
        if l1:
            ax.scatter(
                *zip(*l1, strict=True),
                marker="^",
                color="tab:orange",
                s=22,
                zorder=3,
                label="L1 round",
            )
        if l2:
            ax.scatter(
                *zip(*l2, strict=True),
                marker="o",
                color="tab:red",
                s=26,
                zorder=3,
                label="L2 round (summary)",
            )
        for b in bounds:
            ax.axvline(b + 0.5, color="0.85", lw=0.8)
        ax.set_title(title, fontsize=9)
        ax.set_ylabel("tokens sent")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    axes[-1, 0].set_xlabel("model call")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------ argument parsing


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (``ars replay: error: ...``)."""

    def error(self, message: str) -> NoReturn:
        raise CliError(f"{message} (see '{self.prog} --help')", 2)


def _build_parser() -> _Parser:
    parser = _Parser(
        prog="ars",
        description="ARS context compression: replay recorded agent runs through ARS, "
        "count tokens.",
    )
    parser.add_argument("--version", action="version", version=f"ars {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    rp = sub.add_parser(
        "replay",
        help="replay recorded runs through ARS and report what it did",
        description=(
            "Replay recorded agent runs (OpenAI chat-completions JSON/JSONL, .gz too; a folder "
            "means "
            "every run in it) call by call through ARS, the recorded replies standing in for the "
            "model. With no RUN: the sample runs shipped with ars, summarized by the built-in "
            f"extractive summarizer, at a demo threshold of {DEMO_THRESHOLD}K."
        ),
    )
    rp.add_argument("runs", nargs="*", metavar="RUN", help="recorded run files or folders")
    defaults = SummaryConfig()
    rp.add_argument(
        "--threshold",
        type=float,
        metavar="K",
        default=None,
        help=f"summary_threshold in K tokens (x1024); default {defaults.summary_threshold:g}, "
        f"{DEMO_THRESHOLD} for the shipped samples",
    )
    rp.add_argument(
        "--keep",
        type=int,
        metavar="N",
        default=defaults.summary_keep_messages,
        help="summary_keep_messages: recent messages kept after L2 (default %(default)s)",
    )
    rp.add_argument(
        "--tool-limit",
        type=int,
        metavar="T",
        default=defaults.summary_tool_result_token_limit,
        help="summary_tool_result_token_limit: tool results above T tokens go to files "
        "(default %(default)s)",
    )
    rp.add_argument(
        "--ratio",
        type=float,
        metavar="R",
        default=defaults.summary_l2_trigger_ratio,
        help="summary_l2_trigger_ratio: L2 runs above threshold*R after L1 (default %(default)s)",
    )
    rp.add_argument(
        "--estimator",
        default="approx",
        metavar="NAME",
        help="token estimator: approx (default), tiktoken/o200k, cl100k",
    )
    rp.add_argument(
        "--summarizer",
        default="extractive",
        metavar="NAME",
        help="extractive (built in, no model; default) or a LangChain chat-model string "
        "'provider:model' (needs the langchain extra and the provider's API key)",
    )
    rp.add_argument(
        "--out",
        default="ars-out",
        metavar="DIR",
        help="where ARS writes its files, one folder per run (default %(default)s)",
    )
    rp.add_argument(
        "--plot",
        metavar="FILE.png",
        default=None,
        help="draw tokens sent per call with and without ARS (needs matplotlib: ars[cli])",
    )
    rp.add_argument("--json", action="store_true", help="print the report as JSON")
    rp.add_argument(
        "-v", "--verbose", action="store_true", help="print the engine's warnings as they happen"
    )

    ep = sub.add_parser(
        "estimate",
        help="count tokens of transcripts with every estimator",
        description="Token counts of chat transcripts per estimator (approx, tiktoken o200k "
        "and cl100k), "
        "with their disagreement relative to o200k.",
    )
    ep.add_argument("files", nargs="+", metavar="FILE", help="transcript files or folders")
    ep.add_argument("--json", action="store_true", help="print the counts as JSON")
    return parser


def _one_line(exc: BaseException | str) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


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
        print(f"ars: warning: {_one_line(str(w.message))}", file=sys.stderr)
    return config


def _progress(items: Sequence[Run]) -> Iterator[Run]:
    try:
        tqdm: Any = importlib.import_module("tqdm").tqdm
    except ImportError:
        yield from items
        return
    # disable=None: no bar when stderr is not a terminal
    yield from tqdm(items, desc="replaying", unit="run", file=sys.stderr, disable=None, leave=False)


def _cmd_replay(args: argparse.Namespace, stdout: IO[str]) -> int:
    samples = not args.runs
    threshold = (
        args.threshold
        if args.threshold is not None
        else (DEMO_THRESHOLD if samples else SummaryConfig().summary_threshold)
    )
    config = _config(args, threshold)
    estimator = make_estimator(args.estimator)
    summarizer = make_summarizer(args.summarizer)
    plot = Path(args.plot) if args.plot else None
    if plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError as exc:
            raise CliError('--plot needs matplotlib: pip install "ars[cli]"') from exc
        if plot.parent and not plot.parent.is_dir():
            raise CliError(f"--plot {plot}: folder {plot.parent} does not exist")
    if samples and not SAMPLE_DIR.is_dir():
        raise CliError(f"the shipped sample runs are missing ({SAMPLE_DIR}); pass RUN files")
    runs = load_runs([SAMPLE_DIR] if samples else args.runs)
    out = Path(args.out).expanduser().resolve()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(
            f"--out {args.out}: cannot create the folder: {exc.strerror or exc}"
        ) from exc
    if args.verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("ars: %(levelname)s: %(message)s"))
        log.addHandler(handler)
    log.propagate = False  # the engine's warnings are collected per run, not dumped on stderr

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
                f"{run.source}: replay failed: {type(exc).__name__}: {_one_line(exc)}"
            ) from exc
    total = total_report(reports)
    shown_out = _display_path(out)
    if args.json:
        doc = {
            "ars_version": __version__,
            "command": "replay",
            "samples": samples,
            "config": {
                "summary_threshold": config.summary_threshold,
                "summary_keep_messages": config.summary_keep_messages,
                "summary_tool_result_token_limit": config.summary_tool_result_token_limit,
                "summary_l2_trigger_ratio": config.summary_l2_trigger_ratio,
                "threshold_tokens": config.threshold_tokens,
                "l2_threshold_tokens": config.l2_threshold_tokens,
            },
            "estimator": estimator.name,
            "summarizer": _summarizer_name(summarizer),
            "out": str(out),
            "plot": str(plot) if plot else None,
            "runs": [r.to_dict() for r in reports],
            "total": total.to_dict(calls=False),
        }
        json.dump(doc, stdout, indent=2, ensure_ascii=False)
        stdout.write("\n")
    else:
        summ = _summarizer_name(summarizer)
        if summ == "extractive":
            summ = "extractive (built in: no model, no API key)"
        stdout.write(
            format_report(
                reports,
                total,
                config=config,
                estimator=estimator.name,
                summarizer=summ,
                out=shown_out,
                samples=samples,
                demo_threshold=samples and args.threshold is None,
            )
            + "\n"
        )
    if plot is not None:
        try:
            write_plot(reports, plot, threshold=config.threshold_tokens)
        except OSError as exc:
            raise CliError(f"--plot {plot}: cannot write: {exc.strerror or exc}") from exc
        if not args.json:
            stdout.write(f"Plot written to {plot}\n")
    return 0


def _display_path(path: Path) -> str:
    with contextlib.suppress(ValueError):
        return str(path.relative_to(Path.cwd())) + os.sep
    return str(path) + os.sep


def _estimators() -> list[Estimator]:
    """One of each installed estimator (aliases such as ``tiktoken``/``o200k`` once)."""
    from .plugins import available

    found: dict[str, Estimator] = {}
    for factory in available("estimator").values():
        try:
            est = factory()
        except Exception:  # e.g. tiktoken not installed: that estimator is not available
            continue
        found.setdefault(str(getattr(est, "name", type(est).__name__)), est)
    return list(found.values())


def _cmd_estimate(args: argparse.Namespace, stdout: IO[str]) -> int:
    runs = load_runs(args.files)
    estimators = _estimators()
    names = [e.name for e in estimators]
    reference = "tiktoken:o200k_base" if "tiktoken:o200k_base" in names else None
    rows: list[dict[str, Any]] = []
    for run in runs:
        counts: dict[str, int] = {}
        seconds: dict[str, float] = {}
        for est in estimators:
            t0 = time.perf_counter()
            counts[est.name] = est.count(run.messages)
            seconds[est.name] = time.perf_counter() - t0
        chars = len(render_history(run.messages))
        row: dict[str, Any] = {
            "file": run.source,
            "name": run.name,
            "messages": len(run.messages),
            "characters": chars,
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
        rows.append(row)
    if args.json:
        json.dump(
            {
                "ars_version": __version__,
                "command": "estimate",
                "estimators": names,
                "reference": reference,
                "files": rows,
            },
            stdout,
            indent=2,
            ensure_ascii=False,
        )
        stdout.write("\n")
        return 0
    short = {"approx": "approx", "tiktoken:o200k_base": "o200k", "tiktoken:cl100k_base": "cl100k"}
    cols = [short.get(n, n) for n in names]
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
    stdout.write("\n".join(lines) + "\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ars`` console script; returns the exit status."""
    parser = _build_parser()
    debug = os.environ.get("ARS_DEBUG", "") not in ("", "0")
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help(sys.stderr)
            return 2
        if args.command == "replay":
            return _cmd_replay(args, sys.stdout)
        return _cmd_estimate(args, sys.stdout)
    except CliError as exc:
        if debug:
            raise
        print(f"ars: error: {exc}", file=sys.stderr)
        return exc.code
    except ArsError as exc:  # MessageFormatError, ConfigError, PathBoundaryError...
        if debug:
            raise
        print(f"ars: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("ars: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        with contextlib.suppress(Exception):
            sys.stdout = open(os.devnull, "w")
        return 1
    except Exception as exc:
        if debug:
            raise
        print(
            f"ars: internal error: {type(exc).__name__}: {_one_line(exc)} "
            "(set ARS_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return 70


if __name__ == "__main__":
    raise SystemExit(main())
