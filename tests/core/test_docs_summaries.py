"""docs/summaries.md: its snippet runs verbatim and shows what the page says (R58)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "summaries.md"


def snippets() -> list[str]:
    """The page's python snippets, in order."""
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


@pytest.mark.spec("R21", "R23")
def test_large_task_snippet_prints_the_grown_bound_and_the_task_room(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The large-task snippet runs verbatim and prints what its comment shows: a
    5,453-token task at T = 8K grows the bound from 3,276 to 6,232, all of it the task's."""
    code = snippets()[0]
    shown = re.search(r"print\(.*\)  # (.*)\n", code)
    assert shown is not None and shown.group(1) == "6232 5453"
    exec(compile(code, str(DOC), "exec"), {})
    assert capsys.readouterr().out.strip() == shown.group(1)


@pytest.mark.spec("R58")
def test_summaries_doc_snippet_runs_and_a_dropped_task_is_reported(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The snippet's summary names no file: the audit finds the task (the engine
    writes it into the summary message) and names the edited file missing."""
    code = snippets()[1]
    exec(compile(code, str(DOC), "exec"), {})
    out = capsys.readouterr().out
    assert out.strip() == (
        "{'found': ['task'], 'missing': ['file:src/parser.py'], 'fraction': 0.5, "
        "'task_fraction': 1.0}"
    )


@pytest.mark.spec("R41", "R27")
def test_summary_call_controls_snippet_prints_the_retry_it_shows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The retry snippet runs verbatim and prints the usage the page shows below it."""
    assert len(snippets()) == 3
    exec(compile(snippets()[2], str(DOC), "exec"), {})
    shown = re.search(r"prints\n\n```text\n(.*?)\n```", DOC.read_text(encoding="utf-8"), re.S)
    assert shown is not None
    assert (
        capsys.readouterr().out.strip()
        == shown.group(1)
        == (
            "{'input_tokens': 100, 'output_tokens': 20, 'total_tokens': 120, 'retries': "
            "[{'reason': 'transient_error', 'error': 'ConnectionResetError: connection reset by "
            "peer', 'delay': 0.05}]}"
        )
    )
