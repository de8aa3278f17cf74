"""The public surface is locked, and `import ars_core` needs no framework."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import ars_core

ROOT = Path(__file__).resolve().parents[2]

PUBLIC = sorted(
    [
        "DEFAULT_SUMMARY_PROMPT",
        "MARK_OFFLOADED",
        "MARK_SUMMARY",
        "MARK_TRIMMED",
        "MARK_TRUNCATED_ARGS",
        "SSE_EVENT_NAME",
        "ApproxEstimator",
        "ArsError",
        "AsyncSummarizer",
        "CachingEstimator",
        "CallOutcome",
        "CallableSummarizer",
        "CompressionEvent",
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
        "StateUpdate",
        "SummarizationEvent",
        "Summarizer",
        "SummarizerError",
        "SummaryConfig",
        "SummaryResult",
        "TiktokenEstimator",
        "ToolCall",
        "Usage",
        "__version__",
        "check_path",
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
        "message_from_dict",
        "message_to_dict",
        "read_history",
        "read_messages",
        "sanitize_name",
        "sse_frame",
        "to_global_cutoff",
        "to_openai",
    ]
)


def test_public_surface_is_locked() -> None:
    assert sorted(ars_core.__all__) == PUBLIC
    for name in PUBLIC:
        assert hasattr(ars_core, name), name


def test_import_pulls_in_no_framework() -> None:
    code = (
        "import sys, json, ars_core, ars_core.testing, ars_core.plugins;"
        "ars_core.plugins.get_plugin_manager();"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('langchain', 'langchain_core', 'langgraph', 'llama_index', 'deepagents', 'tiktoken'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == []


def test_errors_share_one_base() -> None:
    for name in (
        "ConfigError",
        "MessageFormatError",
        "PathBoundaryError",
        "FileBackendError",
        "SummarizerError",
        "PluginError",
        "ContextOverflowError",
    ):
        assert issubclass(getattr(ars_core, name), ars_core.ArsError)
