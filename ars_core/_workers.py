"""Worker threads of summary calls that may be given up at their deadline.

Python cannot stop a thread: a synchronous summarizer that hangs keeps its
worker thread after the round gave up on it. :class:`Worker` counts such
threads until they return, and refuses to start a new one while
:data:`MAX_ABANDONED_SUMMARIES` of them run, so a summary model that hangs
costs a bounded number of threads, not one per round.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from .errors import SummarizerError

__all__ = ["MAX_ABANDONED_SUMMARIES", "Worker", "abandoned_summaries", "run_abandonable"]

T = TypeVar("T")
log = logging.getLogger("ars")

#: summary calls given up at their deadline whose worker thread still runs, at most
MAX_ABANDONED_SUMMARIES = 4
_abandoned_lock = threading.Lock()
_abandoned = 0


def abandoned_summaries() -> int:
    """Worker threads of summary calls given up at their deadline that still run."""
    with _abandoned_lock:
        return _abandoned


class Worker:
    """``fn`` run in a worker thread that may be given up (:meth:`abandon`):
    given-up threads are counted until they return, and no new one starts
    while :data:`MAX_ABANDONED_SUMMARIES` of them run (a summarizer that hangs
    would otherwise leak one thread per round)."""

    def __init__(self, fn: Callable[[], T]) -> None:
        with _abandoned_lock:
            running = _abandoned
        if running >= MAX_ABANDONED_SUMMARIES:
            log.error(
                "ARS: %d summary calls given up at their deadline are still running (a summary "
                "model that hangs?); no new summary thread is started until one returns",
                running,
            )
            raise SummarizerError(
                f"{running} summary calls given up at summary_timeout are still running (the "
                f"bound, MAX_ABANDONED_SUMMARIES); not starting another until one returns"
            )
        self.fn = fn
        self.done = False
        self.abandoned = False

    def __call__(self) -> Any:
        global _abandoned
        try:
            return self.fn()
        finally:
            with _abandoned_lock:
                self.done = True
                if self.abandoned:
                    _abandoned -= 1

    def abandon(self) -> None:
        """Count this worker as given up, unless it has already returned."""
        global _abandoned
        with _abandoned_lock:
            if self.done or self.abandoned:
                return
            self.abandoned = True
            _abandoned += 1


async def run_abandonable(fn: Callable[[], T]) -> T:
    """``fn()`` in a worker thread, given up (and counted, see :class:`Worker`)
    when the caller is cancelled before it returns."""
    worker = Worker(fn)
    try:
        result: T = await anyio.to_thread.run_sync(worker, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        worker.abandon()
        raise
    return result
