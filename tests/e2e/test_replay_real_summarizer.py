"""``ars replay --summarizer openai:<model>`` against the local OpenAI-compatible
server: the base URL comes from ``OPENAI_BASE_URL`` (read by LangChain's OpenAI
client), the summaries from the real model, and the last one is in the report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ars_core import read_history
from tests.e2e.helpers import user_turn
from tests.servers import LlamaServer

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


def recorded_run(path: Path) -> Path:
    """A recorded chat (OpenAI messages, one a line) long enough for one L2 round."""
    messages = [{"role": "system", "content": "You are a helpful assistant."}]
    for i in range(4):
        messages.append({"role": "user", "content": user_turn(i)})
        messages.append({"role": "assistant", "content": f"Noted the notes of turn {i}."})
    path.write_text("\n".join(json.dumps(m) for m in messages) + "\n", encoding="utf-8")
    return path


def replay(server: LlamaServer, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": "no-key-needed",
        "PYTHONPATH": str(REPO),
    }
    env.pop("OPENAI_API_BASE", None)
    args = [
        sys.executable, "-m", "ars_core", "replay", str(recorded_run(tmp_path / "chat.jsonl")),
        "--threshold", "0.25", "--keep", "2", "--ratio", "0.5",
        "--summarizer", f"openai:{server.model}", "--out", str(tmp_path / "out"), *extra,
    ]  # fmt: skip
    return subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.spec("R23", "R27")
def test_replay_with_an_openai_summarizer_at_a_local_base_url_reports_the_real_summary(
    llama_server: LlamaServer, tmp_path: Path
) -> None:
    """JSON report: L2 rounds whose summary calls all succeeded, the provider's usage
    counted, the model's last summary in ``last_summary`` and in the history archive's
    folder (the text report's closing line is checked in tests/core)."""
    proc = replay(llama_server, tmp_path, "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["summarizer"] == f"openai:{llama_server.model}"
    run = report["runs"][0]
    assert run["l2_rounds"] >= 1 and run["summary_calls"] == run["l2_rounds"]
    assert run["summary_errors"] == 0
    assert run["summary_input_tokens"] > 0 and run["summary_output_tokens"] > 0
    summary = run["last_summary"]
    assert summary and summary.strip()
    archives = sorted((tmp_path / "out" / "chat").rglob("history-*.jsonl"))
    assert len(archives) == run["l2_rounds"]
    header, archived = read_history(archives[-1].read_text(encoding="utf-8"))
    assert header["count"] == len(archived) > 0
