"""A compression round whose stream events wait for the caller's model call.

Runtimes that fetch the context and call the model themselves (a LlamaIndex
memory, a hand-written loop) build the view with
:meth:`Compressor.compact_round <ars_core.Compressor.compact_round>`: the
round's events are held, and the caller reports how its own model call went::

    rnd = compressor.compact_round(messages, event=event, force=True)
    with rnd:                      # succeeded() on success, failed(exc) if it raises
        response = my_model(rnd.outcome.view)

:meth:`CompressionRound.succeeded` delivers ``started`` and ``completed``;
:meth:`CompressionRound.failed` delivers ``started`` and a ``failed`` record
in place of ``completed``. Either happens once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Self

import attrs

from .flow import CallOutcome
from .l2 import describe_error
from .stream import CompressionEvent

__all__ = ["CompressionRound"]


@attrs.define
class CompressionRound:
    """One compression round with its stream events held back (see the module doc)."""

    outcome: CallOutcome
    _deliver: Callable[[CompressionEvent], None] = attrs.field(alias="deliver")
    _done: bool = attrs.field(default=False, init=False)

    @property
    def events(self) -> tuple[CompressionEvent, ...]:
        """The held events, as the round made them (``started``, ``completed``)."""
        return self.outcome.events

    def succeeded(self) -> None:
        """The caller's model call answered: deliver the round's events."""
        if self._settle():
            for event in self.outcome.events:
                self._deliver(event)

    def failed(self, exc: BaseException) -> None:
        """The caller's model call raised ``exc``: deliver ``started`` and, in
        place of ``completed``, a ``failed`` record carrying the error."""
        if not self._settle():
            return
        for event in self.outcome.events:
            if event.phase != "completed":
                self._deliver(event)
        failed = failed_event(self.outcome.events, exc)
        if failed is not None:
            self._deliver(failed)

    @contextlib.contextmanager
    def failing(self) -> Iterator[Self]:
        """``failed(exc)`` when the block raises; the round stays open otherwise."""
        try:
            yield self
        except BaseException as exc:
            self.failed(exc)
            raise

    def _settle(self) -> bool:
        first, self._done = not self._done, True
        return first

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.succeeded()
        else:
            self.failed(exc)


def failed_event(
    events: tuple[CompressionEvent, ...], exc: BaseException
) -> CompressionEvent | None:
    """The ``failed`` record ending a round whose ``started`` is in ``events``
    (what ``completed`` measured, when the round got that far); ``None``
    when no round started."""
    ended = {e.round_id for e in events if e.phase == "failed"}  # a dropped-summary notice
    started = next(
        (e for e in reversed(events) if e.phase == "started" and e.round_id not in ended), None
    )
    if started is None:
        return None
    completed = next((e for e in events if e.phase == "completed"), None)
    return CompressionEvent(
        phase="failed",
        level=completed.level if completed else started.level,
        round_id=started.round_id,
        forced=started.forced,
        tokens_before=started.tokens_before,
        tokens_after=completed.tokens_after if completed else None,
        threshold=started.threshold,
        cutoff=completed.cutoff if completed else None,
        file_path=completed.file_path if completed else None,
        error=describe_error(exc),
    )
