"""The LangChain examples run offline and print what they promise."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spec("R30", "R31", "R36", "R50")

REPO = Path(__file__).resolve().parents[2]


def run(name: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, str(REPO / "examples" / name)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_langchain_agent_example() -> None:
    out = run("langchain_agent.py")
    compression = [line for line in out if line.startswith("compression:")]
    assert [line.split()[1:3] for line in compression] == [
        ["started", "L1:"],
        ["completed", "L1:"],
        ["started", "L1:"],
        ["completed", "L2:"],
    ]
    # what ARS did, in words (ars_core.describe_event): tokens against T, the files
    assert re.fullmatch(r"compression: started L1: [\d,]+ tokens ≥ T 1,024", compression[0])
    assert re.fullmatch(
        r"compression: completed L1: [\d,]+ → [\d,]+ tokens \(T 1,024\), 1 tool result "
        r"offloaded to outputs/large_tool_results/grep_logs-[0-9a-f]{64}\.txt",
        compression[1],
    )
    assert re.search(
        r", history archived to outputs/conversation_history/history-000000-000004-[0-9a-f]+"
        r"\.jsonl, summary covers messages 1-4$",  # the L2 cutoff (the newest message kept alone)
        compression[3],
    )
    assert any(
        line.startswith("persisted event: cutoff 4 history file outputs/conversation_history/")
        for line in out
    )
    assert "The user asked: How is latency? The logs show at most 299 ms." in out
    files_line = out[-1]
    assert files_line.startswith("files: ['outputs/conversation_history/history-000000-000004-")
    assert "'outputs/large_tool_results/grep_logs-" in files_line


def test_langchain_deep_agent_example() -> None:
    out = run("langchain_deep_agent.py")
    # the sub-agent's round, in words, names the file the agent's own backend holds
    assert re.fullmatch(r"compression: started L1: [\d,]+ tokens ≥ T 3,072", out[0])
    offloaded = re.fullmatch(
        r"compression: completed L1: [\d,]+ → [\d,]+ tokens \(T 3,072\), 1 tool result "
        r"offloaded to (outputs/large_tool_results/build-[0-9a-f]{64}\.txt)",
        out[1],
    )
    assert offloaded is not None, out[1]
    assert out[2] == "The builder reports 200 modules compiled."
    assert out[3:] == [f"file: /{offloaded.group(1)}"]
