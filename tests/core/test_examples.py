"""The core quick-start example runs as a user would run it, and its files are right."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ars_core import message_to_dict, read_history, read_messages
from ars_core.messages import MARK_TRIMMED

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.spec("R24", "R44")
def test_core_quickstart_shows_l1_and_l2_and_recoverable_history() -> None:
    """Every archive the example writes holds exactly the original slice of the run."""
    run = sorted((ROOT / "ars_core/data").glob("*.jsonl.gz"))[0]
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples/core_quickstart.py"), str(run), "--threshold", "8"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    out = proc.stdout
    lines = out.splitlines()
    assert re.fullmatch(r"  started L1: [\d,]+ tokens ≥ T 8,192", lines[0]), lines[0]
    l2 = [line for line in lines if line.startswith("  completed L2: ")]
    assert l2 and all(
        re.search(
            r"^  completed L2: [\d,]+ → [\d,]+ tokens \(T 8,192\), .*history archived to "
            r"outputs/conversation_history/history-\d{6}-\d{6}-[0-9a-f]+\.jsonl, "
            r"summary covers messages 1-\d+$",
            line,
        )
        for line in l2
    ), l2
    assert "none deleted" in out
    out_dir = Path(re.search(r"files under (\S+):", out).group(1))  # type: ignore[union-attr]
    history = read_messages(run)[1:]  # the system message is passed as `system`
    archives = sorted(out_dir.rglob("conversation_history/*.jsonl"))
    assert archives
    scope = archives[0].parents[2]  # the thread's folder (the backend is scoped)
    for path in archives:
        header, messages = read_history(path.read_text(encoding="utf-8"))
        expected = history[header["start"] : header["end"]]
        # a kept message trimmed under overflow (R43) is persisted trimmed: the archive holds
        # that form, and the trimmed-messages file it names holds the original exactly
        restored = [
            json.loads((scope / m.metadata[MARK_TRIMMED]).read_text(encoding="utf-8"))
            if m.metadata.get(MARK_TRIMMED)
            else message_to_dict(m)
            for m in messages
        ]
        assert restored == [message_to_dict(m) for m in expected]
    offloaded = sorted(out_dir.rglob("large_tool_results/*.txt"))
    texts = {m.text for m in history if m.role == "tool"}
    assert offloaded and all(p.read_text(encoding="utf-8") in texts for p in offloaded)
