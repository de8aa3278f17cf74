"""A round's history archive on a local folder is written beside the summary's input
(R23, R26, R52).

A large archive's write (its file, the flush of its bytes, its rename, its folder's
flush) starts in a writing thread as soon as the round knows what it archives,
while the round builds the summary's input; the round waits for the file to be
whole under its name before it asks for the summary (sync path: archive, then
summary), and for its folder's flush before the view naming it is sent. A spy
makes the input's build wait (bounded) until the archive's bytes are being
flushed: the oracle is that it saw that flush (a round writing the archive only
once its input is built would time out), and what was on disk when the summary
was asked for. A small archive (a few messages) is written by the round's own
thread before it builds the input, only its folder's flush beside.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from ars_core import FsspecBackend, Message, read_archive
from ars_core import effects as effects_mod
from ars_core import flow as flow_mod
from ars_core.archive import HistoryArchive
from ars_core.effects import SettleArchive, SyncEffects, WrittenPaths
from ars_core.testing import FakeSummarizer
from tests.core.helpers import user
from tests.core.test_durable_round import _history, _round


def _is_archive_file(fd: int) -> bool:
    path = os.readlink(f"/proc/self/fd/{fd}")
    return stat.S_ISREG(os.fstat(fd).st_mode) and "/conversation_history/" in path


@pytest.mark.spec("R23", "R26", "R52")
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_the_archive_is_written_beside_the_summary_input_and_whole_before_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, asynchronous: bool
) -> None:
    monkeypatch.setattr(effects_mod, "BESIDE_ARCHIVE_BYTES", 1)  # this archive is large
    flushing = threading.Event()
    log: list[tuple[str, Any]] = []
    real_fsync, real_condense = os.fsync, flow_mod.condense_history

    def fsync(fd: int) -> None:
        if _is_archive_file(fd):
            flushing.set()
        real_fsync(fd)

    def condense_history(*args: Any, **kwargs: Any) -> Any:
        log.append(("input built while the archive was flushed", flushing.wait(timeout=10)))
        return real_condense(*args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(flow_mod, "condense_history", condense_history)
    root = tmp_path / "files"
    on_disk: list[dict[str, int]] = []

    def summary(prompt: str) -> str:
        on_disk.append({p.name: p.stat().st_size for p in root.rglob("conversation_history/*")})
        return "SUMMARY"

    sent: list[list[Message]] = []

    def model(view: list[Message]) -> Message:
        sent.append(view)
        return Message(role="assistant", content="ok")

    backend = FsspecBackend(root.as_uri())
    outcome = _round(asynchronous, backend, FakeSummarizer(summary), model, [])
    event = outcome.update.event
    assert outcome.level == "L2" and event.file_path is not None
    assert log == [("input built while the archive was flushed", True)]
    name = Path(event.file_path).name
    archived = read_archive(backend, event.file_path)
    assert [m.text for m in archived] == [m.text for m in _history()[0][: event.cutoff]]
    if not asynchronous:  # archive, then summary: whole under its name when it is asked
        size = (root / event.file_path).stat().st_size
        assert on_disk == [{name: size}]
    assert len(sent) == 1 and sent[0][0] == event.summary_message
    assert name in event.summary_message.text


@pytest.mark.spec("R23", "R26", "R52")
def test_a_small_archive_is_written_by_the_round_before_it_builds_the_summary_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below BESIDE_ARCHIVE_BYTES the round's own thread writes the archive (its bytes
    flushed there) as soon as it knows what it archives: whole under its name when the
    input is built; the view naming it is sent once its folder is flushed too."""
    round_thread = threading.get_ident()
    flushed_by: list[bool] = []
    real_fsync, real_condense = os.fsync, flow_mod.condense_history
    root = tmp_path / "files"

    def fsync(fd: int) -> None:
        if _is_archive_file(fd):
            flushed_by.append(threading.get_ident() == round_thread)
        real_fsync(fd)

    seen: list[list[str]] = []

    def condense_history(*args: Any, **kwargs: Any) -> Any:
        seen.append([p.name for p in root.rglob("conversation_history/*.jsonl")])
        return real_condense(*args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(flow_mod, "condense_history", condense_history)
    backend = FsspecBackend(root.as_uri())
    outcome = _round(
        False, backend, FakeSummarizer("S"), lambda v: Message(role="assistant", content="ok"), []
    )
    event = outcome.update.event
    assert event.file_path is not None
    assert (root / event.file_path).stat().st_size < effects_mod.BESIDE_ARCHIVE_BYTES
    assert flushed_by == [True]
    assert seen == [[Path(event.file_path).name]]
    archived = read_archive(backend, event.file_path)
    assert [m.text for m in archived] == [m.text for m in _history()[0][: event.cutoff]]


@pytest.mark.spec("R23", "R52")
def test_an_archive_write_the_round_forgets_is_finished_and_not_continued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round that chooses its cutoff again (an offload failed beside it) forgets the
    archive it began: that write is waited for (the file whole on disk, no temporary),
    and the next archive of the same range start is written whole, not as a
    continuation of a file nothing names."""
    backend = FsspecBackend((tmp_path / "f").as_uri())
    monkeypatch.setattr(effects_mod, "BESIDE_ARCHIVE_BYTES", 1)  # written beside
    written: WrittenPaths = WrittenPaths()
    effects = SyncEffects(None, FakeSummarizer("S"), backend, lambda e: None, written)
    messages = [user(f"request {i}") for i in range(6)]
    first = HistoryArchive.of(messages[:4], start=0, thread="t")
    effects.begin_archive(flow_mod.BeginArchive(first))
    assert effects.settle_archive(SettleArchive(forget=True)) is None
    folder = tmp_path / "f" / "outputs" / "conversation_history"
    (forgotten,) = sorted(p.name for p in folder.iterdir())
    assert read_archive(backend, f"outputs/conversation_history/{forgotten}") == messages[:4]
    again = HistoryArchive.of(messages, start=0, thread="t")
    effects.begin_archive(flow_mod.BeginArchive(again))
    started = effects.start_archive(again)
    assert started.pending and started.continues is None
    settled = effects.settle_archive(SettleArchive())
    assert settled is not None and settled.path == started.path and settled.error is None
    assert started.path == again.whole().path
    assert read_archive(backend, started.path) == messages
    assert sorted(p.name for p in folder.iterdir()) == sorted([forgotten, Path(started.path).name])
