"""Where something is in a history, kept as the history grows.

An L2 round reads a few facts of every message of a long history: which are
user requests, which edited files or reported errors. Most messages hold none
of them, and the history of the next round is the same objects plus a few
more. :class:`SparseIndex` (kept in :mod:`ars_core.memo`, under the rule every
history memo follows) remembers the positions of the messages holding something
and extends them with the appended messages only.
"""

from __future__ import annotations

from .memo import SparseIndex

__all__ = ["SparseIndex"]
