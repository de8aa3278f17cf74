"""The exact size of each request's messages, kept with its answer (LangChain side).

When the engine counted the messages of a request exactly, its outcome carries a
stamp of that count (:mod:`ars_core.known_size`). :func:`stamp_known` records it
on the answer's ``response_metadata["ars"]`` (where ARS's markers travel: never
sent to a provider, kept by every checkpointer, brought into the core message's
metadata by :func:`~ars_langchain.convert.to_core`), so a later call on the same
thread, in this process or another, reads the history's size from it and counts
only the messages appended since.

:func:`known_sendable` is the passthrough's use of it (:mod:`ars_langchain.passthrough`):
a call with no stored event whose bound is above T but whose newest answer's stamp
matches the history is decided from the stamped count plus the exact counts of the
messages after it (only those converted to core messages), without the engine; the
answer of a call sent so is stamped in turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar, cast

from langchain_core.messages import AIMessage

from ars_core import Compressor, Message
from ars_core.adapter import Tools, fits_by_bound, synthetic_result, utf8_bound
from ars_core.known_size import (
    MARK_KNOWN_SIZE,
    NOT_AN_ANSWER,
    estimator_name,
    ids_digest,
    newest_stamp,
    read_stamp,
)

from .convert import MARKERS_KEY, from_core, to_core
from .passthrough import _Pairs, _read, _summary_first
from .provider_count import history_ratio

__all__ = ["known_sendable", "stamp_known"]

R = TypeVar("R")


def _answer_stamp(message: Any) -> Any:
    if not isinstance(message, AIMessage):
        return NOT_AN_ANSWER
    markers = (message.response_metadata or {}).get(MARKERS_KEY)
    return markers.get(MARK_KNOWN_SIZE) if isinstance(markers, Mapping) else None


def known_sendable(
    compressor: Compressor,
    messages: Sequence[Any],
    system: Message | None,
    tools: Tools | None,
    limit: int | None = None,
) -> tuple[list[Any], dict[str, Any]] | None:
    """The notes to send after ``messages`` when they go out as they came, decided by
    the newest answer's stamp (see the module doc), and the stamp of this request for
    its answer; ``None`` when the stamp does not match (or is missing), when the engine
    would change the view, or when the request is not below T. Raises
    :class:`~ars_langchain.passthrough.TooMuch` past ``limit`` characters of text."""
    estimator: Any = compressor.estimator
    counter = utf8_bound(estimator)
    found = newest_stamp(messages, _answer_stamp) if counter is not None else None
    read = read_stamp(found[1], estimator) if found is not None else None
    if counter is None or found is None or read is None:
        return None
    covers, tokens, size, ids, basis = read
    if covers != found[0] or basis is not None:  # the passthrough sends no summary
        return None
    pairs = _Pairs(broken=_summary_first(messages))
    head = _read(messages[:covers], pairs, counter, estimator, limit)[0]
    if head != size or ids_digest([m.id for m in messages[:covers]]) != ids:
        return None
    tail = messages[covers:]
    bound = head + _read(tail, pairs, counter, estimator, limit)[0]
    if pairs.broken:
        return None
    exact = tokens + sum(estimator.count_message(to_core(m)) for m in tail)
    notes = [synthetic_result(c) for c in pairs.unanswered()]
    ratio = history_ratio(messages, estimator)  # the provider's, as sendable reads it
    if not fits_by_bound(compressor, exact, system, tools, notes, ratio):
        return None
    stamp = {
        "covers": len(messages),
        "tokens": exact,
        "bytes": bound,
        "ids": ids_digest([m.id for m in messages]),
        "basis": None,
        "estimator": estimator_name(estimator),
    }
    return [from_core(n) for n in notes], stamp


def stamp_known(response: R, stamp: Mapping[str, Any] | None) -> R:
    """``response`` (a ``ModelResponse`` or an ``AIMessage``) with its newest answer
    carrying ``stamp``: the answer is replaced by a stamped copy (the model's object
    is not changed); without a stamp, or without an answer, ``response`` as it is."""
    if stamp is None:
        return response
    if isinstance(response, AIMessage):
        return cast(R, _stamped(response, stamp))
    result = getattr(response, "result", None)
    if not isinstance(result, list):
        return response
    for i in range(len(result) - 1, -1, -1):
        if isinstance(result[i], AIMessage):
            result[i] = _stamped(result[i], stamp)
            break
    return response


def _stamped(message: AIMessage, stamp: Mapping[str, Any]) -> AIMessage:
    meta = dict(message.response_metadata or {})
    markers = meta.get(MARKERS_KEY)
    markers = dict(markers) if isinstance(markers, Mapping) else {}
    markers[MARK_KNOWN_SIZE] = dict(stamp)
    meta[MARKERS_KEY] = markers
    return message.model_copy(update={"response_metadata": meta})
