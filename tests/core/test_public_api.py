"""The public surface is locked, and `import ars_core` needs no framework."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import ars_core

ROOT = Path(__file__).resolve().parents[2]

PUBLIC = sorted(
    [
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
        "TiktokenUnavailableError",
        "SummaryConfig",
        "SummaryResult",
        "SummaryRetry",
        "TiktokenEstimator",
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
)


def test_public_surface_is_locked() -> None:
    assert sorted(ars_core.__all__) == PUBLIC
    for name in PUBLIC:
        assert hasattr(ars_core, name), name


def _loaded_after(setup: str, packages: tuple[str, ...]) -> list[str]:
    """The modules of ``packages`` a fresh interpreter has loaded after running ``setup``."""
    code = (
        f"import sys, json; {setup};"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {packages!r})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    loaded: list[str] = json.loads(out.stdout)
    return loaded


FRAMEWORKS = ("langchain", "langchain_core", "langgraph", "llama_index", "deepagents")


def test_import_pulls_in_no_framework() -> None:
    setup = (
        "import ars_core, ars_core.testing, ars_core.plugins; ars_core.plugins.get_plugin_manager()"
    )
    assert _loaded_after(setup, (*FRAMEWORKS, "tiktoken")) == []


ADAPTERS_AND_FRAMEWORKS = (
    "ars_langchain",
    "ars_llamaindex",
    "langchain",
    "langchain_core",
    "langgraph",
    "llama_index",
    "deepagents",
)


def test_the_core_imports_no_adapter_anywhere() -> None:
    """No module of ``ars_core`` (the CLI included) imports an adapter or a framework, at
    the top or inside a function: adapters contribute through the ``ars`` entry points."""
    offenders = []
    for path in sorted((ROOT / "ars_core").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                if name.split(".")[0] in ADAPTERS_AND_FRAMEWORKS:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
        text = path.read_text(encoding="utf-8")
        for adapter in ("ars_langchain", "ars_llamaindex"):
            if f'import_module("{adapter}' in text or f"import_module('{adapter}" in text:
                offenders.append(f"{path.relative_to(ROOT)}: import_module({adapter})")
    assert offenders == []


def test_every_core_module_and_the_plugin_manager_load_no_framework() -> None:
    """Importing every ``ars_core`` module (the CLI too) and loading the plugins (the
    adapters' entry points included) pulls in no framework."""
    setup = (
        "import pkgutil, importlib, ars_core;"
        "[importlib.import_module(m.name) for m in "
        "pkgutil.walk_packages(ars_core.__path__, 'ars_core.')];"
        "from ars_core.plugins import get_plugin_manager, plugin_report;"
        "get_plugin_manager(); plugin_report()"
    )
    assert _loaded_after(setup, FRAMEWORKS) == []


def test_errors_share_one_base() -> None:
    for name in (
        "ConfigError",
        "MessageFormatError",
        "ArchiveFormatError",
        "PathBoundaryError",
        "FileBackendError",
        "SummarizerError",
        "PluginError",
        "TiktokenUnavailableError",
        "ContextOverflowError",
    ):
        assert issubclass(getattr(ars_core, name), ars_core.ArsError)
    assert issubclass(ars_core.TiktokenUnavailableError, ImportError)  # `except ImportError` works


def test_public_signatures_name_protocols_and_resolve_at_run_time() -> None:
    """``summarizer=`` takes the summarizer protocols or a name, not ``Any``, and the
    aliases of ``ars_core.typing`` resolve with ``typing.get_type_hints``."""
    import typing

    from ars_core.summarize import AsyncSummarizer, Summarizer

    expected = Summarizer | AsyncSummarizer | str | None
    for method in ("__init__", "call", "acall", "compact", "acompact"):
        hints = typing.get_type_hints(getattr(ars_core.Compressor, method))
        assert hints["summarizer"] == expected, method
    emitter = typing.get_type_hints(ars_core.Compressor.call)["emitter"]
    assert emitter == typing.Optional[typing.Callable[[ars_core.CompressionEvent], None]]  # noqa: UP045
