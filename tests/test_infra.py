"""Tests of the test infrastructure itself: the server fixtures in ``conftest.py``."""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.conftest import shared_data_missing
from tests.servers import S3Server, unavailable


def _listening_on_loopback_only(host: str, port: int) -> None:
    """The port accepts connections on 127.0.0.1, but not on another local address.

    Linux routes all of 127.0.0.0/8 to the loopback interface, so a server bound to
    0.0.0.0 (or ::) would also accept on 127.0.0.2; one bound to 127.0.0.1 refuses.
    """
    assert host == "127.0.0.1"
    with socket.create_connection((host, port), timeout=5):
        pass
    with pytest.raises(OSError):  # ConnectionRefusedError, or unreachable off Linux
        socket.create_connection(("127.0.0.2", port), timeout=5).close()


class TestPostgresFixture:
    """``postgres_url``: a throwaway PostgreSQL cluster on 127.0.0.1."""

    def test_select_one(self, postgres_url: str) -> None:
        """A psycopg connection to the URL runs ``select 1``."""
        try:
            import psycopg
        except ImportError:
            unavailable("psycopg is not installed (`ars[postgres]` extra)")
        with psycopg.connect(postgres_url, connect_timeout=10) as conn:
            row = conn.execute("select 1").fetchone()
        assert row == (1,)

    def test_url_shape(self, postgres_url: str) -> None:
        """The URL names the postgres superuser and database on 127.0.0.1."""
        parts = urlsplit(postgres_url)
        assert parts.scheme == "postgresql"
        assert parts.username == "postgres"
        assert parts.hostname == "127.0.0.1"
        assert parts.path == "/postgres"
        assert parts.port is not None

    def test_binds_loopback_only(self, postgres_url: str) -> None:
        """The cluster listens on 127.0.0.1 and not on other interfaces."""
        parts = urlsplit(postgres_url)
        assert parts.hostname is not None and parts.port is not None
        _listening_on_loopback_only(parts.hostname, parts.port)

    def test_marker_applied(self, request: pytest.FixtureRequest, postgres_url: str) -> None:
        """Tests using the fixture carry the ``postgres`` marker automatically."""
        assert request.node.get_closest_marker("postgres") is not None


class TestS3Fixture:
    """``s3_endpoint``: an in-process moto S3 server on 127.0.0.1."""

    def test_write_and_read_through_fsspec(self, s3_endpoint: S3Server) -> None:
        """A file written through ``fsspec.filesystem("s3", ...)`` reads back identically."""
        import fsspec

        bucket = s3_endpoint.create_bucket()
        fs = fsspec.filesystem("s3", skip_instance_cache=True, **s3_endpoint.storage_options())
        payload = "压缩 context ✓\n".encode()
        with fs.open(f"{bucket}/outputs/hello.txt", "wb") as f:
            f.write(payload)
        with fs.open(f"{bucket}/outputs/hello.txt", "rb") as f:
            assert f.read() == payload
        assert fs.ls(f"{bucket}/outputs", detail=False) == [f"{bucket}/outputs/hello.txt"]

    def test_storage_options_create_bucket(self, s3_endpoint: S3Server) -> None:
        """``storage_options(bucket)`` creates the bucket and returns s3fs keyword arguments."""
        import fsspec

        options = s3_endpoint.storage_options("ars-infra-named")
        assert options["client_kwargs"] == {"endpoint_url": s3_endpoint.endpoint_url}
        assert {"key", "secret"} <= options.keys()
        fs = fsspec.filesystem("s3", skip_instance_cache=True, **options)
        assert fs.exists("ars-infra-named")
        s3_endpoint.storage_options("ars-infra-named")  # idempotent

    def test_binds_loopback_only(self, s3_endpoint: S3Server) -> None:
        """The moto server listens on 127.0.0.1 and not on other interfaces."""
        assert urlsplit(s3_endpoint.endpoint_url).hostname == "127.0.0.1"
        _listening_on_loopback_only(s3_endpoint.host, s3_endpoint.port)

    def test_credentials_in_environment(self, s3_endpoint: S3Server) -> None:
        """Test credentials and the us-east-1 region are set while the server runs."""
        import os

        assert os.environ["AWS_DEFAULT_REGION"] == "us-east-1"
        assert os.environ["AWS_ACCESS_KEY_ID"] == "testing"


class TestTrajectoriesFixture:
    """``trajectories_dir``: the recorded runs beside the repository (not in a clone)."""

    @pytest.mark.parametrize(
        ("env", "outcome"),
        [
            ({}, pytest.skip.Exception),  # a developer's bare clone
            ({"CI": "true", "ARS_TEST_BARE_CLONE": "1"}, pytest.skip.Exception),  # CI's bare run
            ({"CI": "true"}, pytest.fail.Exception),  # CI's main run must have the data
            ({"CI": "1", "ARS_TEST_BARE_CLONE": "0"}, pytest.fail.Exception),
        ],
    )
    def test_missing_runs_skip_except_in_ci_main_run(
        self, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], outcome: type[Exception]
    ) -> None:
        """Without the folder the test skips with a reason, and fails under ``CI=true``
        unless the run declares a bare clone."""
        monkeypatch.delenv("CI", raising=False)
        monkeypatch.delenv("ARS_TEST_BARE_CLONE", raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        with pytest.raises(outcome) as info:
            shared_data_missing("recorded runs not found at /nowhere")
        assert "recorded runs not found at /nowhere" in str(info.value)
        if outcome is pytest.fail.Exception:
            assert "ARS_TEST_BARE_CLONE=1" in str(info.value)

    def test_is_a_directory(self, trajectories_dir: Path) -> None:
        """The fixture points at an existing directory named ``trajectories``."""
        assert trajectories_dir.is_dir()
        assert trajectories_dir.name == "trajectories"


class TestAnyioBackend:
    """``anyio_backend``: async tests run on asyncio through the anyio plugin."""

    @pytest.mark.anyio
    async def test_runs_on_asyncio(self) -> None:
        """An ``@pytest.mark.anyio`` test runs inside an asyncio event loop."""
        import asyncio

        import anyio

        await anyio.sleep(0)
        asyncio.get_running_loop()
