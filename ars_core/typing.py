"""ARS's public type aliases, in one place.

Annotate your own code with these (``from ars_core.typing import
SummarizerLike``). The module imports no other ARS module at run time, so
every module of the package can use it; the aliases that name ARS classes are
written as strings and resolved by type checkers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

if TYPE_CHECKING:
    from .estimate import Estimator
    from .events import CompressionEvent
    from .files import FileBackend
    from .messages import Message
    from .summarize import AsyncSummarizer, Summarizer

__all__ = [
    "BackendLike",
    "EstimatorLike",
    "EventEmitter",
    "Level",
    "ModelCall",
    "OverflowClassifier",
    "Phase",
    "Role",
    "SummarizerLike",
    "TokenCounter",
    "Tools",
]

#: a message's role in the core model
Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
#: the phase of a compression stream event
Phase: TypeAlias = Literal["started", "completed", "failed"]
#: the deepest level a compression round reached
Level: TypeAlias = Literal["L1", "L2"]
#: tool schemas as the model sees them (OpenAI function format, or the framework's)
Tools: TypeAlias = Sequence[Any]
#: receives every compression stream event
EventEmitter: TypeAlias = "Callable[[CompressionEvent], None]"
#: the main model: the view in, the caller's response out
ModelCall: TypeAlias = "Callable[[list[Message]], Any]"
#: whether an exception means "the request exceeded the context window"
OverflowClassifier: TypeAlias = Callable[[BaseException], bool]
#: a token counter in LangChain's ``token_counter`` convention
TokenCounter: TypeAlias = "Callable[[list[Message]], int]"
#: what ``estimator=`` accepts: an estimator, its class, a registered name, a counter
EstimatorLike: TypeAlias = "Estimator | type[Estimator] | str | TokenCounter"
#: what ``backend=`` accepts: a file backend, a registered name, a URL or a folder
BackendLike: TypeAlias = "FileBackend | str"
#: what ``summarizer=`` accepts: a summarizer (sync or async) or a registered name
#: (``"extractive"``; ``"provider:model"`` with the LangChain adapter)
SummarizerLike: TypeAlias = "Summarizer | AsyncSummarizer | str"
