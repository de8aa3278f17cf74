"""Temporaries a killed writer leaves (``.<name>.ars-tmp-<random>``) are swept
and never listed to the agent (R52): the first write of a process into a
folder removes those older than STALE_TMP_SECONDS (a younger one may be a
live writer's). Through :class:`Compressor`, sync and async. (A deep agent's
``ls`` never shows them: tests/langchain/test_deepagents_isolation.py.)"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ars_core import Compressor, FsspecBackend
from ars_core.files import STALE_TMP_SECONDS

from .helpers import assistant, call, small_config, tool, user, words
from .test_l1_media import run

MODES = pytest.mark.parametrize("mode", ["sync", "async"])


def leftovers(folder: Path) -> tuple[Path, Path]:
    """A killed writer's temporary from an hour ago, and a live writer's from now."""
    folder.mkdir(parents=True)
    stale = folder / ".bash-0123.txt.ars-tmp-0123456789ab"
    fresh = folder / ".bash-4567.txt.ars-tmp-ba9876543210"
    for p in (stale, fresh):
        p.write_bytes(b"half a fi")
    old = time.time() - STALE_TMP_SECONDS - 3600
    os.utime(stale, (old, old))
    return stale, fresh


@pytest.mark.spec("R52")
@MODES
def test_a_killed_writers_stale_temporary_is_swept_by_the_next_write(
    mode: str, tmp_path: Path
) -> None:
    folder = tmp_path / "files" / "threads" / "t1" / "outputs" / "large_tool_results"
    stale, fresh = leftovers(folder)
    backend = FsspecBackend((tmp_path / "files").as_uri()).scoped("t1")
    c = call("bash")
    state = [user("build it"), assistant("", c), tool(c, words(1500, "log")), user("and?")]
    out = run(mode, Compressor(small_config(), backend=backend), state)
    assert out.level is not None
    names = sorted(p.name for p in folder.iterdir())
    assert not stale.exists() and fresh.exists()
    assert len(names) == 2 and names[0] == fresh.name and names[1].startswith("bash-")
