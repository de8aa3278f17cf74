"""Fixtures of the LlamaIndex adapter tests: an instrumentation recorder, a
file backend on disk, real tools, chat stores."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from llama_index.core.instrumentation import get_dispatcher

from ars_core import FsspecBackend
from tests.llamaindex.helpers import EventRecorder, Workspace

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # llama-index workflows find steps with inspect.getmembers() on the (pydantic)
    # agent, which touches pydantic's deprecated attributes: not ours to fix
    for item in items:
        if _HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.filterwarnings("ignore::DeprecationWarning:inspect"))


@pytest.fixture
def recorder() -> Iterator[EventRecorder]:
    rec = EventRecorder(events=[])
    root = get_dispatcher()
    root.add_event_handler(rec)
    try:
        yield rec
    finally:
        root.event_handlers = [h for h in root.event_handlers if h is not rec]


@pytest.fixture
def files_root(tmp_path: Path) -> Path:
    root = tmp_path / "ars-files"
    root.mkdir()
    return root


@pytest.fixture
def file_backend(files_root: Path) -> FsspecBackend:
    return FsspecBackend(f"file://{files_root}")


@pytest.fixture
def workspace() -> Workspace:
    return Workspace()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'chat.db'}"


@pytest.fixture
def table_name() -> str:
    return f"ars_chat_{uuid.uuid4().hex[:10]}"
