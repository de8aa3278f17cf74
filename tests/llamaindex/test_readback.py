"""LlamaIndex: ``ArsMemory`` keeps its files in the local default folder when no
backend is given, and ``memory.read_tool()`` is a ``FunctionTool`` the agent reads
them back with, a page at a time, in a new memory over the same chat store (a
restart) too."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

from ars_core.l1 import sha256_text
from ars_llamaindex import ArsFunctionAgent, ArsMemory
from ars_llamaindex.testing import ScriptedLLM, tool_call
from tests.llamaindex.helpers import Workspace
from tests.procs import repo_env, run_module

pytestmark = pytest.mark.anyio

KEY = "thread-readback"


@pytest.mark.spec("R61", "R12")
async def test_an_agent_reads_back_with_the_memorys_tool_after_a_restart(
    workspace: Workspace, sqlite_url: str, table_name: str
) -> None:
    """Run 1 offloads a 300-line ``bash`` result into ``ARS_FILES_DIR`` (no backend
    given). Run 2 builds a new memory over the same SQLite chat store: the agent calls
    ``read_ars_file`` on the path it was shown and gets the last lines; a path of
    another conversation is refused."""
    output = "".join(f"line {i}: compiled module {i}\n" for i in range(300))
    workspace.outputs["make"] = output
    path = f"outputs/large_tool_results/bash-{sha256_text(output)}.txt"

    def memory() -> ArsMemory:
        store = SQLAlchemyChatStore(table_name=table_name, async_database_uri=sqlite_url)
        return ArsMemory.from_defaults(
            chat_store=store,
            chat_store_key=KEY,
            summary_threshold=1,
            summary_tool_result_token_limit=100,
        )

    first = memory()
    llm = ScriptedLLM([tool_call("bash", cmd="make"), "built"])
    await ArsFunctionAgent(tools=[*workspace.tools(), first.read_tool()], llm=llm).run(
        "build it", memory=first
    )
    assert any(f"saved to {path}." in t for t in llm.agent_requests[-1].texts)
    on_disk = Path(os.environ["ARS_FILES_DIR"]) / "threads" / KEY / path
    assert on_disk.read_text(encoding="utf-8") == output

    second = memory()
    tool = second.read_tool()
    assert tool.metadata.name == "read_ars_file"
    llm = ScriptedLLM(
        [
            tool_call("read_ars_file", path=path, offset=298),
            tool_call("read_ars_file", path="../other/" + path),
            "read it",
        ]
    )
    await ArsFunctionAgent(tools=[*workspace.tools(), tool], llm=llm).run(
        "show the end of the build output", memory=second
    )
    answers: list[Any] = [m.content for m in second.get_all() if m.role.value == "tool"][-2:]
    assert answers == [
        "   299\tline 298: compiled module 298\n   300\tline 299: compiled module 299",
        f"Error: ../other/{path} is not a path of this conversation's saved files "
        "('..' segments are not allowed).",
    ]
    assert tool.call(path=path, offset=0, limit=1).content == (
        "     1\tline 0: compiled module 0\n[lines 1-1 of 300; read on with offset=1]"
    )


@pytest.mark.spec("R61", "R12")
def test_an_agent_in_a_new_process_reads_back_what_the_first_one_offloaded(
    tmp_path: Path, table_name: str
) -> None:
    """Process 1 offloads a 300-line ``bash`` result (no backend given: ``./.ars`` in the
    working directory). Process 2, a restart over the same SQLite chat store, is asked
    about it: the agent calls the memory's ``read_ars_file`` on the path it was shown
    and gets the original last lines."""
    from tests.llamaindex._readback_child import KEY, OUTPUT

    url = f"sqlite+aiosqlite:///{tmp_path / 'chat.db'}"
    path = f"outputs/large_tool_results/bash-{sha256_text(OUTPUT)}.txt"
    env = repo_env()
    env.pop("ARS_FILES_DIR", None)  # the default folder

    def turn(*args: str) -> dict[str, Any]:
        result = run_module("tests.llamaindex._readback_child", *args, cwd=tmp_path, env=env)
        assert result.returncode == 0, result.stderr
        assert "WARNING" not in result.stderr, result.stderr
        return dict(json.loads(result.stdout.splitlines()[-1]))

    first = turn("1", url, table_name)
    assert any(f"saved to {path}." in t for t in first["sent"]), first["sent"]
    on_disk = tmp_path / ".ars" / "threads" / KEY / path
    assert on_disk.read_text(encoding="utf-8") == OUTPUT

    second = turn("2", url, table_name, path)
    assert second["answers"] == [
        "   299\tline 298: compiled module 298\n   300\tline 299: compiled module 299"
    ]
