"""A tiny third-party ARS plugin, installed through the `ars` entry-point group in tests."""

from __future__ import annotations

from ars_core import hookimpl
from ars_core.estimate import CachingEstimator

SEEN: list[object] = []


class WordEstimator(CachingEstimator):
    """One token per whitespace-separated word."""

    name = "words"

    def count_text(self, text: str) -> int:
        return len(text.split())


@hookimpl
def register_estimators(register):  # type: ignore[no-untyped-def]
    register("words", WordEstimator)


class FailingSummarizer:
    """A summary model whose provider refuses the key: every call raises (an error
    that is not retried, unlike a connection error)."""

    name = "failing"

    def summarize(self, messages, prompt):  # type: ignore[no-untyped-def]
        raise PermissionError("summary provider refused the API key")


@hookimpl
def register_summarizers(register):  # type: ignore[no-untyped-def]
    register("failing", FailingSummarizer)


@hookimpl
def compression_event(event):  # type: ignore[no-untyped-def]
    SEEN.append(event)
