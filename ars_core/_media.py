"""Tokens of images, the way each provider documents them.

* OpenAI (``image_url`` / ``input_image`` blocks): ``detail="low"`` is 85
  tokens; otherwise the image is scaled to fit 2048x2048, then so that its
  shortest side is at most 768 px, and costs 85 + 170 per 512 px tile.
* Anthropic (``image`` blocks with a ``source``): ``width * height / 750``
  after scaling to at most 1568 px on the long edge and about 1.19 megapixels.
* A provider-neutral block (LangChain v1 ``image`` with ``base64``/``url``)
  is charged the larger of the two, since either provider may receive it.

The size comes from ``width``/``height`` fields when a block carries them, or
from the header of inline (base64 / ``data:`` URL) PNG, GIF, JPEG and WebP
data. Only when the size cannot be known is a flat number charged: what the
provider charges for its typical largest image.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
from collections.abc import Mapping
from typing import Any

__all__ = [
    "anthropic_image_tokens",
    "image_size",
    "media_tokens",
    "media_type",
    "openai_image_tokens",
]

#: a media type as RFC 6838 names them: ``type/subtype``, restricted characters, no parameters
_NAME = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
_MEDIA_TYPE = re.compile(f"{_NAME}/{_NAME}")


def media_type(value: Any) -> str | None:
    """``value`` as a lower-case ``type/subtype`` media type, or ``None`` when it
    is not one (parameters, spaces, line breaks, anything else): a media type
    found in content is data, and only a well-formed one is repeated."""
    if not isinstance(value, str) or _MEDIA_TYPE.fullmatch(value) is None:
        return None
    return value.lower()


#: OpenAI: an image of unknown size at high/auto detail (1024x1024, four tiles)
OPENAI_UNKNOWN_IMAGE = 765
#: OpenAI: any image at low detail
OPENAI_LOW_DETAIL = 85
#: Anthropic: an image of unknown size (its documented largest, about 1.19 megapixels)
ANTHROPIC_UNKNOWN_IMAGE = 1600
#: base64 characters decoded to find an image header (JPEG headers can sit after EXIF data)
HEADER_CHARS = 1 << 17

_OPENAI_KINDS = frozenset({"image_url", "input_image"})


def openai_image_tokens(width: int | None, height: int | None, detail: str = "auto") -> int:
    """OpenAI's documented image cost (tiles of 512 px)."""
    if detail == "low":
        return OPENAI_LOW_DETAIL
    if not width or not height:
        return OPENAI_UNKNOWN_IMAGE
    w, h = float(width), float(height)
    scale = min(1.0, 2048 / max(w, h))
    w, h = w * scale, h * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    return OPENAI_LOW_DETAIL + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def anthropic_image_tokens(width: int | None, height: int | None) -> int:
    """Anthropic's documented image cost (``width * height / 750``)."""
    if not width or not height:
        return ANTHROPIC_UNKNOWN_IMAGE
    w, h = float(width), float(height)
    scale = min(1.0, 1568 / max(w, h), math.sqrt(1092 * 1092 / (w * h)))
    return max(1, math.ceil(w * scale * h * scale / 750))


def _dims_from_header(raw: bytes) -> tuple[int, int] | None:
    if raw.startswith(b"\x89PNG\r\n\x1a\n") and len(raw) >= 24:
        w, h = struct.unpack(">II", raw[16:24])
        return int(w), int(h)
    if raw[:6] in (b"GIF87a", b"GIF89a") and len(raw) >= 10:
        w, h = struct.unpack("<HH", raw[6:10])
        return int(w), int(h)
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP" and len(raw) >= 30:
        chunk = raw[12:16]
        if chunk == b"VP8 ":
            w, h = struct.unpack("<HH", raw[26:30])
            return int(w) & 0x3FFF, int(h) & 0x3FFF
        if chunk == b"VP8L":
            b = raw[21:25]
            w = 1 + (((b[1] & 0x3F) << 8) | b[0])
            h = 1 + (((b[3] & 0xF) << 10) | (b[2] << 2) | ((b[1] & 0xC0) >> 6))
            return w, h
        if chunk == b"VP8X":
            w = 1 + int.from_bytes(raw[24:27], "little")
            h = 1 + int.from_bytes(raw[27:30], "little")
            return w, h
        return None
    if raw[:2] == b"\xff\xd8":
        i = 2
        while i + 9 < len(raw):
            if raw[i] != 0xFF:
                i += 1
                continue
            marker = raw[i + 1]
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7 or marker == 0xFF:
                i += 1 if marker == 0xFF else 2
                continue
            length = int.from_bytes(raw[i + 2 : i + 4], "big")
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                h, w = struct.unpack(">HH", raw[i + 5 : i + 9])
                return int(w), int(h)
            i += 2 + length
    return None


def _inline_payload(data: Mapping[str, Any]) -> str | None:
    """The base64 text of an inline image, wherever the block format keeps it."""
    source = data.get("source")
    if isinstance(source, Mapping) and source.get("type") == "base64":
        payload = source.get("data")
        return payload if isinstance(payload, str) else None
    if isinstance(data.get("base64"), str):
        return str(data["base64"])
    url: Any = data.get("image_url", data.get("url"))
    if isinstance(url, Mapping):
        url = url.get("url")
    if isinstance(url, str) and url.startswith("data:"):
        head, _, payload = url.partition(",")
        return payload if head.endswith(";base64") else None
    return None


def _declared(data: Mapping[str, Any]) -> tuple[int, int] | None:
    for holder in (data, data.get("image_url"), data.get("metadata"), data.get("extras")):
        if isinstance(holder, Mapping):
            w, h = holder.get("width"), holder.get("height")
            if isinstance(w, int) and isinstance(h, int) and w > 0 and h > 0:
                return w, h
    return None


def image_size(data: Mapping[str, Any]) -> tuple[int, int] | None:
    """``(width, height)`` of an image block, or ``None`` when it cannot be known."""
    declared = _declared(data)
    if declared is not None:
        return declared
    payload = _inline_payload(data)
    if not payload:
        return None
    head = "".join(payload[:HEADER_CHARS].split())
    head = head[: len(head) - len(head) % 4]
    try:
        raw = base64.b64decode(head, validate=False)
    except (binascii.Error, ValueError):
        return None
    return _dims_from_header(raw)


def media_tokens(kind: str, data: Mapping[str, Any]) -> int | None:
    """Tokens of an image block by its size and detail; ``None`` for other blocks."""
    if kind in _OPENAI_KINDS:
        url = data.get("image_url")
        detail = url.get("detail") if isinstance(url, Mapping) else data.get("detail")
        size = image_size(data)
        w, h = size if size else (None, None)
        return openai_image_tokens(w, h, str(detail or "auto"))
    if kind == "image":
        size = image_size(data)
        w, h = size if size else (None, None)
        if isinstance(data.get("source"), Mapping):
            return anthropic_image_tokens(w, h)
        return max(
            openai_image_tokens(w, h, str(data.get("detail") or "auto")),
            anthropic_image_tokens(w, h),
        )
    return None
