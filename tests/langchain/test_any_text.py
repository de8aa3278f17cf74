"""Any text survives (R53): lone surrogates and NUL through a real agent.

Half an emoji (``json.loads('"\\ud83d"')``) cannot be encoded as UTF-8; ARS
stores text with the ``surrogatepass`` handler, so the offloaded tool result
and the archived messages are written and read back exactly, on every
checkpointer, sync and async.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from ars_core import FsspecBackend, SummaryConfig, read_history
from ars_langchain import ArsSummarizationMiddleware
from ars_langchain.testing import FakeToolChatModel, tool_call
from tests.langchain.conftest import SAVERS
from tests.langchain.helpers import Runner, build_agent, prose

HALF = json.loads('"\\ud83d"')  # a lone high surrogate, as json.loads makes it
CONFIG = SummaryConfig(
    summary_threshold=1,
    summary_keep_messages=1,
    # the view after L1 (the summary with its task, the offloaded result) fits T2
    summary_l2_trigger_ratio=0.7,
    summary_tool_result_token_limit=100,
)


@tool
def dump(n: int) -> str:
    """Dump n lines of a binary-ish log."""
    return "".join(f"record {i}: half {HALF} nul \x00 end\n" for i in range(n))


def _stored(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


@pytest.mark.spec("R53", "R12", "R24")
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", SAVERS)
def test_lone_surrogates_and_nul_are_offloaded_and_archived_exactly(
    kind: str, mode: str, tmp_path: Path, request: pytest.FixtureRequest, thread_id: str
) -> None:
    """A first human message and a large tool result holding a lone surrogate and
    NUL: the turn succeeds (no ``UnicodeEncodeError``), the archive gives back the
    summarized messages exactly, the offloaded file holds the exact result (its
    name the SHA-256 of the stored bytes), and the next turn works too."""
    # each message below T (a user message above T would be offloaded), both above it;
    # the first one short: it is the task every summary carries
    first = prose("first", 60) + f" {HALF} and \x00"
    noted = f"noted {HALF} " + prose("noted", 900)
    result = dump.invoke({"n": 300})
    model = FakeToolChatModel(
        [
            AIMessage("SUMMARY-1", id="s1"),
            AIMessage("", id="a1", tool_calls=[tool_call("dump", {"n": 300}, "c1")]),
            AIMessage(f"done {HALF}", id="a2"),
            AIMessage("second turn fine", id="a3"),
        ]
    )
    backend = FsspecBackend((tmp_path / "files").as_uri())
    mw = ArsSummarizationMiddleware(CONFIG, backend=backend)
    turns = [
        {
            "messages": [
                HumanMessage(first, id="h1"),
                AIMessage(noted, id="a0"),
                HumanMessage("now dump the log", id="h2"),
            ]
        },
        {"messages": [HumanMessage("and again", id="h3")]},
    ]
    out = Runner(kind, mode, tmp_path, request).run(
        build_agent(model, mw, tools=[dump]), turns, {"configurable": {"thread_id": thread_id}}
    )
    assert [r.error for r in out.runs] == [None, None]

    files = backend.scoped(thread_id)
    # the offloaded tool result: named by the hash of its stored bytes, read back exactly
    path = f"outputs/large_tool_results/dump-{hashlib.sha256(_stored(result)).hexdigest()}.txt"
    sent = model.main_calls[1][-1]
    assert isinstance(sent, ToolMessage) and sent.tool_call_id == "c1"
    assert sent.text.startswith(f"[ARS: tool result offloaded: {len(result)} characters")
    assert path in sent.text
    assert files.read_text(path) == result
    host = tmp_path / "files" / "threads" / thread_id / path
    assert host.read_bytes() == _stored(result)

    # the archive of the first L2 round: the summarized messages, exactly
    event = out.state["_summarization_event"]
    assert event["cutoff"] == 2 and event["file_path"] is not None
    header, archived = read_history(files.read_text(event["file_path"]))
    assert header["count"] == 2
    assert [m.text for m in archived] == [first, noted]
    # the model saw the summary, then the newest messages
    assert model.main_calls[0][0].type == "system" and "SUMMARY-1" in model.main_calls[0][1].text
    assert [m.id for m in model.main_calls[0][2:]] == ["h2"]
    assert model.main_calls[-1][-1].text == "and again"
