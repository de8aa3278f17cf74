"""ARS's public type aliases, in one place.

Annotate your own code with these (``from ars_core.typing import
SummarizerLike``). The module imports no other ARS module at run time, so
every module of the package can use it; at run time the aliases that name ARS
classes hold references to them that ``typing.get_type_hints`` resolves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ForwardRef, Literal, TypeAlias, Union
from typing import Callable as TypingCallable  # noqa: UP035  (resolves nested references)

if TYPE_CHECKING:
    from .estimate import Estimator
    from .files import FileBackend
    from .messages import Message
    from .stream import CompressionEvent
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
#: whether an exception means "the request exceeded the context window"
OverflowClassifier: TypeAlias = Callable[[BaseException], bool]

if TYPE_CHECKING:
    #: receives every compression stream event
    EventEmitter: TypeAlias = Callable[[CompressionEvent], None]
    #: the main model: the view in, the caller's response out
    ModelCall: TypeAlias = Callable[[list[Message]], Any]
    #: a token counter in LangChain's ``token_counter`` convention
    TokenCounter: TypeAlias = Callable[[list[Message]], int]
    #: what ``estimator=`` accepts: an estimator, its class, a registered name, a counter
    EstimatorLike: TypeAlias = Estimator | type[Estimator] | str | TokenCounter
    #: what ``backend=`` accepts: a file backend, a registered name, a URL or a folder
    BackendLike: TypeAlias = FileBackend | str
    #: what ``summarizer=`` accepts: a summarizer (sync or async) or a registered name
    #: (``"extractive"``; ``"provider:model"`` with the LangChain adapter)
    SummarizerLike: TypeAlias = Summarizer | AsyncSummarizer | str
else:  # the same aliases at run time, their ARS classes as references resolved on demand
    # (``typing.get_type_hints`` finds them in their modules; nothing is imported here)

    def _ref(name: str, module: str) -> ForwardRef:
        return ForwardRef(name, module=f"ars_core.{module}")

    _Message = list[_ref("Message", "messages")]  # type: ignore[misc]
    EventEmitter = TypingCallable[[_ref("CompressionEvent", "events")], None]
    ModelCall = TypingCallable[[_Message], Any]
    TokenCounter = TypingCallable[[_Message], int]
    EstimatorLike = Union[  # noqa: UP007  (the | operator needs classes)
        _ref("Estimator", "estimate"), type, str, TokenCounter
    ]
    BackendLike = Union[_ref("FileBackend", "files"), str]  # noqa: UP007
    SummarizerLike = Union[  # noqa: UP007
        _ref("Summarizer", "summarize"), _ref("AsyncSummarizer", "summarize"), str
    ]
