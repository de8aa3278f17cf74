"""Fixtures of the end-to-end tests (``nox -s e2e``).

``llama_server`` (a real model over HTTP) lives in ``tests/conftest.py``; here:

- ``langgraph_server``: ``examples/langgraph_server`` copied to a temporary
  folder and served by ``langgraph dev`` (in memory, 127.0.0.1, a free port,
  no browser, no reload), with ``ARS_FILES_URL`` pointing at a local folder.
  Stopped when the module's tests are done.
"""

from __future__ import annotations

import gc
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.servers import LOCALHOST, free_port, unavailable

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "langgraph_server"


@pytest.fixture(autouse=True)
def _collect_clients_between_tests() -> Iterator[None]:
    """Provider clients a test leaves open are garbage-collected here, outside any
    running event loop. Collected inside the next test's loop instead, an OpenAI
    async client schedules its close on that loop, for connections of a loop that
    is already closed, and that test fails with "Event loop is closed"."""
    yield
    gc.collect()


@dataclass
class LangGraphServer:
    """A running ``langgraph dev``: its ``url`` and where ARS writes files (``files``)."""

    url: str
    files: Path
    log: Path


def _langgraph_cli() -> str:
    found = shutil.which("langgraph", path=str(Path(sys.executable).parent)) or shutil.which(
        "langgraph"
    )
    if found is None:
        unavailable('`langgraph` CLI not found: pip install "langgraph-cli[inmem]" (the e2e extra)')
    return found


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=20)


@pytest.fixture(scope="module")
def langgraph_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LangGraphServer]:
    """``langgraph dev`` serving the example graph (see the module doc)."""
    cli = _langgraph_cli()
    root = tmp_path_factory.mktemp("langgraph-server")
    app = root / "app"
    shutil.copytree(EXAMPLE, app, ignore=shutil.ignore_patterns(".langgraph_api", "__pycache__"))
    files = root / "files"
    log = root / "server.log"
    port = free_port()
    env = {
        **os.environ,
        "ARS_FILES_URL": f"file://{files}",
        "LANGSMITH_TRACING": "false",
        "LANGCHAIN_TRACING_V2": "false",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    env.pop("ARS_OPENAI_BASE_URL", None)  # the scripted model: this test checks exact replies
    args = [cli, "dev", "--config", "langgraph.json", "--host", LOCALHOST, "--port", str(port)]
    args += ["--no-browser", "--no-reload"]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            args, cwd=app, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://{LOCALHOST}:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                tail = log.read_text(errors="replace")[-3000:]
                unavailable(f"langgraph dev exited with {proc.returncode}:\n{tail}")
            try:
                with urllib.request.urlopen(f"{url}/ok", timeout=5) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                unavailable("langgraph dev did not answer on /ok within 120 s")
            time.sleep(0.5)
        yield LangGraphServer(url=url, files=files, log=log)
    finally:
        _stop(proc)
