"""Server-sent events framing for compression events.

SSE is notification only: the checkpoint is the source of truth.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .stream import CompressionEvent

__all__ = ["SSE_EVENT_NAME", "encode_sse", "sse_frame"]

#: the SSE ``event:`` name of compression events
SSE_EVENT_NAME = "context_compression"


def sse_frame(
    event: str | None, data: Any, *, id: str | None = None, retry: int | None = None
) -> str:
    """One SSE frame: ``event:``/``id:``/``retry:`` lines, ``data:`` lines, a blank line.

    ``data`` that is not a string is JSON-encoded (UTF-8, no ASCII escaping);
    multi-line data becomes several ``data:`` lines, as the SSE spec requires.
    """
    lines: list[str] = []
    if event:
        if "\n" in event or "\r" in event:
            raise ValueError("an SSE event name cannot contain a newline")
        lines.append(f"event: {event}")
    if id is not None:
        lines.append(f"id: {id}")
    if retry is not None:
        lines.append(f"retry: {retry}")
    text = (
        data
        if isinstance(data, str)
        else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    )
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        lines.append(f"data: {line}")
    return "\n".join(lines) + "\n\n"


def encode_sse(event: CompressionEvent | Mapping[str, Any], *, id: str | None = None) -> str:
    """A compression event as an ``event: context_compression`` SSE frame."""
    payload = event.to_dict() if isinstance(event, CompressionEvent) else dict(event)
    return sse_frame(SSE_EVENT_NAME, payload, id=id)
