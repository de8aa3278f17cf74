"""docs/summaries.md: its snippet runs verbatim and shows what the page says (R58)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "summaries.md"


@pytest.mark.spec("R58")
def test_summaries_doc_snippet_runs_and_a_dropped_task_is_reported(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The snippet's summary drops the task: the audit names it missing."""
    (code,) = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    exec(compile(code, str(DOC), "exec"), {})
    out = capsys.readouterr().out
    assert out.strip() == (
        "{'found': [], 'missing': ['task'], 'fraction': 0.0, 'task_fraction': 0.0}"
    )
