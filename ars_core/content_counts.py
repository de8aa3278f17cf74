"""An estimator's counts of plain-text messages by their content: an equal message
rebuilt as a new object (a store reloaded each call) takes the count of the first,
not counted again (:meth:`~ars_core.estimate.CachingEstimator.count_message`)."""

from __future__ import annotations

from typing import Any

from .messages import Message

__all__ = ["ContentCounts"]


class ContentCounts:
    """The counts, one table per role: keyed by the text alone for a message with no
    name and no tool-call id (most of a conversation: no key tuple kept per message),
    else by its name, tool-call id and text. All are forgotten together when they
    reach the bound :meth:`keep` is given."""

    __slots__ = ("entries", "tables")

    def __init__(self) -> None:
        self.tables: dict[str, dict[Any, int]] = {}
        self.entries = 0

    def slot(self, message: Message, text: object) -> tuple[dict[Any, int], Any]:
        """The table and key the count of ``message`` (whose content is ``text``) is
        kept under."""
        tables = self.tables
        table = tables.get(message.role) or tables.setdefault(message.role, {})
        name, call_id = message.name, message.tool_call_id
        return table, text if name is None and call_id is None else (name, call_id, text)

    def keep(self, table: dict[Any, int], key: Any, count: int, bound: int) -> None:
        """Keep ``count`` under ``key`` of ``table`` (a :meth:`slot`), every count
        forgotten first when ``bound`` counts are kept."""
        if self.entries >= bound:
            for kept in self.tables.values():
                kept.clear()  # in place: a table a caller holds stays the role's
            self.entries = 0
        table[key] = count
        self.entries += 1
