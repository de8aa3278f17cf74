"""Replay recorded agent runs through ARS, call by call: the library behind
``ars replay`` and the benchmarks.

A recorded run is an OpenAI chat-completions transcript (JSON / JSONL, gzip
too). :func:`replay_messages` sends it through a real
:class:`~ars_core.engine.Compressor`: at every assistant message the request is
the history before it, the recorded reply stands in for the model, and the
outcome's state update (a new summary event, tail messages trimmed under
overflow) is applied to the replayed state exactly as an adapter persists it.
The result is a :class:`RunReport`: rounds, tokens with and without ARS, files
written, summary calls.

::

    from ars_core import SummaryConfig
    from ars_core.replay import SAMPLE_DIR, load_runs, replay_messages

    for run in load_runs([SAMPLE_DIR]):
        report = replay_messages(run.messages, config=SummaryConfig(summary_threshold=16))
        print(run.name, report.tokens_sent_total, report.tokens_without_total)
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from .capabilities import WholeHistorySummarizer, has
from .checkpoint import SummarizationEvent
from .config import SummaryConfig
from .engine import CallOutcome, Compressor
from .errors import MessageFormatError
from .estimate import Estimator, message_tokens
from .files import FileBackend, FsspecBackend
from .layout import HISTORY_DIR, LARGE_TOOL_RESULTS_DIR, TRIMMED_DIR
from .messages import Message, read_messages
from .paths import sanitize_name
from .provider_size import stamped
from .resolve import resolve_summarizer
from .retention import TASK_KEPT
from .summarize import (
    ExtractiveSummarizer,
    SummaryResult,
    Usage,
    bound_summarizer,
    render_prompt,
)

__all__ = [
    "CACHED_PRICE",
    "DEMO_THRESHOLD",
    "RUN_SUFFIXES",
    "SAMPLE_DIR",
    "CallRecord",
    "MeteredSummarizer",
    "Run",
    "RunReport",
    "find_runs",
    "load_runs",
    "replay_messages",
    "total_report",
]

#: the sample runs shipped with the package (``ars replay`` with no RUN)
SAMPLE_DIR = Path(__file__).resolve().parent / "data"
#: the entry threshold (K tokens) used when replaying the shipped samples without
#: ``--threshold``: they are 20-85K tokens long, so the production default (100K)
#: would never trigger on them
DEMO_THRESHOLD = 16
#: the price of a prompt-cached input token relative to an uncached one (OpenAI, Anthropic)
CACHED_PRICE = 0.1
#: file name endings read as recorded runs when a folder is given
RUN_SUFFIXES: tuple[str, ...] = (".jsonl.gz", ".json.gz", ".jsonl", ".json")

log = logging.getLogger("ars")


# ------------------------------------------------------------------ reading runs


@attrs.frozen
class Run:
    """A recorded run: a display name, where it came from, and its messages."""

    name: str
    source: str
    messages: tuple[Message, ...]


#: characters a terminal may act on (C0 and C1 controls, DEL)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _stem(path: Path) -> str:
    """The run's name: the file name without its suffix. It names the run's
    folder under ``--out``, so a name that is not one plain folder name
    (``...jsonl`` gives ``..``) is made safe."""
    name = _CONTROL.sub("_", path.name)  # an escape sequence never names a folder or a line
    for suffix in (*RUN_SUFFIXES, ".gz"):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
            break
    if name in {"", ".", ".."} or "/" in name or "\\" in name:
        return sanitize_name(name, default="run")
    return name


def find_runs(paths: Sequence[str | Path]) -> list[Path]:
    """Expand ``paths``: a folder means every run file in it (sorted).

    A missing path or a folder without runs raises
    :class:`~ars_core.errors.MessageFormatError` naming it.
    """
    found: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            inside = sorted(c for c in p.iterdir() if c.is_file() and c.name.endswith(RUN_SUFFIXES))
            if not inside:
                raise MessageFormatError(
                    "no recorded runs in this folder (expected *.jsonl, *.json, optionally .gz)",
                    source=str(p),
                )
            found.extend(inside)
        elif p.exists():
            found.append(p)
        else:
            raise MessageFormatError("no such file or folder", source=str(p))
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


# ------------------------------------------------------------------ reports


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
    #: tokens of the request's prefix equal to the previous request's (a prompt-cache hit)
    tokens_cached: int = 0
    #: L2 only: the share of the task statement the view kept (the event's retention audit)
    task_fraction: float | None = None
    #: L2 only: the share of the audited anchors (task, files, commands, errors, ids) kept
    retention_fraction: float | None = None


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
    summary_errors: int = 0  #: summaries that failed (their error recorded, a fallback kept)
    #: retries of summary calls (overflow or transient errors), each also a summary call
    summary_retries: int = 0
    #: request tokens repeating the previous request's prefix (cache hits), with ARS
    tokens_cached_total: int = 0
    #: the same without ARS (each request extends the previous one)
    tokens_without_cached_total: int = 0
    #: L2 rounds whose retention was audited, and those whose view kept the task
    retention_rounds: int = 0
    task_kept_rounds: int = 0
    #: the text of the last summary the summarizer wrote (``None``: no summary call
    #: succeeded), lone surrogates escaped so the report can be printed (files keep them)
    last_summary: str | None = None
    warnings: list[str] = attrs.field(factory=list)
    seconds: float = 0.0
    calls: list[CallRecord] = attrs.field(factory=list)

    @property
    def sent_ratio(self) -> float:
        """Tokens sent with ARS over tokens that would have been sent without it."""
        return (
            self.tokens_sent_total / self.tokens_without_total if self.tokens_without_total else 1.0
        )

    @property
    def cache_hit_share(self) -> float:
        """Share of the tokens sent with ARS that repeat the previous request's prefix."""
        return self.tokens_cached_total / self.tokens_sent_total if self.tokens_sent_total else 0.0

    @property
    def effective_cost(self) -> float:
        """Input billed as providers bill it, in token equivalents: uncached tokens, cached
        ones at :data:`CACHED_PRICE`, summary calls (input and output) at full price."""
        cached = self.tokens_cached_total
        summary = self.summary_input_tokens + self.summary_output_tokens
        return self.tokens_sent_total - cached + CACHED_PRICE * cached + summary

    @property
    def effective_cost_without(self) -> float:
        """:attr:`effective_cost` of the same requests without ARS."""
        cached = self.tokens_without_cached_total
        return self.tokens_without_total - cached + CACHED_PRICE * cached

    def to_dict(self, *, calls: bool = True) -> dict[str, Any]:
        """A JSON-ready dict (``calls=False`` leaves out the per-call records)."""
        out = attrs.asdict(self, recurse=True)
        out["sent_ratio"] = round(self.sent_ratio, 4)
        out["cache_hit_share"] = round(self.cache_hit_share, 4)
        out["effective_cost"] = round(self.effective_cost, 1)
        out["effective_cost_without"] = round(self.effective_cost_without, 1)
        out["summary_tokens"] = self.summary_input_tokens + self.summary_output_tokens
        out["seconds"] = round(self.seconds, 3)
        if not calls:
            del out["calls"]
        return out

    def add_call(self, record: CallRecord, *, threshold: int) -> None:
        """Count one replayed call."""
        self.model_calls += 1
        self.l1_rounds += record.level == "L1"
        self.l2_rounds += record.level == "L2"
        self.tokens_sent_total += record.tokens_sent
        self.tokens_sent_peak = max(self.tokens_sent_peak, record.tokens_sent)
        self.tokens_without_total += record.tokens_without
        self.tokens_without_peak = max(self.tokens_without_peak, record.tokens_without)
        self.over_threshold += record.tokens_sent > threshold
        self.over_threshold_without += record.tokens_without > threshold
        self.tokens_cached_total += record.tokens_cached
        if record.task_fraction is not None:
            self.retention_rounds += 1
            self.task_kept_rounds += record.task_fraction >= TASK_KEPT
        if len(self.calls):  # without ARS every request extends the previous one
            self.tokens_without_cached_total += self.calls[-1].tokens_without
        self.calls.append(record)


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
    "summary_retries",
    "tokens_cached_total",
    "tokens_without_cached_total",
    "retention_rounds",
    "task_kept_rounds",
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


# ------------------------------------------------------------------ instruments


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


class MeteredSummarizer:
    """Delegates to a summarizer and adds up its calls, failures and token usage.

    When the summarizer reports no usage, the rendered prompt and the summary
    are counted with ``estimator``.
    """

    def __init__(self, inner: Any, estimator: Estimator) -> None:
        self.inner = self._unbounded = inner
        self.estimator = estimator
        self.calls = 0
        self.errors = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.last_text: str | None = None

    def reads_whole_history(self, history: Sequence[Message]) -> bool:
        """The wrapped summarizer's answer (see :class:`~ars_core.summary_call.SummaryCall`)."""
        inner = self._unbounded
        return has(inner, WholeHistorySummarizer) and inner.reads_whole_history(history) is True

    def with_budget(
        self,
        summary_tokens: int,
        *,
        task_tokens: int | None = None,
        task: Sequence[str] | None = None,
    ) -> MeteredSummarizer:
        """Bound the wrapped summarizer to the engine's summary budget and the
        task's room in it, and tell it the task the engine writes (one replay
        runs one call at a time, so the wrapper is re-bound in place)."""
        self.inner = bound_summarizer(self._unbounded, summary_tokens, task_tokens, task)
        return self

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
        self.last_text = result.text
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


# ------------------------------------------------------------------ replay


OnCall = Callable[[CallOutcome, Message | None], None]


class _Replay:
    """The state of one run being replayed: persisted messages, the latest event,
    the running size of the uncompressed request."""

    def __init__(
        self,
        compressor: Compressor,
        estimator: Estimator,
        system: Message | None,
        provider: Any = None,
    ) -> None:
        self.compressor = compressor
        self.provider = provider  #: counts each request as the provider does (or None)
        self.estimator = estimator  #: counts the figures of the report
        self.system = system
        self.extra = estimator.count([], system=system)  # the system message's share
        self.state: list[Message] = []
        self.event: SummarizationEvent | None = None
        self.without = self.extra
        self.previous: Sequence[Message] = ()  # the view of the previous request

    def call(self, reply: Message) -> tuple[CallOutcome, int | None]:
        """One model call answered by ``reply``; its state update applied.
        Returns the outcome and the new cutoff (L2 only)."""
        outcome = self.compressor.call(
            self.state, _recorded(reply), event=self.event, system=self.system
        )
        cutoff = None
        if outcome.update is not None:
            if outcome.update.event is not None:
                self.event = outcome.update.event
                cutoff = self.event.cutoff
            for index, replacement in outcome.update.replaced:  # persisted by index
                self.state[index] = replacement
        return outcome, cutoff

    def sent(self, outcome: CallOutcome) -> tuple[int, int]:
        """Tokens of the request ARS sent, as ``estimator`` counts them, and how many of
        them repeat the previous request's prefix (message by message, system included)."""
        view, previous = outcome.view, self.previous
        sizes = [message_tokens(self.estimator, m) for m in view]
        shared = 0
        while shared < min(len(view), len(previous)) and view[shared] == previous[shared]:
            shared += 1
        cached = self.extra + sum(sizes[:shared]) if previous else 0
        self.previous = list(view)
        return self.extra + sum(sizes), cached

    def record(
        self, reply: Message, report: RunReport, message_index: int, threshold: int
    ) -> CallOutcome:
        """One model call answered by ``reply``, counted in ``report``."""
        outcome, cutoff = self.call(reply)
        sent, cached = self.sent(outcome)
        audit = self.event.retention if cutoff is not None and self.event is not None else None
        record = CallRecord(
            call=report.model_calls + 1,
            message_index=message_index,
            level=outcome.level,
            forced=outcome.forced,
            tokens_sent=sent,
            tokens_without=self.without,
            cutoff=cutoff,
            tokens_cached=cached,
            task_fraction=audit.task_fraction if audit is not None else None,
            retention_fraction=audit.fraction if audit is not None else None,
        )
        report.add_call(record, threshold=threshold)
        if cutoff is not None and self.event is not None:
            usage = self.event.summary_usage
            report.summary_retries += len(usage.retries) if usage is not None else 0
            report.summary_errors += self.event.summary_error is not None
        return outcome

    def stamped(self, answer: Message, outcome: CallOutcome) -> Message:
        """``answer`` carrying the provider's count of the request ``outcome`` sent,
        beside the deciding estimator's count of it (as it is without a provider)."""
        if self.provider is None:
            return answer
        tokens = self.provider.count(outcome.view, system=self.system)
        return stamped(answer, tokens, outcome.tokens_after, self.compressor.estimator)

    def append(self, message: Message) -> None:
        self.state.append(message)
        self.without += message_tokens(self.estimator, message)


def replay_messages(
    messages: Sequence[Message],
    *,
    config: SummaryConfig,
    estimator: Estimator | None = None,
    summarizer: Any = None,
    backend: FileBackend | None = None,
    name: str = "run",
    source: str = "",
    on_call: OnCall | None = None,
    compressor_options: Mapping[str, Any] | None = None,
    counter: Estimator | None = None,
    provider: Any = None,
) -> RunReport:
    """Replay one recorded run through a fresh :class:`~ars_core.engine.Compressor`.

    At every assistant message, the request is the history before it (a
    leading system message goes in ``system=``); the recorded assistant
    message is the model's reply. The outcome's state update (new event,
    replaced tail messages) is applied before the reply is appended, as an
    adapter would persist it. Token figures are ``estimator``'s (by default the
    exact o200k count when tiktoken is installed). ``on_call``
    receives every call's outcome and the system message (benchmarks count
    the views with their own tokenizer). ``compressor_options`` are extra
    :class:`~ars_core.engine.Compressor` keyword arguments. ``estimator``
    decides (the engine's default when ``None``); ``counter`` counts the
    report's figures (default: the deciding estimator), e.g. the exact o200k
    count whatever estimator ARS decided with. ``provider`` (``count(messages,
    system=...)``, e.g. :class:`ars_core.testing.ProviderTokenizer`): each answer
    enters the history stamped with its count of the request ARS sent, as an adapter
    stamps a reported usage (:func:`ars_core.provider_size.stamped`)."""
    recording = _RecordingBackend(
        backend if backend is not None else FsspecBackend("memory://ars-replay")
    )
    compressor = Compressor(
        config, estimator=estimator, backend=recording, **dict(compressor_options or {})
    )
    est = counter if counter is not None else compressor.estimator
    inner = resolve_summarizer(summarizer)
    metered = MeteredSummarizer(inner if inner is not None else ExtractiveSummarizer(), est)
    compressor.summarizer = metered
    history = list(messages)
    system = history.pop(0) if history and history[0].role == "system" else None
    offset = 1 if system is not None else 0
    replay = _Replay(compressor, est, system, provider)
    report = RunReport(name=name, source=source, messages=len(messages))
    started = time.perf_counter()
    with _collect_warnings() as collected:
        for i, message in enumerate(history):
            if message.role == "assistant":
                outcome = replay.record(message, report, i + offset, config.threshold_tokens)
                if on_call is not None:
                    on_call(outcome, system)
                message = replay.stamped(message, outcome)
            replay.append(message)
    report.seconds = time.perf_counter() - started
    report.warnings = collected.records
    _finish(report, recording, metered)
    return report


def _finish(report: RunReport, recording: _RecordingBackend, metered: MeteredSummarizer) -> None:
    report.files_written = len(recording.written)
    for path in recording.written:
        kind = _file_kind(path)
        report.files_by_kind[kind] = report.files_by_kind.get(kind, 0) + 1
    report.summary_calls = metered.calls
    report.summary_input_tokens = metered.input_tokens
    report.summary_output_tokens = metered.output_tokens
    if metered.last_text is not None:
        report.last_summary = metered.last_text.encode("utf-8", "backslashreplace").decode("utf-8")
