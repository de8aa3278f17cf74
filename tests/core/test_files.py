"""File backends, per-thread scopes and the path boundary."""

from __future__ import annotations

from pathlib import Path

import pytest

from ars_core import (
    Compressor,
    FileBackendError,
    FsspecBackend,
    PathBoundaryError,
    check_path,
    sanitize_name,
)
from ars_core.l1 import sha256_text
from ars_core.testing import ScriptedModel

from .helpers import assistant, call, files_in, small_config, tool, user, words

pytestmark = pytest.mark.spec("R36", "R37", "R38")


class TestPathBoundary:
    @pytest.mark.parametrize(
        ("path", "reason"),
        [
            ("/etc/passwd", "absolute"),
            ("C:/Windows", "absolute"),
            ("../secrets.txt", "'..'"),
            ("outputs/../../x", "'..'"),
            ("outputs\\x", "backslash"),
            ("~/x", "home"),
            ("", "empty"),
            ("./", "empty"),
            ("a\x00b", "NUL"),
        ],
    )
    @pytest.mark.spec("R37")
    def test_paths_outside_the_boundary_are_rejected(self, path: str, reason: str) -> None:
        with pytest.raises(PathBoundaryError, match=reason):
            check_path(path, write=True)

    @pytest.mark.spec("R37")
    def test_skills_area_is_read_only(self) -> None:
        with pytest.raises(PathBoundaryError, match="read-only"):
            check_path("skills/public/SKILL.md", write=True)
        assert check_path("skills/public/SKILL.md") == "skills/public/SKILL.md"  # reading is fine
        assert check_path("./outputs//a.txt", write=True) == "outputs/a.txt"

    @pytest.mark.spec("R37")
    def test_backend_refuses_writes_outside_its_boundary(self, tmp_path: Path) -> None:
        backend = FsspecBackend(f"file://{tmp_path}/root")
        for bad in ("../escape.txt", "/tmp/abs.txt", "skills/x.md"):
            with pytest.raises(PathBoundaryError):
                backend.write_text(bad, "x")
        assert not (tmp_path / "escape.txt").exists()

    @pytest.mark.parametrize(
        ("name", "safe"),
        [
            ("bash", "bash"),
            ("../../etc/passwd", "etc_passwd"),
            ("a/b\\c d", "a_b_c_d"),
            ("..", "tool"),
            ("", "tool"),
            ("工具", "tool"),
            ("x" * 100, "x" * 64),
        ],
    )
    @pytest.mark.spec("R37")
    def test_tool_names_are_sanitised(self, name: str, safe: str) -> None:
        assert sanitize_name(name) == safe

    @pytest.mark.spec("R37")
    def test_host_paths_never_reach_the_model(self, tmp_path: Path) -> None:
        backend = FsspecBackend(f"file://{tmp_path}/store").scoped("thread-1")
        c = call("bash")
        state = [user("x"), assistant("", c), tool(c, words(1500))]
        model = ScriptedModel()
        Compressor(small_config(summary_l2_trigger_ratio=1.0), backend=backend).call(state, model)
        sent_text = "\n".join(m.text for m in model.calls[0])
        assert str(tmp_path) not in sent_text and "threads/" not in sent_text
        assert "outputs/large_tool_results/bash-" in sent_text


class TestFsspecBackends:
    def test_local_filesystem_bytes(self, tmp_path: Path) -> None:
        backend = FsspecBackend(f"file://{tmp_path}")
        assert backend.write_text("outputs/a/b.txt", "héllo 世界") == "outputs/a/b.txt"
        assert (tmp_path / "outputs/a/b.txt").read_bytes() == "héllo 世界".encode()
        assert backend.read_text("outputs/a/b.txt") == "héllo 世界" and backend.exists(
            "outputs/a/b.txt"
        )

    def test_missing_file_is_a_typed_error(self) -> None:
        with pytest.raises(FileBackendError, match="no such file"):
            FsspecBackend("memory://ars-missing").read_text("outputs/none.txt")

    @pytest.mark.spec("R36")
    def test_thread_scopes_are_isolated_and_shared_by_subagents(self, tmp_path: Path) -> None:
        root = FsspecBackend(f"file://{tmp_path}")
        main, other = root.scoped("thread-A"), root.scoped("thread-B")
        main.write_text("outputs/x.txt", "main")
        subagent = root.scoped("thread-A")  # a sub-agent inherits the parent thread's scope
        assert subagent.read_text("outputs/x.txt") == "main"
        assert not other.exists("outputs/x.txt")
        assert (tmp_path / "threads/thread-A/outputs/x.txt").read_text() == "main"

    @pytest.mark.spec("R36")
    def test_scope_names_cannot_escape_or_collide(self, tmp_path: Path) -> None:
        root = FsspecBackend(f"file://{tmp_path}/r")
        root.scoped("../../evil").write_text("outputs/x.txt", "escaped?")
        root.scoped("evil").write_text("outputs/x.txt", "plain")
        root.scoped("a/b").write_text("outputs/x.txt", "slash")
        root.scoped("a_b").write_text("outputs/x.txt", "underscore")
        written = {
            p.relative_to(tmp_path).as_posix(): p.read_text() for p in tmp_path.rglob("x.txt")
        }
        assert len(written) == 4 and all(p.startswith("r/threads/") for p in written)
        assert written["r/threads/evil/outputs/x.txt"] == "plain"
        assert written["r/threads/a_b/outputs/x.txt"] == "underscore"
        assert root.scoped("a/b") is root.scoped("a/b")
        # a hashed name is never a literal thread id's (safe names never start with "_")
        root.scoped("team/alice").write_text("outputs/y.txt", "alice")
        assert not root.scoped("team_alice-8b8fafbf563a").exists("outputs/y.txt")

    def test_s3_through_a_local_moto_server(self, s3_endpoint) -> None:  # type: ignore[no-untyped-def]
        bucket = s3_endpoint.create_bucket()
        opts = {**s3_endpoint.storage_options(bucket), "skip_instance_cache": True}
        backend = FsspecBackend(f"s3://{bucket}/ars", storage_options=opts).scoped("t1")
        c = call("bash")
        big = words(1500)
        state = [user("x"), assistant("", c), tool(c, big)]
        Compressor(small_config(summary_l2_trigger_ratio=1.0), backend=backend).call(
            state, ScriptedModel()
        )
        path = f"outputs/large_tool_results/bash-{sha256_text(big)}.txt"
        assert backend.read_text(path) == big
        import fsspec

        fs = fsspec.filesystem("s3", **opts)
        assert fs.cat_file(f"{bucket}/ars/threads/t1/{path}") == big.encode()

    @pytest.mark.spec("R38")
    def test_memory_backend_content_addressed(self) -> None:
        backend = FsspecBackend("memory://ars-r38")
        c1, c2 = call("bash"), call("bash")
        text = words(900)
        state = [user("x"), assistant("", c1), tool(c1, text), assistant("", c2), tool(c2, text)]
        Compressor(
            small_config(summary_l2_trigger_ratio=1.0, summary_keep_messages=10), backend=backend
        ).call(state, ScriptedModel())
        assert files_in(backend) == {
            f"outputs/large_tool_results/bash-{sha256_text(text)}.txt": text
        }
