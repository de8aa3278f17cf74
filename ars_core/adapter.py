"""The interface for framework adapters: everything an adapter needs from the core.

``ars_langchain`` and ``ars_llamaindex`` import only :mod:`ars_core` (the
package face) and this module; a third adapter (another agent framework)
should do the same. What an adapter does around :class:`~ars_core.Compressor`:

1. **convert** the framework's messages to core :class:`~ars_core.Message`
   records and back (keeping what the core does not model in ``metadata``);
2. **read the checkpoint**: the stored :class:`~ars_core.SummarizationEvent`
   (its plain-dict form), checked against the history with :func:`check_event`
   before anything is decided from it (an edited history re-anchors or drops it);
3. **call** the engine with one :class:`~ars_core.CallOptions` (``Compressor.call``,
   ``compact``, ``compact_now``, ``compact_round``, and the async twins);
4. **persist** the outcome's :class:`~ars_core.StateUpdate` in the framework's
   state (a new or re-anchored event, tail messages replaced by id, a cleared
   event) and **deliver** held stream events with :func:`deliver_event`;
5. **scope files** per conversation thread: a :class:`~ars_core.FileBackend`
   (:func:`resolve_backend` turns names and URLs into one); ARS writes only
   under :data:`OUTPUT_FOLDERS` (see :mod:`ars_core.layout`), and the agent
   reads them back with a ``read_ars_file`` tool answering :func:`read_page`
   (:data:`READ_TOOL_NAME`, :data:`READ_TOOL_DESCRIPTION`) where it has no file
   tool of its own.

Configuration read from a framework's run context uses the field names in
:data:`CONFIG_FIELDS`; :func:`can_compact` says whether an on-demand round
has anything to summarize (what a compaction tool answers before scheduling).
An adapter that remembers what it derived from a history (its converted
messages, the forms of the last view) reuses it under the core's one rule,
:func:`unchanged_prefix`.

A call the engine would send as it came (no stored event, below T, every tool
call answered in its block: :func:`~ars_core.pairing.pair_tool_calls` changes
nothing, or only answers the calls of the last block with :func:`synthetic_result`
notes, named once by :func:`warn_unpaired`) needs no conversion at all: an adapter
whose engine's estimator offers :func:`utf8_bound` may bound its own messages
from their fields and, when :func:`fits_by_bound` says so, send them itself (the
engine's decision is the same: the bound is never below the count).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .bounds import Utf8Bytes
from .budget import in_estimate_units
from .capabilities import Utf8BoundedEstimator, has
from .checkpoint import EventCheck, check_event, message_key, reads_kept_part_only
from .config import CONFIG_FIELDS
from .engine import Compressor, deliver_event
from .errors import is_context_overflow
from .estimate import OFFLOAD_CHARS, is_calibrated, message_tokens
from .flow import _count_extra, can_compact
from .hookspecs import hookimpl
from .known_size import (
    MARK_KNOWN_SIZE,
    NOT_AN_ANSWER,
    IdsDigest,
    estimator_name,
    newest_stamp,
    read_stamp,
)
from .known_size import stamped as with_known_size
from .layout import OUTPUT_FOLDERS, output_folder
from .memo import unchanged_prefix
from .messages import MARK_SUMMARY, Message
from .options import CallOptions
from .pairing import synthetic_result, warn_unpaired
from .paths import (
    DEFAULT_READ_ONLY,
    decode_text,
    encode_text,
    is_temporary,
    scope_name,
    text_sha256,
)
from .prompt import render_prompt
from .provider_size import MARK_PROVIDER_COUNT, provider_ratio, ratio_of, stamp
from .readback import (
    DEFAULT_READ_LIMIT,
    READ_TOOL_DESCRIPTION,
    READ_TOOL_NAME,
    aread_page,
    read_error_text,
    read_page,
)
from .resolve import CallableEstimator, resolve_backend
from .typing import (
    BackendLike,
    EstimatorLike,
    EventEmitter,
    OverflowClassifier,
    SummarizerLike,
    Tools,
)

__all__ = [
    "CONFIG_FIELDS",
    "DEFAULT_READ_LIMIT",
    "DEFAULT_READ_ONLY",
    "MARK_KNOWN_SIZE",
    "MARK_PROVIDER_COUNT",
    "MARK_SUMMARY",
    "NOT_AN_ANSWER",
    "OFFLOAD_CHARS",
    "OUTPUT_FOLDERS",
    "READ_TOOL_DESCRIPTION",
    "READ_TOOL_NAME",
    "BackendLike",
    "CallOptions",
    "CallableEstimator",
    "EstimatorLike",
    "EventCheck",
    "EventEmitter",
    "IdsDigest",
    "OverflowClassifier",
    "SummarizerLike",
    "Tools",
    "Utf8Bytes",
    "aread_page",
    "can_compact",
    "check_event",
    "decode_text",
    "deliver_event",
    "encode_text",
    "estimator_name",
    "fits_by_bound",
    "fitting_bound",
    "hookimpl",
    "is_calibrated",
    "is_context_overflow",
    "is_temporary",
    "message_key",
    "newest_stamp",
    "output_folder",
    "provider_ratio",
    "ratio_of",
    "read_error_text",
    "read_page",
    "read_stamp",
    "reads_kept_part_only",
    "render_prompt",
    "request_extra",
    "resolve_backend",
    "scope_name",
    "stamp",
    "synthetic_result",
    "text_sha256",
    "unchanged_prefix",
    "utf8_bound",
    "warn_unpaired",
    "with_known_size",
]


def utf8_bound(estimator: object) -> Utf8Bytes | None:
    """The :class:`Utf8Bytes` counter bounding ``estimator``'s count of any message
    nothing counted yet (:class:`~ars_core.capabilities.Utf8BoundedEstimator`), else
    ``None`` (then only the engine can tell whether a request is below T)."""
    if has(estimator, Utf8BoundedEstimator):
        counter: Utf8Bytes = estimator.utf8_bytes  # type: ignore[attr-defined]
        return counter
    return None


def fits_by_bound(
    compressor: Compressor,
    bound: int,
    system: Message | str | None,
    tools: Tools | None,
    notes: Sequence[Message] = (),
    provider_ratio: float = 1.0,
) -> bool:
    """Whether a request whose messages ``compressor``'s estimator counts at most
    ``bound`` tokens (with ``system``, ``tools`` and the ``notes`` pairing adds to calls
    without a result) is below T, as the engine decides it for a call with no stored
    event (its T in estimate units, the rest counted as it counts them;
    ``provider_ratio``: the history's :func:`~ars_core.provider_size.provider_ratio`,
    as the engine reads it from the same messages)."""
    extra = request_extra(compressor, system, tools, notes)
    return bound + extra < fitting_bound(compressor, provider_ratio)


def request_extra(
    compressor: Compressor,
    system: Message | str | None,
    tools: Tools | None,
    notes: Sequence[Message] = (),
) -> int:
    """What a request counts beside its messages, as the engine counts it: the system
    message, the tools and the ``notes`` pairing adds to calls without a result."""
    est: Any = compressor.estimator
    return _count_extra(est, system, tools) + sum(message_tokens(est, m) for m in notes)


def fitting_bound(compressor: Compressor, provider_ratio: float = 1.0) -> int:
    """The bound of a request's messages at which :func:`fits_by_bound` says no
    whatever the system message, the tools and the notes (T in the estimator's units,
    with the history's ``provider_ratio``): a measure can stop there."""
    config, est = compressor.config, compressor.estimator
    return in_estimate_units(config, est, provider_ratio).threshold_tokens
