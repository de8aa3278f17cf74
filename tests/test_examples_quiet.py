"""The examples print no warning: run as a user runs them (a fresh process, Python's
default logging and warning filters, no ARS_FILES_DIR, a fresh working directory),
nothing on either stream is a warning or a log line of ARS's; what the retention
audit found is in the events and at INFO, which a default logger does not print."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.procs import REPO_ROOT, repo_env

EXAMPLES = ["core_quickstart", "langchain_agent", "langchain_deep_agent", "llamaindex_agent"]
NOISE = re.compile(r"warning|^ARS:|Traceback", re.IGNORECASE | re.MULTILINE)


@pytest.mark.spec("R61", "R58")
@pytest.mark.parametrize("name", EXAMPLES)
def test_an_example_prints_no_warning(name: str, tmp_path: Path) -> None:
    env = repo_env()
    env.pop("ARS_FILES_DIR", None)
    env.pop("PYTHONWARNINGS", None)
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "examples" / f"{name}.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()  # it ran and said what it did
    assert NOISE.findall(result.stdout + result.stderr) == [], result.stderr
