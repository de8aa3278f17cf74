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

import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar, cast

import attrs
from langchain_core.messages import AIMessage

from ars_core import Compressor, Message
from ars_core.adapter import (
    MARK_KNOWN_SIZE,
    NOT_AN_ANSWER,
    IdsDigest,
    Tools,
    estimator_name,
    fitting_bound,
    newest_stamp,
    read_stamp,
    request_extra,
    synthetic_result,
    utf8_bound,
)

from .convert import from_core, marker, to_core, with_marker
from .passthrough import Passthrough, _Pairs, _read, _summary_first, grown_from
from .provider_count import history_ratio

__all__ = ["KnownRequest", "known_sendable", "stamp_known"]

R = TypeVar("R")


def _answer_stamp(message: Any) -> Any:
    if not isinstance(message, AIMessage):
        return NOT_AN_ANSWER
    return marker(message, MARK_KNOWN_SIZE)


@attrs.frozen
class KnownRequest:
    """A request decided by its known size: the notes sent after its messages, the
    stamp for its answer, and the estimator's count of the whole request (what a
    reported usage is recorded against: its ``tokens_after``)."""

    notes: list[Any]
    known: dict[str, Any]
    tokens_after: int
    view: Sequence[Any] = ()  # the messages sent (the request's, then the notes)


class _Decided:
    """A history :func:`known_sendable` sent (its messages as read, their exact count
    and bound, their pairing, the digest of their ids): a call on the same objects with
    messages appended reads only those."""

    __slots__ = ("bound", "exact", "ids", "messages", "pairs")

    def __init__(self, messages: list[Any], exact: int, bound: int, pairs: _Pairs, ids: Any):
        self.messages, self.exact, self.bound, self.pairs, self.ids = (
            messages,
            exact,
            bound,
            pairs,
            ids,
        )

    def extended_by(self, messages: Sequence[Any]) -> bool:
        """Whether ``messages`` are these messages (the same objects, or equal ones) with
        messages appended (:func:`~ars_langchain.passthrough.grown_from`)."""
        return grown_from(self.messages, messages)


#: the last history each passthrough (a thread's session) sent by its known size
_decided: weakref.WeakKeyDictionary[Passthrough, _Decided] = weakref.WeakKeyDictionary()
_decided_lock = threading.Lock()


def _from_stamp(messages: Sequence[Any], estimator: Any, counter: Any, limit: int | None) -> Any:
    """``_Decided`` of the part the newest answer's stamp covers, when every part of its
    fingerprint matches (``None`` otherwise)."""
    found = newest_stamp(messages, _answer_stamp)
    read = read_stamp(found[1], estimator) if found is not None else None
    if found is None or read is None:
        return None
    covers, tokens, size, ids, basis = read
    if covers != found[0] or basis is not None:  # the passthrough sends no summary
        return None
    head = messages[:covers]
    pairs = _Pairs(broken=_summary_first(messages))
    if _read(head, pairs, counter, estimator, limit)[0] != size:
        return None
    digest = IdsDigest().extend([m.id for m in head])
    return _Decided(list(head), tokens, size, pairs, digest) if digest.hexdigest() == ids else None


def known_sendable(
    compressor: Compressor,
    passthrough: Passthrough,
    messages: Sequence[Any],
    system: Message | None,
    tools: Tools | None,
    limit: int | None = None,
) -> KnownRequest | None:
    """The request ``messages`` make when they go out as they came, decided by the
    newest answer's stamp (see the module doc) or by the history this passthrough
    last sent so: its notes, the stamp for its answer, its estimate; ``None`` when the stamp
    does not match (or is missing), when the engine would change the view, or when the
    request is not below T. Raises :class:`~ars_langchain.passthrough.TooMuch` past
    ``limit`` characters of text."""
    estimator: Any = compressor.estimator
    counter = utf8_bound(estimator)
    if counter is None:
        return None
    with _decided_lock:
        last = _decided.get(passthrough)
        start = last if last is not None and last.extended_by(messages) else None
    start = start or _from_stamp(messages, estimator, counter, limit)
    if start is None:
        return None
    ratio = history_ratio(messages, estimator)  # the provider's, as sendable reads it
    if start.exact >= fitting_bound(compressor, ratio):
        return None
    tail, pairs = messages[len(start.messages) :], _Pairs(start.pairs)
    bound = start.bound + _read(tail, pairs, counter, estimator, limit)[0]
    exact = start.exact + sum(estimator.count_message(to_core(m)) for m in tail)
    notes = [synthetic_result(c) for c in pairs.unanswered()]
    extra = request_extra(compressor, system, tools, notes)
    if pairs.broken or exact + extra >= fitting_bound(compressor, ratio):
        return None
    ids = start.ids.copy().extend([m.id for m in tail])
    with _decided_lock:
        _decided[passthrough] = _Decided(list(messages), exact, bound, pairs, ids)
    stamp = {"covers": len(messages), "tokens": exact, "bytes": bound, "ids": ids.hexdigest()}
    stamp.update(basis=None, estimator=estimator_name(estimator))
    sent = [from_core(n) for n in notes]
    return KnownRequest(sent, stamp, exact + extra, [*messages, *sent])


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
    return with_marker(message, MARK_KNOWN_SIZE, dict(stamp))
