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
"""

from __future__ import annotations

from .checkpoint import EventCheck, check_event
from .config import CONFIG_FIELDS
from .engine import deliver_event
from .errors import is_context_overflow
from .estimate import is_calibrated
from .files import (
    DEFAULT_READ_ONLY,
    decode_text,
    encode_text,
    is_temporary,
    scope_name,
    text_sha256,
)
from .flow import can_compact
from .hookspecs import hookimpl
from .layout import OUTPUT_FOLDERS, output_folder
from .memo import unchanged_prefix
from .messages import MARK_SUMMARY
from .options import CallOptions
from .prompt import render_prompt
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
    "MARK_SUMMARY",
    "OUTPUT_FOLDERS",
    "READ_TOOL_DESCRIPTION",
    "READ_TOOL_NAME",
    "BackendLike",
    "CallOptions",
    "CallableEstimator",
    "EstimatorLike",
    "EventCheck",
    "EventEmitter",
    "OverflowClassifier",
    "SummarizerLike",
    "Tools",
    "aread_page",
    "can_compact",
    "check_event",
    "decode_text",
    "deliver_event",
    "encode_text",
    "hookimpl",
    "is_calibrated",
    "is_context_overflow",
    "is_temporary",
    "output_folder",
    "read_error_text",
    "read_page",
    "render_prompt",
    "resolve_backend",
    "scope_name",
    "text_sha256",
    "unchanged_prefix",
]
