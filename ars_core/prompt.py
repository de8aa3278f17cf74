"""How summarized messages reach a summary prompt: the history as plain
text (one block a message, tool calls and results labelled, media as
references, never as base64) put into the prompt at ``{messages}``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .messages import MARK_SUMMARY, ContentPart, Message

__all__ = ["media_reference", "render_history", "render_prompt"]


def render_history(messages: Sequence[Message]) -> str:
    """The history as plain text for a summary prompt: one block a message,
    tool calls as ``-> name(args)``, tool results labelled with their tool."""
    blocks: list[str] = []
    for m in messages:
        if m.metadata.get(MARK_SUMMARY):
            head = "[previous summary]"
        elif m.role == "tool":
            head = f"[tool result: {m.name or 'tool'}]"
        else:
            head = f"[{m.role}]"
        lines = [head]
        if m.text:
            lines.append(m.text)
        if not isinstance(m.content, str):
            lines += [media_reference(p) for p in m.content if p.text is None]
        for call in m.tool_calls:
            args = json.dumps(dict(call.args), ensure_ascii=False, default=str)
            lines.append(f"-> {call.name}({args})")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


_MEDIA_KINDS = {"image_url": "image", "input_image": "image", "input_audio": "audio"}
_URL_KEYS = ("url", "image_url", "file_path", "path", "file_id", "source")


def _media_url(data: Mapping[str, Any]) -> str | None:
    for key in _URL_KEYS:
        value = data.get(key)
        if isinstance(value, Mapping):
            value = _media_url(value)
        if isinstance(value, str) and value:
            return value
    return None


def media_reference(part: ContentPart) -> str:
    """How a non-text part (image, audio, file) reaches a summary prompt:
    ``[image: <url or path>]``; inline data is named with its size, never
    copied (``[image: inline image/png data, 12,345 characters, not shown]``)."""
    kind = _MEDIA_KINDS.get(part.type, part.type)
    url = _media_url(part.data)
    inline = url if url is not None and url.startswith("data:") else None
    if inline is None and url is None:
        raw = part.data.get("base64") or part.data.get("data")
        inline = raw if isinstance(raw, str) else None
    if inline is not None:
        mime = part.data.get("mime_type") or part.data.get("media_type")
        if not isinstance(mime, str) and inline.startswith("data:"):
            mime = inline[5:].split(";", 1)[0]
        what = f"inline {mime} data" if isinstance(mime, str) and mime else "inline data"
        return f"[{kind}: {what}, {len(inline):,} characters, not shown]"
    return f"[{kind}: {url}]" if url else f"[{kind}]"


def render_prompt(prompt: str, messages: Sequence[Message]) -> str:
    """Put the rendered history into ``prompt`` at ``{messages}`` (other braces are left alone)."""
    return prompt.replace("{messages}", render_history(messages))
