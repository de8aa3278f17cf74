"""``ars replay`` on a recorded run holding lone surrogates and NUL (R53).

The run is JSONL whose strings carry ``\\ud83d`` (half an emoji) and ``\\u0000``
escapes, which ``json.loads`` turns into a lone surrogate and a NUL. The command
must succeed and the files it writes must give back exactly the recorded text.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ars_core import read_history
from tests.procs import repo_env

HALF = json.loads('"\\ud83d"')


def _run(tmp_path: Path) -> list[dict[str, Any]]:
    big = "".join(f"row {i}: {HALF} \x00 value {i * 7}\n" for i in range(400))
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    records: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": f"fix the bug {HALF} " + "please " * 400},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": big},
        {"role": "assistant", "content": f"found it {HALF}"},
        {"role": "user", "content": "thanks " * 300},
        {"role": "assistant", "content": "done"},
    ]
    # ensure_ascii writes the lone surrogate and NUL as JSON escapes, as recorders do
    (tmp_path / "run.jsonl").write_text(
        "\n".join(json.dumps(r, ensure_ascii=True) for r in records) + "\n", encoding="ascii"
    )
    return records


@pytest.mark.spec("R53")
def test_replay_of_a_run_with_lone_surrogates_and_nul_writes_exact_files(
    tmp_path: Path,
) -> None:
    """The command exits 0; the offloaded tool result and the archived messages,
    read back from disk, are exactly the recorded strings."""
    records = _run(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "ars_core", "replay", "run.jsonl", "--threshold", "1",
         "--keep", "2", "--json", "--out", "out"],
        cwd=tmp_path,
        env=repo_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    run = doc["runs"][0]
    assert run["l2_rounds"] >= 1 and run["files_by_kind"]["large_tool_results"] >= 1

    outputs = tmp_path / "out" / run["name"] / "outputs"
    offloaded = sorted((outputs / "large_tool_results").iterdir())
    assert [p.read_bytes().decode("utf-8", "surrogatepass") for p in offloaded] == [
        records[3]["content"]
    ]
    archived_texts: dict[int, str] = {}
    for archive in sorted((outputs / "conversation_history").iterdir()):
        header, messages = read_history(archive.read_bytes().decode("utf-8", "surrogatepass"))
        for offset, message in enumerate(messages):
            archived_texts[header["start"] + offset] = message.text
    # state indices exclude the system message; the first user message is always archived
    assert 0 in archived_texts
    for index, text in archived_texts.items():
        assert text == (records[index + 1]["content"] or "")
