"""A round's offloads on a local folder are written beside its next steps (R52, R12, R23).

The L1 offloads of a round are written (staged, flushed together, renamed, their
folder flushed) in a writing thread while the round chooses its cutoff and builds
the summary's input; the round waits for them before anything naming them leaves
it (the summary request, the view sent, the event). A spy on ``os.fsync`` holds
the offloads' flush until the round is choosing its cutoff: the oracle is that it
was released by that (the write ran beside the round), and what was on disk when
the summary was asked for. An offload whose flush fails leaves the round exactly
as a backend refusing that file outright does: same summary input, same view
sent, same event (the result kept whole, not named as offloaded).
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from ars_core import FsspecBackend, Message
from ars_core import flow as flow_mod
from ars_core.paths import text_sha256
from ars_core.stream import CompressionEvent
from ars_core.testing import FailingBackend, FakeSummarizer
from tests.core.test_durable_round import RESULTS, _history, _round

OFFLOADS = "outputs/large_tool_results/"


def _sending(
    asynchronous: bool, backend: Any, summarizer: FakeSummarizer, messages: list[Message]
) -> tuple[Any, list[CompressionEvent], list[list[Message]]]:
    """One L2 round (:func:`_round`): its outcome, its events and the views it sent."""
    sent: list[list[Message]] = []
    events: list[CompressionEvent] = []

    def model(view: list[Message]) -> Message:
        sent.append(view)
        return Message(role="assistant", content="ok")

    outcome = _round(asynchronous, backend, summarizer, model, events, messages)
    return outcome, events, sent


def _path(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


@pytest.mark.spec("R52", "R12", "R23")
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_offloads_are_written_beside_the_cut_choice_and_durable_before_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, asynchronous: bool
) -> None:
    cutting = threading.Event()
    log: list[tuple[str, Any]] = []
    real_fsync, real_choose = os.fsync, flow_mod.choose_cut

    def fsync(fd: int) -> None:
        path = _path(fd)
        if stat.S_ISREG(os.fstat(fd).st_mode) and "/large_tool_results/" in path:
            log.append(("offload flush waited for the cut choice", cutting.wait(timeout=20)))
        real_fsync(fd)
        if path.endswith("large_tool_results"):
            log.append(("offloads folder flushed", path))

    def choose_cut(*args: Any, **kwargs: Any) -> Any:
        cutting.set()
        return real_choose(*args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(flow_mod, "choose_cut", choose_cut)
    root = tmp_path / "files"
    on_disk: list[dict[str, bytes]] = []

    def summary(prompt: str) -> str:
        files = sorted(root.rglob("large_tool_results/*"))
        on_disk.append({p.name: p.read_bytes() for p in files})
        log.append(("summary asked", len(files)))
        return "SUMMARY"

    backend = FsspecBackend(root.as_uri())
    outcome, events, sent = _sending(asynchronous, backend, FakeSummarizer(summary), _history()[0])
    event = outcome.update.event
    assert outcome.level == "L2" and events[-1].phase == "completed"
    assert len(events[-1].offloaded) == RESULTS
    waited = [e for e in log if e[0] == "offload flush waited for the cut choice"]
    assert waited == [("offload flush waited for the cut choice", True)] * RESULTS
    # every offload whole under its name, its folder flushed, before the summary is asked
    asked = log.index(("summary asked", RESULTS))
    assert [e[0] for e in log[:asked]].count("offloads folder flushed") == 1
    _, texts = _history()
    expected = {f"bash-{text_sha256(t)}.txt": t.encode() for t in texts}
    assert on_disk == [expected]
    assert {Path(p).name for p in events[-1].offloaded} == set(expected)
    assert len(sent) == 1 and sent[0][0] == event.summary_message


@pytest.mark.spec("R52", "R12")
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_an_offload_failing_beside_the_round_leaves_it_as_a_refused_write_does(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    asynchronous: bool,
) -> None:
    """One offload's flush fails (EIO) while the round goes on: the summary's input,
    the view sent and the event are those of a round whose backend refuses that file
    outright (written at once, not beside); one summary call; the file is neither
    under its name nor left as a temporary; the failure is logged with its cause."""
    messages, texts = _history()
    failing = f"bash-{text_sha256(texts[5])}.txt"

    def run(backend: Any) -> tuple[Any, list[CompressionEvent], FakeSummarizer, list[Any]]:
        summarizer = FakeSummarizer("S")
        outcome, events, sent = _sending(asynchronous, backend, summarizer, messages)
        return outcome, events, summarizer, sent

    refused = FailingBackend([OFFLOADS + failing], inner=FsspecBackend((tmp_path / "ref").as_uri()))
    expected, expected_events, expected_summarizer, expected_sent = run(refused)
    assert refused.failed == [OFFLOADS + failing]
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if failing in _path(fd):
            raise OSError(errno.EIO, "simulated I/O error")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    root = tmp_path / "f"
    with caplog.at_level(logging.WARNING, logger="ars"):
        outcome, events, summarizer, sent = run(FsspecBackend(root.as_uri()))
    assert outcome.level == expected.level == "L2"
    assert len(summarizer.calls) == len(expected_summarizer.calls) == 1
    assert summarizer.calls == expected_summarizer.calls
    # the result itself went to the summary, not the name of a missing file
    assert any(texts[5][:200] in m.text for m in summarizer.calls[0][0])
    assert not any(failing in m.text for m in summarizer.calls[0][0])
    assert sent == expected_sent and len(sent) == 1
    done, ref = events[-1], expected_events[-1]
    assert done.phase == ref.phase == "completed"
    assert done.offloaded == ref.offloaded and len(done.offloaded) == RESULTS - 1
    assert not any(failing in p for p in done.offloaded)
    assert outcome.update.event.summary_message == expected.update.event.summary_message
    on_disk = {p.name for p in root.rglob("*") if p.is_file()}
    assert not any(failing in n for n in on_disk)  # neither the file nor a temporary
    assert {Path(p).name for p in done.offloaded} <= on_disk
    assert f"could not write {OFFLOADS}{failing}" in caplog.text
    assert "simulated I/O error" in caplog.text
