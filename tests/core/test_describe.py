"""`describe_event` says in words what a compression round did: the
phase and level, tokens before -> after against T, and the files written."""

from __future__ import annotations

import pytest

from ars_core import CompressionEvent, describe_event
from ars_core.summarize import Usage


@pytest.mark.spec("R30")
def test_started_compares_tokens_with_the_threshold() -> None:
    """The started line says the size that triggered the round and T, with separators."""
    event = CompressionEvent("started", "L1", "r1", tokens_before=8422, threshold=16384)
    assert describe_event(event) == "started L1: 8,422 tokens < T 16,384"
    over = CompressionEvent("started", "L1", "r1", tokens_before=20000, threshold=16384)
    assert describe_event(over) == "started L1: 20,000 tokens ≥ T 16,384"
    forced = CompressionEvent("started", "L1", "r2", forced=True, tokens_before=900, threshold=1024)
    assert (
        describe_event(forced) == "started L1 (forced by a context overflow): 900 tokens < T 1,024"
    )


@pytest.mark.spec("R31")
def test_completed_l1_names_the_offloaded_files_and_no_archive() -> None:
    """An L1 completion lists the offloaded results; it has no cutoff, so no archive."""
    event = CompressionEvent(
        "completed",
        "L1",
        "r1",
        tokens_before=8422,
        tokens_after=3120,
        threshold=16384,
        offloaded=("outputs/large_tool_results/a.txt", "outputs/large_tool_results/b.txt"),
        truncated_args=1,
    )
    assert describe_event(event) == (
        "completed L1: 8,422 → 3,120 tokens (T 16,384), 2 tool results offloaded to "
        "outputs/large_tool_results/a.txt, outputs/large_tool_results/b.txt, "
        "1 large argument truncated"
    )


@pytest.mark.spec("R31", "R24")
def test_completed_l2_names_the_history_archive_and_the_cutoff() -> None:
    """An L2 completion says where the history went and what the summary covers; the
    JSON form (an SSE frame's data) reads the same as the record."""
    event = CompressionEvent(
        "completed",
        "L2",
        "r9",
        tokens_before=8422,
        tokens_after=3120,
        threshold=16384,
        cutoff=12,
        file_path="outputs/conversation_history/history-000000-000012-ab.jsonl",
        summary_usage=Usage(input_tokens=10, output_tokens=5),
    )
    text = (
        "completed L2: 8,422 → 3,120 tokens (T 16,384), history archived to "
        "outputs/conversation_history/history-000000-000012-ab.jsonl, summary covers messages 1-12"
    )
    assert describe_event(event) == text
    assert describe_event(event.to_dict()) == text
    unarchived = CompressionEvent(
        "completed", "L2", "r9", tokens_before=5000, tokens_after=900, threshold=4096, cutoff=3
    )
    assert describe_event(unarchived) == (
        "completed L2: 5,000 → 900 tokens (T 4,096), history archive not written, "
        "summary covers messages 1-3"
    )


@pytest.mark.spec("R32")
def test_failed_names_the_error() -> None:
    """A failed round says the size it started from and the error that escaped."""
    event = CompressionEvent(
        "failed", "L2", "r3", tokens_before=70000, threshold=65536, error="RuntimeError: down"
    )
    assert describe_event(event) == "failed L2: 70,000 tokens (T 65,536), RuntimeError: down"
