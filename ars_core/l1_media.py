"""L1, media: inline base64 media in the view moved to content-addressed files.

A content part that carries its data inline as base64 — an OpenAI
``image_url`` / ``input_image`` with a ``data:`` URL, an OpenAI ``file`` /
``input_file`` with a ``data:`` URL in ``file_data``, an OpenAI
``input_audio``, an Anthropic ``image`` / ``document`` with a ``base64``
source, a LangChain v1 ``image`` / ``audio`` / ``file`` block with
``base64``, a LlamaIndex ``image`` / ``audio`` / ``document`` block — whose
base64 text is longer than :func:`media_char_limit` (four characters per token
of ``summary_tool_result_token_limit``: 1,200 characters, about 900 bytes, at
the default 300) is written to ``outputs/media/<kind>-<sha256>.<ext>.b64`` (the
base64 text exactly as it was; the same data always maps to the same path)
and, in the view's copy, replaced by a text part naming that path. The state
keeps the original.

Media the model has not answered yet (in the messages after the last
assistant message: the user's new question, fresh tool results) stay in the
view: the model has not seen them.
"""

from __future__ import annotations

import functools
from bisect import bisect_left
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from . import memo
from ._media import media_type
from .l1 import FileWrite, L1Plan
from .layout import MEDIA_DIR
from .memo import L1_MEDIA
from .messages import MARK_SUMMARY, ContentPart, Message
from .paths import text_sha256
from .pending_form import has_text_content

__all__ = [
    "MARK_MEDIA_OFFLOADED",
    "MEDIA_DIR",
    "InlineMedia",
    "inline_media",
    "media_char_limit",
    "media_offloader",
    "media_reference_text",
    "offload_inline_media",
    "offload_media",
]

#: metadata key: the paths this message's inline media were offloaded to (L1)
MARK_MEDIA_OFFLOADED = "ars_media_offloaded"

_EXTENSIONS = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "application/pdf": ".pdf",
    "audio/wav": ".wav",
    "audio/mpeg": ".mp3",
}
_KINDS = {
    "image_url": "image",
    "input_image": "image",
    "image": "image",
    "input_audio": "audio",
    "audio": "audio",
    "document": "document",
    "file": "file",
    "input_file": "file",
}
#: LlamaIndex blocks keep their base64 data under the block's own name
_LLAMAINDEX_KEYS = {"image": "image", "audio": "audio", "document": "data"}


@attrs.frozen
class InlineMedia:
    """The inline data of a content part: ``kind`` (image, audio, document,
    file), its MIME type when known, and the base64 text."""

    kind: str
    mime: str | None
    payload: str


def _data_url(url: Any) -> tuple[str | None, str] | None:
    if isinstance(url, Mapping):
        url = url.get("url")
    if not isinstance(url, str) or not url.startswith("data:"):
        return None
    head, _, payload = url.partition(",")
    if not head.endswith(";base64"):
        return None
    return media_type(head[5:].split(";", 1)[0]), payload


def _mime(data: Mapping[str, Any], *keys: str) -> str | None:
    for key in keys:
        value = data.get(key)
        if isinstance(value, str) and value:
            return media_type(value)
    return None


def inline_media(part: ContentPart) -> InlineMedia | None:
    """The inline base64 data ``part`` carries, wherever its format keeps it;
    ``None`` for text, URLs, file ids and paths."""
    if part.text is not None:
        return None
    data = part.data
    kind_name = str(data.get("block_type") or part.type)
    kind = _KINDS.get(kind_name)
    if kind is None:
        return None
    found = _data_url(data.get("image_url", data.get("url", data.get("file_data"))))
    file = data.get("file")
    if found is None and isinstance(file, Mapping):  # OpenAI chat ``file`` blocks
        found = _data_url(file.get("file_data"))
    if found is not None:
        return InlineMedia(kind, found[0], found[1])
    source = data.get("source")
    if isinstance(source, Mapping) and source.get("type") == "base64":
        payload = source.get("data")
        if isinstance(payload, str):
            return InlineMedia(kind, _mime(source, "media_type"), payload)
    if isinstance(data.get("base64"), str):
        return InlineMedia(kind, _mime(data, "mime_type", "media_type"), str(data["base64"]))
    audio = data.get("input_audio")
    if isinstance(audio, Mapping) and isinstance(audio.get("data"), str):
        fmt = audio.get("format")
        return InlineMedia(kind, media_type(f"audio/{fmt}"), audio["data"])
    key = _LLAMAINDEX_KEYS.get(kind_name) if "block_type" in data else None
    if key is not None and isinstance(data.get(key), str):
        mime = _mime(data, f"{kind_name}_mimetype", "document_mimetype", "format")
        fmt = data.get("format")
        if mime is None and kind in ("audio", "image") and isinstance(fmt, str):
            mime = media_type(f"{kind}/{fmt}")
        return InlineMedia(kind, mime, str(data[key]))
    return None


def media_char_limit(tool_token_limit: int) -> int:
    """The longest inline base64 text L1 leaves in the view: four characters per
    token of the tool-result limit (the limit that offloads large tool results)."""
    return 4 * tool_token_limit


def media_path(media: InlineMedia) -> str:
    """``outputs/media/<kind>-<sha256 of the base64 text>.<ext>.b64``."""
    ext = _EXTENSIONS.get(media.mime or "", "")
    return f"{MEDIA_DIR}/{media.kind}-{text_sha256(media.payload)}{ext}.b64"


def media_reference_text(media: InlineMedia, path: str) -> str:
    """The text part that stands for offloaded media in the view."""
    what = f"{media.kind}, {media.mime}" if media.mime else media.kind
    return (
        f"[ARS: inline {what} data ({len(media.payload):,} base64 characters) offloaded "
        f"to {path}; the original is kept in the conversation state]"
    )


def offload_media(message: Message, char_limit: int) -> tuple[Message, dict[str, str]]:
    """``message`` with every inline payload longer than ``char_limit``
    characters replaced by a reference, and the files to write
    (``{path: base64 text}``); ``message`` itself and ``{}`` when nothing is."""
    if isinstance(message.content, str):
        return message, {}
    parts: list[ContentPart] = []
    writes: dict[str, str] = {}
    for part in message.content:
        media = inline_media(part)
        if media is None or len(media.payload) <= char_limit:
            parts.append(part)
            continue
        path = media_path(media)
        writes[path] = media.payload
        parts.append(ContentPart(type="text", text=media_reference_text(media, path)))
    if not writes:
        return message, {}
    return message.with_content(parts, **{MARK_MEDIA_OFFLOADED: list(writes)}), writes


@functools.cache
@functools.lru_cache(maxsize=64)
def media_offloader(tool_token_limit: int) -> Callable[[Message], tuple[Message, dict[str, str]]]:
    """:func:`offload_media` at the limit of ``tool_token_limit`` (one function
    per limit, kept: the results cached under it are found again)."""
    return functools.partial(offload_media, char_limit=media_char_limit(tool_token_limit))


def _has_parts(m: Message) -> bool:
    return not has_text_content(m) and not m.metadata.get(MARK_SUMMARY)


def offload_inline_media(plan: L1Plan, *, tool_token_limit: int) -> L1Plan:
    """``plan`` with the inline media of every answered message offloaded (see
    the module doc): the messages up to the last assistant message of the
    view, summaries aside. Each message's result is cached on it."""
    char_limit = media_char_limit(tool_token_limit)
    key = L1_MEDIA.key(char_limit)
    view = plan.view
    answered = next((i for i in range(len(view) - 1, -1, -1) if view[i].role == "assistant"), -1)
    found: list[tuple[int, Message, tuple[FileWrite, ...]]] = []
    # only the messages of content parts (where they are is kept as the history grows)
    positions, _ = memo.current().index("l1-media:parts", _has_parts)(view)
    for i in positions[: bisect_left(positions, answered)]:
        m = view[i]
        cached = L1_MEDIA.get(m, key)
        if cached is None:
            new, writes = offload_media(m, char_limit)
            cached = L1_MEDIA.put(m, (new, tuple(FileWrite(p, t) for p, t in writes.items())), key)
        if cached[1]:
            found.append((i, *cached))
    return plan.replacing(found)
