"""The latest distinct items of a history's readings (files edited, commands run,
error lines), each at its last place: read from the newest message back, or from an
order kept per history that a longer history extends with its new readings."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence

from . import memo
from .memo import SparseIndex
from .messages import Message

__all__ = ["last_distinct", "last_places", "ordered_by_last"]


def ordered_by_last(items: Iterable[str]) -> list[str]:
    """Distinct ``items``, ordered by where each occurs last."""
    found: dict[str, None] = {}
    _to_end(found, items)
    return list(found)


def _to_end(order: dict[str, None], items: Iterable[str]) -> None:
    """Each of ``items`` moved to (or added at) the end of ``order``, in turn."""
    for item in items:
        order.pop(item, None)
        order[item] = None


def last_distinct(newest_first: Iterable[tuple[str, ...]], k: int) -> list[str]:
    """The last ``k`` distinct items of the messages' items given newest message first,
    oldest first (each at its last place)."""
    found: dict[str, None] = {}
    for items in newest_first:
        for item in reversed(items):
            if item not in found:
                found[item] = None
                if len(found) == k:
                    return list(reversed(found))
    return list(reversed(found))


class _Places:
    """The distinct items of a history's readings, ordered by their last place, and how
    much of the history (``read`` messages, ``found`` readings) they cover."""

    __slots__ = ("found", "order", "read")

    def __init__(self) -> None:
        self.order: dict[str, None] = {}
        self.read = 0
        self.found = 0


#: orders kept per history: one for each length its callers read it to (the audit
#: reads the summarized part, a summary input's note a longer part of the same history)
ORDERS = 4


def last_places(
    index: SparseIndex[tuple[str, ...]],
    messages: Sequence[Message],
    reader: str,
    k: int,
    read_back: Callable[[], Iterable[tuple[str, ...]]],
) -> list[str]:
    """``last_distinct`` of ``index``'s readings of ``messages``, newest first, kept as
    the history grows: a longer history adds the readings of its new messages to the
    longest order kept for a part of it, so a round reads what was appended, not the
    whole history. A history no order and not ``index`` holds is read as ``read_back``
    gives it (newest first, no further than the ``k`` items take)."""
    remembered = memo.current().prefix(f"retention:places:{reader}", list[_Places])
    with remembered.lock:
        seen, known = remembered.track(messages)
        orders, n = seen.state, len(messages)
        if not orders and not index.knows(messages):
            return last_distinct(read_back(), k)
        places = max((p for p in orders if p.read <= n), key=_read, default=None)
        if places is None:  # every order kept reads further: one for this length
            places = _Places()
            del orders[ORDERS - 1 :]
        else:
            orders.remove(places)
        orders.insert(0, places)
        new = index(messages, since=places.found)[1]
        order = places.order
        places.found += len(new)
        for items in new:
            _to_end(order, items)
        places.read = n
        remembered.extend(seen, messages, known)
        return list(reversed(list(itertools.islice(reversed(order), k))))


def _read(places: _Places) -> int:
    return places.read
