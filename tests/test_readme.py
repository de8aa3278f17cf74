"""The README's quick start runs as written, and prints what the README says it prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def section_blocks(heading: str) -> list[tuple[str, str]]:
    """``(language, code)`` of the fenced blocks under a ``## heading`` of the README."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end >= 0 else len(text)]
    return re.findall(r"^```(\w*)\n(.*?)^```$", section, flags=re.M | re.S)


@pytest.mark.spec("R30", "R31")
def test_readme_quick_start_runs_verbatim_and_prints_what_it_shows(tmp_path: Path) -> None:
    """The quick start's Python block is run unchanged in a fresh process (no API
    key, no network): it compresses with L1 and then L2, and the sample output the
    README shows under it is what it prints (``…`` standing for the elided text)."""
    blocks = section_blocks("Quick start: the core in any agent runtime")
    code = next(c for lang, c in blocks if lang == "python")  # the core's, before the adapters'
    shown = next(c for lang, c in blocks if lang == "text")
    script = tmp_path / "quickstart.py"
    script.write_text(code, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    expected = shown.splitlines()
    assert len(out) > len(expected)
    for line, sample in zip(out, expected, strict=False):
        pattern = ".*?".join(re.escape(piece) for piece in sample.split("…"))
        assert re.fullmatch(pattern, line), (sample, line)
    assert out[-1] == "16 messages kept; the model now reads the summary + 5 messages"
    assert [line.split(":")[0] for line in out[:-1]] == ["started L1", "completed L1"] + [
        "started L1",
        "completed L2",
    ] * 3
