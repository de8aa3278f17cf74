"""What the approximate estimator reads from a text, in one pass at C speed:
character-class counts (:func:`approx_features`) whose weighted sum
approximates tiktoken's ``o200k_base`` (weights in
:class:`~ars_core.estimate.ApproxEstimator`, fitted by
``benchmarks/fit_approx.py``)."""

from __future__ import annotations

import operator

__all__ = ["APPROX_CHUNK", "APPROX_FEATURES", "approx_features", "approx_weighted_sum"]

_LETTER, _UPPER, _DIGIT, _PUNCT, _LOWER, _NEWLINE, _CJK, _OTHER = (1 << i for i in range(8))
#: characters per chunk: bounds the temporary memory (a few times this many bytes)
APPROX_CHUNK = 1 << 16


def _class_table() -> bytes:
    table = bytearray(256)
    for i in range(128):
        c = chr(i)
        if c.isalpha():
            table[i] = _LETTER | (_UPPER if c.isupper() else _LOWER)
        elif c.isdigit():
            table[i] = _DIGIT
        elif c in "\n\r":
            table[i] = _NEWLINE
        elif c in " \t\f\v":
            table[i] = 0  # white space: no class
        elif 33 <= i < 127:
            table[i] = _PUNCT
        else:
            table[i] = _OTHER
    for i in range(0xC0, 0x100):  # UTF-8 lead bytes: the script of the character
        if i <= 0xDF:
            table[i] = _LETTER | _LOWER  # Latin, Greek, Cyrillic, Hebrew, Arabic...
        elif 0xE3 <= i <= 0xED:
            table[i] = _CJK  # CJK punctuation, kana, ideographs, Hangul (U+3000-U+DFFF)
        else:
            table[i] = _OTHER  # symbols, Indic scripts, emoji...
    return bytes(table)


_CLASSES = _class_table()
_CONTINUATION = bytes(range(0x80, 0xC0))


def _mask(bit: int) -> int:
    return int.from_bytes(bytes([bit]) * (APPROX_CHUNK + 1), "little")


_M_LETTER, _M_UPPER, _M_DIGIT, _M_PUNCT, _M_NEWLINE = map(
    _mask, (_LETTER, _UPPER, _DIGIT, _PUNCT, _NEWLINE)
)
#: ``0x7F`` in every byte, one mask per power-of-two length up to a chunk plus one
#: byte: the smallest that covers a text is the one :func:`_chunk_features` adds
_LOW7_BY_BITS = [
    int.from_bytes(b"\x7f" * min(1 << k, APPROX_CHUNK + 1), "little") for k in range(18)
]
_B_PUNCT, _B_CJK, _B_OTHER = bytes([_PUNCT]), bytes([_CJK]), bytes([_OTHER])

#: the features :func:`approx_features` returns, in order
APPROX_FEATURES = (
    "chars",
    "word_starts",
    "case_changes",
    "digit_starts",
    "punct",
    "punct_repeats",
    "line_breaks",
    "cjk",
    "other",
)


def approx_features(text: str) -> tuple[int, ...]:
    """The character counts the approximate estimator weighs (see ``APPROX_FEATURES``):
    characters, word starts, lower-to-upper case changes inside words, digit-run
    starts, punctuation, punctuation repeating the character before it
    (``=====`` rules, which BPE packs densely), line-break runs, CJK
    and other non-Latin characters. One pass, memory a small multiple of a chunk.

    Every integer operation is on integers the size of the text (the masks are
    wider, but ``&`` stops at the shorter operand and the one addition uses a mask
    cut to length), so a short text costs a few microseconds, not a chunk's worth."""
    if len(text) <= APPROX_CHUNK:  # most texts: one chunk, its counts as they are
        return _chunk_features(text)
    totals = [0] * len(APPROX_FEATURES)
    for start in range(0, len(text), APPROX_CHUNK):
        totals = list(
            map(operator.add, totals, _chunk_features(text[start : start + APPROX_CHUNK]))
        )
    return tuple(totals)


def approx_weighted_sum(text: str, weights: tuple[float, ...]) -> float:
    """``sum(w * f for w, f in zip(weights, approx_features(text)))``, the same float
    (added left to right from the first product), without a ``map`` over nine pairs."""
    w0, w1, w2, w3, w4, w5, w6, w7, w8 = weights
    n, words, cases, digits, punct, repeats, breaks, cjk, other = approx_features(text)
    return (
        n * w0
        + words * w1
        + cases * w2
        + digits * w3
        + punct * w4
        + repeats * w5
        + breaks * w6
        + cjk * w7
        + other * w8
    )


def _chunk_features(chunk: str) -> tuple[int, ...]:
    """:func:`approx_features` of at most :data:`APPROX_CHUNK` characters."""
    raw = chunk.encode("utf-8", "surrogatepass")
    ascii_only = len(raw) == len(chunk)
    if not ascii_only:  # one byte a character: the lead byte tells the script
        raw = raw.translate(None, _CONTINUATION)
    flags = raw.translate(_CLASSES)
    n = len(flags)
    x = int.from_bytes(flags, "little")
    both = x & (x << 8)  # a class present here and just before
    starts = x ^ both  # a class present here and absent just before
    punct = flags.count(_B_PUNCT)
    runs = 0
    if both & _M_PUNCT:  # no punctuation after punctuation: nothing can repeat
        # punctuation equal to the byte before it: bit 7 of each byte of
        # ``differs`` is set where raw ^ (raw << 8) has a non-zero byte (found
        # without carries between bytes), then shifted onto the punctuation bit
        r = int.from_bytes(raw, "little")
        diff = r ^ (r << 8)
        # any mask of at least n + 1 bytes gives the same bits below (the sum carries
        # within each byte only, and ``x`` cuts the result to the text's length)
        low7 = _LOW7_BY_BITS[n.bit_length()]
        differs = ((diff & low7) + low7) | diff
        runs = punct - (x & (differs >> 4) & _M_PUNCT).bit_count()
    return (
        n,
        (starts & _M_LETTER).bit_count(),
        # an upper-case letter after a lower-case one (x << 5 moves the previous
        # character's lower-case bit onto this one's upper-case bit)
        (x & (x << 5) & _M_UPPER).bit_count(),
        (starts & _M_DIGIT).bit_count(),
        punct,
        runs,
        (starts & _M_NEWLINE).bit_count(),
        0 if ascii_only else flags.count(_B_CJK),
        0 if ascii_only else flags.count(_B_OTHER),
    )
