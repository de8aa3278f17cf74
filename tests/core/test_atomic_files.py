"""Files are crash-safe (R52): a writer killed mid-write leaves no partial file
under the final name, and a reader in another process never sees one.

The writer and the reader are separate processes (``tests.core._files_procs``):
the writer offloads a ~4 MB tool result through ``Compressor.call`` with slowed,
streamed writes; the test kills it with SIGKILL while a partial file is on disk,
then lets a fresh writer finish. The reader reads the final path all along.
"""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.core._files_procs import TOOL, big_text
from tests.procs import REPO_ROOT, repo_env
from tests.servers import S3Server

LINES = 70_000  # ~4.2 MB


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.core._files_procs", *args],
        cwd=REPO_ROOT,
        env=repo_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_line(proc: subprocess.Popen[str], expected: str) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line == expected, (line, proc.stderr.read() if proc.stderr else "")


def _expected() -> tuple[bytes, str, str]:
    data = big_text(LINES).encode("utf-8")
    digest = hashlib.sha256(data).hexdigest()
    return data, digest, f"outputs/large_tool_results/{TOOL}-{digest}.txt"


def _finish(url: str, options: str) -> None:
    """A fresh writer that is not killed."""
    writer = _spawn("write", url, options, str(LINES), "1")
    out, err = writer.communicate(timeout=120)
    assert writer.returncode == 0 and out.split() == ["writing", "done"], err


def _stop_reader(reader: subprocess.Popen[str], stop: Path) -> list[str]:
    time.sleep(0.3)  # a few reads of the finished file
    stop.touch()
    out, err = reader.communicate(timeout=60)
    assert reader.returncode == 0, err
    seen: list[str] = json.loads(out)
    return seen


@pytest.mark.spec("R52", "R12")
@pytest.mark.parametrize("slow", ["1", "2"], ids=["app-fs", "os-calls"])
def test_a_killed_writer_leaves_no_partial_file_and_a_reader_never_sees_one(
    tmp_path: Path, slow: str
) -> None:
    """Local directory: SIGKILL while the offload is half on disk leaves nothing
    under the final name; the reader process sees only "absent" or the whole file,
    and a fresh writer then completes it. The file is staged through the
    application's filesystem class (``app-fs``) or through ``os`` calls, ARS's own
    way on a local folder (``os-calls``)."""
    root = tmp_path / "files"
    root.mkdir()
    url, options = root.as_uri(), "{}"
    data, digest, path = _expected()
    stop = tmp_path / "stop"
    reader = _spawn("read", url, options, path, str(stop))
    writer = _spawn("write", url, options, str(LINES), slow)
    _wait_for_line(writer, "writing")
    partial: list[Path] = []
    deadline = time.monotonic() + 60
    while not partial and time.monotonic() < deadline:
        partial = [p for p in root.rglob("*") if p.is_file() and 0 < p.stat().st_size < len(data)]
        time.sleep(0.002)
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=30)
    assert partial, "the writer never had a partial file on disk"
    assert writer.returncode == -signal.SIGKILL
    target = root / path
    assert not target.exists()  # killed mid-write: nothing under the final name
    assert all(p.name.startswith(f".{target.name}.") for p in partial)  # only a temporary

    _finish(url, options)
    assert target.read_bytes() == data
    seen = _stop_reader(reader, stop)
    assert "absent" in seen and digest in seen
    assert set(seen) == {"absent", digest}  # never a part of the file


@pytest.mark.spec("R52", "R12")
def test_a_killed_writer_on_s3_leaves_no_partial_object(
    tmp_path: Path, s3_endpoint: S3Server
) -> None:
    """S3 (moto server): a writer killed during its slowed upload leaves no object
    or the whole one; the reader process never sees a part; a fresh writer
    completes it."""
    bucket = s3_endpoint.create_bucket()
    storage_options: dict[str, Any] = s3_endpoint.storage_options()
    url, options = f"s3://{bucket}/files", json.dumps(storage_options)
    data, digest, path = _expected()
    stop = tmp_path / "stop"
    reader = _spawn("read", url, options, path, str(stop))
    writer = _spawn("write", url, options, str(LINES), "1")
    _wait_for_line(writer, "writing")
    time.sleep(1.5)  # estimating done, the upload under way
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=30)
    assert writer.returncode == -signal.SIGKILL
    client = s3_endpoint.client()
    listed = client.list_objects_v2(Bucket=bucket).get("Contents", [])
    assert all(obj["Size"] == len(data) for obj in listed)  # absent, or whole

    _finish(url, options)
    body = client.get_object(Bucket=bucket, Key=f"files/{path}")["Body"].read()
    assert body == data
    seen = _stop_reader(reader, stop)
    assert digest in seen and set(seen) <= {"absent", digest}


@pytest.mark.spec("R52", "R23")
def test_a_local_archive_is_on_disk_before_its_name_appears(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A history archive on a local directory is flushed to disk (fsync) under its
    temporary name, whole, before it is renamed into place, and its folder is flushed
    once the name is there: after a power loss the archive the summary message points
    at is there whole or not at all, and once written it stays."""
    import os
    import stat

    from ars_core import FsspecBackend
    from ars_core import files as files_mod

    folder = tmp_path / "outputs" / "conversation_history"
    seen: list[tuple[str, list[str], list[int]]] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        kind = "folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"
        names = sorted(p.name for p in folder.iterdir())
        seen.append((kind, names, [(folder / n).stat().st_size for n in names]))
        real_fsync(fd)

    monkeypatch.setattr(files_mod.os, "fsync", spy)
    text = "line\n" * 50_000
    path = "outputs/conversation_history/history-000000-000010-0123456789abcdef.jsonl"
    FsspecBackend(tmp_path.as_uri()).write_text(path, text)
    assert [kind for kind, _, _ in seen] == ["file", "folder"]
    _, names, sizes = seen[0]
    assert len(names) == 1 and names[0].startswith(".history-000000-000010-")
    assert names[0].split(".ars-tmp-")[0] == "." + path.rsplit("/", 1)[1]
    assert sizes == [len(text)]
    assert seen[1][1:] == ([path.rsplit("/", 1)[1]], [len(text)])  # renamed, then flushed
    assert (tmp_path / path).read_text() == text


@pytest.mark.spec("R52", "R12")
def test_a_batch_written_beside_the_caller_is_whole_flushed_and_reports_each_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many files at once (several batches): each file's temporary is written in a
    staging thread while the next file is read, yet every file is whole under its
    name with its bytes flushed (``fsync`` of it, or a ``syncfs`` of its file system
    while it is whole under its temporary name) before the rename, and a file whose
    write fails there (its folder is a regular file) is reported as that file's
    error while the others are written; no temporary is left behind."""
    import os
    import stat

    from ars_core import FsspecBackend, _syncfs
    from ars_core import files as files_mod
    from ars_core._local_files import BATCH_FILES

    flushed: dict[str, int] = {}
    real_fsync, real_syncfs = os.fsync, _syncfs.syncfs

    def spy(fd: int) -> None:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            path = os.readlink(f"/proc/self/fd/{fd}") if os.path.exists("/proc/self/fd") else ""
            flushed[os.path.basename(path)] = os.fstat(fd).st_size
        real_fsync(fd)

    def syncfs_spy(fd: int) -> OSError | None:
        error = real_syncfs(fd)
        if error is None:  # every temporary then staged is flushed as it is
            flushed.update({p.name: p.stat().st_size for p in (tmp_path / "out").glob(".*")})
        return error

    monkeypatch.setattr(files_mod.os, "fsync", spy)
    monkeypatch.setattr(_syncfs, "syncfs", syncfs_spy)
    (tmp_path / "blocked").write_text("a file, not a folder")
    n = BATCH_FILES * 2 + 7
    files = {
        f"{'blocked' if i % 97 == 5 else 'out'}/f{i:04d}.txt": [f"{i}:".encode() * (i + 1), b"!"]
        for i in range(n)
    }
    errors = FsspecBackend(tmp_path.as_uri()).write_files(list(files.items()))
    failing = {p for p in files if p.startswith("blocked/")}
    assert set(errors) == failing and len(failing) == 6
    for path, pieces in files.items():
        if path not in failing:
            assert (tmp_path / path).read_bytes() == b"".join(pieces)
    assert not [p for p in (tmp_path / "out").iterdir() if not p.name.startswith("f")]
    if flushed:  # each written file was flushed whole under its temporary name
        sizes = {name.split(".ars-tmp-")[0].lstrip("."): size for name, size in flushed.items()}
        assert sizes == {
            p.rsplit("/", 1)[1]: len(b"".join(v)) for p, v in files.items() if p not in failing
        }
