"""The exact size of each request's messages, kept with its answer (LangChain side).

When the engine counted the messages of a request exactly, its outcome carries a
stamp of that count (:mod:`ars_core.known_size`). :func:`stamp_known` records it
on the answer's ``response_metadata["ars"]`` (where ARS's markers travel: never
sent to a provider, kept by every checkpointer, brought into the core message's
metadata by :func:`~ars_langchain.convert.to_core`), so a later call on the same
thread, in this process or another, reads the history's size from it and counts
only the messages appended since.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage

from ars_core.known_size import MARK_KNOWN_SIZE

from .convert import MARKERS_KEY

__all__ = ["stamp_known"]


def stamp_known(response: Any, stamp: Mapping[str, Any] | None) -> Any:
    """``response`` (a ``ModelResponse`` or an ``AIMessage``) with its newest answer
    carrying ``stamp``: the answer is replaced by a stamped copy (the model's object
    is not changed); without a stamp, or without an answer, ``response`` as it is."""
    if stamp is None:
        return response
    if isinstance(response, AIMessage):
        return _stamped(response, stamp)
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
