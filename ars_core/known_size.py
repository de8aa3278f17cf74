"""Counts that travel with the answer: a history sized from what the last request knew.

When the engine sends a request whose messages it counted exactly (in its
estimator's units), that count is what the next call of the same thread would
count again for the same messages, in any process. :func:`stamp_of` makes a
JSON-safe record of it (the *stamp*), kept on the model's answer (core
``Message.metadata[MARK_KNOWN_SIZE]``; an adapter puts it where its answers keep
ARS's markers). A later call whose history nothing has counted (fresh message
objects, as a checkpointer's deserialization builds) finds the newest stamp
(:func:`known_history`) and sizes the history as the stamped count plus the
exact counts of the messages appended since: the same number counting every
message gives, at the cost of the appended ones.

What a stamp records (see :func:`stamp_of`):

* ``covers``: how many effective messages the request held (the stamped answer is
  the message right after them: its own position must be ``covers``);
* ``tokens``: the estimator's exact count of those messages (the messages only:
  the system message and the tools are counted by every call);
* the fingerprint: ``bytes``, the sum of those messages' UTF-8 bounds
  (:class:`~ars_core.bounds.Utf8Bytes`, what a cold call's bound pass reads
  anyway), ``ids``, a digest of their ids in order, and ``basis``, what the
  effective messages were built from (``None``: the stored messages, no summary;
  else the event's cutoff and its summary message's id);
* ``estimator``: the name of the estimator that counted.

A stamp is used only when all of it matches the history as this call builds it;
anything else (a removed or inserted message, an edit that changes a message's
id or its byte length, a new or dropped summary, another estimator, a malformed
or hostile value) makes the call count as it does without one.

Which calls stamp: any call whose history's exact count is known when it ends
(counted, or sized from a valid stamp) and which made no new summary: the stamp
describes the effective messages as stored (what the next call rebuilds), not the
view sent, so an L1 call stamps too. A call that made a new summary (L2) does not:
the next call's effective messages start with that summary (their count is not
the one this call made); the first call after it counts them and stamps.

What the fingerprint guarantees: a stale stamp is detected whenever the prefix it
covers changed in its messages' number, order or ids, in the byte length of any
message (unless other edits of the prefix make up for it exactly), in its summary
or cutoff, or in the estimator. It cannot see an edit that keeps a message's id
and the prefix's total bytes (a same-length rewrite under the same id). A stamp is
data in the agent's state and can be forged by whoever edits that state; its count
is accepted only between the messages' fixed overheads and their byte bound (a
count is never above that bound), so a forged or unseen-stale stamp can make a
request's messages exceed T by at most their byte bound minus the stamped count,
never by more; a model that then overflows takes the engine's forced path.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .capabilities import Utf8BoundedEstimator, has
from .checkpoint import SummarizationEvent
from .estimate import MESSAGE_OVERHEAD, Estimator, is_bounded, is_incremental
from .memo import TOKENS, Memo
from .messages import Message
from .totals import HistorySize, Totals, no_bound

__all__ = [
    "MARK_KNOWN_SIZE",
    "NOT_AN_ANSWER",
    "STAMP_REACH",
    "Fingerprint",
    "IdsDigest",
    "basis_of",
    "estimator_name",
    "fingerprint",
    "history_size",
    "ids_digest",
    "known_history",
    "newest_stamp",
    "read_stamp",
    "stamp_history",
    "stamp_of",
    "stamped",
]

#: metadata key of an assistant message: the exact size of the messages before it
MARK_KNOWN_SIZE = "ars_known_size"
#: how far from the end of a history the newest stamped answer is looked for
STAMP_REACH = 256
#: the largest number a stamp's integers may hold (JSON-safe everywhere)
_MAX_INT = 2**53


def estimator_name(estimator: Any) -> str:
    """The name a stamp records the counting estimator by."""
    return str(getattr(estimator, "name", type(estimator).__name__))


def basis_of(event: SummarizationEvent | None) -> list[Any] | None:
    """What effective messages built with ``event`` start from, as a stamp records it."""
    if event is None:
        return None
    return [int(event.cutoff), event.summary_message.id or ""]


def _id_lines(ids: Sequence[str | None]) -> bytes:
    """Each id as a JSON string (``null`` for none) on a line of its own: any string,
    lone surrogates and NULs included, read unambiguously; the lines of a list are
    those of its first part then those of the rest (a digest can be extended)."""
    if not ids:
        return b""
    text = json.dumps([i if isinstance(i, str) else None for i in ids], separators=("\n", ":"))
    return text[1:-1].encode("ascii") + b"\n"


class IdsDigest:
    """:func:`ids_digest` of a growing list of ids: :meth:`extend` with the ids
    appended (read once), :meth:`hexdigest` at any length reached."""

    __slots__ = ("_hasher", "count")

    def __init__(self) -> None:
        self._hasher, self.count = hashlib.blake2b(digest_size=16), 0

    def extend(self, ids: Sequence[str | None]) -> IdsDigest:
        self._hasher.update(_id_lines(ids))
        self.count += len(ids)
        return self

    def hexdigest(self) -> str:
        return str(self._hasher.hexdigest())

    def copy(self) -> IdsDigest:
        other = IdsDigest()
        other._hasher, other.count = self._hasher.copy(), self.count
        return other


def ids_digest(ids: Sequence[str | None]) -> str:
    """A digest of ``ids`` in order (``None`` as no id)."""
    return IdsDigest().extend(ids).hexdigest()


class Fingerprint:
    """The byte bounds of a history's first messages, running (``sums[i]``: the first
    ``i``), and the digest of their ids so far (of the first :attr:`hashed`), kept on
    the history's :class:`~ars_core.totals.Totals` while they describe it: a call on
    a grown history reads its appended messages alone."""

    __slots__ = ("ids", "lock", "sums", "version")

    def __init__(self, version: int) -> None:
        self.version = version
        self.sums = [0]
        self.ids = IdsDigest()
        self.lock = threading.Lock()  # calls of two threads on one history

    def digest_to(self, messages: Sequence[Message], n: int) -> str:
        """:func:`ids_digest` of the ids of ``messages[:n]``, extended from the last one
        made (made again when ``n`` is below it)."""
        if n < self.ids.count:
            return ids_digest([m.id for m in messages[:n]])
        return self.ids.extend([m.id for m in messages[self.ids.count : n]]).hexdigest()

    def bytes_to(
        self, messages: Sequence[Message], n: int, measure: Any, totals: Totals, key: Any
    ) -> int:
        """The byte bounds of ``messages[:n]``; taken from ``totals`` when they hold
        bounds alone and none of these messages holds a count (then each bound is the
        message's UTF-8 measure: what the call's bound pass read, not read twice)."""
        sums = self.sums
        if n >= len(sums) and not totals.exact and n < len(totals):
            if all(c is None for c in TOKENS.get_many(messages[len(sums) - 1 : n], key)):
                self.sums = sums = totals[: n + 1]
        if n >= len(sums):
            running = sums[-1]
            for m in messages[len(sums) - 1 : n]:
                running += measure(m)
                sums.append(running)
        return sums[n]


def fingerprint(
    messages: Sequence[Message], n: int, estimator: Any, totals: Totals | None = None
) -> tuple[int, str]:
    """``(bytes, ids)`` of ``messages[:n]``: the sum of their UTF-8 bounds and the digest
    of their ids (the byte sums kept on ``totals`` when given, for the next call)."""
    measure = estimator.utf8_bytes.measure
    if totals is None:
        return sum(map(measure, messages[:n])), ids_digest([m.id for m in messages[:n]])
    found = totals.known
    if not isinstance(found, Fingerprint) or found.version != totals.version:
        found = totals.known = Fingerprint(totals.version)
    with found.lock:
        total = found.bytes_to(messages, n, measure, totals, estimator.cache_key)
        return total, found.digest_to(messages, n)


def stamp_of(
    messages: Sequence[Message],
    tokens: int,
    estimator: Any,
    event: SummarizationEvent | None = None,
    totals: Totals | None = None,
) -> dict[str, Any] | None:
    """The stamp of a request whose effective ``messages`` (built with ``event``) the
    estimator counted ``tokens`` exactly; ``None`` for an estimator without a UTF-8
    bound (its stamps could not be checked)."""
    if not has(estimator, Utf8BoundedEstimator):
        return None
    size, ids = fingerprint(messages, len(messages), estimator, totals)
    return {
        "covers": len(messages),
        "tokens": int(tokens),
        "bytes": size,
        "ids": ids,
        "basis": basis_of(event),
        "estimator": estimator_name(estimator),
    }


def stamped(message: Message, stamp: Mapping[str, Any] | None) -> Message:
    """The answer ``message`` carrying ``stamp`` (itself when there is none)."""
    if stamp is None:
        return message
    return message.with_content(message.content, **{MARK_KNOWN_SIZE: dict(stamp)})


def _int(value: Any) -> int | None:
    if type(value) is not int or value < 0 or value > _MAX_INT:
        return None
    return value


def read_stamp(record: Any, estimator: Any) -> tuple[int, int, int, str, Any] | None:
    """``(covers, tokens, bytes, ids, basis)`` of a well-formed stamp made by an
    estimator of ``estimator``'s name; ``None`` for anything else."""
    if not isinstance(record, Mapping) or record.get("estimator") != estimator_name(estimator):
        return None
    covers, tokens, size = (_int(record.get(k)) for k in ("covers", "tokens", "bytes"))
    ids, basis = record.get("ids"), record.get("basis")
    if covers is None or tokens is None or size is None or type(ids) is not str:
        return None
    if not (covers * MESSAGE_OVERHEAD <= tokens <= size):  # a count is within these
        return None
    if basis is not None:
        ok = isinstance(basis, list | tuple) and len(basis) == 2
        if not ok or _int(basis[0]) is None or type(basis[1]) is not str:
            return None
        basis = [basis[0], basis[1]]
    return covers, tokens, size, ids, basis


#: what :func:`newest_stamp`'s reader returns for a message that is not an answer
NOT_AN_ANSWER = object()


def newest_stamp(messages: Sequence[Any], read: Callable[[Any], Any]) -> tuple[int, Any] | None:
    """The position and stamp of the newest answer of ``messages`` when it carries one
    (looked for within :data:`STAMP_REACH` of the end); ``read(message)`` is the stamp
    of an answer (``None``: none), :data:`NOT_AN_ANSWER` for any other message."""
    for i in range(len(messages) - 1, max(-1, len(messages) - 1 - STAMP_REACH), -1):
        record = read(messages[i])
        if record is not NOT_AN_ANSWER:
            return (i, record) if record is not None else None
    return None


def _core_stamp(message: Message) -> Any:
    if message.role != "assistant":
        return NOT_AN_ANSWER
    return message.metadata.get(MARK_KNOWN_SIZE)


def known_history(
    size: HistorySize,
    effective: Sequence[Message],
    event: SummarizationEvent | None,
    estimator: Any,
) -> HistorySize:
    """``size`` of the ``effective`` messages, exact from the newest valid stamp when it
    is only a bound: the stamped count plus the counts of the messages after it."""
    if size.exact or not is_incremental(estimator):
        return size
    if not has(estimator, Utf8BoundedEstimator):
        return size
    found = newest_stamp(effective, _core_stamp)
    read = read_stamp(found[1], estimator) if found is not None else None
    if found is None or read is None:
        return size
    covers, tokens, size_bytes, ids, basis = read
    if covers != found[0] or basis != basis_of(event):
        return size
    if fingerprint(effective, covers, estimator, size.origin) != (size_bytes, ids):
        return size
    size.known_prefix(covers, tokens)
    return size


def history_size(
    memo: Memo, est: Estimator, effective: Sequence[Message], event: SummarizationEvent | None
) -> HistorySize:
    """The size of the effective messages (built with ``event``): for an incremental
    estimator, the engine's running total of this history, extended by what was
    appended since the last call. A history nothing of which was counted yet is sized
    by the estimator's bound when it has one
    (:class:`~ars_core.capabilities.BoundedEstimator`) and counted exactly only when
    that bound reaches a threshold or a count is read; or from the newest answer's
    stamp (:func:`known_history`)."""
    if is_incremental(est):
        # an estimator with no cheap bound: a history nothing counted yet is counted from
        # the newest message back, as far as a question about its size needs
        bound = est.token_bound if is_bounded(est) else no_bound
        size = memo.history_size(effective, est.cache_key, est.count_message, bound)
        return known_history(size, effective, event, est)
    return HistorySize(est.count(effective))


def stamp_history(
    messages: Sequence[Message], estimator: Any, event: SummarizationEvent | None = None
) -> list[Message]:
    """``messages`` (effective messages built with ``event``) with every assistant
    message stamped as the call that produced it would have stamped it (the exact
    count of the messages before it): a history as ARS leaves it, for tests and
    benchmarks."""
    out: list[Message] = []
    running, totals = 0, Totals()
    for m in messages:
        if m.role == "assistant":
            m = stamped(m, stamp_of(out, running, estimator, event, totals))
        out.append(m)
        running += estimator.count_message(m)
    return out
