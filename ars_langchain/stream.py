"""Compression events on LangGraph's custom stream, and SSE framing.

The middleware writes each :class:`~ars_core.CompressionEvent` as a plain dict
(``{"type": "context_compression", "phase": ..., ...}``) through
``langgraph.config.get_stream_writer()``, so it arrives with
``stream_mode="custom"``. :func:`sse_frames` / :func:`asse_frames` turn an
agent's ``stream``/``astream`` output into server-sent events:

* a compression event -> ``event: context_compression``;
* a model token (``stream_mode="messages"``) -> ``event: token``; a tool
  result on that stream -> ``event: tool``;
* any other custom payload -> ``event: custom``;
* a node update (``stream_mode="updates"``) -> ``event: update`` naming the node;
* at the end, ``event: end``.

SSE is a notification channel only: the checkpoint is the source of truth.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator, Mapping
from typing import Any

from ars_core import SSE_EVENT_NAME, CompressionEvent, encode_sse, sse_frame

__all__ = [
    "DEFAULT_STREAM_MODES",
    "asse_frames",
    "chunk_to_sse",
    "is_compression_event",
    "sse_frames",
    "stream_writer_emitter",
]

#: the stream modes a chat service usually asks for
DEFAULT_STREAM_MODES: tuple[str, ...] = ("messages", "custom", "updates")


def is_compression_event(chunk: Any) -> bool:
    """Whether a custom-stream chunk is an ARS compression event."""
    return isinstance(chunk, Mapping) and chunk.get("type") == SSE_EVENT_NAME


def stream_writer_emitter(event: CompressionEvent) -> None:
    """Write ``event`` to the current LangGraph run's custom stream (a no-op outside a run)."""
    from langgraph.config import get_stream_writer

    try:
        writer = get_stream_writer()
    except (RuntimeError, KeyError):  # not inside a graph run
        return
    writer(event.to_dict())


def _split(item: Any, modes: tuple[str, ...] | None) -> tuple[tuple[str, ...], str, Any]:
    """``(namespace, mode, chunk)`` from what ``stream`` yields with one or several modes."""
    if isinstance(item, tuple):
        if len(item) == 3 and isinstance(item[0], tuple):
            return item[0], item[1], item[2]
        if len(item) == 2 and isinstance(item[0], tuple) and modes and len(modes) == 1:
            return item[0], modes[0], item[1]
        if len(item) == 2 and isinstance(item[0], str):
            return (), item[0], item[1]
    return (), modes[0] if modes else "custom", item


def chunk_to_sse(mode: str, chunk: Any, namespace: tuple[str, ...] = ()) -> str | None:
    """One stream chunk as an SSE frame, or ``None`` when there is nothing to send."""
    ns = list(namespace)
    if mode == "custom":
        if is_compression_event(chunk):
            payload = dict(chunk)
            if ns:
                payload["namespace"] = ns
            return encode_sse(payload, id=f"{chunk.get('round_id')}:{chunk.get('phase')}")
        return sse_frame("custom", chunk if not ns else {"namespace": ns, "data": chunk})
    if mode == "messages":
        message, metadata = chunk if isinstance(chunk, tuple) else (chunk, {})
        text = getattr(message, "text", "")
        if not isinstance(text, str) or not text:
            return None
        kind = getattr(message, "type", "")
        data: dict[str, Any] = {"content": text, "id": getattr(message, "id", None)}
        if kind == "tool":  # a tool's result, not assistant output
            event = "tool"
            data["name"] = getattr(message, "name", None)
            data["tool_call_id"] = getattr(message, "tool_call_id", None)
        elif kind in ("ai", "AIMessageChunk"):
            event = "token"
            data["node"] = (metadata or {}).get("langgraph_node")
        else:
            return None
        if ns:
            data["namespace"] = ns
        return sse_frame(event, data)
    if mode == "updates":
        if not isinstance(chunk, Mapping):
            return None
        data = {"nodes": list(chunk)}
        if ns:
            data["namespace"] = ns
        return sse_frame("update", data)
    return None


def _modes(stream_mode: tuple[str, ...] | list[str] | str | None) -> tuple[str, ...]:
    return (stream_mode,) if isinstance(stream_mode, str) else tuple(stream_mode or ())


def _frame(item: Any, modes: tuple[str, ...]) -> str | None:
    """The SSE frame of one item of ``stream``/``astream`` output, if any."""
    ns, mode, chunk = _split(item, modes)
    return chunk_to_sse(mode, chunk, ns)


_END = sse_frame("end", {})


def sse_frames(
    stream: Iterable[Any],
    *,
    stream_mode: tuple[str, ...] | list[str] | str | None = None,
    end: bool = True,
) -> Iterator[str]:
    """SSE frames from ``agent.stream(..., stream_mode=[...])`` (sync)."""
    modes = _modes(stream_mode)
    frames = (_frame(item, modes) for item in stream)
    yield from (f for f in frames if f is not None)
    if end:
        yield _END


async def asse_frames(
    stream: AsyncIterable[Any],
    *,
    stream_mode: tuple[str, ...] | list[str] | str | None = None,
    end: bool = True,
) -> AsyncIterator[str]:
    """SSE frames from ``agent.astream(..., stream_mode=[...])``."""
    modes = _modes(stream_mode)
    async for item in stream:
        if (frame := _frame(item, modes)) is not None:
            yield frame
    if end:
        yield _END
