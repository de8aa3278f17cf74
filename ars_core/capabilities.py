"""What an optional capability of a plugin is, declared once.

ARS's components are protocols: an estimator, a file backend and a summarizer
need only a few members (``ars_core.estimate.Estimator``,
``ars_core.files.FileBackend``, ``ars_core.summarize.Summarizer``). Anything more
they offer is one of the capabilities below (or in :mod:`ars_core.estimate`:
``IncrementalEstimator``, ``CalibratedEstimator``), and the engine checks for it
with :func:`has` (an ``isinstance`` check against the protocol, remembered per
class), never by probing attribute names. A plugin author implements the
protocol's members; mypy checks them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, cast, runtime_checkable

__all__ = [
    "AsyncBackend",
    "AsyncBytesBackend",
    "AsyncReadBackend",
    "BatchBackend",
    "BoundedEstimator",
    "BudgetedSummarizer",
    "BytesBackend",
    "InlineSummarizer",
    "StateBoundBackend",
    "TiktokenEncoding",
    "Utf8BoundedEstimator",
    "WholeHistorySummarizer",
    "has",
    "keeps_writes",
]


@runtime_checkable
class BytesBackend(Protocol):
    """A file backend that takes a file's bytes as ARS encoded them (the engine then
    writes bytes, with no second encoding)."""

    def write_bytes(self, path: str, data: bytes) -> Any: ...


@runtime_checkable
class BatchBackend(Protocol):
    """A file backend that writes several files in one call (``(path, pieces)`` pairs,
    read one at a time: a file's bytes are its pieces one after the other) and returns
    once each one written is durable, with the error of each one not written, by
    path: the engine hands it all the files of one step (a round's offloads), so
    durability costs one barrier, not one per file, and a large file is streamed."""

    def write_files(
        self, files: Iterable[tuple[str, Sequence[bytes]]]
    ) -> Mapping[str, Exception]: ...


@runtime_checkable
class AsyncBackend(Protocol):
    """A file backend with a native async write (the async engine awaits it instead
    of running the sync write in a worker thread)."""

    async def awrite_text(self, path: str, text: str) -> Any: ...


@runtime_checkable
class AsyncBytesBackend(Protocol):
    """:class:`AsyncBackend` for bytes."""

    async def awrite_bytes(self, path: str, data: bytes) -> Any: ...


@runtime_checkable
class AsyncReadBackend(Protocol):
    """A file backend with a native async read (the read-back tool awaits it instead
    of running the sync read in a worker thread)."""

    async def aread_text(self, path: str) -> str: ...


@runtime_checkable
class StateBoundBackend(Protocol):
    """A file backend that says whether its files live in the agent's state (a
    deepagents ``StateBackend``): then a write belongs to the step that made it and
    the engine never takes a file as written because it wrote it once."""

    @property
    def writes_follow_state(self) -> bool: ...


@runtime_checkable
class TiktokenEncoding(Protocol):
    """An estimator whose text counts are those of the tiktoken encoding it names
    (``encoding_name``, ``o200k_base`` or ``cl100k_base``): a preview is then fitted
    to its budget on where that encoding's tokens end, from one encoding pass, with
    one count to confirm it, instead of a count per trial length."""

    encoding_name: str


@runtime_checkable
class WholeHistorySummarizer(Protocol):
    """A summarizer that computes in this process (no model window bounds it) and may
    read the whole history instead of the condensed one: ``reads_whole_history``
    answers for one history."""

    def reads_whole_history(self, history: Any) -> bool: ...


@runtime_checkable
class BudgetedSummarizer(Protocol):
    """A summarizer that can be bounded: ``with_budget(tokens)`` returns one whose
    summary takes at most ``tokens`` (a ``task_tokens`` keyword, when accepted, is the
    task statement's own room in it)."""

    def with_budget(self, tokens: int, *args: Any, **kwargs: Any) -> Any: ...


@runtime_checkable
class InlineSummarizer(Protocol):
    """A summarizer cheap enough to run inline (no model call, e.g. the extractive
    one): the sync engine calls it on the calling thread, without a deadline thread.
    ``runs_inline`` must be ``True``."""

    runs_inline: bool


@runtime_checkable
class BoundedEstimator(Protocol):
    """An estimator with a cheap count never below its own: ``token_bound(message)``
    is at least what ``count_message(message)`` returns (e.g. a byte-level BPE
    estimator's UTF-8 bytes, each token covering at least one byte). The engine
    sizes a history nothing has counted by these bounds, and counts it exactly only
    when the bound comes within reach of a threshold: the decisions are those of
    the exact count. An estimator without it is counted exactly, always."""

    def token_bound(self, message: Any) -> int: ...


@runtime_checkable
class Utf8BoundedEstimator(Protocol):
    """A :class:`BoundedEstimator` whose bound of a message nothing counted yet is
    ``utf8_bytes.measure(message)``, a :class:`~ars_core.bounds.Utf8Bytes` count (never
    below its own count): an adapter can then bound its own messages from their
    fields (``plain_fields``, ``count_tool_call``) without building core messages."""

    utf8_bytes: Any

    def token_bound(self, message: Any) -> int: ...


_known: dict[tuple[type, type], bool] = {}
_lock = threading.Lock()


def has(obj: object, capability: Any) -> bool:
    """Whether ``obj`` offers ``capability`` (one of the protocols above or an
    estimator capability), worked out once per class: a capability is declared by
    the class (its methods, properties and class attributes; an instance may
    override a value, as a calibrated estimator's ``scale``)."""
    key = (type(obj), capability)
    found = _known.get(key)
    if found is None:
        found = isinstance(obj, capability)
        with _lock:
            if len(_known) > 4096:
                _known.clear()
            _known[key] = found
    return found


def keeps_writes(backend: object) -> bool:
    """Whether a file ``backend`` wrote stays written: always, but for a
    :class:`StateBoundBackend` whose files follow the agent's state (a step that
    fails after a write drops it, and a thread forked from an older checkpoint
    never had it). The engine takes what it wrote to such a backend as there, and
    checks nothing again."""
    return not (
        has(backend, StateBoundBackend) and cast(StateBoundBackend, backend).writes_follow_state
    )
