"""One broken third-party plugin (a hook ARS does not know, a hook that
raises, an import that raises) never takes down ``ars plugins``, a default
``ars replay`` or the engine's events; each is reported once with why, and a
failed import is not retried on every event."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ars_core import Compressor
from ars_core.plugins import available, failed_plugins, reset_plugin_manager, skipped_plugins
from ars_core.testing import FakeSummarizer, ScriptedModel
from tests.core.helpers import assistant, small_config, user, words
from tests.test_cli import SAMPLE_DIR, run_cli

PLUGINS = {
    "unknownhook": (
        "from ars_core import hookimpl\n"
        "@hookimpl\n"
        "def register_estimatorz(register):\n"
        "    register('typo', object)\n"
    ),
    "raising": (
        "from ars_core import hookimpl\n"
        "@hookimpl\n"
        "def register_estimators(register):\n"
        "    raise RuntimeError('estimator registry exploded')\n"
        "@hookimpl\n"
        "def compression_event(event):\n"
        "    raise RuntimeError('observer exploded')\n"
    ),
    "badimport": (
        "import os\n"
        "with open(os.environ['ARS_IMPORTS_LOG'], 'a') as f:\n"
        "    f.write('imported\\n')\n"
        "raise RuntimeError('cannot start: no licence')\n"
    ),
}


def install(root: Path) -> Path:
    """The three broken plugins as a distribution with ``ars`` entry points."""
    root.mkdir(parents=True)
    for name, source in PLUGINS.items():
        (root / f"ars_broken_{name}.py").write_text(source)
    info = root / "ars_broken-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ars-broken\nVersion: 0.1\n")
    points = "".join(f"{n} = ars_broken_{n}\n" for n in PLUGINS)
    (info / "entry_points.txt").write_text(f"[ars]\n{points}")
    return root


@pytest.fixture
def broken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = install(tmp_path / "site")
    log = tmp_path / "imports.log"
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("ARS_IMPORTS_LOG", str(log))
    monkeypatch.delenv("ARS_PLUGINS", raising=False)
    reset_plugin_manager()
    yield log
    reset_plugin_manager()


@pytest.mark.spec("R30")
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_engine_works_and_a_failed_import_is_tried_once(broken: Path, mode: str) -> None:
    """Twelve calls (each emitting events to the plugins): the built-in estimator
    is found, the raising observer is left out after its first failure, and the
    plugin whose import raised was imported once."""
    import anyio

    compressor = Compressor(small_config(), summarizer=FakeSummarizer())
    state = [user("task " + words(50))]
    for i in range(12):
        state += [assistant(f"a{i} " + words(60)), user(f"q{i} " + words(60))]
        if mode == "sync":
            compressor.call(state, ScriptedModel())
        else:
            anyio.run(compressor.acall, state, ScriptedModel().acall)
    assert "approx" in available("estimator")
    assert broken.read_text() == "imported\n"
    skipped = skipped_plugins()
    assert sorted(skipped) == ["badimport", "unknownhook"]
    assert skipped["badimport"].endswith("failed to load: RuntimeError: cannot start: no licence")
    assert "register_estimatorz" in skipped["unknownhook"]
    # the observer raised first (the first event): the plugin is left out from then on
    assert failed_plugins() == {
        "raising": "its compression_event hook raised RuntimeError: observer exploded"
    }


def test_ars_plugins_and_a_default_replay_survive_broken_plugins(tmp_path: Path) -> None:
    root = install(tmp_path / "site")
    env = {"PYTHONPATH": str(root), "ARS_IMPORTS_LOG": str(tmp_path / "imports.log")}
    listed = run_cli("plugins", cwd=tmp_path, env=env)
    assert listed.returncode == 0, listed.stderr
    report = {p["name"]: p for p in json.loads(listed.stdout)}
    assert "ars.builtins" in report and "unknownhook" not in report
    assert report["raising"]["error"].startswith("its register_estimators hook raised")
    lines = listed.stderr.splitlines()
    assert any(line.startswith("ars: plugin 'badimport' skipped: ") for line in lines)
    assert any(line.startswith("ars: plugin 'unknownhook' skipped: ") for line in lines)
    assert any(
        line.startswith("ars: plugin 'raising' failed: its register_estimators") for line in lines
    )

    run = str(sorted(SAMPLE_DIR.glob("*.jsonl.gz"))[0])
    replay = run_cli("replay", run, "--threshold", "8", "--out", "out", cwd=tmp_path, env=env)
    assert replay.returncode == 0, replay.stderr
    assert "Traceback" not in replay.stderr
