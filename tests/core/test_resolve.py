"""The plugin registry is the path: ``Compressor(...)`` takes names, URLs, classes and
plain counters, resolved through the registry; bad values fail at construction."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import fsspec
import pytest

from ars_core import (
    ApproxEstimator,
    Compressor,
    ConfigError,
    ExtractiveSummarizer,
    FsspecBackend,
    Message,
    SummaryResult,
    TiktokenEstimator,
    hookimpl,
)
from ars_core.plugins import get_plugin_manager, reset_plugin_manager
from ars_core.resolve import CallableEstimator
from ars_core.testing import FakeSummarizer, ScriptedModel

from .helpers import assistant, call, small_config, tool, user, words


@pytest.fixture(autouse=True)
def fresh_manager() -> Iterator[None]:
    reset_plugin_manager()
    yield
    reset_plugin_manager()


def offloading_history(seed: str) -> list[Message]:
    """Above T (1,024) with one tool result above the 120-token limit: L1 offloads it and
    the view falls under the L2 threshold (512)."""
    c = call("bash", cmd="pytest")
    return [
        user(words(200, seed)),
        assistant("", c),
        tool(c, words(1000, f"{seed}out")),
        assistant("looking"),
        user("go on"),
    ]


def offloaded_path(view: Sequence[Message]) -> str:
    """The virtual path L1 put in the view in place of the tool result."""
    body = next(m.text for m in view if m.role == "tool")
    found = re.search(r"outputs/large_tool_results/\S+?\.txt", body)
    assert found is not None, body
    return found.group(0)


@pytest.mark.spec("R3", "R12", "R36")
def test_names_resolve_through_the_registry() -> None:
    """``estimator="o200k"``, ``summarizer="extractive"``, ``backend="memory://..."``: each name
    builds the registered component, and the file L1 writes lands in the named storage."""
    root = f"memory://resolve-{uuid.uuid4().hex[:8]}"
    engine = Compressor(small_config(), estimator="o200k", summarizer="extractive", backend=root)
    assert isinstance(engine.estimator, TiktokenEstimator)
    assert engine.estimator.name == "tiktoken:o200k_base"
    assert isinstance(engine.summarizer, ExtractiveSummarizer)
    assert isinstance(engine.backend, FsspecBackend) and engine.backend.url == root

    history = offloading_history("names")
    out = engine.call(history, ScriptedModel())
    assert out.level == "L1"
    path = offloaded_path(out.view)
    with fsspec.open(f"{root}/{path}", "r", encoding="utf-8") as f:
        assert f.read() == history[2].text  # the whole result, in the storage the URL named
    assert out.tokens_before == TiktokenEstimator("o200k_base").count(history)


@pytest.mark.spec("R3")
@pytest.mark.parametrize(
    "form", ["instance", "class", "name", "alias", "counter"], ids=lambda f: f"estimator-{f}"
)
def test_every_estimator_form_counts_the_request(form: str) -> None:
    """An instance, a class, a name, an alias or a plain ``messages -> int`` counter: the
    engine counts the request with it (the class is built once, not passed uncalled)."""
    counted: list[int] = []

    def counter(messages: list[Message]) -> int:
        counted.append(len(messages))
        return 100 * len(messages)

    value: Any = {
        "instance": ApproxEstimator(),
        "class": ApproxEstimator,
        "name": "approx",
        "alias": "o200k_base",
        "counter": counter,
    }[form]
    engine = Compressor(small_config(), estimator=value, summarizer=FakeSummarizer())
    history = [user(words(50)), assistant("ok"), user("next")]
    out = engine.call(history, ScriptedModel())
    expected = {
        "instance": ApproxEstimator().count(history),
        "class": ApproxEstimator().count(history),
        "name": ApproxEstimator().count(history),
        "alias": TiktokenEstimator("o200k_base").count(history),
        "counter": 300,
    }[form]
    assert out.tokens_before == expected
    assert out.level is None and out.view == history
    if form == "counter":
        assert isinstance(engine.estimator, CallableEstimator)
        assert counted and counted[0] == 3  # the whole request as one list, as LangChain's do


@pytest.mark.spec("R3", "R12")
def test_a_counter_estimator_drives_the_trigger_and_l1() -> None:
    """A plain counter decides the trigger: 600 a message puts 5 messages above T (1,024) and
    every tool result above the 120-token limit, so L1 offloads it. No message fits the L2
    threshold beside the summary: L2 keeps the newest alone and summarizes the L1 view."""
    summarizer = FakeSummarizer()
    engine = Compressor(
        small_config(),
        estimator=lambda messages: 600 * len(messages),
        summarizer=summarizer,
        summary_input_tokens=10_000,  # every message "600 tokens": the summary reads them all
    )
    c = call("bash")
    history = [user("hi"), assistant("", c), tool(c, "short output"), assistant("ok"), user("more")]
    out = engine.call(history, ScriptedModel())
    assert out.level == "L2" and out.tokens_before == 5 * 600
    assert list(out.view)[1:] == [history[-1]]
    ((summarized, _),) = summarizer.calls
    assert offloaded_path(summarized).startswith("outputs/large_tool_results/bash-")


@pytest.mark.spec("R35")
@pytest.mark.parametrize(
    ("field", "value", "phrase"),
    [
        ("estimator", 42, "expected an Estimator instance or class"),
        ("estimator", dict, "not an Estimator class"),
        ("estimator", "no-such-estimator", "not registered"),
        ("estimator", "tiktoken:nope", "not registered"),
        ("summarizer", "no-such-summarizer", "unknown summarizer"),
        ("backend", 3.5, "expected a FileBackend"),
    ],
    ids=["number", "class-not-estimator", "unknown-name", "unknown-alias", "summarizer", "backend"],
)
def test_bad_values_fail_at_construction(field: str, value: Any, phrase: str) -> None:
    """A bad ``estimator=`` / ``summarizer=`` / ``backend=`` is a ConfigError naming the field,
    raised by the constructor, not a TypeError on every later call."""
    with pytest.raises(ConfigError, match=phrase) as info:
        Compressor(small_config(), **{field: value})
    assert info.value.field == field and info.value.value == value


@pytest.mark.spec("R35")
def test_an_estimator_class_that_needs_arguments_is_a_config_error() -> None:
    class NeedsArgs(ApproxEstimator):
        def __init__(self, ratio: float) -> None:
            super().__init__()

    with pytest.raises(ConfigError, match="could not be built without arguments"):
        Compressor(small_config(), estimator=NeedsArgs)


class _Plugin:
    """An in-process plugin: a backend for the ``vault://`` scheme, a summarizer spec."""

    def __init__(self) -> None:
        self.urls: list[str] = []

    @hookimpl
    def register_file_backends(self, register: Any) -> None:
        def vault(url: str) -> FsspecBackend:
            self.urls.append(url)
            return FsspecBackend("memory://" + url.removeprefix("vault://"))

        register("vault", vault)

    @hookimpl
    def resolve_summarizer(self, spec: str) -> Any:
        if not spec.startswith("echo:"):
            return None
        word = spec.removeprefix("echo:")

        class Echo:
            name = spec

            def summarize(self, messages: Sequence[Message], prompt: str) -> SummaryResult:
                return SummaryResult(text=f"{word} x{len(messages)}")

        return Echo()


@pytest.mark.spec("R23", "R36")
def test_plugins_resolve_url_schemes_and_summarizer_specs() -> None:
    """A backend registered under a URL scheme builds ``backend="vault://..."``; a plugin's
    ``resolve_summarizer`` hook builds ``summarizer="echo:..."``; L2 uses both."""
    plugin = _Plugin()
    get_plugin_manager().register(plugin, name="test-vault")
    bucket = f"vault-{uuid.uuid4().hex[:8]}"
    engine = Compressor(small_config(), summarizer="echo:hello", backend=f"vault://{bucket}")
    assert plugin.urls == [f"vault://{bucket}"]
    history = [user(words(80, f"w{i}")) for i in range(20)]
    out = engine.call(history, ScriptedModel())
    assert out.level == "L2" and out.update is not None and out.update.event is not None
    event = out.update.event
    cut = event.cutoff
    assert event.file_path is not None
    # the plugin's summary, after the task the engine wrote
    assert re.search(r"\n\n⟦ARS⟧ Summary\nhello x\d+\n\n", event.summary_message.text)
    fs = fsspec.filesystem("memory")
    archive = fs.cat_file(f"/{bucket}/{event.file_path}").decode("utf-8")
    assert json.loads(archive.splitlines()[0])["count"] == cut


@pytest.mark.s3
@pytest.mark.spec("R36")
def test_an_s3_url_resolves_to_the_s3_backend(s3_endpoint: Any) -> None:
    """``backend="s3://bucket/prefix"``: a plugin registering the ``s3`` scheme (with its
    storage options) builds the backend; the offloaded result is read back from the bucket."""
    bucket = s3_endpoint.create_bucket()
    options = s3_endpoint.storage_options()

    class S3Plugin:
        @hookimpl
        def register_file_backends(self, register: Any) -> None:
            register("s3", lambda url: FsspecBackend(url, storage_options=options))

    get_plugin_manager().register(S3Plugin(), name="test-s3")
    engine = Compressor(small_config(), summarizer=FakeSummarizer(), backend=f"s3://{bucket}/ars")
    history = offloading_history("s3")
    out = engine.call(history, ScriptedModel())
    key = f"ars/{offloaded_path(out.view)}"
    body = s3_endpoint.client().get_object(Bucket=bucket, Key=key)["Body"].read()
    assert body.decode("utf-8") == history[2].text


@pytest.mark.spec("R3")
def test_a_counter_estimator_counts_system_and_tools() -> None:
    """The system message goes first in the counted list; tool schemas are counted as text."""
    seen: list[list[str]] = []

    def counter(messages: list[Message]) -> int:
        seen.append([m.role for m in messages])
        return sum(len(m.text) for m in messages)

    est = CallableEstimator(counter)
    assert est.count([user("abc")], system="sys") == 6
    assert seen[-1] == ["system", "user"]
    tools = [{"name": "bash"}]
    assert est.count([], tools=tools) == len(json.dumps(tools[0], sort_keys=True))
    assert est.count_text("") == 0 and est.name.startswith("callable:")
