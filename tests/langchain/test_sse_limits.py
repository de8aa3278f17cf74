"""The example chat service (examples/sse_chat_service.py) against hostile
requests, over ASGI: a 100,000-deep JSON body is a 400, a 50 MB body is
refused (413) after at most the limit was read, and file requests for ever
new thread ids keep a bounded number of scoped backends."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

import ars_core.files
from tests.langchain.test_sse_service import load_example

pytestmark = [pytest.mark.anyio, pytest.mark.spec("R33")]


async def _client(app: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")  # type: ignore[arg-type]


async def test_a_deeply_nested_body_is_a_400_not_a_traceback() -> None:
    example = load_example()
    async with await _client(example.create_app(example.build_demo())) as client:
        resp = await client.post("/chat", content=b"[" * 100_000 + b"]" * 100_000)
        assert resp.status_code == 400 and resp.headers["content-type"] == "application/json"
        assert resp.json() == {"error": "the body is not JSON (nested too deeply)"}


@pytest.mark.parametrize("declared", [True, False])
async def test_a_50_mb_body_is_refused_before_it_is_read_whole(declared: bool) -> None:
    """With or without a Content-Length: 413, and the service read at most its
    limit (1 MiB) and a chunk of the body."""
    example = load_example()
    sent = 0
    total, chunk = 50 * 1024 * 1024, 64 * 1024

    async def body() -> AsyncIterator[bytes]:
        nonlocal sent
        while sent < total:
            sent += chunk
            yield b"x" * chunk

    headers = {"Content-Length": str(total)} if declared else {}
    async with await _client(example.create_app(example.build_demo())) as client:
        resp = await client.post("/chat", content=body(), headers=headers)
    assert resp.status_code == 413
    assert resp.json() == {"error": f"the body is longer than {example.MAX_BODY_BYTES:,} bytes"}
    assert sent <= (0 if declared else example.MAX_BODY_BYTES + chunk)


async def test_file_requests_for_new_threads_keep_a_bounded_number_of_scopes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Unauthenticated GETs of a file for 200 new thread ids: the service's file
    root keeps at most MAX_SCOPED thread backends (64 here), the latest ones."""
    monkeypatch.setattr(ars_core.files, "MAX_SCOPED", 64)
    example = load_example()
    setup = example.build_demo()
    assert setup.files is not None
    async with await _client(example.create_app(setup)) as client:
        for i in range(200):
            resp = await client.get(f"/threads/t{i}/files/outputs/missing.txt")
            assert resp.status_code == 404
    kept = list(setup.files._children)
    assert kept == [f"t{i}" for i in range(136, 200)]
    assert setup.files.scoped("t199") is setup.files.scoped("t199")
