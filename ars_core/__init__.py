"""ARS: two-level context compression for long-running LLM agents.

L1 trims a copy of each request (huge ``write_file``/``edit_file`` arguments,
huge tool results moved to content-addressed files); L2 archives older history
to a file, summarizes it, and records a cumulative cutoff event in the agent's
state. See :class:`Compressor` for the entry point.
"""

from __future__ import annotations

from .archive import read_archive, read_history
from .checkpoint import SummarizationEvent, effective_messages, to_global_cutoff
from .config import CHINESE_SUMMARY_PROMPT, DEFAULT_SUMMARY_PROMPT, SummaryConfig
from .engine import CallOutcome, Compaction, Compressor, StateUpdate
from .errors import (
    ArchiveFormatError,
    ArsError,
    ConfigError,
    ContextOverflowError,
    FileBackendError,
    MessageFormatError,
    PathBoundaryError,
    PluginError,
    SummarizerError,
    TiktokenUnavailableError,
    is_context_overflow,
    is_transient_error,
)
from .estimate import (
    ApproxEstimator,
    CachingEstimator,
    Estimator,
    TiktokenEstimator,
    default_estimator,
)
from .files import FileBackend, FsspecBackend
from .hookspecs import hookimpl
from .messages import (
    MARK_OFFLOADED,
    MARK_SUMMARY,
    MARK_TRIMMED,
    MARK_TRUNCATED_ARGS,
    ContentPart,
    Message,
    ToolCall,
    from_openai,
    message_from_dict,
    message_to_dict,
    read_messages,
    to_openai,
)
from .options import CallOptions
from .paths import check_path, sanitize_name
from .plugins import get_estimator, get_file_backend, get_plugin_manager, get_summarizer
from .resolve import default_backend
from .retention import Retention, audit_retention, task_retention, task_statement
from .round import CompressionRound
from .sse import SSE_EVENT_NAME, encode_sse, sse_frame
from .stream import CompressionEvent, describe_event
from .summarize import (
    AsyncSummarizer,
    CallableSummarizer,
    ExtractiveSummarizer,
    Summarizer,
    SummaryResult,
)
from .usage import SummaryRetry, Usage

__version__ = "0.1.0"

__all__ = [
    "CHINESE_SUMMARY_PROMPT",
    "DEFAULT_SUMMARY_PROMPT",
    "MARK_OFFLOADED",
    "MARK_SUMMARY",
    "MARK_TRIMMED",
    "MARK_TRUNCATED_ARGS",
    "SSE_EVENT_NAME",
    "ApproxEstimator",
    "ArchiveFormatError",
    "ArsError",
    "AsyncSummarizer",
    "CachingEstimator",
    "CallOptions",
    "CallOutcome",
    "CallableSummarizer",
    "Compaction",
    "CompressionEvent",
    "CompressionRound",
    "Compressor",
    "ConfigError",
    "ContentPart",
    "ContextOverflowError",
    "Estimator",
    "ExtractiveSummarizer",
    "FileBackend",
    "FileBackendError",
    "FsspecBackend",
    "Message",
    "MessageFormatError",
    "PathBoundaryError",
    "PluginError",
    "Retention",
    "StateUpdate",
    "SummarizationEvent",
    "Summarizer",
    "SummarizerError",
    "SummaryConfig",
    "SummaryResult",
    "SummaryRetry",
    "TiktokenEstimator",
    "TiktokenUnavailableError",
    "ToolCall",
    "Usage",
    "__version__",
    "audit_retention",
    "check_path",
    "default_backend",
    "default_estimator",
    "describe_event",
    "effective_messages",
    "encode_sse",
    "from_openai",
    "get_estimator",
    "get_file_backend",
    "get_plugin_manager",
    "get_summarizer",
    "hookimpl",
    "is_context_overflow",
    "is_transient_error",
    "message_from_dict",
    "message_to_dict",
    "read_archive",
    "read_history",
    "read_messages",
    "sanitize_name",
    "sse_frame",
    "task_retention",
    "task_statement",
    "to_global_cutoff",
    "to_openai",
]
