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

Documents and audio, when inline:

* a PDF (Anthropic ``document`` with a base64 source, OpenAI ``file`` /
  ``input_file`` with ``file_data``, LangChain v1 ``file`` with ``base64``) costs
  :data:`PDF_PAGE_TOKENS` a page: both providers send each page as its text
  and an image of the page (Anthropic documents 1,500-3,000 tokens a page);
  the pages are counted in the file (its page objects, compressed object
  streams included), or estimated from its size when they cannot be;
* audio (OpenAI ``input_audio``, LangChain v1 ``audio``) costs
  :data:`AUDIO_TOKENS_PER_SECOND` a second of the duration its container
  states (WAV, MP3 by its bit rate).

Other documents and audio of unknown length keep the flat charge.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
import zlib
from collections.abc import Mapping
from typing import Any

__all__ = [
    "AUDIO_TOKENS_PER_SECOND",
    "PDF_PAGE_TOKENS",
    "anthropic_image_tokens",
    "audio_seconds",
    "image_size",
    "media_tokens",
    "media_type",
    "openai_image_tokens",
    "pdf_pages",
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
#: a page of a PDF: its text and an image of the page (the top of Anthropic's documented range)
PDF_PAGE_TOKENS = 3000
#: bytes of a PDF page when its pages cannot be counted (a text page of a typical PDF)
PDF_BYTES_PER_PAGE = 50_000
#: a second of audio (OpenAI: one token per 100 ms of input audio)
AUDIO_TOKENS_PER_SECOND = 10
#: decompressed bytes read from a PDF's object streams to find its pages
PDF_INFLATE_LIMIT = 1 << 26
_DOCUMENT_KINDS = frozenset({"document", "file", "input_file"})
_AUDIO_KINDS = frozenset({"audio", "input_audio"})


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


def _inline(data: Mapping[str, Any]) -> tuple[str | None, str] | None:
    """``(media type, base64 text)`` of an inline block, wherever its format
    keeps them (the media type ``None`` when not stated or not well-formed)."""
    source = data.get("source")
    if isinstance(source, Mapping) and source.get("type") == "base64":
        payload = source.get("data")
        return (media_type(source.get("media_type")), payload) if isinstance(payload, str) else None
    for key in ("base64", "data", "audio", "image"):  # LangChain v1; LlamaIndex blocks
        if isinstance(data.get(key), str) and (key == "base64" or "block_type" in data):
            mime = data.get("mime_type") or data.get(f"{data.get('block_type')}_mimetype")
            return media_type(mime), str(data[key])
    audio = data.get("input_audio")
    if isinstance(audio, Mapping) and isinstance(audio.get("data"), str):
        return media_type(f"audio/{audio.get('format')}"), str(audio["data"])
    url: Any = data.get("image_url", data.get("url", data.get("file_data")))
    file = data.get("file")
    if url is None and isinstance(file, Mapping):  # OpenAI chat ``file`` blocks
        url = file.get("file_data")
    if isinstance(url, Mapping):
        url = url.get("url")
    if isinstance(url, str) and url.startswith("data:"):
        head, _, payload = url.partition(",")
        if head.endswith(";base64"):
            return media_type(head[5:].split(";", 1)[0]), payload
    return None


def _inline_payload(data: Mapping[str, Any]) -> str | None:
    """The base64 text of an inline block."""
    found = _inline(data)
    return found[1] if found else None


def _decode(payload: str, chars: int | None = None) -> bytes:
    text = "".join((payload if chars is None else payload[:chars]).split())
    text = text[: len(text) - len(text) % 4]
    try:
        return base64.b64decode(text, validate=False)
    except (binascii.Error, ValueError):
        return b""


_PAGE = re.compile(rb"/Type\s*/Page(?![A-Za-z])")
_OBJECT_STREAM = re.compile(rb"/Type\s*/ObjStm")
_STREAM = re.compile(rb"stream\r?\n")


def pdf_pages(raw: bytes) -> int | None:
    """Pages of a PDF: its ``/Type /Page`` objects, in the file and in its
    compressed object streams (at most :data:`PDF_INFLATE_LIMIT` bytes
    inflated); ``None`` when none is found."""
    pages = len(_PAGE.findall(raw))
    if pages:
        return pages
    budget = PDF_INFLATE_LIMIT
    for found in _OBJECT_STREAM.finditer(raw):
        start = _STREAM.search(raw, found.end())
        if start is None or budget <= 0:
            break
        inflater = zlib.decompressobj()
        try:
            chunk = inflater.decompress(raw[start.end() :], budget)
        except zlib.error:
            continue
        budget -= len(chunk)
        pages += len(_PAGE.findall(chunk))
    return pages or None


def _wav_seconds(raw: bytes) -> float | None:
    if not (raw[:4] == b"RIFF" and raw[8:12] == b"WAVE"):
        return None
    i, rate, size = 12, None, None
    while i + 8 <= len(raw) and (rate is None or size is None):
        chunk, length = raw[i : i + 4], int.from_bytes(raw[i + 4 : i + 8], "little")
        if chunk == b"fmt " and i + 20 <= len(raw):
            rate = int.from_bytes(raw[i + 16 : i + 20], "little")
        elif chunk == b"data":
            size = length
        i += 8 + length + (length & 1)
    return size / rate if rate and size is not None else None


#: MPEG-1 layer III bit rates (kbit/s) by the header's index
_MP3_KBPS = (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 0)


def _mp3_seconds(raw: bytes, total: int) -> float | None:
    """Seconds of an MP3 of ``total`` bytes at the bit rate of its first frame."""
    i = 10 + int.from_bytes(raw[6:10], "big") if raw[:3] == b"ID3" else 0  # approx tag size
    i = raw.find(b"\xff", i)
    while 0 <= i < len(raw) - 3:
        b1, b2 = raw[i + 1], raw[i + 2]
        if b1 & 0xFE == 0xFA and _MP3_KBPS[b2 >> 4]:  # MPEG-1 layer III frame
            return total * 8 / (_MP3_KBPS[b2 >> 4] * 1000)
        i = raw.find(b"\xff", i + 1)
    return None


def audio_seconds(data: Mapping[str, Any]) -> float | None:
    """Duration of an inline audio block as its container states it (WAV, MP3)."""
    found = _inline(data)
    if found is None:
        return None
    raw = _decode(found[1], HEADER_CHARS)
    seconds = _wav_seconds(raw)
    if seconds is None:
        seconds = _mp3_seconds(raw, len(found[1]) * 3 // 4)
    return seconds


def _document_tokens(data: Mapping[str, Any]) -> int | None:
    found = _inline(data)
    if found is None or found[0] not in (None, "application/pdf"):
        return None
    raw = _decode(found[1])
    if not raw.startswith(b"%PDF"):
        return None
    pages = pdf_pages(raw) or max(1, math.ceil(len(raw) / PDF_BYTES_PER_PAGE))
    return pages * PDF_PAGE_TOKENS


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
    return _dims_from_header(_decode(payload, HEADER_CHARS))


def media_tokens(kind: str, data: Mapping[str, Any]) -> int | None:
    """Tokens of an image block by its size and detail, of an inline PDF by its
    pages, of inline audio by its duration; ``None`` for other blocks."""
    if kind in _DOCUMENT_KINDS:
        return _document_tokens(data)
    if kind in _AUDIO_KINDS:
        seconds = audio_seconds(data)
        return None if seconds is None else max(1, math.ceil(seconds * AUDIO_TOKENS_PER_SECOND))
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
