"""Cheap counts never below an estimator's own: what a
:class:`~ars_core.capabilities.BoundedEstimator` sizes a history by before counting it.

For a byte-level BPE encoding (tiktoken's ``o200k_base``, ``cl100k_base``) every
token covers at least one byte of the text's UTF-8 form, so a text's bytes bound
its tokens; :class:`Utf8Bytes` counts a message as the estimators do (the same
overheads, media, tool calls as JSON) with each text taken as its bytes.
"""

from __future__ import annotations

import functools
from json.encoder import encode_basestring as _escaped
from typing import Any

from .estimate import MESSAGE_OVERHEAD, TOOL_CALL_OVERHEAD, CachingEstimator
from .memo import call_scratch
from .messages import Message
from .provider_text import json_text

__all__ = ["Utf8Bytes", "json_bytes", "utf8_length"]

_STR = {str}


def utf8_length(text: str) -> int:
    """Bytes of ``text`` in UTF-8 (a lone surrogate as the 3 bytes tiktoken reads in
    its place), without encoding an ASCII text."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


class Utf8Bytes(CachingEstimator):
    """Counts every text as its UTF-8 bytes, everything else as the estimators do
    (overheads, media, tool calls as JSON): above the count of any byte-level BPE
    estimator (each of its tokens covers at least one byte), read at C speed."""

    name = "utf8-bytes"

    def count_text(self, text: str) -> int:
        return utf8_length(text) if text else 0

    def bytes_of(self, message: Message) -> int:
        """:meth:`measure`, kept while the running engine call lasts (a call reads the
        bound of a message several times: sizing the history, in L1, in L2)."""
        scratch = call_scratch()
        if scratch is None:
            return self.measure(message)
        kept: tuple[dict[int, int], list[Message]] | None = scratch.get(self)
        if kept is None:
            kept = scratch[self] = ({}, [])
        sizes, held = kept
        found = sizes.get(id(message))  # every message measured is held: its id is its own
        if found is not None:
            return int(found)
        size = self.measure(message)
        sizes[id(message)] = size
        held.append(message)  # (held in a list: no pair made for each message)
        return size

    def measure(self, message: Message) -> int:
        """:meth:`CachingEstimator.measure` in bytes (a plain-text message read inline)."""
        content = message.content
        if type(content) is not str:
            return super().measure(message)
        total = self.plain_fields(content, message.name, message.tool_call_id)
        calls = message.tool_calls
        if calls:
            for call in calls:
                total += self.count_tool_call(call.id, call.name, call.args)
        return total

    @staticmethod
    def plain_fields(content: str, name: str | None, call_id: str | None) -> int:
        """A message with string content, its tool calls aside, in bytes: what
        :meth:`measure` counts of its overhead, content, name and tool-call id (an adapter
        bounds its own messages from these fields and :meth:`count_tool_call`, without
        building core messages)."""
        total = MESSAGE_OVERHEAD + (
            len(content) if content.isascii() else len(content.encode("utf-8", "surrogatepass"))
        )
        if name:
            total += 1 + utf8_length(name)
        if call_id:
            total += len(call_id) if call_id.isascii() else utf8_length(call_id)
        return total

    def count_tool_call(self, call_id: str | None, name: str | None, args: Any) -> int:
        """:meth:`CachingEstimator.count_tool_call` in bytes, the arguments' JSON measured
        without building it when they are a flat mapping (:func:`json_bytes`)."""
        total = TOOL_CALL_OVERHEAD
        if call_id:
            total += utf8_length(str(call_id))
        if name:
            total += utf8_length(str(name))
        return total + (utf8_length(args) if isinstance(args, str) else json_bytes(args))


def json_bytes(value: Any) -> int:
    """The UTF-8 bytes of :func:`~ars_core.provider_text.json_text` of ``value``: a
    mapping of string keys to strings, integers, booleans and ``None`` is measured
    piece by piece (each string escaped by the C encoder, no document built);
    anything else is rendered."""
    if type(value) is not dict or not value:
        return utf8_length(json_text(value))
    if set(map(type, value)) == _STR and set(map(type, value.values())) == _STR:
        # strings only (most arguments): escaped in one piece, since JSON escapes each
        # character alone; {"k": "v", ...} adds 8 characters an item, less ", " once
        text = "".join(value) + "".join(value.values())
        return 8 * len(value) - 2 + utf8_length(_escaped(text))
    total = 2 * len(value)  # the braces, and ", " between items
    for key, item in value.items():
        if type(key) is not str:
            return utf8_length(json_text(value))
        total += utf8_length(_escaped(key)) + 2  # ": "
        kind = type(item)
        if kind is str:
            total += utf8_length(_escaped(item))
        elif kind is int:
            total += len(int.__repr__(item))
        elif kind is bool:
            total += 4 if item else 5
        elif item is None:
            total += 4
        else:
            return utf8_length(json_text(value))
    return total


#: characters a head is first taken with, per token it must hold (a text has about 4)
HEAD_CHARS_PER_TOKEN = 5
#: how far past that length a head may end (where a line starts with a letter or digit)
HEAD_REACH = 4


def head_tokens_below(encoding: Any, text: str, tokens: int) -> int:
    """Tokens of a head of ``text`` of about ``tokens`` tokens (:func:`piece_head`),
    never more than the text's own count in the ``o200k_base`` ``encoding``: 0 when no
    such head is found."""
    end = piece_head(text, tokens * HEAD_CHARS_PER_TOKEN)
    return len(encoding.encode_ordinary(text[:end])) if end else 0


def piece_head(text: str, start: int) -> int:
    """The length of a head of ``text`` (from ``start`` to :data:`HEAD_REACH` times
    that) that the ``o200k_base`` encoding encodes as the text's first tokens; 0 when
    there is none.

    The encoding splits a text into pieces (its pattern) and encodes each alone, so a
    text's count is the sum of its pieces'. The head ends right after a newline that
    starts no longer run of newlines (:func:`_piece_ends_after`): the piece holding
    that newline ends there in the text as in the head, and the pieces before it are
    found the same in both (what decides them lies before it). So the head's pieces
    are the text's first ones, and its count is at most the text's.
    """
    if start <= 0 or start >= len(text):
        return 0
    limit = min(len(text) - 1, start * HEAD_REACH)
    i = text.find("\n", start - 1, limit)
    while i != -1:
        if _piece_ends_after(text, i + 1):
            return i + 1
        i = text.find("\n", i + 1, limit)
    return 0


def _piece_ends_after(text: str, p: int) -> bool:
    """Whether the ``o200k_base`` piece holding the newline ``text[p - 1]`` ends at ``p``
    whatever follows ``text[p]``: the pieces that hold a newline are a run of spaces
    ending in newlines (``\\s*[\\r\\n]+``) and punctuation followed by newlines and
    slashes (`` ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*``); neither takes a character that is
    neither a space nor a slash, nor spaces and tabs that a character other than a
    space follows (no newline among them)."""
    c = text[p]
    if c in " \t":
        q = p + 1
        while q < len(text) and text[q] in " \t":
            q += 1
        return q < len(text) and not text[q].isspace()
    return c != "/" and not c.isspace()


@functools.cache
def digit_groups_are_tokens(encoding: Any) -> bool:
    """Whether every string of one to three digits is one token of ``encoding`` (true
    of ``o200k_base``): a number, split by the pattern into such groups, then counts
    one token a group, so a number of fewer digits never counts more."""
    return all(
        len(encoding.encode_ordinary(str(i).zfill(digits))) == 1
        for digits in (1, 2, 3)
        for i in range(10**digits)
    )
