"""Plugins: built-ins through the hooks, an entry-point plugin, ARS_PLUGINS."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ars_core import (
    ApproxEstimator,
    Compressor,
    ExtractiveSummarizer,
    FsspecBackend,
    PluginError,
    hookimpl,
)
from ars_core.plugins import (
    available,
    get_estimator,
    get_file_backend,
    get_plugin_manager,
    get_summarizer,
    reset_plugin_manager,
)
from ars_core.testing import FakeSummarizer, ScriptedModel

from .helpers import assistant, small_config, user, words

FIXTURE = Path(__file__).parent / "fixture_plugin"


@pytest.fixture
def fixture_plugin_installed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Put a distribution with an `ars` entry point on sys.path (as pip would)."""
    monkeypatch.syspath_prepend(str(FIXTURE))
    reset_plugin_manager()
    yield
    reset_plugin_manager()
    sys.modules.pop("ars_fixture_plugin", None)


@pytest.fixture(autouse=True)
def fresh_manager() -> Iterator[None]:
    reset_plugin_manager()
    yield
    reset_plugin_manager()


class TestBuiltins:
    def test_builtins_register_through_the_hooks(self) -> None:
        pm = get_plugin_manager()
        assert pm.get_plugin("ars.builtins") is not None
        assert {"approx", "tiktoken", "o200k", "cl100k"} <= set(available("estimator"))
        assert isinstance(get_estimator("approx"), ApproxEstimator)
        assert get_estimator("cl100k").count_text("hello world") == 2
        assert isinstance(get_summarizer("extractive"), ExtractiveSummarizer)
        backend = get_file_backend("memory", url="memory://ars-plugin-test")
        assert (
            isinstance(backend, FsspecBackend)
            and backend.write_text("outputs/a.txt", "a") == "outputs/a.txt"
        )

    def test_unknown_names_are_typed_errors(self) -> None:
        with pytest.raises(PluginError, match="not registered"):
            get_estimator("nope")
        with pytest.raises(PluginError, match="unknown kind"):
            available("widget")
        with pytest.raises(PluginError, match="could not be built"):
            get_estimator("tiktoken", encoding="no_such_encoding")


class TestThirdParty:
    def test_entry_point_plugin_is_loaded_and_used(self, fixture_plugin_installed: None) -> None:
        est = get_estimator("words")
        assert est.count_text("one two three") == 3
        engine = Compressor(small_config(), estimator=est, summarizer=FakeSummarizer())
        out = engine.call([user(words(40)), assistant("ok")], ScriptedModel())
        assert out.tokens_before == 40 + 1 + 2 * 4  # words + MESSAGE_OVERHEAD per message

    def test_observer_hook_sees_compression_events(self, fixture_plugin_installed: None) -> None:
        import ars_fixture_plugin  # type: ignore[import-not-found]

        ars_fixture_plugin.SEEN.clear()
        history = [user(words(80, f"w{i}")) for i in range(20)]
        Compressor(small_config(), summarizer=FakeSummarizer()).call(history, ScriptedModel())
        assert [(e.phase, e.level) for e in ars_fixture_plugin.SEEN] == [
            ("started", "L1"),
            ("completed", "L2"),
        ]

    @pytest.mark.parametrize(
        ("env", "loaded"), [("none", False), ("", False), ("fixture", True), ("other", False)]
    )
    def test_ars_plugins_env_limits_external_plugins(
        self,
        fixture_plugin_installed: None,
        monkeypatch: pytest.MonkeyPatch,
        env: str,
        loaded: bool,
    ) -> None:
        monkeypatch.setenv("ARS_PLUGINS", env)
        reset_plugin_manager()
        assert ("words" in available("estimator")) is loaded
        assert "approx" in available("estimator")  # built-ins always load

    def test_in_process_registration(self) -> None:
        class Plugin:
            @hookimpl
            def register_summarizers(self, register):  # type: ignore[no-untyped-def]
                register("fake", lambda **kw: FakeSummarizer("from plugin"))

        get_plugin_manager().register(Plugin(), name="inproc")
        summarizer = get_summarizer("fake")
        out = Compressor(small_config(), summarizer=summarizer).call(
            [user(words(80, f"w{i}")) for i in range(20)], ScriptedModel()
        )
        assert "from plugin" in out.update.event.summary_message.text
