"""A round's files on a local folder are durable before its event is returned, with
one barrier for all of them (R52, R12, R23).

The files of one step (a round's offloads) are written under temporary names,
flushed to disk together, renamed into place, and their folder flushed: a spy on
``os.fsync`` and ``os.replace`` records the order. The oracle is that order and
the bytes on disk when the round's ``completed`` event is delivered.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from ars_core import Compressor, FsspecBackend, Message, read_archive
from ars_core.stream import CompressionEvent
from ars_core.testing import FakeSummarizer
from tests.core.helpers import assistant, call, small_config, tool, user, words

RESULTS = 6


def _history() -> tuple[list[Message], list[str]]:
    """A history over T whose tool results (distinct, each well above the offload
    limit) are offloaded, then summarized by an L2 round."""
    messages: list[Message] = [user("build the project and fix every failing test")]
    texts = []
    for i in range(RESULTS):
        c = call("bash", command=f"make step{i}")
        text = f"step {i} output\n" + words(400, seed=f"log{i}")
        texts.append(text)
        messages += [assistant("", c), tool(c, text), assistant(f"step {i} done")]
    messages.append(user("now run the whole suite"))
    return messages, texts


class _Spy:
    """Every fsync (of a file or a folder, by inode) and rename, in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail_on: str | None = None) -> None:
        self.log: list[tuple[str, Any]] = []
        self.fail_on = fail_on
        real_fsync, real_replace = os.fsync, os.replace

        def fsync(fd: int) -> None:
            info = os.fstat(fd)
            kind = "folder" if stat.S_ISDIR(info.st_mode) else "file"
            if self.fail_on is not None and self.fail_on in os.readlink(f"/proc/self/fd/{fd}"):
                raise OSError(errno.EIO, "simulated I/O error")
            self.log.append((kind, info.st_ino))
            real_fsync(fd)

        def replace(src: str, dst: str) -> None:
            real_replace(src, dst)
            self.log.append(("rename", os.stat(dst).st_ino))

        monkeypatch.setattr(os, "fsync", fsync)
        monkeypatch.setattr(os, "replace", replace)


def _run(asynchronous: bool, root: Path, messages: list[Message], on_event: Any) -> Any:
    engine = Compressor(small_config(summary_keep_messages=2), backend=FsspecBackend(root.as_uri()))
    reply = Message(role="assistant", content="ok")
    if asynchronous:

        async def model(view: list[Message]) -> Message:
            return reply

        async def go() -> Any:
            return await engine.acall(messages, model, emitter=on_event, thread="t")

        return anyio.run(go)
    return engine.call(messages, lambda view: reply, emitter=on_event, thread="t")


def _files(root: Path) -> dict[str, Path]:
    return {
        p.relative_to(root).as_posix(): p
        for p in root.rglob("*")
        if p.is_file() and p.name != ".gitignore"
    }


@pytest.mark.spec("R52", "R12", "R23")
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_rounds_files_are_whole_and_durable_before_its_event_with_one_barrier(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, asynchronous: bool
) -> None:
    messages, texts = _history()
    spy = _Spy(monkeypatch)
    at_event: dict[str, Any] = {}

    def on_event(event: CompressionEvent) -> None:
        if event.phase == "completed":  # what is on disk, and flushed, when it is named
            files = _files(tmp_path / "files")
            at_event.update(
                event=event,
                log=list(spy.log),
                bytes={k: p.read_bytes() for k, p in files.items()},
                inodes={k: p.stat().st_ino for k, p in files.items()},
                folders={k: p.parent.stat().st_ino for k, p in files.items()},
            )

    root = tmp_path / "files"
    outcome = _run(asynchronous, root, messages, on_event)
    event, log = at_event["event"], at_event["log"]
    assert outcome.level == "L2" and event.level == "L2"
    offloads = {k: v for k, v in at_event["bytes"].items() if "large_tool_results/" in k}
    # every offload the event names is on disk, whole, holding the result it stands for
    assert sorted(event.offloaded) == sorted(offloads) and len(offloads) == RESULTS
    assert sorted(offloads.values()) == sorted(t.encode() for t in texts)
    archive = [k for k in at_event["bytes"] if "conversation_history/" in k]
    assert archive == [event.file_path]
    archived = read_archive(FsspecBackend(root.as_uri()), archive[0])
    assert len(archived) == event.cutoff > 0
    assert [m.text for m in archived] == [m.text for m in messages[: event.cutoff]]
    # durable before the event: each file flushed before its rename, its folder after
    for name, ino in at_event["inodes"].items():
        renamed = log.index(("rename", ino))
        assert ("file", ino) in log[:renamed], name
        assert ("folder", at_event["folders"][name]) in log[renamed + 1 :], name
    # one barrier for the offloads: every flush of them before any of their renames,
    # one flush of their folder
    offload_inodes = {at_event["inodes"][k] for k in offloads}
    flushes = [i for i, e in enumerate(log) if e[0] == "file" and e[1] in offload_inodes]
    renames = [i for i, e in enumerate(log) if e[0] == "rename" and e[1] in offload_inodes]
    assert len(flushes) == RESULTS and max(flushes) < min(renames)
    folder = at_event["folders"][next(iter(offloads))]
    assert log.count(("folder", folder)) == 1


@pytest.mark.spec("R52", "R12")
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_file_whose_flush_fails_is_a_failed_write_and_the_others_are_written(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    asynchronous: bool,
) -> None:
    """One offload's fsync fails (EIO): that result stays whole in the view and is not
    named as offloaded, its file is neither under its name nor left as a temporary;
    the other offloads are written, as when a write fails outright."""
    from ars_core.paths import text_sha256

    messages, texts = _history()
    failing = f"bash-{text_sha256(texts[2])}.txt"
    _Spy(monkeypatch, fail_on=failing)
    seen: list[list[Message]] = []
    events: list[CompressionEvent] = []
    engine = Compressor(
        small_config(summary_threshold=2, summary_l2_trigger_ratio=1.0),
        backend=FsspecBackend((tmp_path / "f").as_uri()),
    )

    def model(view: list[Message]) -> Message:
        seen.append(view)
        return Message(role="assistant", content="ok")

    with caplog.at_level(logging.WARNING, logger="ars"):
        if asynchronous:

            async def amodel(view: list[Message]) -> Message:
                return model(view)

            outcome = anyio.run(lambda: engine.acall(messages, amodel, emitter=events.append))
        else:
            outcome = engine.call(messages, model, emitter=events.append)
    view = outcome.view
    assert outcome.level == "L1" and view == seen[-1]
    completed = [e for e in events if e.phase == "completed"][-1]
    names = {Path(p).name for p in completed.offloaded}
    assert failing not in names and len(names) == RESULTS - 1
    assert [m.text for m in view if m.role == "tool" and m.text == texts[2]] == [texts[2]]
    on_disk = {p.name for p in (tmp_path / "f").rglob("*") if p.is_file()}
    assert not any(failing in n for n in on_disk)  # neither the file nor a temporary
    assert names <= on_disk
    assert f"could not write outputs/large_tool_results/{failing}" in caplog.text
    assert "simulated I/O error" in caplog.text


def _round(
    asynchronous: bool,
    backend: Any,
    summarizer: FakeSummarizer,
    model: Any,
    events: list[Any],
    messages: list[Message] | None = None,
) -> Any:
    """One L2 round over ``messages`` (a new :func:`_history` by default; thread ``t``),
    the model answering through ``model(view)``."""
    engine = Compressor(
        small_config(summary_keep_messages=2), backend=backend, summarizer=summarizer
    )
    messages = messages if messages is not None else _history()[0]
    if asynchronous:

        async def amodel(view: list[Message]) -> Message:
            return model(view)  # type: ignore[no-any-return]

        async def go() -> Any:
            return await engine.acall(messages, amodel, emitter=events.append, thread="t")

        return anyio.run(go)
    return engine.call(messages, model, emitter=events.append, thread="t")


def _is_archive_folder(fd: int) -> bool:
    return stat.S_ISDIR(os.fstat(fd).st_mode) and os.readlink(f"/proc/self/fd/{fd}").endswith(
        "conversation_history"
    )


@pytest.mark.spec("R52", "R23", "R26")
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_the_archives_folder_is_flushed_beside_the_summary_and_before_the_view_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, asynchronous: bool
) -> None:
    """The archive is written (whole under its name, its bytes flushed) before the
    summary is asked for (sync: archive, then summary); the flush of its folder runs
    beside the summary: here it waits until the summary was asked for (it would wait
    forever, bounded by a guard, if the round flushed it first). The round's view,
    which names the archive, is sent only once that flush is done."""
    asked = threading.Event()
    log: list[tuple[str, Any]] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if _is_archive_folder(fd):
            log.append(("folder flush waited for the summary", asked.wait(timeout=20)))
        real_fsync(fd)
        log.append(("flushed", os.readlink(f"/proc/self/fd/{fd}")))

    monkeypatch.setattr(os, "fsync", fsync)
    root = tmp_path / "files"

    def summary(prompt: str) -> str:
        archives = sorted(root.rglob("conversation_history/*.jsonl"))
        log.append(("summary asked, archives on disk", [p.name for p in archives]))
        asked.set()
        return "SUMMARY"

    sent: list[tuple[list[Message], list[tuple[str, Any]]]] = []

    def model(view: list[Message]) -> Message:
        sent.append((view, list(log)))
        return Message(role="assistant", content="ok")

    events: list[CompressionEvent] = []
    outcome = _round(
        asynchronous, FsspecBackend(root.as_uri()), FakeSummarizer(summary), model, events
    )
    event = outcome.update.event
    assert outcome.level == "L2" and event.file_path is not None
    name = Path(event.file_path).name
    assert name in event.summary_message.text  # the view names the archive
    ((view, at_call),) = sent
    assert view[0] == event.summary_message
    folder = str(next(root.rglob(name)).parent)
    waited = [e for e in at_call if e[0] == "folder flush waited for the summary"]
    assert waited == [("folder flush waited for the summary", True)]
    assert ("flushed", folder) in at_call  # durable before the view naming it is sent
    if not asynchronous:  # archive, then summary: the file is there whole when it is asked
        asked_at = [e for e in at_call if e[0] == "summary asked, archives on disk"]
        assert asked_at == [("summary asked, archives on disk", [name])]
    assert [(e.phase, e.level) for e in events] == [("started", "L1"), ("completed", "L2")]
    assert events[-1].file_path == event.file_path


@pytest.mark.spec("R52", "R24", "R26")
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_failed_flush_of_the_archives_folder_is_a_failed_archive_write(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    asynchronous: bool,
) -> None:
    """The flush of the archive's folder fails (EIO) after the summary was made: the
    round sends what it sends when the archive's write fails outright (a backend
    refusing it): a summary naming no archive, no ``file_path`` in the event, one
    warning, one summary call, the retention audit logged once."""
    from ars_core.testing import FailingBackend

    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if _is_archive_folder(fd):
            raise OSError(errno.EIO, "simulated I/O error")
        real_fsync(fd)

    messages, _ = _history()

    def run(backend: Any) -> tuple[Any, list[list[Message]], FakeSummarizer, list[str]]:
        views: list[list[Message]] = []
        summarizer = FakeSummarizer("S")
        caplog.clear()

        def model(view: list[Message]) -> Message:
            views.append(view)
            return Message(role="assistant", content="ok")

        events: list[CompressionEvent] = []
        with caplog.at_level(logging.INFO, logger="ars"):
            outcome = _round(asynchronous, backend, summarizer, model, events, messages)
        assert [(e.phase, e.level) for e in events] == [("started", "L1"), ("completed", "L2")]
        assert events[-1].file_path is None
        return outcome, views, summarizer, [r.getMessage() for r in caplog.records]

    refused = FailingBackend(
        ["outputs/conversation_history"], inner=FsspecBackend((tmp_path / "ref").as_uri())
    )
    expected, expected_views, _, expected_log = run(refused)
    monkeypatch.setattr(os, "fsync", fsync)
    outcome, views, summarizer, logged = run(FsspecBackend((tmp_path / "f").as_uri()))
    assert outcome.level == "L2" and outcome.update.event.file_path is None
    assert views == expected_views and len(views) == 1
    assert outcome.update.event.summary_message == expected.update.event.summary_message
    assert "saved at" not in outcome.update.event.summary_message.text
    assert len(summarizer.calls) == 1
    failed = [m for m in logged if "history archive write failed" in m]
    assert len(failed) == 1
    assert [m for m in logged if "could not write" in m and "simulated I/O error" in m]
    audit = [m for m in logged if "summary round" in m or "no longer sees" in m]
    assert len(audit) == len(
        [m for m in expected_log if "summary round" in m or "no longer sees" in m]
    )
    assert len(audit) <= 1
    archives = [
        p.name for p in (tmp_path / "f").rglob("*") if "conversation_history" in str(p.parent)
    ]
    assert not any(".ars-tmp-" in n for n in archives)
