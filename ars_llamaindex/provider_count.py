"""The provider's count of each request, for an :class:`~ars_llamaindex.ArsMemory`.

Where the usage is in LlamaIndex: a ``ChatResponse`` carries it (``raw``, the
provider's own response: OpenAI's ``usage.prompt_tokens``, Anthropic's
``usage.input_tokens`` plus its cache reads and writes, Gemini's
``usage_metadata.prompt_token_count``), but the ``ChatMessage`` an agent stores
in its memory (``response.message``) does not: ``FunctionAgent`` puts the
message alone in the memory, the raw response only in its ``AgentOutput``. Nor can
ARS write its stamp into that message: ``additional_kwargs`` are sent on to some
providers, which reject unknown fields.

So :class:`~ars_llamaindex.ArsFunctionAgent` reads the usage of each step's raw
response (:func:`raw_input_tokens`) and hands it to the memory
(``ArsMemory.record_usage``), and :class:`UsageLog` keeps the stamp
(:func:`ars_core.provider_size.stamp`: the provider's count beside the estimate of
the view the memory last returned) in the chat store under ``<key>::ars_usage``,
with the key of the answer it came with, so a new process reads it back. When the
memory builds the next view, the newest assistant message gets the stamp if it is
that answer (:meth:`UsageLog.apply`), and the engine sizes the call by it as it
does for LangChain's answers. A memory driven by another agent (no raw response
reaches it) sizes by the estimator alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llama_index.core.base.llms.types import ChatMessage

from ars_core import Message
from ars_core.adapter import MARK_PROVIDER_COUNT, NOT_AN_ANSWER, message_key, newest_stamp, stamp

from .convert import to_core_messages
from .stored_record import StoredRecord

__all__ = ["USAGE_KEY_SUFFIX", "UsageLog", "raw_input_tokens"]

#: suffix of the chat-store key of a conversation's last usage stamp
USAGE_KEY_SUFFIX = "::ars_usage"
#: the record's field in its ``ChatMessage.additional_kwargs``
_FIELD = "ars_usage"


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def raw_input_tokens(raw: Any) -> int | None:
    """The input tokens a provider's raw response reports, cache reads and writes
    included (Anthropic reports them apart); ``None`` when it reports none."""
    usage = _get(raw, "usage") if raw is not None else None
    if usage is None and raw is not None:
        usage = _get(raw, "usage_metadata")
    if usage is None:
        return None
    for name in ("prompt_tokens", "prompt_token_count"):  # OpenAI, Gemini: cache included
        value = _int(_get(usage, name))
        if value is not None:
            return value
    value = _int(_get(usage, "input_tokens"))
    if value is None:
        return None
    cached = ("cache_read_input_tokens", "cache_creation_input_tokens")
    return value + sum(_int(_get(usage, name)) or 0 for name in cached)


class UsageLog(StoredRecord):
    """The last answer's usage stamp of one conversation (see the module docstring)."""

    field = _FIELD

    def __init__(self, store: Any, key: str) -> None:
        super().__init__(store, key)
        self._sent: Any = None  # the estimate of the view the memory last returned

    def sent(self, outcome: Any, system: Any, tools: Any) -> None:
        """The memory returned the view of ``outcome`` (with ``system`` and ``tools``): the
        request a usage will measure. Its estimate is kept when it is known; else the
        view's messages (not the engine's list, which the history grows in place), to
        be counted only if a usage comes."""
        if outcome.counted:
            self._sent = int(outcome.tokens_after)
        else:
            self._sent = (tuple(outcome.view), system, tools)

    def _estimate(self, estimator: Any) -> int | None:
        sent = self._sent
        if isinstance(sent, tuple):
            view, system, tools = sent
            return int(estimator.count(list(view), system=system, tools=tools))
        return None if sent is None else int(sent)

    def _made(self, answer: ChatMessage, input_tokens: int | None, estimator: Any) -> Any:
        estimated = self._estimate(estimator) if input_tokens else None
        if not input_tokens or estimated is None:
            return None
        core = to_core_messages([answer])[0]
        record = {"answer": message_key(core), "stamp": stamp(input_tokens, estimated, estimator)}
        return self._rows(record)

    def record(self, answer: ChatMessage, input_tokens: int | None, estimator: Any) -> None:
        """Keep the provider's ``input_tokens`` for the request that ``answer`` answered."""
        made = self._made(answer, input_tokens, estimator)
        if made is not None:
            self._store.set(self.key, made)

    async def arecord(self, answer: ChatMessage, input_tokens: int | None, estimator: Any) -> None:
        made = self._made(answer, input_tokens, estimator)
        if made is not None:
            await self._store.aset(self.key, made)

    def mark(self, core: list[Message], record: Any) -> list[Message]:
        """``core`` with its newest assistant message stamped, when it is the recorded
        answer."""
        return _stamped(core, record)


def _stamped(core: list[Message], record: Any) -> list[Message]:
    if not record:
        return core
    found = newest_stamp(core, _answer)  # the newest answer, as the engine reads it
    if found is None:
        return core
    i, message = found
    if MARK_PROVIDER_COUNT in message.metadata or message_key(message) != record["answer"]:
        return core
    copy = list(core)
    copy[i] = message.with_content(message.content, **{MARK_PROVIDER_COUNT: record["stamp"]})
    return copy


def _answer(message: Message) -> Any:
    return message if message.role == "assistant" else NOT_AN_ANSWER
