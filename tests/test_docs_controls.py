"""docs/controls.md: every snippet runs verbatim and prints what the page shows under it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "controls.md"
PAIRS = re.findall(
    r"```python\n(.*?)```\s*\nprints\n\n```text\n(.*?)\n```",
    DOC.read_text(encoding="utf-8"),
    re.S,
)
NAMES = [
    "threshold_from_langchain_profile",
    "threshold_from_llamaindex_context_window",
    "compaction_tool",
    "compact_now_langgraph_thread",
    "compact_now_llamaindex_memory",
    "oversized_user_message",
]


def test_every_snippet_has_its_output_shown() -> None:
    """Six snippets, each followed by the output it prints."""
    page = DOC.read_text(encoding="utf-8")
    assert len(PAIRS) == len(NAMES) == page.count("```python")


@pytest.mark.spec("R35", "R21", "R24", "R12", "R30")
@pytest.mark.parametrize(("code", "shown"), PAIRS, ids=NAMES)
def test_controls_doc_snippet_prints_what_the_page_shows(
    code: str, shown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The snippet runs as written and its output is exactly the page's."""
    exec(compile(code, str(DOC), "exec"), {})
    assert capsys.readouterr().out.rstrip("\n") == shown
