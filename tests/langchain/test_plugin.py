"""The LangChain adapter's ``ars`` plugin: ``"provider:model"`` summarizers by name.

The plugin is contributed through the ``ars`` entry-point group
(``[project.entry-points.ars]`` in pyproject.toml), so the core resolves the
spec without importing the adapter itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.constants import TAG_NOSTREAM

from ars_core import Compressor, ConfigError, Message
from ars_core.plugins import get_plugin_manager, plugin_report, reset_plugin_manager
from ars_core.replay import SAMPLE_DIR
from ars_core.resolve import resolve_summarizer
from ars_core.testing import ScriptedModel
from ars_langchain.summarizer import ChatModelSummarizer
from tests.core.helpers import small_config, user, words

REPO_ROOT = Path(__file__).resolve().parents[2]


#: what the fake chat model was invoked with: (input, config)
SEEN: list[tuple[Any, Any]] = []


class Recording(GenericFakeChatModel):
    """A fake chat model that records what it was invoked with."""

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        SEEN.append((input, config))
        return super().invoke(input, config, **kwargs)


@pytest.fixture
def fake_provider(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``init_chat_model`` answering every spec with a recording fake model (no network)."""
    import langchain.chat_models

    specs: list[str] = []
    reply = AIMessage(
        content="the summary",
        usage_metadata={"input_tokens": 120, "output_tokens": 7, "total_tokens": 127},
    )

    def init_chat_model(spec: str, **kwargs: Any) -> Any:
        specs.append(spec)
        SEEN.clear()
        return Recording(messages=iter([reply, reply, reply]))

    monkeypatch.setattr(langchain.chat_models, "init_chat_model", init_chat_model)
    reset_plugin_manager()
    yield specs
    reset_plugin_manager()


def test_the_plugin_is_registered_from_the_entry_point() -> None:
    """The installed distribution declares it; the core's manager loads it by entry point."""
    reset_plugin_manager()
    entry = next(p for p in plugin_report() if p["name"] == "langchain")
    assert entry["module"] == "ars_langchain.plugin" and entry["distribution"] == "ars"
    assert entry["hooks"] == ["resolve_summarizer"]
    assert get_plugin_manager().get_plugin("langchain") is sys.modules["ars_langchain.plugin"]


@pytest.mark.spec("R23", "R27")
def test_provider_model_spec_resolves_to_the_adapter_summarizer(fake_provider: list[str]) -> None:
    """``summarizer="provider:model"``: the adapter's ChatModelSummarizer over the model
    ``init_chat_model`` builds; the call is tagged nostream and reports the provider's usage."""
    summarizer = resolve_summarizer("fake:model")
    assert fake_provider == ["fake:model"]
    assert isinstance(summarizer, ChatModelSummarizer) and summarizer.name == "fake:model"
    history = [Message(role="user", content="fix the bug in setup.py")]
    result = summarizer.summarize(history, "Summarize:\n{messages}")
    assert result.text == "the summary"
    assert result.usage is not None
    assert (result.usage.input_tokens, result.usage.output_tokens) == (120, 7)
    prompt, config = SEEN[0]
    assert isinstance(prompt[0], HumanMessage)
    assert (
        prompt[0].content.startswith("Summarize:")
        and "fix the bug in setup.py" in prompt[0].content
    )
    assert TAG_NOSTREAM in config["tags"]


@pytest.mark.spec("R23", "R24")
def test_compressor_summarizes_with_a_provider_model_string(fake_provider: list[str]) -> None:
    """``Compressor(summarizer="fake:model")`` runs L2 through the resolved chat model."""
    engine = Compressor(small_config(), summarizer="fake:model")
    out = engine.call([user(words(80, f"w{i}")) for i in range(20)], ScriptedModel())
    assert out.level == "L2" and out.update is not None and out.update.event is not None
    event = out.update.event
    assert "\n\n⟦ARS⟧ Summary\nthe summary\n\n" in event.summary_message.text
    assert event.summary_usage is not None and event.summary_usage.input_tokens == 120
    assert len(SEEN) == 1


def test_an_unloadable_chat_model_is_a_config_error() -> None:
    reset_plugin_manager()
    with pytest.raises(ConfigError, match="cannot load chat model") as info:
        Compressor(small_config(), summarizer="nosuchprovider:model-x")
    assert info.value.field == "summarizer"


def test_ars_plugins_none_leaves_provider_specs_unresolved(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ARS_PLUGINS=none`` keeps every entry-point plugin out, the adapter's too."""
    monkeypatch.setenv("ARS_PLUGINS", "none")
    reset_plugin_manager()
    try:
        with pytest.raises(ConfigError, match="needs the langchain extra and its plugin"):
            resolve_summarizer("openai:gpt-4o-mini")
    finally:
        reset_plugin_manager()


def test_cli_accepts_a_langchain_model_string(tmp_path: Path) -> None:
    """``ars replay --summarizer provider:model`` builds the chat model through the plugin.

    The threshold is the production default, so this run never reaches L2 and
    the (fake-keyed) model is never called: wiring only, no network.
    """
    pytest.importorskip("langchain_anthropic")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    env["ANTHROPIC_API_KEY"] = "sk-ant-fake-key-for-a-test"
    env.pop("ARS_DEBUG", None)
    run = str(SAMPLE_DIR / "django__django-16502.jsonl.gz")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ars_core",
            "replay",
            run,
            "--summarizer",
            "anthropic:claude-sonnet-4-5",
            "--json",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["summarizer"] == "anthropic:claude-sonnet-4-5"
    assert doc["total"]["summary_calls"] == 0 and doc["total"]["l2_rounds"] == 0


# ------------------------------------------------------------------ estimator forms in the middleware


def _run_agent(estimator: Any, mode: str, thread_id: str) -> tuple[Any, dict[str, Any]]:
    """Two turns of ~900-token prose at T=1,024 (keep 2) through ``create_agent``."""
    import asyncio

    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    from ars_core import FsspecBackend, SummaryConfig
    from ars_langchain import ArsSummarizationMiddleware
    from ars_langchain.testing import FakeToolChatModel
    from tests.langchain.helpers import SYSTEM, prose

    model = FakeToolChatModel(["first answer", "the summary", "second answer"])
    mw = ArsSummarizationMiddleware(
        SummaryConfig(summary_threshold=1, summary_keep_messages=2),
        estimator=estimator,
        backend=FsspecBackend(f"memory://plugin-{thread_id}"),
        compressor_options={"lean_rounds": False},  # the fixed rounds: one L2, cutoff 1
    )
    agent = create_agent(
        model, tools=[], system_prompt=SYSTEM, middleware=[mw], checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": thread_id}}
    turns = [HumanMessage(prose("one", 700), id="h1"), HumanMessage(prose("two", 700), id="h2")]
    for turn in turns:
        if mode == "sync":
            agent.invoke({"messages": [turn]}, config)
        else:
            asyncio.run(agent.ainvoke({"messages": [turn]}, config))
    return model, dict(agent.get_state(config).values)


@pytest.mark.spec("R3", "R20", "R24")
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_langchain_token_counter_drives_the_middleware(mode: str, thread_id: str) -> None:
    """``estimator=count_tokens_approximately`` (LangChain's ``token_counter`` convention): it
    counts the request as LangChain messages (the agent's own objects, not copies converted
    per count), and its count triggers L2 on the second turn."""
    from langchain_core.messages import BaseMessage
    from langchain_core.messages.utils import count_tokens_approximately

    from tests.langchain.helpers import prose

    seen: list[list[Any]] = []

    def counter(messages: list[Any]) -> int:
        seen.append(list(messages))
        return count_tokens_approximately(messages)

    model, state = _run_agent(counter, mode, thread_id)
    assert seen and all(isinstance(m, BaseMessage) for request in seen for m in request)
    sent = model.main_calls[0][-1]  # the first question, as the model received it
    counted = [m for request in seen for m in request if m.id == "h1"]
    assert counted and all(m is sent for m in counted)
    assert sent == HumanMessage(prose("one", 700), id="h1")
    assert len(model.summary_calls) == 1
    event = state["_summarization_event"]
    messages = state["messages"]
    assert event["cutoff"] == 1  # h1 summarized; the first answer and h2 kept
    second = model.main_calls[1]
    assert "the summary" in second[1].text
    assert [m.id for m in second[2:]] == [messages[1].id, messages[2].id]


@pytest.mark.spec("R1", "R3")
def test_a_counter_saying_zero_never_triggers(thread_id: str) -> None:
    """The same run with a counter that returns 0: no compression, the whole history sent."""
    model, state = _run_agent(lambda messages: 0, "sync", thread_id)
    assert model.summary_calls == [] and "_summarization_event" not in state
    assert [m.id for m in model.main_calls[1][1:]] == [m.id for m in state["messages"][:3]]


@pytest.mark.spec("R3")
@pytest.mark.parametrize("form", ["name", "class", "factory"])
def test_the_middleware_takes_estimator_names_classes_and_factories(
    form: str, thread_id: str
) -> None:
    """``estimator="o200k"``, a class, or a zero-argument factory: one estimator per thread."""
    from ars_core import ApproxEstimator, TiktokenEstimator

    value: Any = {
        "name": "o200k",
        "class": TiktokenEstimator,
        "factory": lambda: ApproxEstimator(),
    }[form]
    model, state = _run_agent(value, "sync", thread_id)
    assert len(model.summary_calls) == 1 and state["_summarization_event"]["cutoff"] == 1
