"""The README's quick start runs as written, and prints what the README says it prints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.procs import run_script

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
    proc = run_script(code, tmp_path, "quickstart.py")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    expected = shown.splitlines()
    assert len(out) > len(expected)
    for line, sample in zip(out, expected, strict=False):
        pattern = ".*?".join(re.escape(piece) for piece in sample.split("…"))
        assert re.fullmatch(pattern, line), (sample, line)
    assert out[-1] == "16 messages kept; the model now reads the summary + 3 messages"
    assert [line.split(":")[0] for line in out[:-1]] == ["started L1", "completed L1"] + [
        "started L1",
        "completed L2",
    ] * 3


@pytest.mark.spec("R30")
def test_readme_capture_events_example_runs_verbatim(tmp_path: Path) -> None:
    """The testing section's ``capture_events`` block runs unchanged (its own
    assertion is the oracle) in a fresh process."""
    (code,) = [c for lang, c in section_blocks("Testing your agent") if lang == "python"]
    assert "capture_events()" in code and "assert captured.phases" in code
    proc = run_script(code, tmp_path, "capture.py")
    assert proc.returncode == 0, proc.stderr


def test_readme_lists_every_example_and_each_names_its_extra() -> None:
    """The README's examples table has every example with its extra, and each example
    says in its first lines how to install what it needs and how to run it."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = dict(
        re.findall(r"^\| \[`(examples/[\w/]+\.py)`\]\([^)]*\) \| (`[\w,]+`|none) \|", readme, re.M)
    )
    examples = sorted(str(p.relative_to(REPO)) for p in (REPO / "examples").glob("*.py"))
    assert sorted(table) == examples
    for path, extra in table.items():
        head = "\n".join((REPO / path).read_text(encoding="utf-8").splitlines()[:12])
        assert "pip install" in head and f"python {path}" in (REPO / path).read_text(), path
        for name in [] if extra == "none" else extra.strip("`").split(","):
            assert re.search(rf"\[[\w,]*\b{name}\b[\w,]*\]", head), (path, name)  # ars[name]


def test_no_link_in_readme_or_docs_leaves_the_repository() -> None:
    """Markdown links and backticked relative paths in README.md and docs/ resolve
    inside the repository; the only URLs are local ones (127.0.0.1, file://, memory://)."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    outside: list[str] = []

    def check(page: Path, target: str) -> None:
        resolved = (page.parent / target.split("#")[0]).resolve()
        if not (resolved.is_relative_to(REPO) and resolved.exists()):
            outside.append(f"{page.name}: {target}")

    for page in pages:
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+://", target):
                outside.append(f"{page.name}: {target}")
            else:
                check(page, target)
        for target in re.findall(r"`(\.\./[^`\s]*/[^`\s]*)`", text):
            check(page, target)
        for url in re.findall(r"https?://[^\s)`'\"]+", text):
            if not url.startswith(("http://127.0.0.1", "http://localhost")):
                outside.append(f"{page.name}: {url}")
    assert outside == []
