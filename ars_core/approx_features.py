"""What the approximate estimator reads from a text, in one pass at C speed:
character-class counts (:func:`approx_features`) whose weighted sum
approximates tiktoken's ``o200k_base`` (weights in
:class:`~ars_core.estimate.ApproxEstimator`, fitted by
``benchmarks/fit_approx.py``)."""

from __future__ import annotations

__all__ = ["APPROX_CHUNK", "APPROX_FEATURES", "approx_features"]

_LETTER, _UPPER, _DIGIT, _PUNCT, _SPACE, _NEWLINE, _CJK, _OTHER = (1 << i for i in range(8))
#: characters per chunk: bounds the temporary memory (a few times this many bytes)
APPROX_CHUNK = 1 << 16


def _class_table() -> bytes:
    table = bytearray(256)
    for i in range(128):
        c = chr(i)
        if c.isalpha():
            table[i] = _LETTER | (_UPPER if c.isupper() else 0)
        elif c.isdigit():
            table[i] = _DIGIT
        elif c in "\n\r":
            table[i] = _NEWLINE
        elif c in " \t\f\v":
            table[i] = _SPACE
        elif 33 <= i < 127:
            table[i] = _PUNCT
        else:
            table[i] = _OTHER
    for i in range(0xC0, 0x100):  # UTF-8 lead bytes: the script of the character
        if i <= 0xDF:
            table[i] = _LETTER  # Latin, Greek, Cyrillic, Hebrew, Arabic...
        elif 0xE3 <= i <= 0xED:
            table[i] = _CJK  # CJK punctuation, kana, ideographs, Hangul (U+3000-U+DFFF)
        else:
            table[i] = _OTHER  # symbols, Indic scripts, emoji...
    return bytes(table)


_CLASSES = _class_table()
_CONTINUATION = bytes(range(0x80, 0xC0))


def _mask(bit: int) -> int:
    return int.from_bytes(bytes([bit]) * APPROX_CHUNK, "little")


_M_LETTER, _M_DIGIT, _M_PUNCT, _M_NEWLINE, _M_CJK, _M_OTHER, _M_LOW7, _M_HIGH = map(
    _mask, (_LETTER, _DIGIT, _PUNCT, _NEWLINE, _CJK, _OTHER, 0x7F, 0x80)
)

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
    and other non-Latin characters. One pass, memory a small multiple of a chunk."""
    chars = words = case = digits = punct = runs = breaks = cjk = other = 0
    for start in range(0, len(text), APPROX_CHUNK):
        chunk = text[start : start + APPROX_CHUNK]
        raw = chunk.encode("utf-8", "surrogatepass")
        ascii_only = len(raw) == len(chunk)
        if not ascii_only:  # one byte a character: the lead byte tells the script
            raw = raw.translate(None, _CONTINUATION)
        flags = raw.translate(_CLASSES)
        x = int.from_bytes(flags, "little")
        prev = x << 8
        starts = x ^ (x & prev)  # a class present here and absent just before
        chars += len(flags)
        words += (starts & _M_LETTER).bit_count()
        # an upper-case letter after a lower-case one (bit 0 of prev ^ prev >> 1 is
        # "letter and not upper-case": upper-case letters carry both bits)
        case += ((x >> 1) & (prev ^ (prev >> 1)) & _M_LETTER).bit_count()
        digits += (starts & _M_DIGIT).bit_count()
        punct += (x & _M_PUNCT).bit_count()
        breaks += (starts & _M_NEWLINE).bit_count()
        # bytes equal to the previous byte: zero bytes of raw ^ (raw << 8), found
        # without carries between bytes (bit 7 ends up set for every non-zero byte)
        r = int.from_bytes(raw, "little")
        diff = r ^ (r << 8)
        same = _M_HIGH ^ ((((diff & _M_LOW7) + _M_LOW7) | diff) & _M_HIGH)
        runs += ((same >> 4) & x & _M_PUNCT).bit_count()
        if not ascii_only:
            cjk += (x & _M_CJK).bit_count()
            other += (x & _M_OTHER).bit_count()
    return chars, words, case, digits, punct, runs, breaks, cjk, other
