"""``ars replay`` on hostile files: a gzip that unpacks to 1 GiB is refused
after at most the cap was unpacked (the process runs under a 1 GiB address
space limit), and terminal escape sequences in a run's file name or in an
error message never reach the terminal raw."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

from ars_core.messages import MAX_RUN_BYTES
from tests.test_cli import REPO_ROOT, SAMPLE_DIR, run_cli


def bomb(path: Path, size: int = 1 << 30) -> None:
    """A gzip of ``size`` zero bytes (about 1 MB on disk)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(1 << 20)
    with path.open("wb") as out:
        for _ in range(size // len(block)):
            out.write(packer.compress(block))
        out.write(packer.flush())


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def test_a_gzip_bomb_is_refused_within_its_cap(tmp_path: Path) -> None:
    run = tmp_path / "bomb.jsonl.gz"
    bomb(run)
    assert run.stat().st_size < 4 << 20
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "ars_core", "replay", str(run), "--out", "out"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_limited,
        check=False,
    )
    assert "MemoryError" not in result.stderr and "Traceback" not in result.stderr
    assert result.returncode == 1, result.stderr  # bad input, not a crash
    assert f"gzip data unpacks to more than {MAX_RUN_BYTES:,} bytes" in result.stderr
    assert len(result.stderr.splitlines()) == 1


EVIL = "evil\x1b]0;pwned\x07\x1b[2J"


def test_escape_sequences_in_run_names_and_errors_are_not_printed_raw(tmp_path: Path) -> None:
    """A run whose file name holds an OSC title sequence, a bell and a clear-screen:
    the report names it with those characters replaced; a broken file of such a
    name is an error line with them written as \\xNN."""
    sample = sorted(SAMPLE_DIR.glob("*.jsonl.gz"))[0]
    good = tmp_path / f"{EVIL}.jsonl.gz"
    shutil.copy(sample, good)
    replay = run_cli("replay", str(good), "--threshold", "8", "--out", "out", cwd=tmp_path)
    assert replay.returncode == 0, replay.stderr
    for text in (replay.stdout, replay.stderr):
        assert "\x1b" not in text and "\x07" not in text
    assert "evil_]0;pwned__[2J" in replay.stdout
    (folder,) = (tmp_path / "out").iterdir()
    assert folder.name.startswith("evil_") and "\x1b" not in folder.name

    bad = tmp_path / f"{EVIL}.jsonl"
    bad.write_text("not a transcript\n")
    broken = run_cli("replay", str(bad), "--out", "out2", cwd=tmp_path)
    assert broken.returncode != 0
    assert "\x1b" not in broken.stderr and "\x07" not in broken.stderr
    assert "evil\\x1b]0;pwned\\x07\\x1b[2J.jsonl" in broken.stderr
