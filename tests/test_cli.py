"""The ``ars`` command end to end, through its console entry point.

Every test runs the CLI in a subprocess (``python -m ars_core``, and the
installed ``ars`` script when there is one) and checks what it printed against
an independent replay done here with the library API (``Compressor.call`` in a
plain loop), against the files it wrote on disk, or against the PNG format.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ars_core import (
    ApproxEstimator,
    Compressor,
    Estimator,
    ExtractiveSummarizer,
    FsspecBackend,
    Message,
    SummarizationEvent,
    SummaryConfig,
    TiktokenEstimator,
    default_estimator,
    read_history,
    read_messages,
)
from ars_core.replay import SAMPLE_DIR

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLES = sorted(SAMPLE_DIR.glob("*.jsonl.gz"))
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run_cli(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    python: Sequence[str] = ("-m", "ars_core"),
) -> subprocess.CompletedProcess[str]:
    """``python -m ars_core ARGS`` in ``cwd``, the repository importable; ``env`` adds
    variables (its ``PYTHONPATH`` goes after the repository's); ``python`` replaces
    ``-m ars_core`` (``-c CODE`` running the CLI another way)."""
    env = {**os.environ, **(env or {})}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    env.pop("ARS_DEBUG", None)
    return subprocess.run(
        [sys.executable, *python, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def notice(runs: str, out: str = "ars-out/") -> str:
    """The line ``ars replay`` prints on stderr before its first call."""
    return (
        f"ars: replaying {runs}; ARS writes its files (offloaded tool results, history "
        f"archives) under {out}, one folder per run (--out DIR to change)"
    )


# ------------------------------------------------------------------ the oracle


def library_replay(
    path: Path,
    threshold: float,
    keep: int = 10,
    *,
    estimator: Estimator | None = None,
    counter: Estimator | None = None,
) -> dict[str, Any]:
    """Replay one run with the library API only: the figures the CLI must print.
    ``estimator`` decides (default: the library default); ``counter`` counts what the
    report shows (default: o200k)."""
    messages = read_messages(path)
    system: Message | None = None
    if messages[0].role == "system":
        system, messages = messages[0], messages[1:]
    est = estimator if estimator is not None else default_estimator()
    o200k = counter if counter is not None else TiktokenEstimator("o200k_base")
    config = SummaryConfig(summary_threshold=threshold, summary_keep_messages=keep)
    compressor = Compressor(
        config,
        estimator=est,
        summarizer=ExtractiveSummarizer(),
        backend=FsspecBackend(f"memory://oracle-{path.name}-{threshold}"),
    )
    state: list[Message] = []
    event: SummarizationEvent | None = None
    out = {
        "calls": 0,
        "l1": 0,
        "l2": 0,
        "sent": [],
        "without": [],
        "summary_tokens": 0,
        "cutoffs": [],
        "cached": [],
        "task": [],  # the retention audit's task share, per L2 round
    }
    previous: list[Message] = []
    for i, m in enumerate(messages):
        if m.role == "assistant":
            outcome = compressor.call(state, lambda view, m=m: m, event=event, system=system)
            if outcome.update is not None:
                if outcome.update.event is not None:
                    event = outcome.update.event
                    out["cutoffs"].append(event.cutoff)
                    assert event.retention is not None
                    out["task"].append(event.retention.task_fraction)
                    usage = event.summary_usage
                    out["summary_tokens"] += (
                        usage.input_tokens + usage.output_tokens if usage else 0
                    )
                for index, new in outcome.update.replaced:
                    state[index] = new
            out["calls"] += 1
            out["l1"] += outcome.level == "L1"
            out["l2"] += outcome.level == "L2"
            view = list(outcome.view)
            out["sent"].append(o200k.count(view, system=system))
            out["without"].append(o200k.count(messages[:i], system=system))
            shared = 0  # the prefix repeated from the previous request: a prompt-cache hit
            while shared < min(len(view), len(previous)) and view[shared] == previous[shared]:
                shared += 1
            out["cached"].append(o200k.count(view[:shared], system=system) if previous else 0)
            previous = view
        state.append(m)
    out["threshold_tokens"] = config.threshold_tokens
    return out


def files_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def _int(text: str) -> int:
    return int(text.replace(",", ""))


# ------------------------------------------------------------------ replay


def test_samples_are_shipped_and_small() -> None:
    assert len(SAMPLES) == 3
    total = sum(p.stat().st_size for p in SAMPLES)
    assert 50_000 <= total <= 150_000
    for p in SAMPLES:
        assert read_messages(p)  # each one is a valid transcript


def test_replay_without_arguments_prints_totals_matching_the_library(tmp_path: Path) -> None:
    """``ars replay`` (the README's first command): shipped runs, built-in summarizer."""
    result = run_cli("replay", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    # before the first call it says where the files go (ars-out/ in the current folder)
    assert result.stderr == notice("the 3 runs shipped with ars as samples") + "\n"
    assert (tmp_path / "ars-out").is_dir()
    text = result.stdout
    assert "16K = 16,384 tokens" in text
    assert "extractive" in text and "no API key" in text

    # the library default decides: the exact o200k count with tiktoken installed
    assert "decided with tiktoken:o200k_base; summarizer extractive" in text
    assert max(len(line) for line in text.splitlines()) <= 100  # fits 100 columns

    oracles = {p.name.removesuffix(".jsonl.gz"): library_replay(p, 16) for p in SAMPLES}
    calls_table: dict[str, list[str]] = {}  # the first table a run's row appears in
    tokens_table: dict[str, list[str]] = {}  # the second
    for line in text.splitlines():
        cols = line.split()
        if cols and cols[0] in {*oracles, "total"}:
            (tokens_table if cols[0] in calls_table else calls_table)[cols[0]] = cols
    assert set(calls_table) == set(tokens_table) == {*oracles, "total"}
    files_seen = 0
    for name, o in oracles.items():
        calls, l1, l2, peak, peak_wo, over, over_wo, files, summaries = (
            _int(c) for c in calls_table[name][1:10]
        )
        kept = sum(f >= 0.9 for f in o["task"])
        assert calls_table[name][10] == f"{kept}/{len(o['task'])}"  # task kept / audited
        sent, sent_wo = (_int(c) for c in tokens_table[name][1:3])
        summary_tokens = _int(tokens_table[name][4])
        cache_hits, effective = tokens_table[name][5], _int(tokens_table[name][6])
        assert (calls, l1, l2) == (o["calls"], o["l1"], o["l2"])
        assert (peak, peak_wo) == (max(o["sent"]), max(o["without"]))
        assert (sent, sent_wo) == (sum(o["sent"]), sum(o["without"]))
        assert over == sum(s > o["threshold_tokens"] for s in o["sent"])
        assert over_wo == sum(s > o["threshold_tokens"] for s in o["without"])
        assert (summaries, summary_tokens) == (o["l2"], o["summary_tokens"])
        cached = sum(o["cached"])
        assert cache_hits == f"{100 * cached / sum(o['sent']):.0f}%"
        assert effective == round(sum(o["sent"]) - 0.9 * cached + o["summary_tokens"])
        on_disk = files_under(tmp_path / "ars-out" / name)
        assert files == len(on_disk) > 0
        files_seen += files
    total, total_tokens = calls_table["total"], tokens_table["total"]
    assert _int(total[1]) == sum(o["calls"] for o in oracles.values())
    assert _int(total_tokens[1]) == sum(sum(o["sent"]) for o in oracles.values())
    assert _int(total_tokens[2]) == sum(sum(o["without"]) for o in oracles.values())
    assert _int(total[8]) == files_seen
    # the demo shows both levels and keeps every request under the threshold (in o200k)
    assert _int(total[2]) > 0 and _int(total[3]) > 0 and _int(total[6]) == 0


JSON_RUN_KEYS = {
    "name": str,
    "source": str,
    "messages": int,
    "model_calls": int,
    "l1_rounds": int,
    "l2_rounds": int,
    "tokens_sent_total": int,
    "tokens_sent_peak": int,
    "tokens_without_total": int,
    "tokens_without_peak": int,
    "over_threshold": int,
    "over_threshold_without": int,
    "files_written": int,
    "files_by_kind": dict,
    "summary_calls": int,
    "summary_input_tokens": int,
    "summary_output_tokens": int,
    "summary_tokens": int,
    "summary_errors": int,
    "tokens_cached_total": int,
    "tokens_without_cached_total": int,
    "retention_rounds": int,
    "task_kept_rounds": int,
    "cache_hit_share": float,
    "effective_cost": float,
    "effective_cost_without": float,
    "warnings": list,
    "seconds": float,
    "sent_ratio": float,
}
JSON_CALL_KEYS = {
    "call": int,
    "message_index": int,
    "level": (str, type(None)),
    "forced": bool,
    "tokens_sent": int,
    "tokens_without": int,
    "cutoff": (int, type(None)),
    "tokens_cached": int,
    "task_fraction": (float, type(None)),
    "retention_fraction": (float, type(None)),
}


def _check_types(obj: dict[str, Any], schema: dict[str, Any]) -> None:
    for key, kind in schema.items():
        assert key in obj, key
        assert isinstance(obj[key], kind), (key, obj[key])


def test_replay_json_schema_and_files_on_disk(tmp_path: Path) -> None:
    run = SAMPLE_DIR / "django__django-16502.jsonl.gz"
    result = run_cli(
        "replay",
        str(run),
        "--threshold",
        "8",
        "--keep",
        "6",
        "--json",
        "--out",
        "out",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["command"] == "replay" and doc["samples"] is False
    assert doc["config"] == {
        "summary_threshold": 8.0,
        "summary_keep_messages": 6,
        "summary_tool_result_token_limit": 300,
        "summary_l2_trigger_ratio": 0.4,
        "threshold_tokens": 8192,
        "l2_threshold_tokens": 3276,
    }
    assert doc["estimator"] == "tiktoken:o200k_base" and doc["summarizer"] == "extractive"
    assert doc["counted_with"] == "tiktoken:o200k_base" and doc["cached_price"] == 0.1
    assert Path(doc["out"]) == (tmp_path / "out").resolve()
    assert len(doc["runs"]) == 1
    r = doc["runs"][0]
    _check_types(r, {**JSON_RUN_KEYS, "calls": list})
    _check_types(doc["total"], JSON_RUN_KEYS)
    assert "calls" not in doc["total"]
    for c in r["calls"]:
        _check_types(c, JSON_CALL_KEYS)

    messages = read_messages(run)
    assistants = [i for i, m in enumerate(messages) if m.role == "assistant"]
    assert [c["message_index"] for c in r["calls"]] == assistants
    assert [c["call"] for c in r["calls"]] == list(range(1, len(assistants) + 1))
    assert r["model_calls"] == len(assistants) and r["messages"] == len(messages)
    assert r["tokens_sent_total"] == sum(c["tokens_sent"] for c in r["calls"])
    assert r["tokens_sent_peak"] == max(c["tokens_sent"] for c in r["calls"])
    assert r["l2_rounds"] == sum(c["level"] == "L2" for c in r["calls"]) == r["summary_calls"] > 1
    # the retention audit of every L2 round, as the engine recorded it in the event
    oracle = library_replay(run, 8, keep=6)
    l2_calls = [c for c in r["calls"] if c["level"] == "L2"]
    assert [c["task_fraction"] for c in l2_calls] == oracle["task"]
    assert all(c["task_fraction"] is None for c in r["calls"] if c["level"] != "L2")
    assert r["retention_rounds"] == len(l2_calls)
    assert r["task_kept_rounds"] == sum(f >= 0.9 for f in oracle["task"])
    # cache hits: per call, then the totals and the bill derived from them
    assert r["calls"][0]["tokens_cached"] == 0
    assert all(0 <= c["tokens_cached"] <= c["tokens_sent"] for c in r["calls"])
    assert r["tokens_cached_total"] == sum(c["tokens_cached"] for c in r["calls"]) > 0
    assert r["tokens_without_cached_total"] == sum(c["tokens_without"] for c in r["calls"][:-1])
    assert r["cache_hit_share"] == round(r["tokens_cached_total"] / r["tokens_sent_total"], 4)
    assert r["effective_cost"] == round(
        r["tokens_sent_total"] - 0.9 * r["tokens_cached_total"] + r["summary_tokens"], 1
    )
    for key in ("model_calls", "tokens_sent_total", "files_written", "summary_tokens"):
        assert doc["total"][key] == r[key]

    # files: what the JSON says is what is on disk, and the archives match the cutoffs
    folder = tmp_path / "out" / r["name"] / "outputs"
    on_disk = files_under(folder)
    assert r["files_written"] == len(on_disk)
    kinds = {k: v for k, v in r["files_by_kind"].items() if v}
    assert kinds == {p.parent.name: sum(q.parent == p.parent for q in on_disk) for p in on_disk}
    cutoffs = [c["cutoff"] for c in r["calls"] if c["level"] == "L2"]
    assert cutoffs == sorted(cutoffs) and all(isinstance(c, int) for c in cutoffs)
    ranges = []
    for archive in sorted((folder / "conversation_history").iterdir()):
        header, archived = read_history(archive.read_text(encoding="utf-8"))
        assert len(archived) == header["count"]
        ranges.append((header["start"], header["end"]))
    # cutoffs are into the state without the system message; chained, no gaps, no overlaps
    assert sorted(ranges) == list(zip([0, *cutoffs[:-1]], cutoffs, strict=True))


def test_replay_plot_writes_a_png(tmp_path: Path) -> None:
    result = run_cli("replay", "--plot", "tokens.png", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    png = tmp_path / "tokens.png"
    data = png.read_bytes()
    assert data[:8] == PNG_MAGIC
    assert len(data) > 10_000  # three panels with lines, not an empty canvas
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width > 500 and height > 500
    assert "Plot written to tokens.png" in result.stdout


def test_replay_folder_of_runs_and_plot_aggregate(tmp_path: Path, trajectories_dir: Path) -> None:
    """A folder means every run in it; more than six runs give one aggregate panel."""
    runs = sorted(trajectories_dir.glob("*.jsonl.gz"), key=lambda p: p.stat().st_size)[:7]
    folder = tmp_path / "runs"
    folder.mkdir()
    for p in runs:
        shutil.copy(p, folder / p.name)
    (folder / "notes.txt").write_text("not a run", encoding="utf-8")  # ignored: not a run file
    result = run_cli(
        "replay", "runs", "--threshold", "4", "--json", "--plot", "agg.png", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert [r["name"] for r in doc["runs"]] == sorted(
        p.name.removesuffix(".jsonl.gz") for p in runs
    )
    for r, p in zip(doc["runs"], sorted(runs), strict=True):
        o = library_replay(p, 4)
        assert r["tokens_sent_total"] == sum(o["sent"])
        assert r["tokens_without_total"] == sum(o["without"])
        assert (r["l1_rounds"], r["l2_rounds"]) == (o["l1"], o["l2"])
    assert (tmp_path / "agg.png").read_bytes()[:8] == PNG_MAGIC


def test_console_script(tmp_path: Path) -> None:
    """The ``ars`` console script (installed by ``pip install -e .``) is the same command."""
    script = shutil.which("ars") or shutil.which("ars", path=str(Path(sys.executable).parent))
    if script is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("the ars console script is not installed")
        pytest.skip("the ars console script is not installed (pip install -e .)")
    run = str(SAMPLE_DIR / "sphinx-doc__sphinx-8459.jsonl.gz")
    args = ["replay", run, "--threshold", "16", "--json"]
    installed = subprocess.run(
        [script, *args], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False
    )
    assert installed.returncode == 0, installed.stderr
    module = run_cli(*args, cwd=tmp_path)
    a, b = json.loads(installed.stdout), json.loads(module.stdout)
    for doc in (a, b):
        for r in doc["runs"]:
            r.pop("seconds")
        doc["total"].pop("seconds")
    assert a == b


def test_replay_with_tiktoken_estimator(tmp_path: Path) -> None:
    run = SAMPLE_DIR / "django__django-16502.jsonl.gz"
    result = run_cli(
        "replay", str(run), "--estimator", "o200k", "--threshold", "16", "--json", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["estimator"] == "tiktoken:o200k_base"
    messages = read_messages(run)
    est = TiktokenEstimator("o200k_base")
    # the first request is the system message plus the task: counted exactly by o200k
    assert doc["runs"][0]["calls"][0]["tokens_without"] == est.count(
        messages[1:2], system=messages[0]
    )


@pytest.mark.spec("R3", "R57")
def test_replay_totals_are_exact_o200k_whatever_estimator_decides(tmp_path: Path) -> None:
    """ARS decides with the approximate estimator; the report's totals are still the
    exact o200k counts of what was sent (and would have been sent without ARS)."""
    run = SAMPLE_DIR / "django__django-16502.jsonl.gz"
    result = run_cli(
        "replay", str(run), "--estimator", "approx", "--threshold", "8", "--json", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert (doc["estimator"], doc["counted_with"]) == ("approx", "tiktoken:o200k_base")
    r = doc["runs"][0]
    oracle = library_replay(run, 8, estimator=ApproxEstimator())
    assert r["tokens_sent_total"] == sum(oracle["sent"])
    assert r["tokens_without_total"] == sum(oracle["without"])
    assert [c["tokens_sent"] for c in r["calls"]] == oracle["sent"]
    assert r["over_threshold"] == sum(s > 8192 for s in oracle["sent"]) == 0
    # the approximate count of the same requests differs: the figures are o200k's
    by_approx = library_replay(run, 8, estimator=ApproxEstimator(), counter=ApproxEstimator())
    assert sum(by_approx["without"]) != r["tokens_without_total"]


@pytest.mark.spec("R3", "R57")
def test_replay_without_tiktoken_decides_and_counts_with_approx(tmp_path: Path) -> None:
    """With tiktoken not installed (an import that fails), ``ars replay`` decides and
    counts with the approximate estimator, and says so."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "tiktoken.py").write_text("raise ImportError('tiktoken is not installed')\n")
    run = SAMPLE_DIR / "django__django-16502.jsonl.gz"
    env = {"PYTHONPATH": str(shim)}
    result = run_cli("replay", str(run), "--threshold", "8", "--json", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert (doc["estimator"], doc["counted_with"]) == ("approx", "approx")
    oracle = library_replay(run, 8, estimator=ApproxEstimator(), counter=ApproxEstimator())
    r = doc["runs"][0]
    assert [c["tokens_sent"] for c in r["calls"]] == oracle["sent"]
    assert r["tokens_without_total"] == sum(oracle["without"])


# ------------------------------------------------------------------ estimate


def test_estimate_counts_per_estimator(tmp_path: Path) -> None:
    result = run_cli("estimate", *map(str, SAMPLES), "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["estimators"] == ["approx", "tiktoken:o200k_base", "tiktoken:cl100k_base"]
    assert doc["reference"] == "tiktoken:o200k_base"
    o200k, cl100k = TiktokenEstimator("o200k_base"), TiktokenEstimator("cl100k_base")
    for row, path in zip(doc["files"], SAMPLES, strict=True):
        messages = read_messages(path)
        assert row["messages"] == len(messages)
        assert row["tokens"] == {
            "approx": ApproxEstimator().count(messages),
            "tiktoken:o200k_base": o200k.count(messages),
            "tiktoken:cl100k_base": cl100k.count(messages),
        }
        ref = row["tokens"]["tiktoken:o200k_base"]
        assert row["error_vs_o200k"]["approx"] == pytest.approx(
            (row["tokens"]["approx"] - ref) / ref, abs=1e-4
        )
        assert abs(row["error_vs_o200k"]["approx"]) < 0.15

    human = run_cli("estimate", str(SAMPLES[0]), cwd=tmp_path)
    assert human.returncode == 0
    assert "o200k" in human.stdout and SAMPLES[0].name.removesuffix(".jsonl.gz") in human.stdout


def test_estimate_without_arguments_estimates_the_shipped_samples(tmp_path: Path) -> None:
    """``ars estimate`` with no FILE counts the sample runs, exactly as naming them does."""
    bare = run_cli("estimate", "--json", cwd=tmp_path)
    named = run_cli("estimate", *map(str, SAMPLES), "--json", cwd=tmp_path)
    assert bare.returncode == 0 == named.returncode, bare.stderr
    files = json.loads(bare.stdout)["files"]
    assert [Path(f["file"]).name for f in files] == [p.name for p in SAMPLES]
    assert [f["tokens"] for f in files] == [f["tokens"] for f in json.loads(named.stdout)["files"]]


# ------------------------------------------------------------------ long runs, failures, plot


def test_replay_shows_per_call_progress_on_a_terminal_only(tmp_path: Path) -> None:
    """On a terminal, stderr carries a per-call progress bar up to the number of calls; piped,
    stderr holds only the notice of where the files go."""
    import fcntl
    import pty
    import struct
    import termios

    run = SAMPLE_DIR / "django__django-16502.jsonl.gz"
    calls = sum(m.role == "assistant" for m in read_messages(run))
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # 120 columns
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ars_core", "replay", str(run), "--threshold", "8", "--json"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=secondary,
        text=True,
    )
    os.close(secondary)
    chunks = []
    while True:
        try:
            data = os.read(primary, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data.decode("utf-8", "replace"))
    out, _ = proc.communicate(timeout=300)
    os.close(primary)
    assert proc.returncode == 0
    assert json.loads(out)["total"]["model_calls"] == calls
    bar = "".join(chunks)
    assert "replaying" in bar and f"0/{calls}" in bar and "call" in bar  # counts calls, not runs
    piped = run_cli("replay", str(run), "--threshold", "8", "--json", cwd=tmp_path)
    assert piped.returncode == 0 and piped.stderr == notice("1 run") + "\n"


def test_a_failing_summarizer_makes_replay_fail_unless_allowed(tmp_path: Path) -> None:
    """A real summarizer that fails (here a plugin's, its provider refusing the key): the report is
    printed, one error line names the failures, exit 1; ``--allow-summary-errors`` exits 0."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(FIXTURE_PLUGIN)])}
    env.pop("ARS_PLUGINS", None)
    run = str(SAMPLE_DIR / "django__django-16502.jsonl.gz")
    args = [
        sys.executable,
        "-m",
        "ars_core",
        "replay",
        run,
        "--threshold",
        "8",
        "--json",
        "--summarizer",
        "failing",
    ]
    failed = subprocess.run(
        args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert failed.returncode == 1
    total = json.loads(failed.stdout)["total"]
    assert total["summary_errors"] == total["summary_calls"] == total["l2_rounds"] > 0
    assert total["summary_retries"] == 0  # a refused key is not retried
    lines = [ln for ln in failed.stderr.splitlines() if ln.strip()]
    assert lines == [
        notice("1 run"),
        f"ars: error: {total['summary_errors']} of {total['l2_rounds']} summaries failed "
        "(they hold the error text; see the report); pass --allow-summary-errors to "
        "accept that",
    ]
    allowed = subprocess.run(
        [*args, "--allow-summary-errors"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert allowed.returncode == 0 and allowed.stderr == notice("1 run") + "\n"
    assert json.loads(allowed.stdout)["total"]["summary_errors"] == total["summary_errors"]


def test_plot_draws_before_and_after_the_threshold_and_the_l2_trigger() -> None:
    """The figure: before/after lines with the replayed numbers, the labelled threshold T, the
    L2 trigger line, thousands separators on the token axis."""
    from ars_core.cli.plot import build_figure
    from ars_core.replay import load_runs, replay_messages

    config = SummaryConfig(summary_threshold=8)
    run = load_runs([SAMPLE_DIR / "django__django-16502.jsonl.gz"])[0]
    report = replay_messages(run.messages, config=config, name=run.name)
    fig = build_figure(
        [report], threshold=config.threshold_tokens, l2_threshold=config.l2_threshold_tokens
    )
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert list(lines["before ARS"].get_ydata()) == [c.tokens_without for c in report.calls]
    assert list(lines["after ARS (sent)"].get_ydata()) == [c.tokens_sent for c in report.calls]
    assert list(lines["threshold T = 8,192"].get_ydata()) == [8192, 8192]
    assert list(lines["L2 trigger = 3,276"].get_ydata()) == [3276, 3276]
    assert "T = 8,192" in [t.get_text() for t in ax.texts]
    fig.canvas.draw()
    ticks = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert any("," in t for t in ticks) and all(t.replace(",", "").isdigit() for t in ticks)


# ------------------------------------------------------------------ bad input


def _write(path: Path, data: bytes | str) -> Path:
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.write_bytes(data)
    return path


def _bad_inputs(tmp: Path) -> dict[str, tuple[Sequence[str], str]]:
    """name -> (arguments, a phrase the error line must contain)."""
    orphan = [
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "call_1", "name": "bash", "content": "out"},
    ]
    _write(tmp / "orphan.jsonl", "\n".join(json.dumps(m) for m in orphan))
    _write(tmp / "prose.txt", "Dear diary, today I compressed a context window.\n")
    _write(tmp / "object.json", json.dumps({"hello": "world"}))
    _write(tmp / "binary.jsonl", b"\xff\xfe\x00garbage")
    _write(tmp / "truncated.jsonl.gz", gzip.compress(b'{"role": "user", "content": "x"}\n')[:20])
    _write(tmp / "badrole.jsonl", json.dumps({"role": "wizard", "content": "x"}))
    _write(tmp / "empty.jsonl", "")
    (tmp / "emptydir").mkdir(exist_ok=True)
    good = str(SAMPLE_DIR / "django__django-16502.jsonl.gz")
    return {
        "missing file": (["replay", "nope.jsonl"], "no such file"),
        "orphan tool message": (["replay", "orphan.jsonl"], "answers no earlier tool call"),
        "not a transcript (prose)": (["replay", "prose.txt"], "invalid JSON"),
        "not a transcript (object)": (["replay", "object.json"], "role"),
        "not UTF-8": (["replay", "binary.jsonl"], "UTF-8"),
        "corrupt gzip": (["replay", "truncated.jsonl.gz"], "gzip"),
        "unknown role": (["replay", "badrole.jsonl"], "role"),
        "empty file": (["replay", "empty.jsonl"], "empty"),
        "folder without runs": (["replay", "emptydir"], "no recorded runs"),
        "directory as a file to estimate": (["estimate", "emptydir"], "no recorded runs"),
        "estimate orphan": (["estimate", "orphan.jsonl"], "answers no earlier tool call"),
        "negative threshold": (["replay", good, "--threshold", "-1"], "summary_threshold"),
        "threshold not finite": (["replay", good, "--threshold", "nan"], "--threshold"),
        "negative keep": (["replay", good, "--keep", "-1"], "--keep: invalid summary_keep"),
        "threshold not a number": (["replay", good, "--threshold", "lots"], "--threshold"),
        "ratio above 1": (["replay", good, "--ratio", "1.5"], "summary_l2_trigger_ratio"),
        "keep zero": (["replay", good, "--keep", "0"], "summary_keep_messages"),
        "tool limit zero": (
            ["replay", good, "--tool-limit", "0"],
            "summary_tool_result_token_limit",
        ),
        "unknown estimator": (["replay", good, "--estimator", "nope"], "nope"),
        "unknown summarizer": (["replay", good, "--summarizer", "nope"], "nope"),
        "unknown chat model provider": (
            ["replay", good, "--summarizer", "nosuchprovider:model-x"],
            "nosuchprovider:model-x",
        ),
        "plot into a missing folder": (
            ["replay", good, "--plot", "no/such/dir/x.png"],
            "does not exist",
        ),
        "plot of no image format": (["replay", good, "--plot", "tokens.txt"], "image format"),
        "plot without a format": (["replay", good, "--plot", "tokens"], "image format"),
        "empty output folder": (["replay", good, "--out", ""], "--out: name a folder"),
        "unknown option": (["replay", good, "--frobnicate"], "--frobnicate"),
        "unknown command": (["compress"], "compress"),
    }


@pytest.fixture(scope="module")
def bad_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bad")


#: the exit status of each case of ``_bad_inputs``: 2 when the command line itself is wrong
BAD_INPUT_EXIT = {
    "missing file": 1,
    "orphan tool message": 1,
    "not a transcript (prose)": 1,
    "not a transcript (object)": 1,
    "not UTF-8": 1,
    "corrupt gzip": 1,
    "unknown role": 1,
    "empty file": 1,
    "folder without runs": 1,
    "directory as a file to estimate": 1,
    "estimate orphan": 1,
    "negative threshold": 2,
    "threshold not finite": 2,
    "negative keep": 2,
    "threshold not a number": 2,
    "ratio above 1": 2,
    "keep zero": 2,
    "tool limit zero": 2,
    "unknown estimator": 2,
    "unknown summarizer": 2,
    "unknown chat model provider": 2,
    "plot into a missing folder": 1,
    "plot of no image format": 2,
    "plot without a format": 2,
    "empty output folder": 2,
    "unknown option": 2,
    "unknown command": 2,
}


@pytest.mark.parametrize("case", list(BAD_INPUT_EXIT))
def test_bad_input_gives_one_clear_line(case: str, bad_dir: Path) -> None:
    """One line on stderr, nothing replayed; exit 2 when the command line is wrong (an
    unknown option or name, a value of the wrong type or out of range), 1 when the input
    it names is (a file missing or not a transcript)."""
    args, phrase = _bad_inputs(bad_dir)[case]
    result = run_cli(*args, cwd=bad_dir)
    assert result.returncode == BAD_INPUT_EXIT[case], result.stderr
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("ars: error: ")
    assert phrase.lower() in lines[0].lower()
    assert result.stdout == ""
    assert not (bad_dir / "ars-out").exists()  # nothing replayed, nothing written


def test_ratio_below_recommended_range_warns_in_one_line(tmp_path: Path) -> None:
    run = str(SAMPLE_DIR / "django__django-16502.jsonl.gz")
    result = run_cli("replay", run, "--ratio", "0.05", "--threshold", "16", cwd=tmp_path)
    assert result.returncode == 0
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 2 and lines[0].startswith("ars: warning:") and "0.05" in lines[0]
    assert lines[1] == notice("1 run")


def test_no_command_prints_help_and_fails(tmp_path: Path) -> None:
    result = run_cli(cwd=tmp_path)
    assert result.returncode == 2
    assert "replay" in result.stderr and "estimate" in result.stderr
    assert "Traceback" not in result.stderr


def test_help_exits_zero(tmp_path: Path) -> None:
    result = run_cli("replay", "--help", cwd=tmp_path)
    assert result.returncode == 0
    for option in (
        "--threshold",
        "--keep",
        "--tool-limit",
        "--ratio",
        "--estimator",
        "--summarizer",
        "--out",
        "--plot",
        "--json",
    ):
        assert option in result.stdout
    assert re.search(r"default\s+10\b", result.stdout)  # summary_keep_messages default shown


# ------------------------------------------------------------------ plugins


FIXTURE_PLUGIN = REPO_ROOT / "tests" / "core" / "fixture_plugin"


def test_plugins_lists_what_is_registered_and_where_it_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ars plugins``: JSON, one entry per plugin (built-ins, the adapter's entry point, a
    third-party distribution), with the components each one registers."""
    monkeypatch.delenv("ARS_PLUGINS", raising=False)
    result = run_cli("plugins", cwd=tmp_path, env={"PYTHONPATH": str(FIXTURE_PLUGIN)})
    assert result.returncode == 0, result.stderr
    plugins = {p["name"]: p for p in json.loads(result.stdout)}
    builtins = plugins["ars.builtins"]
    assert builtins["source"] == "built-in"
    assert builtins["estimators"] == ["approx", "tiktoken", "o200k", "cl100k"]
    assert builtins["file_backends"] == ["fsspec", "memory"]
    assert builtins["summarizers"] == ["extractive"]
    fixture = plugins["fixture"]
    assert (fixture["distribution"], fixture["version"], fixture["module"]) == (
        "ars-fixture-plugin",
        "0.1",
        "ars_fixture_plugin",
    )
    assert fixture["hooks"] == ["compression_event", "register_estimators", "register_summarizers"]
    assert fixture["estimators"] == ["words"] and fixture["summarizers"] == ["failing"]
    if importlib.util.find_spec("langchain") is not None:
        assert plugins["langchain"]["module"] == "ars_langchain.plugin"
        assert result.stderr == ""
    else:  # the core-only session: the adapter's plugin is left out, and says why
        assert "langchain" not in plugins
        assert result.stderr == SKIPPED_LANGCHAIN + "\n"

    env = {"PYTHONPATH": str(FIXTURE_PLUGIN), "ARS_PLUGINS": "fixture"}
    limited = run_cli("plugins", cwd=tmp_path, env=env)
    assert [p["name"] for p in json.loads(limited.stdout)] == ["ars.builtins", "fixture"]


def test_replay_says_where_it_writes_before_the_first_call(tmp_path: Path) -> None:
    """The notice names ``--out`` as the user wrote it (relative to the working folder) and
    comes before anything the replay itself prints: here every summary fails, and the
    failure line follows the notice."""
    env = {"PYTHONPATH": str(FIXTURE_PLUGIN)}
    run = str(SAMPLE_DIR / "django__django-16502.jsonl.gz")
    args = ["replay", run, "--threshold", "8", "--out", "runs/here", "--summarizer", "failing"]
    result = run_cli(*args, cwd=tmp_path, env=env)
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[0] == notice("1 run", "runs/here/")
    assert lines[1].startswith("ars: error: ") and "summaries failed" in lines[1]
    written = files_under(tmp_path / "runs" / "here" / "django__django-16502")
    assert any(p.parent.name == "conversation_history" for p in written)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]


def test_a_summarizer_whose_package_is_missing_is_a_runtime_error(tmp_path: Path) -> None:
    """``provider:model`` whose provider package is not installed: with LangChain the name
    is right and the environment lacks a package (exit 1, the package named); without
    LangChain nothing installed knows such names (exit 2, the extra named)."""
    run = str(SAMPLE_DIR / "django__django-16502.jsonl.gz")
    result = run_cli("replay", run, "--summarizer", "fireworks:some-model", cwd=tmp_path)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ars: error: --summarizer: ")
    if importlib.util.find_spec("langchain") is not None:
        assert importlib.util.find_spec("langchain_fireworks") is None
        assert result.returncode == 1 and "langchain-fireworks" in lines[0]
    else:
        assert result.returncode == 2 and 'pip install "ars[langchain]"' in lines[0]
    assert not (tmp_path / "ars-out").exists()


SKIPPED_LANGCHAIN = (
    "ars: plugin 'langchain' skipped: ars_langchain.plugin: the LangChain plugin needs "
    'LangChain: pip install "ars[langchain]"'
)


@pytest.mark.parametrize(
    ("missing", "skipped"),
    [
        ("langchain", SKIPPED_LANGCHAIN),
        ("langchain_core", SKIPPED_LANGCHAIN.replace("needs LangChain", "needs langchain-core")),
    ],
)
def test_plugins_leaves_out_a_plugin_whose_import_fails_and_says_why(
    missing: str, skipped: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without LangChain or langchain-core (its import blocked here) ``ars plugins`` lists
    the built-ins only, one stderr line names the left-out adapter plugin and the extra to
    install, exit 0; a provider string then is an unknown summarizer naming that extra."""
    blocked = (
        f"import sys; sys.modules[{missing!r}] = None; "
        "from ars_core.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    monkeypatch.delenv("ARS_PLUGINS", raising=False)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(*args, cwd=tmp_path, python=("-c", blocked))

    listed = cli("plugins")
    assert listed.returncode == 0
    assert [p["name"] for p in json.loads(listed.stdout)] == ["ars.builtins"]
    assert listed.stderr == skipped + "\n"
    spec = cli("replay", str(SAMPLES[0]), "--summarizer", "openai:gpt-4o-mini")
    assert spec.returncode == 2
    assert spec.stderr.startswith("ars: error: --summarizer: ")
    assert 'pip install "ars[langchain]"' in spec.stderr and spec.stdout == ""


@pytest.mark.spec("R37")
def test_replay_of_a_file_named_dots_jsonl_writes_only_inside_out(tmp_path: Path) -> None:
    """A run file named ``...jsonl`` (its name without the suffix is ``..``) is
    replayed into ``--out/run``; nothing is written outside ``--out``."""
    source = SAMPLE_DIR / "django__django-16502.jsonl.gz"
    runs = tmp_path / "in"
    runs.mkdir()
    (runs / "...jsonl").write_bytes(gzip.decompress(source.read_bytes()))
    result = run_cli("replay", "in/...jsonl", "--threshold", "8", "--out", "out", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "out"]
    assert sorted(p.name for p in (tmp_path / "in").iterdir()) == ["...jsonl"]
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["run"]
    written = [p for p in (tmp_path / "out" / "run").rglob("*") if p.is_file()]
    assert any(p.parent.name == "conversation_history" for p in written)
