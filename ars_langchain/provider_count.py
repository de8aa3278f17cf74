"""The provider's count of each request, kept with its answer (LangChain side).

The main model's answer carries ``usage_metadata["input_tokens"]``: what the
provider counted for the request ARS sent. :func:`stamp_response` records it on
the answer's ``response_metadata["ars"]`` (where ARS's markers travel; never
sent to a provider, kept by every checkpointer) beside the estimator's count of
that same request, so a later call, in this process or another, reads the
provider/estimator ratio back from the history (:func:`history_ratio`, as the
engine does from the converted messages: :mod:`ars_core.provider_size`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage

from ars_core.adapter import MARK_PROVIDER_COUNT, NOT_AN_ANSWER, newest_stamp, ratio_of, stamp

from .convert import marker, with_marker

__all__ = ["history_ratio", "stamp_response"]


def history_ratio(messages: Sequence[Any], estimator: Any) -> float:
    """The provider/estimator ratio of the newest ``AIMessage`` in ``messages``
    (see :func:`ars_core.provider_size.ratio_of`); 1.0 when it carries no stamp."""
    found = newest_stamp(messages, _usage_stamp)
    return ratio_of(found[1] if found is not None else None, estimator)


def _usage_stamp(message: Any) -> Any:
    if isinstance(message, AIMessage):
        return marker(message, MARK_PROVIDER_COUNT)
    if getattr(message, "type", None) == "ai":  # another class of answer: not read
        return None
    return NOT_AN_ANSWER


def stamp_response(response: Any, estimated: int, estimator: Any) -> Any:
    """``response`` (a ``ModelResponse`` or an ``AIMessage``) with its newest answer
    carrying usage stamped: the provider's input tokens beside ``estimated``, the
    estimator's count of the request. The answer is replaced by a stamped copy (the
    model's object is not changed); a response without usage is returned as it is."""
    if isinstance(response, AIMessage):
        return _stamped(response, estimated, estimator) or response
    result = getattr(response, "result", None)
    if not isinstance(result, list):
        return response
    for i in range(len(result) - 1, -1, -1):
        message = result[i]
        if isinstance(message, AIMessage) and message.usage_metadata:
            copy = _stamped(message, estimated, estimator)
            if copy is not None:
                result[i] = copy
            break
    return response


def _stamped(message: AIMessage, estimated: int, estimator: Any) -> AIMessage | None:
    usage: Mapping[str, Any] = message.usage_metadata or {}
    tokens = usage.get("input_tokens")
    if not tokens:
        return None
    return with_marker(message, MARK_PROVIDER_COUNT, stamp(int(tokens), estimated, estimator))
