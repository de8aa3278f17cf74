"""Provider-true sizes through a real LlamaIndex agent (``ArsFunctionAgent``, ``ArsMemory``).

The scripted LLM stands for a provider whose tokenizer counts 40% more than o200k
(``ProviderTokenizer(1.4)``), with a window of T = 4,096 of its tokens; it reports
each request's count in its raw response (``raw["usage"]["input_tokens"]``) or
not. The agent hands that usage to the memory, which stamps the answer with it in
the next view (the chat store keeps the stamp for a new process). ARS decides with
the exact o200k count. The oracle is the provider's count of every request the
LLM received.
"""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.storage.chat_store import SimpleChatStore
from llama_index.core.tools import FunctionTool

from ars_core import ExtractiveSummarizer, FsspecBackend, TiktokenEstimator
from ars_core.testing import ProviderTokenizer
from ars_llamaindex import ArsFunctionAgent, ArsMemory
from ars_llamaindex.convert import to_core_messages, tool_schemas
from ars_llamaindex.provider_count import raw_input_tokens
from ars_llamaindex.testing import ScriptedLLM, tool_call
from tests.core.helpers import words

pytestmark = [pytest.mark.anyio, pytest.mark.spec("R3", "R57")]

T = 4096
SYSTEM = "You are a careful build agent."
KEY = "usage-thread"


def build(step: int) -> str:
    """Run one build step and print its log."""
    return f"log {step}\n" + words(700, f"log{step}")


TOOLS = [FunctionTool.from_defaults(build)]


def _llm(script: list[Any], usage: bool) -> ScriptedLLM:
    provider = ProviderTokenizer(1.4, TiktokenEstimator("o200k_base"))
    return ScriptedLLM(script, provider=provider, report_usage=usage)


def _memory(store: SimpleChatStore) -> ArsMemory:
    """A new memory (a new estimator, nothing remembered: a new process) on ``store``."""
    return ArsMemory.from_defaults(
        chat_store=store,
        chat_store_key=KEY,
        file_backend=FsspecBackend("memory://provider-count-li"),
        summarizer=ExtractiveSummarizer(),
        estimator=TiktokenEstimator("o200k_base"),
        summary_threshold=T / 1024,
        summary_keep_messages=4,
    )


def _sizes(llm: ScriptedLLM) -> list[int]:
    sizes = [r.provider_tokens for r in llm.agent_requests]
    assert sizes and all(s is not None for s in sizes)
    return [s for s in sizes if s is not None]


@pytest.mark.parametrize("usage", [False, True])
async def test_a_real_agent_keeps_every_request_in_a_window_that_counts_more(usage: bool) -> None:
    llm = _llm([*(tool_call("build", step=i) for i in range(12)), "done"], usage)
    agent = ArsFunctionAgent(tools=TOOLS, llm=llm, system_prompt=SYSTEM)
    await agent.run("Build the project.", memory=_memory(SimpleChatStore()))
    sizes = _sizes(llm)
    assert len(sizes) == 13
    if usage:
        assert max(sizes) <= T, sizes
    else:
        assert max(sizes) > T, sizes


def _fill(memory: ArsMemory, target: int) -> str:
    """A user message bringing the conversation to ``target`` o200k tokens (system and
    tools included): below T for o200k, above it for the provider."""
    o200k = TiktokenEstimator("o200k_base")
    history = to_core_messages(memory.get_all())
    size = o200k.count(history, system=SYSTEM, tools=tool_schemas(TOOLS))
    return "Here is the log. " + words(target - size, "paste")


@pytest.mark.parametrize("usage", [False, True])
async def test_a_new_memory_reads_the_last_answers_usage_back(usage: bool) -> None:
    """A first run (with or without usage), then a new memory and agent on the same
    chat store: with the stamp kept in the store, its first request is sized in the
    provider's tokens; without, the estimator alone sends it above the provider's T."""
    store = SimpleChatStore()
    first = _llm([tool_call("build", step=0), tool_call("build", step=1), "built"], usage)
    await ArsFunctionAgent(tools=TOOLS, llm=first, system_prompt=SYSTEM).run(
        "Build it.", memory=_memory(store)
    )
    assert max(_sizes(first)) < T
    memory = _memory(store)
    second = _llm(["looks fine"], usage=True)
    await ArsFunctionAgent(tools=TOOLS, llm=second, system_prompt=SYSTEM).run(
        _fill(memory, 3300), memory=memory
    )
    size = _sizes(second)[0]
    assert (size <= T) if usage else (size > T), size


def test_the_raw_usage_of_each_provider_is_read() -> None:
    assert raw_input_tokens({"usage": {"prompt_tokens": 120, "completion_tokens": 3}}) == 120
    anthropic = {"input_tokens": 20, "cache_read_input_tokens": 100, "output_tokens": 3}
    assert raw_input_tokens({"usage": anthropic}) == 120  # cache reads are input too
    assert raw_input_tokens({"usage_metadata": {"prompt_token_count": 120}}) == 120
    assert raw_input_tokens({"content": "no usage"}) is None
    assert raw_input_tokens(None) is None
