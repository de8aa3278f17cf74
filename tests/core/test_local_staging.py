"""How a local file is staged (R52, R12): its pieces written whole through ``os``
calls, small pieces gathered into few writes, a short write gone on with, the
file's mode that of ``open``; a write that fails leaves no temporary."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from ars_core import _local_files
from ars_core._local_files import CHUNK, LocalBatch
from ars_core.files import FsspecBackend


@pytest.mark.spec("R52", "R12")
def test_pieces_are_written_whole_in_few_writes_and_short_writes_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pieces = [b"", b"a" * 10, b"b" * (CHUNK - 5), b"c" * 7, b"d" * (2 * CHUNK + 3)]
    pieces += [f"line {i}\n".encode() for i in range(5000)]
    expected = b"".join(pieces)
    writes: list[int] = []
    real_write = os.write

    def short_write(fd: int, data: bytes | memoryview) -> int:
        writes.append(len(data))
        return real_write(fd, bytes(data[: max(1, len(data) // 3)]))  # a third at most

    monkeypatch.setattr(os, "write", short_write)
    batch = LocalBatch()
    host = tmp_path / "out" / "f.txt"
    batch.stage("k", str(host), str(tmp_path / "out" / ".f.txt.ars-tmp-1"), pieces)
    assert batch.commit() == {}
    assert host.read_bytes() == expected
    assert os.listdir(tmp_path / "out") == ["f.txt"]  # no temporary left
    # 5,000 lines of ~9 bytes gathered: far fewer writes than pieces, none over CHUNK
    assert max(writes) <= CHUNK and len(writes) < len(pieces) // 20
    probe = tmp_path / "probe"
    with open(probe, "xb"):
        pass
    assert stat.S_IMODE(host.stat().st_mode) == stat.S_IMODE(probe.stat().st_mode)


@pytest.mark.spec("R52", "R12")
def test_a_write_failing_while_staged_is_that_files_error_and_leaves_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = os.write

    def write(fd: int, data: bytes | memoryview) -> int:
        if b"FULL" in bytes(data):
            raise OSError(errno.ENOSPC, "simulated full disk")
        return real_write(fd, data)

    monkeypatch.setattr(_local_files.os, "write", write)
    files = [
        (f"out/f{i}.txt", (f"file {i} ".encode(), b"FULL" if i == 2 else b"ok")) for i in range(4)
    ]
    errors = FsspecBackend(tmp_path.as_uri()).write_files(files)
    assert list(errors) == ["out/f2.txt"] and "simulated full disk" in str(errors["out/f2.txt"])
    assert sorted(os.listdir(tmp_path / "out")) == ["f0.txt", "f1.txt", "f3.txt"]
    for i in (0, 1, 3):
        assert (tmp_path / "out" / f"f{i}.txt").read_bytes() == f"file {i} ok".encode()


@pytest.mark.spec("R52", "R12")
def test_staged_files_are_whole_under_temporaries_until_finish_names_them(
    tmp_path: Path,
) -> None:
    """:meth:`FsspecBackend.stage_files` returns with each file whole under a
    temporary name and none under its own; ``finish()`` (run in another thread, as
    a round runs it) names each, leaving no temporary."""
    import threading

    files = {f"out/f{i}.txt": (f"file {i} ".encode(), b"x" * (i * 1000)) for i in range(5)}
    finish = FsspecBackend(tmp_path.as_uri()).stage_files(list(files.items()))
    names = sorted(os.listdir(tmp_path / "out"))
    assert len(names) == 5 and all(".ars-tmp-" in n for n in names)
    staged = {
        n.split(".ars-tmp-")[0].lstrip("."): (tmp_path / "out" / n).read_bytes() for n in names
    }
    assert staged == {p.split("/")[1]: b"".join(v) for p, v in files.items()}
    result: list[dict[str, Exception]] = []
    worker = threading.Thread(target=lambda: result.append(finish()))
    worker.start()
    worker.join(timeout=60)
    assert result == [{}]
    assert sorted(os.listdir(tmp_path / "out")) == sorted(p.split("/")[1] for p in files)
    for path, pieces in files.items():
        assert (tmp_path / path).read_bytes() == b"".join(pieces)
