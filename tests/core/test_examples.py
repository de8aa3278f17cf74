"""The core quick-start example runs as a user would run it, and its files are right."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ars_core import message_to_dict, read_history, read_messages

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
    assert "[started  ] L1" in out and "[completed] L2" in out
    assert "none deleted" in out
    out_dir = Path(re.search(r"files under (\S+):", out).group(1))  # type: ignore[union-attr]
    history = read_messages(run)[1:]  # the system message is passed as `system`
    archives = sorted(out_dir.rglob("conversation_history/*.jsonl"))
    assert archives
    for path in archives:
        header, messages = read_history(path.read_text(encoding="utf-8"))
        expected = history[header["start"] : header["end"]]
        assert [message_to_dict(m) for m in messages] == [message_to_dict(m) for m in expected]
    offloaded = sorted(out_dir.rglob("large_tool_results/*.txt"))
    texts = {m.text for m in history if m.role == "tool"}
    assert offloaded and all(p.read_text(encoding="utf-8") in texts for p in offloaded)
