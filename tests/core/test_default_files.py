"""Files persist by default: with no backend given, ARS writes to a local folder
(``./.ars``, or ``ARS_FILES_DIR``), named in one log line the first time; an
in-memory filesystem only when asked for. And the read-back pages."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ars_core import (
    Compressor,
    ConfigError,
    FileBackendError,
    FsspecBackend,
    PathBoundaryError,
    SummaryConfig,
    default_backend,
)
from ars_core.l1 import sha256_text
from ars_core.readback import LINE_CHARS, aread_page, page_of, read_page
from ars_core.testing import ScriptedModel


def _big_state() -> tuple[list[dict[str, object]], str]:
    log = "".join(f"step {i}: compiled target/module_{i}.c\n" for i in range(400))
    return [
        {"role": "user", "content": "Build and report."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "build", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "name": "build", "content": log},
    ], log


@pytest.mark.spec("R61", "R36")
def test_a_compressor_without_a_backend_writes_to_the_local_default_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """No ARS_FILES_DIR: ``.ars`` in the current directory (made absolute when the
    engine is built), with a ``.gitignore``; one INFO line names it, however many files
    follow; no warning."""
    monkeypatch.delenv("ARS_FILES_DIR")
    monkeypatch.chdir(tmp_path)
    state, log = _big_state()
    engine = Compressor(SummaryConfig(summary_threshold=1))
    monkeypatch.chdir("/")  # a later chdir does not move the files
    with caplog.at_level(logging.INFO, logger="ars"):
        engine.call(state, ScriptedModel(["ok"]))
        longer = log + "one more line\n"
        state[-1] = {**state[-1], "content": longer}
        engine.call(state, ScriptedModel(["ok"]))
    folder = tmp_path / ".ars" / "outputs" / "large_tool_results"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [f"build-{sha256_text(log)}.txt", f"build-{sha256_text(longer)}.txt"]
    )
    assert (tmp_path / ".ars" / ".gitignore").read_text().splitlines()[-1] == "*"
    named = [r for r in caplog.records if str(tmp_path / ".ars") in r.getMessage()]
    assert [(r.levelno, r.getMessage()) for r in named] == [
        (
            logging.INFO,
            f"ARS: offloaded tool results and history archives go to {tmp_path / '.ars'} "
            "(the default; set ARS_FILES_DIR or pass a backend to choose another place)",
        )
    ]
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


@pytest.mark.spec("R61", "R36")
def test_ars_files_dir_names_a_folder_or_any_backend_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARS_FILES_DIR", str(tmp_path / "files"))
    backend = default_backend()
    assert isinstance(backend, FsspecBackend)
    assert backend.url == (tmp_path / "files").as_uri()
    backend.scoped("t1").write_text("outputs/a.txt", "hello")
    assert (tmp_path / "files" / "threads" / "t1" / "outputs" / "a.txt").read_text() == "hello"

    monkeypatch.setenv("ARS_FILES_DIR", "memory://ars-asked-for")  # memory only when asked
    asked = default_backend()
    assert isinstance(asked, FsspecBackend) and asked.url == "memory://ars-asked-for"
    asked.write_text("outputs/b.txt", "kept in memory")
    assert asked.fs.cat_file("/ars-asked-for/outputs/b.txt") == b"kept in memory"


@pytest.mark.spec("R61", "R36")
def test_an_fsspec_backend_given_no_url_keeps_files_where_the_default_backend_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``FsspecBackend()`` is not an in-memory store: with no URL it takes the same
    place as the default backend (``./.ars`` made absolute, or ``ARS_FILES_DIR``)."""
    monkeypatch.delenv("ARS_FILES_DIR")
    monkeypatch.chdir(tmp_path)
    backend = FsspecBackend()
    monkeypatch.chdir("/")
    assert backend.url == (tmp_path / ".ars").as_uri()
    backend.scoped("t1").write_text("outputs/a.txt", "kept on disk")
    assert (tmp_path / ".ars" / "threads" / "t1" / "outputs" / "a.txt").read_text() == (
        "kept on disk"
    )
    monkeypatch.setenv("ARS_FILES_DIR", "memory://ars-no-url-asked")
    assert FsspecBackend().url == "memory://ars-no-url-asked"


def test_a_page_is_numbered_lines_and_says_how_to_read_on() -> None:
    text = "first\nsecond\n" + "x" * (LINE_CHARS + 5) + "\nlast\n"
    assert page_of(text, "outputs/f.txt", 0, 2) == (
        "     1\tfirst\n     2\tsecond\n[lines 1-2 of 5; read on with offset=2]"
    )
    # a line longer than LINE_CHARS comes in pieces, each counted as a line
    assert page_of(text, "outputs/f.txt", 2, 3) == (
        f"     3\t{'x' * LINE_CHARS}\n     4\txxxxx\n     5\tlast"
    )
    assert page_of(text, "outputs/f.txt", 9) == (
        "[outputs/f.txt has 5 lines; offset 9 is past its end]"
    )
    assert page_of("", "outputs/e.txt") == "[outputs/e.txt is empty]"


@pytest.mark.anyio
async def test_read_page_checks_the_path_and_the_range() -> None:
    backend = FsspecBackend("memory://ars-readback-test").scoped("t1")
    backend.write_text("outputs/large_tool_results/r.txt", "a\nb\nc\n")
    assert read_page(backend, "/outputs/large_tool_results/r.txt", 1, 1) == (
        "     2\tb\n[lines 2-2 of 3; read on with offset=2]"
    )
    assert await aread_page(backend, "outputs/large_tool_results/r.txt", 2) == "     3\tc"
    with pytest.raises(PathBoundaryError):
        read_page(backend, "../t2/outputs/large_tool_results/r.txt")
    with pytest.raises(FileBackendError, match="no such file"):
        read_page(backend, "outputs/large_tool_results/missing.txt")
    for offset, limit in ((-1, 10), (0, 0), (0, 5000), (True, 3)):
        with pytest.raises(ConfigError):
            read_page(backend, "outputs/large_tool_results/r.txt", offset, limit)


@pytest.mark.spec("R53")
def test_a_page_breaks_lines_where_the_file_does_not_at_unicode_line_separators() -> None:
    """U+2028, U+2029 and U+0085 are text inside a line (an archive's JSON holds them
    unescaped); a CRLF file's lines lose their ``\\r``."""
    text = "a\u2028b\u0085c\nd\u2029e\r\nlast\n"
    assert (
        page_of(text, "outputs/f.txt") == "     1\ta\u2028b\u0085c\n     2\td\u2029e\n     3\tlast"
    )
    assert page_of("no newline at the end", "outputs/g.txt") == "     1\tno newline at the end"
    assert page_of("\n\n", "outputs/h.txt", 0, 1) == (
        "     1\t\n[lines 1-1 of 2; read on with offset=1]"
    )
