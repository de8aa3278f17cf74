"""Cheap counts never below an estimator's own: what a
:class:`~ars_core.capabilities.BoundedEstimator` sizes a history by before counting it.

For a byte-level BPE encoding (tiktoken's ``o200k_base``, ``cl100k_base``) every
token covers at least one byte of the text's UTF-8 form, so a text's bytes bound
its tokens; :class:`Utf8Bytes` counts a message as the estimators do (the same
overheads, media, tool calls as JSON) with each text taken as its bytes.
"""

from __future__ import annotations

from .estimate import CachingEstimator

__all__ = ["Utf8Bytes", "utf8_length"]


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
