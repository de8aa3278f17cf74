"""Running the repository's own modules in child processes (crash and restart tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def repo_env() -> dict[str, str]:
    """This process's environment with the repository first on ``PYTHONPATH``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    return env


def run_script(
    code: str, folder: Path, name: str = "snippet.py"
) -> subprocess.CompletedProcess[str]:
    """Write ``code`` to ``folder/name`` and run it in a fresh Python process
    (the repository importable, ``folder`` the working directory)."""
    script = folder / name
    script.write_text(code, encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        env=repo_env(),
    )


def run_module(
    module: str, *args: str, cwd: Path = REPO_ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m module args...`` in a fresh process (the repository importable)."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=env if env is not None else repo_env(),
        check=False,
    )
