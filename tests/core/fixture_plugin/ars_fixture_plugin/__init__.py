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


@hookimpl
def compression_event(event):  # type: ignore[no-untyped-def]
    SEEN.append(event)
