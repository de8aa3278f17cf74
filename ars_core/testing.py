"""Fakes for testing code that uses ARS — only the LLM provider is faked.

* :class:`ScriptedModel`: a main model that returns scripted replies, records
  every view it receives, and raises :class:`~ars_core.errors.ContextOverflowError`
  when a request is larger than ``overflow_above`` tokens.
* :class:`FakeSummarizer`: a summary model with scripted text, a usage figure,
  optional failures (always, on the first calls, or above a window size), and
  (async) an optional gate to prove concurrency or hold a call.
* :class:`FailingBackend`: a file backend whose writes fail (all, or those
  matching a prefix), wrapping a real one for the rest.
* :class:`RecordingEmitter`: collects stream events.
* :func:`capture_events`: records every stream event delivered while a
  ``with`` block runs, whoever emits it (like structlog's ``capture_logs``)::

      with capture_events() as captured:
          compressor.call(messages, model)
      assert captured.phases == [("started", "L1"), ("completed", "L1")]

* :func:`recorded_sleeps`: records the waits before summary retries instead
  of sleeping.
* :class:`ProviderTokenizer`: a provider's own count of a request, ``factor``
  times the exact o200k count (a provider whose tokenizer counts more than
  ARS's estimator when ``factor`` > 1), for fakes that report usage.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from typing import Any

import anyio

from .errors import ContextOverflowError, FileBackendError
from .estimate import Estimator, TiktokenEstimator, Tools, default_estimator
from .files import FileBackend, FsspecBackend
from .hookspecs import hookimpl
from .messages import Message, from_openai
from .stream import CompressionEvent
from .summarize import SummaryResult, Usage, render_prompt

__all__ = [
    "FailingBackend",
    "FakeSummarizer",
    "ProviderTokenizer",
    "RecordingEmitter",
    "RecordingTiktoken",
    "ScriptedModel",
    "capture_events",
    "recorded_sleeps",
]


class ScriptedModel:
    """A fake main model: ``model(view) -> reply``.

    ``replies`` are returned in order (the last one repeats); each may be a
    value or a callable taking the view. ``overflow_above`` makes a request
    larger than that many tokens (by ``estimator``) raise
    :class:`ContextOverflowError`, like a provider would. ``calls`` holds every
    view received, overflowing ones included.
    """

    def __init__(
        self,
        replies: Iterable[Any] = ("ok",),
        *,
        overflow_above: int | None = None,
        estimator: Estimator | None = None,
        system: Message | str | None = None,
        tools: Sequence[Any] | None = None,
    ) -> None:
        self.replies = list(replies) or ["ok"]
        self.overflow_above = overflow_above
        self.estimator = estimator or default_estimator()
        self.system = system
        self.tools = tools
        self.calls: list[list[Message]] = []
        self._next = 0

    def __call__(self, view: list[Message]) -> Any:
        self.calls.append(list(view))
        if self.overflow_above is not None:
            records = [m if isinstance(m, Message) else from_openai(m) for m in view]
            size = self.estimator.count(records, system=self.system, tools=self.tools)
            if size > self.overflow_above:
                raise ContextOverflowError(
                    f"prompt is too long: {size} tokens > {self.overflow_above} maximum",
                    tokens=size,
                )
        reply = self.replies[min(self._next, len(self.replies) - 1)]
        self._next += 1
        return reply(view) if callable(reply) else reply

    async def acall(self, view: list[Message]) -> Any:
        return self(view)


_DEFAULT_USAGE = Usage(input_tokens=100, output_tokens=20)


class ProviderTokenizer:
    """A provider's count of a request (system, tool schemas, messages): ``factor``
    times ``estimator``'s count (by default the engine's default estimator: the exact
    o200k count when tiktoken is installed), rounded up. ``factor`` 1.4 stands for a
    provider whose tokenizer counts 40% more than o200k (as Anthropic's and Llama's
    count more on many texts): a request ARS sizes at T is 1.4 T for it."""

    def __init__(self, factor: float = 1.0, estimator: Estimator | None = None) -> None:
        self.factor = float(factor)
        self.estimator = estimator if estimator is not None else default_estimator()

    def count(
        self,
        messages: Sequence[Message],
        *,
        system: Message | str | None = None,
        tools: Tools | None = None,
    ) -> int:
        """The provider's input tokens of one request."""
        tokens = self.estimator.count(list(messages), system=system, tools=tools)
        return math.ceil(self.factor * tokens)


class FakeSummarizer:
    """A fake summary model.

    Returns ``text`` (or ``text(rendered_prompt)`` if callable) with ``usage``;
    raises ``error`` when set. ``errors`` are raised by the first calls, one
    each, in order (a rate limit then an answer, say). ``overflow_above`` makes
    a rendered prompt larger than that many tokens (by ``estimator``) raise
    :class:`ContextOverflowError`, like a summary model with a small window.
    ``calls`` records ``(messages, prompt)`` of every call, failing ones
    included. On the async path, ``gate`` (an awaitable factory) is awaited
    before answering — tests use it to prove the archive and the summary run
    concurrently, or to hold a summary past its timeout. ``bounds`` records
    every bound the engine gave it (``with_budget``: what a model would be told
    it may write, the summary bound less the task the engine writes).
    """

    def __init__(
        self,
        text: str | Callable[[str], str] = "SUMMARY",
        *,
        usage: Usage | None = _DEFAULT_USAGE,
        error: BaseException | None = None,
        errors: Iterable[BaseException] = (),
        overflow_above: int | None = None,
        estimator: Estimator | None = None,
        gate: Callable[[], Awaitable[Any]] | None = None,
    ) -> None:
        self.text = text
        self.usage = usage
        self.error = error
        self.errors = list(errors)
        self.overflow_above = overflow_above
        self.estimator = estimator or default_estimator()
        self.gate = gate
        self.calls: list[tuple[list[Message], str]] = []
        self.bounds: list[int] = []

    def with_budget(self, summary_tokens: int, **_: Any) -> FakeSummarizer:
        """Record the bound the engine gives; the fake answers the same whatever it is."""
        self.bounds.append(summary_tokens)
        return self

    def summarize(self, messages: Sequence[Message], prompt: str) -> SummaryResult:
        self.calls.append((list(messages), prompt))
        if self.error is not None:
            raise self.error
        if len(self.calls) <= len(self.errors):
            raise self.errors[len(self.calls) - 1]
        rendered = render_prompt(prompt, messages)
        if self.overflow_above is not None:
            size = self.estimator.count_text(rendered)
            if size > self.overflow_above:
                raise ContextOverflowError(
                    f"prompt is too long: {size} tokens > {self.overflow_above} maximum",
                    tokens=size,
                )
        text = self.text(rendered) if callable(self.text) else self.text
        return SummaryResult(text=text, usage=self.usage, model="fake-summarizer")

    async def asummarize(self, messages: Sequence[Message], prompt: str) -> SummaryResult:
        if self.gate is not None:
            await self.gate()
        await anyio.sleep(0)
        return self.summarize(messages, prompt)


class FailingBackend:
    """A :class:`~ars_core.files.FileBackend` whose writes fail.

    Writes under any of ``fail_prefixes`` (all writes when empty) raise
    :class:`FileBackendError`; everything else goes to ``inner`` (an
    in-memory fsspec backend by default). ``failed`` lists the paths refused.
    """

    def __init__(self, fail_prefixes: Sequence[str] = (), inner: FileBackend | None = None) -> None:
        self.fail_prefixes = tuple(fail_prefixes)
        self.inner: FileBackend = (
            inner if inner is not None else FsspecBackend(f"memory://ars-failing-{id(self)}")
        )
        self.failed: list[str] = []

    def _fails(self, path: str) -> bool:
        return not self.fail_prefixes or any(path.startswith(p) for p in self.fail_prefixes)

    def write_text(self, path: str, text: str) -> str:
        if self._fails(path):
            self.failed.append(path)
            raise FileBackendError(path, "simulated write failure")
        return self.inner.write_text(path, text)

    def read_text(self, path: str) -> str:
        return self.inner.read_text(path)

    def exists(self, path: str) -> bool:
        return self.inner.exists(path)


class RecordingEmitter:
    """An event emitter that keeps every event; ``phases`` gives ``(phase, level)`` pairs."""

    def __init__(self) -> None:
        self.events: list[CompressionEvent] = []

    def __call__(self, event: CompressionEvent) -> None:
        self.events.append(event)

    @property
    def phases(self) -> list[tuple[str, str]]:
        return [(e.phase, e.level) for e in self.events]


class _Observer:
    """A plugin that hands every delivered compression event to ``record``."""

    def __init__(self, record: Callable[[CompressionEvent], None]) -> None:
        self.record = record

    @hookimpl
    def compression_event(self, event: CompressionEvent) -> None:
        self.record(event)


@contextlib.contextmanager
def recorded_sleeps() -> Iterator[list[float]]:
    """Record the waits of summary retries instead of sleeping, sync and async::

    with recorded_sleeps() as waits:
        compressor.call(messages, model)
    assert waits == [1.0, 2.0]  # two transient retries, exponential backoff
    """
    from . import summary_call

    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)

    async def asleep(seconds: float) -> None:
        waits.append(seconds)
        await anyio.sleep(0)

    saved = summary_call.sleep, summary_call.asleep
    summary_call.sleep, summary_call.asleep = sleep, asleep
    try:
        yield waits
    finally:
        summary_call.sleep, summary_call.asleep = saved


@contextlib.contextmanager
def capture_events() -> Iterator[RecordingEmitter]:
    """Record every compression event delivered while the block runs.

    Events reach it the way they reach plugin observers: from any
    :class:`~ars_core.Compressor`, either adapter, any thread; held events
    (``compact_round``) once the round delivers them. Yields a
    :class:`RecordingEmitter` (``.events``, ``.phases``).
    """
    from .plugins import get_plugin_manager

    recorder = RecordingEmitter()
    observer = _Observer(recorder)
    pm = get_plugin_manager()
    pm.register(observer)
    try:
        yield recorder
    finally:
        pm.unregister(observer)


class RecordingTiktoken(TiktokenEstimator):
    """The default o200k estimator, recording every text it encodes in :attr:`texts`
    (what a test reads to see which messages a call counted)."""

    def __init__(self, encoding: str = "o200k_base") -> None:
        super().__init__(encoding)
        self.texts: list[str] = []

    def count_text(self, text: str) -> int:
        self.texts.append(text)
        return super().count_text(text)
