"""Cheap counts never above the exact count of a tiktoken encoding: what a decision
that only needs to know that a count is above a limit reads before encoding a text.

``o200k_base`` (and ``cl100k_base``) split a text into pieces by a pattern and
encode each piece alone into one token or more, so a text counts at least as many
tokens as it has pieces. :func:`token_floor` counts places where a piece starts
whatever surrounds them, on pairs of neighbouring ASCII characters (a few passes
at C speed instead of an encoding):

* a letter followed by punctuation other than ``'``, a slash, a line break or a
  tab (a piece of letters holds nothing after them but a contraction);
* a digit next to anything ASCII but a digit or a space (a number's pieces hold
  digits alone; a space before a digit is a piece of its own or ends one);
* a line break followed by a letter, punctuation other than ``/``, or ``'`` (no
  piece goes on past line breaks but to a slash or to more of them);
* a space followed by a printable character: the space starts a piece (only a
  piece's first character may be a space that such a character follows).

Each rule names the position of the piece start it finds, and no two rules name
the same one; the text's first character starts a piece too. Characters outside
ASCII (and control characters) start or end nothing here, so any of them only
loses pieces (a letter, a mark or a space of another script).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .estimate import MESSAGE_OVERHEAD, TOOL_CALL_OVERHEAD, CachingEstimator, TiktokenEstimator
from .memo import FLOOR, TOKENS
from .messages import Message
from .pending_form import is_pending
from .totals import Reach

__all__ = [
    "FLOOR_REACH",
    "HEAD_CHARS_PER_TOKEN",
    "Reach",
    "counts_by_pieces",
    "floor_of",
    "floors_reach",
    "floors_reach_of",
    "head_floor",
    "message_floor",
    "token_floor",
]

_LETTERS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_DIGITS = frozenset(b"0123456789")
_PUNCT = frozenset(range(0x21, 0x7F)) - _LETTERS - _DIGITS - frozenset(b"'/")
_CLASSES = {
    "L": _LETTERS,
    "D": _DIGITS,
    "P": _PUNCT,
    "A": frozenset(b"'"),
    "F": frozenset(b"/"),
    "N": frozenset(b"\r\n"),
    "T": frozenset(b"\t\x0b\x0c"),
    "S": frozenset(b" "),
}


#: the rules: the classes of the character before a piece start, and of the one at it
#: (the space rule's piece start is the character before: the space)
_RULES = (("L", "PFNT"), ("D", "LPAFNT"), ("LPAFNT", "D"), ("N", "LPA"), ("S", "LDPAF"))


def _flags(side: int) -> bytes:
    """A translation of each byte to the rules it may be the first (``side`` 0) or
    the second (``side`` 1) character of, one bit a rule."""
    table = bytearray(256)
    for bit, rule in enumerate(_RULES):
        for cls in rule[side]:
            for byte in _CLASSES[cls]:
                table[byte] |= 1 << bit
    return bytes(table)


_FIRST, _SECOND = _flags(0), _flags(1)
#: the bit of the space rule
_SPACE_RULE = 1 << 4


def token_floor(text: str) -> int:
    """At most the tokens of ``text`` in ``o200k_base`` (or ``cl100k_base``), as the
    exact estimator counts it: the piece starts of the module's rules (0 for an empty
    text). Each pair of neighbouring bytes meets one rule at most: the bytes as two
    integers of rule bits, the first shifted onto the second, their common bits are
    the starts (a few passes at C speed, a machine word at a time). A long text the
    estimator encodes in parts counts at least this too: where a part starts, one
    piece starts in the part, and the rules name at most one start around that
    place. The floor of a head of a text is at most the text's (each start it names
    is one of the text's)."""
    if not text:
        return 0
    data = text.encode("utf-8", "surrogatepass")
    first = int.from_bytes(data.translate(_FIRST), "big") >> 8  # each byte onto the next
    starts = (first & int.from_bytes(data.translate(_SECOND), "big")).bit_count()
    # the text's first piece, unless the space rule found it (a space, then a character)
    return starts + (not (data[0] == 0x20 and len(data) > 1 and _SECOND[data[1]] & _SPACE_RULE))


#: characters per token of the head :func:`head_floor` reads
HEAD_CHARS_PER_TOKEN = 8


def head_floor(text: str, tokens: int) -> int:
    """:func:`token_floor` of a head of ``text`` long enough to show most texts of
    more than ``tokens`` tokens above them (:data:`HEAD_CHARS_PER_TOKEN` characters a
    token): at most the text's floor, at a cost that does not grow with the text."""
    return token_floor(text[: tokens * HEAD_CHARS_PER_TOKEN])


def message_floor(message: Message) -> int:
    """At most what the exact estimator counts for ``message`` (its
    :meth:`~ars_core.estimate.CachingEstimator.measure`: the same overheads, each text
    at its :func:`token_floor`, whatever else at least nothing). A pending form
    (:mod:`ars_core.pending_form`) is not made for it: its overhead alone."""
    if is_pending(message):
        return MESSAGE_OVERHEAD
    total = MESSAGE_OVERHEAD
    content = message.content
    if isinstance(content, str):
        total += token_floor(content)
    else:
        for part in content:
            if part.text is not None:
                total += token_floor(part.text)
    for call in message.tool_calls:
        # the id and the name when set, the arguments unless an empty text
        total += TOOL_CALL_OVERHEAD + bool(call.id) + bool(call.name)
        total += bool(call.args) or not isinstance(call.args, str)
    if message.name:
        total += 2  # a separator and the name
    if message.tool_call_id:
        total += 1
    return total


def counts_by_pieces(estimator: Any) -> bool:
    """Whether ``estimator`` counts a message as the built-in exact estimator does,
    with an encoding that encodes a text piece by piece (``o200k_base``,
    ``cl100k_base``): its counts are then at least :func:`message_floor`'s."""
    kind: type[Any] = type(estimator)
    return (
        isinstance(estimator, TiktokenEstimator)
        and estimator.encoding_name in ("o200k_base", "cl100k_base")
        and kind.count_text is TiktokenEstimator.count_text
        and kind.count_message is CachingEstimator.count_message
        and kind.measure is CachingEstimator.measure
        and kind.count_part is CachingEstimator.count_part
        and kind.count_tool_call is CachingEstimator.count_tool_call
    )


def floor_of(estimator: Any) -> Callable[[Message], int] | None:
    """A message's count at most ``estimator``'s: the count a message holds, else
    :func:`message_floor` (kept on the message); ``None`` when ``estimator`` does not
    count by pieces (:func:`counts_by_pieces`)."""
    if not counts_by_pieces(estimator):
        return None
    key, get = estimator.cache_key, TOKENS.get

    def floor(message: Message) -> int:
        held = get(message, key)
        if held is not None:
            return int(held)
        # kept on the message (a round reads a message's floor in several decisions)
        return message_floor(message) if is_pending(message) else FLOOR.of(message, message_floor)

    return floor


#: how far past the limit (times it) the bounds of the messages read by
#: :func:`floors_reach` may go before it gives up (a text its floor says little of)
FLOOR_REACH = 8


def floors_reach(
    messages: Iterable[Message],
    limit: int,
    floor: Callable[[Message], int] = message_floor,
    bound: Callable[[Message], int] | None = None,
) -> bool:
    """Whether the ``floor`` of ``messages`` (read in their order) add up to ``limit``
    or more: then so do their counts. Given ``bound`` (never below a count), the pass
    gives up once the bounds of the messages read pass :data:`FLOOR_REACH` times
    ``limit`` (their counts are left to a count). A pending form's bound is not read
    (that would make it)."""
    low = high = 0
    most = FLOOR_REACH * limit
    for m in messages:
        low += floor(m)
        if low >= limit:
            return True
        if bound is not None and not is_pending(m):
            high += bound(m)
            if high > most:
                return False
    return False


def floors_reach_of(estimator: Any) -> Reach | None:
    """:func:`floors_reach` with ``estimator``'s :func:`floor_of` and its
    ``token_bound``; ``None`` when its counts have no floor here."""
    floor = floor_of(estimator)
    if floor is None:
        return None
    bound = estimator.token_bound

    def reach(messages: Iterable[Message], limit: int) -> bool:
        return floors_reach(messages, limit, floor, bound)

    return reach
