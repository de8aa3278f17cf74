"""The per-call inputs of the engine, as one typed record.

:class:`CallOptions` is what an adapter builds once per model call (or
compaction) and hands to any of :class:`~ars_core.Compressor`'s entry points
(``call``, ``compact``, ``compact_now``, ``compact_round`` and their async
twins) as ``options=``. The same fields are also accepted one by one as
keyword arguments; a keyword that is given wins over the record's field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from .checkpoint import SummarizationEvent
    from .files import FileBackend
    from .messages import Message
    from .typing import EventEmitter, SummarizerLike, Tools

__all__ = ["CallOptions"]


@attrs.frozen(kw_only=True)
class CallOptions:
    """What one call tells the engine besides the messages.

    ``event`` is the stored summarization event (the checkpoint's, checked
    against the messages by the engine); ``system`` and ``tools`` are counted
    in every measurement; ``summarizer``, ``backend`` and ``emitter`` override
    the engine's own for this call; ``thread`` names the conversation (its
    archive continuations); ``requested`` runs an L2 round now whatever the
    size (a compaction tool asked for it); ``force`` is the forced path after a
    context overflow (``compact`` only)."""

    event: SummarizationEvent | None = None
    system: Message | str | None = None
    tools: Tools | None = None
    summarizer: SummarizerLike | None = None
    backend: FileBackend | None = None
    emitter: EventEmitter | None = None
    thread: str | None = None
    requested: bool = False
    force: bool = False

    def replace(self, **changes: Any) -> CallOptions:
        """A copy with ``changes``."""
        return attrs.evolve(self, **changes)

    @classmethod
    def merge(cls, options: CallOptions | None, **given: Any) -> CallOptions:
        """``options`` (or the defaults) with the keyword arguments a caller gave
        one by one: a value other than ``None``/``False`` (each field's default)
        wins over the record's."""
        base = options if options is not None else _DEFAULT
        changes = {k: v for k, v in given.items() if v is not None and v is not False}
        return attrs.evolve(base, **changes) if changes else base


_DEFAULT = CallOptions()
