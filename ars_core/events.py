"""The two event records, re-exported for code written before they were split.

The summarization event L2 persists in the agent's state (the checkpoint)
lives in :mod:`ars_core.checkpoint`; what a compression round streams while it
runs lives in :mod:`ars_core.stream`. New code imports from those.
"""

from __future__ import annotations

from .checkpoint import (
    ANCHOR_WINDOW,
    Anchor,
    EventCheck,
    SummarizationEvent,
    apply_sent_forms,
    check_event,
    content_key,
    effective_messages,
    form_key,
    message_key,
    sent_forms_of,
    to_global_cutoff,
)
from .stream import SSE_EVENT_TYPE, CompressionEvent, EventEmitter, Level, Phase, describe_event

__all__ = [
    "ANCHOR_WINDOW",
    "SSE_EVENT_TYPE",
    "Anchor",
    "CompressionEvent",
    "EventCheck",
    "EventEmitter",
    "Level",
    "Phase",
    "SummarizationEvent",
    "apply_sent_forms",
    "check_event",
    "content_key",
    "describe_event",
    "effective_messages",
    "form_key",
    "message_key",
    "sent_forms_of",
    "to_global_cutoff",
]
