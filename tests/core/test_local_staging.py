"""How a local file is staged (R52, R12): its pieces written whole through ``os``
calls, small pieces gathered into few writes, a short write gone on with, the
file's mode that of ``open``; a write that fails leaves no temporary."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from ars_core import _local_files, _syncfs
from ars_core._local_files import CHUNK, SYNCFS_FILES, LocalBatch
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


def _fsync_spy(monkeypatch: pytest.MonkeyPatch, log: list[tuple[str, str]], fail: str = "") -> None:
    """``os.fsync`` and ``os.replace`` logged (``fail``: a file whose fsync fails)."""
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        name = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
        kind = "folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"
        if fail and name.startswith(f".{fail}"):
            raise OSError(errno.EIO, "simulated I/O error")
        log.append((kind, name))
        real_fsync(fd)

    def replace(src: str, dst: str) -> None:
        real_replace(src, dst)
        log.append(("rename", os.path.basename(dst)))

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)


def _batch(n: int) -> dict[str, tuple[bytes, ...]]:
    return {f"out/f{i:02d}.txt": (f"file {i}\n".encode() * (50 + i),) for i in range(n)}


def _with_syncfs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the kernel offers no sound ``syncfs``, one that syncs every file system;
    and little of others' data waiting to be written, whatever this machine's load (a
    CI machine installing packages may have more than FOREIGN_DIRTY of it)."""
    monkeypatch.setattr(_syncfs, "others_dirty", lambda own: 0)
    if not _syncfs.available():
        monkeypatch.setattr(_syncfs, "_SYNCFS", lambda fd: (os.sync(), 0)[1])


@pytest.mark.spec("R52", "R12")
def test_a_large_batch_is_flushed_by_one_syncfs_between_staging_and_renaming(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch of SYNCFS_FILES or more: one ``syncfs`` while every file is whole under
    its temporary name and none under its own, no ``fsync`` per file, every rename
    after it, the folder flushed after the renames; the bytes are the files'."""
    _with_syncfs(monkeypatch)
    log: list[tuple[str, str]] = []
    _fsync_spy(monkeypatch, log)
    real_syncfs = _syncfs.syncfs
    out = tmp_path / "out"

    def syncfs(fd: int) -> OSError | None:
        log.append(("syncfs", ""))
        at_syncfs.update({p.name: p.read_bytes() for p in out.iterdir()})
        return real_syncfs(fd)

    at_syncfs: dict[str, bytes] = {}
    monkeypatch.setattr(_syncfs, "syncfs", syncfs)
    files = _batch(SYNCFS_FILES * 2)
    assert FsspecBackend(tmp_path.as_uri()).write_files(list(files.items())) == {}
    whole = {p.split("/")[1]: b"".join(v) for p, v in files.items()}
    # at the syncfs: each file whole under a temporary name, none under its own
    assert {n.split(".ars-tmp-")[0].lstrip("."): b for n, b in at_syncfs.items()} == whole
    assert all(".ars-tmp-" in n for n in at_syncfs)
    kinds = [k for k, _ in log]
    assert kinds.count("syncfs") == 1 and "file" not in kinds
    renames = [i for i, k in enumerate(kinds) if k == "rename"]
    assert len(renames) == len(files) and kinds.index("syncfs") < min(renames)
    assert kinds[max(renames) + 1 :] == ["folder"]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == whole


@pytest.mark.spec("R52", "R12")
def test_a_failed_syncfs_falls_back_to_each_files_own_flush_and_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ``syncfs`` fails: each file is flushed on its own, so the one whose flush
    fails is that file's error (neither its name nor a temporary left) and the
    others are written."""
    _with_syncfs(monkeypatch)
    log: list[tuple[str, str]] = []
    _fsync_spy(monkeypatch, log, fail="f03.txt")
    monkeypatch.setattr(_syncfs, "syncfs", lambda fd: OSError(errno.EIO, "simulated"))
    files = _batch(SYNCFS_FILES + 2)
    errors = FsspecBackend(tmp_path.as_uri()).write_files(list(files.items()))
    assert list(errors) == ["out/f03.txt"] and "simulated I/O error" in str(errors["out/f03.txt"])
    assert [k for k, _ in log].count("file") == len(files) - 1
    on_disk = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
    assert on_disk == {p.split("/")[1]: b"".join(v) for p, v in files.items() if p != "out/f03.txt"}


@pytest.mark.spec("R52", "R12")
def test_much_data_of_others_waiting_keeps_a_flush_per_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Others have more than FOREIGN_DIRTY bytes waiting to be written: no
    ``syncfs`` (it would wait for theirs), an ``fsync`` of each file instead."""
    _with_syncfs(monkeypatch)
    log: list[tuple[str, str]] = []
    _fsync_spy(monkeypatch, log)
    monkeypatch.setattr(_syncfs, "others_dirty", lambda own: _syncfs.FOREIGN_DIRTY + 1)
    monkeypatch.setattr(_syncfs, "syncfs", lambda fd: pytest.fail("syncfs called"))
    files = _batch(SYNCFS_FILES + 1)
    assert FsspecBackend(tmp_path.as_uri()).write_files(list(files.items())) == {}
    flushed = sorted(n.split(".ars-tmp-")[0].lstrip(".") for k, n in log if k == "file")
    assert flushed == sorted(p.split("/")[1] for p in files)


def _stat_spy(monkeypatch: pytest.MonkeyPatch, root: Path) -> list[str]:
    """The files under ``root`` whose existence the backend looked up (``os.stat``)."""
    looked: list[str] = []
    real_stat = os.stat

    def spy(path: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(path, str) and path.startswith(str(root)) and path.endswith(".txt"):
            looked.append(os.path.relpath(path, root))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", spy)
    return looked


@pytest.mark.spec("R52", "R12")
def test_files_of_a_folder_the_batch_made_are_written_without_looking_for_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder the batch itself made held nothing then: of its files only the first
    (staged before the folder existed) is looked up; every file is written whole. In a
    folder that was already there every file is looked up (and one already written
    is not written again)."""
    files = _batch(6)
    looked = _stat_spy(monkeypatch, tmp_path)
    assert FsspecBackend(tmp_path.as_uri()).write_files(files.items()) == {}
    assert looked == ["out/f00.txt"]
    for path, pieces in files.items():
        assert (tmp_path / path).read_bytes() == b"".join(pieces)
    kept = (tmp_path / "out/f03.txt").stat().st_ino
    looked.clear()
    again = {**files, "out/f06.txt": (b"new\n",)}
    assert FsspecBackend(tmp_path.as_uri()).write_files(again.items()) == {}
    assert looked == sorted(again)
    assert (tmp_path / "out/f03.txt").stat().st_ino == kept
    assert (tmp_path / "out/f06.txt").read_bytes() == b"new\n"


@pytest.mark.spec("R52", "R12")
def test_a_folder_another_writer_made_meanwhile_has_its_files_looked_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer makes the folder (and writes one of the batch's files in it)
    between the batch's first look and its making the folder: the batch did not make
    it, so each further file is looked up and that one is not written again."""
    files = _batch(4)
    other = tmp_path / "out/f02.txt"
    real_mkdir = os.mkdir
    inodes: list[int] = []

    def racing_mkdir(path: Any, *args: Any, **kwargs: Any) -> None:
        if str(path) == str(tmp_path / "out") and not inodes:
            real_mkdir(path, *args, **kwargs)  # the other writer's folder and file
            other.write_bytes(b"".join(files["out/f02.txt"]))
            inodes.append(other.stat().st_ino)
        real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", racing_mkdir)
    looked = _stat_spy(monkeypatch, tmp_path)
    assert FsspecBackend(tmp_path.as_uri()).write_files(files.items()) == {}
    assert looked == sorted(files) and len(inodes) == 1
    assert other.stat().st_ino == inodes[0]  # not written again
    for path, pieces in files.items():
        assert (tmp_path / path).read_bytes() == b"".join(pieces)
    assert sorted(os.listdir(tmp_path / "out")) == sorted(p.split("/")[1] for p in files)
