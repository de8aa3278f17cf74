"""The controls users of the peers expect, on a real LlamaIndex memory and
agent: T follows the LLM's ``metadata.context_window`` unless configured;
``compact_now`` between turns."""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.storage.chat_store import SimpleChatStore
from llama_index.core.storage.chat_store.sql import SQLAlchemyChatStore

from ars_core import Compaction, describe_event
from ars_llamaindex import ArsFunctionAgent, ArsMemory
from ars_llamaindex.testing import ScriptedLLM
from tests.llamaindex.helpers import Workspace, prose

pytestmark = pytest.mark.anyio

SOURCE = "85% of the model's 1,500-token input window"


def history() -> list[ChatMessage]:
    """Four exchanges of ~180 tokens each and a last question: about 1,400 tokens."""
    out: list[ChatMessage] = []
    for i in range(4):
        out.append(ChatMessage(role="user", content=prose(170, f"q{i}")))
        out.append(ChatMessage(role="assistant", content=prose(170, f"a{i}")))
    out.append(ChatMessage(role="user", content="go on"))
    return out


def memory_for(llm: ScriptedLLM | None, payloads: list[dict[str, Any]], **fields: Any) -> ArsMemory:
    return ArsMemory.from_defaults(
        history(),
        llm=llm,
        chat_store=SimpleChatStore(),
        on_event=payloads.append,
        summary_l2_trigger_ratio=1.0,
        **fields,
    )


@pytest.mark.spec("R2", "R35")
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_threshold_follows_the_llm_context_window(mode: str) -> None:
    """No ``summary_threshold``: T is 85% of ``context_window`` (1,275 of
    1,500) and the events say so; a 4,000-token window (T 3,400) lets the same
    history through untouched."""
    runs: dict[int, list[dict[str, Any]]] = {}
    for window in (1500, 4000):
        payloads: list[dict[str, Any]] = []
        memory = memory_for(ScriptedLLM(["ok"], context_window=window), payloads)
        view = memory.get() if mode == "sync" else await memory.aget()
        runs[window] = payloads
        if window == 4000:
            assert view == history()
    started, completed = runs[1500]
    assert (started["phase"], started["threshold"], started["threshold_source"]) == (
        "started",
        1275,
        SOURCE,
    )
    assert 1275 <= started["tokens_before"] < 3400
    assert describe_event(started).endswith(f"≥ T 1,275 ({SOURCE})")
    assert completed["phase"] == "completed" and completed["threshold"] == 1275
    assert runs[4000] == []


@pytest.mark.spec("R2", "R35")
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_configured_threshold_wins_over_the_context_window(mode: str) -> None:
    """``summary_threshold=1`` with a 1,000,000-token window: T is 1,024; the
    placeholder window of an LLM that does not know its own (3,900) is ignored."""
    payloads: list[dict[str, Any]] = []
    memory = memory_for(
        ScriptedLLM(["ok"], context_window=1_000_000), payloads, summary_threshold=1
    )
    _ = memory.get() if mode == "sync" else await memory.aget()
    assert payloads[0]["threshold"] == 1024 and "threshold_source" not in payloads[0]
    unknown: list[dict[str, Any]] = []
    placeholder = memory_for(ScriptedLLM(["ok"]), unknown)
    assert placeholder.compressor.config.threshold_tokens == 102_400
    assert (placeholder.get() if mode == "sync" else await placeholder.aget()) == history()
    assert unknown == []


@pytest.mark.spec("R2", "R50")
async def test_agent_binds_its_llm_window_into_the_memory(workspace: Workspace) -> None:
    """A memory built without an LLM follows the window of the agent that uses
    it: the agent's first request already starts a round at T = 1,275."""
    payloads: list[dict[str, Any]] = []
    memory = memory_for(None, payloads)
    assert memory.compressor.config.threshold_tokens == 102_400
    llm = ScriptedLLM(["done"], context_window=1500, summary_reply="SUMMARY")
    agent = ArsFunctionAgent(tools=workspace.tools(), llm=llm, system_prompt="Be brief.")
    await agent.run("and finally?", memory=memory)
    assert memory.compressor.config.threshold_tokens == 1275
    # the first view is already a round: its L1 view is above T with fewer than
    # summary_keep_messages messages, so L2 cuts them; the round leaves room under the L2
    # threshold, so the second view, over the grown history, fits below T
    assert [(p["phase"], p["level"], p["threshold"]) for p in payloads] == [
        ("started", "L1", 1275),
        ("completed", "L2", 1275),
    ]
    assert payloads[0]["threshold_source"] == SOURCE


# ------------------------------------------------------------------ compact_now


@pytest.fixture(params=["simple", "sqlite"])
def chat_store(request: pytest.FixtureRequest, sqlite_url: str, table_name: str) -> Any:
    if request.param == "simple":
        return SimpleChatStore()
    return SQLAlchemyChatStore(table_name=table_name, async_database_uri=sqlite_url)


def short_history() -> list[ChatMessage]:
    out: list[ChatMessage] = []
    for i in range(4):
        out.append(ChatMessage(role="user", content=f"question {i}"))
        out.append(ChatMessage(role="assistant", content=f"answer {i}"))
    return out


@pytest.mark.spec("R21", "R24", "R30", "R31")
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_compact_now_on_a_memory_then_the_agent_gets_summary_and_kept(
    mode: str, chat_store: Any, workspace: Workspace
) -> None:
    """``compact_now`` on a short conversation (far below T) summarizes all but
    the two latest messages and logs the event; the stored messages are
    untouched; the agent's next request holds the summary and the kept
    messages; a second ``compact_now`` has nothing to compact."""
    payloads: list[dict[str, Any]] = []
    llm = ScriptedLLM(["next answer"], summary_reply="SUMMARY-NOW")
    memory = ArsMemory.from_defaults(
        short_history(),
        llm=llm,
        chat_store=chat_store,
        chat_store_key="compact-now",
        on_event=payloads.append,
        summary_keep_messages=2,
    )
    done = memory.compact_now() if mode == "sync" else await memory.acompact_now()
    assert done.compacted and done.event is not None and done.event.cutoff == 6
    assert done.message.startswith("Conversation compacted: messages 1-6 summarized (")
    assert [(p["phase"], p["level"], p.get("requested")) for p in payloads] == [
        ("started", "L1", True),
        ("completed", "L2", True),
    ]
    assert memory.get_all() == short_history()
    assert memory.get_event() == done.event

    again = memory.compact_now() if mode == "sync" else await memory.acompact_now()
    assert not again.compacted and again.message == Compaction.nothing_to_compact(2)

    agent = ArsFunctionAgent(tools=workspace.tools(), llm=llm, system_prompt="Be brief.")
    await agent.run("and next?", memory=memory)
    (request,) = llm.agent_requests
    texts = request.texts
    assert texts[0] == "Be brief." and "SUMMARY-NOW" in texts[1]
    assert texts[2:] == ["question 3", "answer 3", "and next?"]
    assert len(payloads) == 2  # the agent's own request was below T: no new round
