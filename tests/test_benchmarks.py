"""A smoke run of ``benchmarks/run.py`` (tiny sizes) so the benchmark code cannot rot.

The report is parsed back from its markdown tables and checked: the table
structure, sane timings, ratios consistent with the medians they come from,
and the "no compression" token totals recomputed here with tiktoken o200k.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from ars_core import ApproxEstimator, TiktokenEstimator, default_estimator, read_messages
from ars_core.replay import SAMPLE_DIR
from tests.conftest import TRAJECTORIES_DIR as FIT_CORPUS  # fit_approx.DEFAULT_RUNS

REPO_ROOT = Path(__file__).resolve().parents[1]
SCRIPT = REPO_ROOT / "benchmarks" / "run.py"


def parse_tables(markdown: str) -> list[list[dict[str, str]]]:
    """Every markdown table in ``markdown`` as a list of rows keyed by header."""
    tables: list[list[dict[str, str]]] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        is_header = i + 1 < len(lines) and lines[i + 1].startswith(("|:", "|-"))
        if lines[i].startswith("| ") and is_header:
            header = [c.strip() for c in lines[i].strip("|").split("|")]
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                cells = [c.strip() for c in lines[i].strip("|").split("|")]
                assert len(cells) == len(header), lines[i]
                rows.append(dict(zip(header, cells, strict=True)))
                i += 1
            tables.append(rows)
        else:
            i += 1
    return tables


def section_tables(markdown: str, heading: str) -> list[list[dict[str, str]]]:
    """The tables of the section (or sub-section) that starts with ``heading``."""
    start = markdown.index(heading)
    level = heading.split(" ", 1)[0] + " "
    end = len(markdown)
    for marker in ("\n## ", "\n### ") if level == "### " else ("\n## ",):
        found = markdown.find(marker, start + len(heading))
        if found >= 0:
            end = min(end, found)
    return parse_tables(markdown[start:end])


def section_text(markdown: str, heading: str) -> str:
    """The text of the section that starts with ``heading`` (up to the next ``## ``)."""
    start = markdown.index(heading)
    end = markdown.find("\n## ", start + len(heading))
    return markdown[start : end if end >= 0 else len(markdown)]


def target_lines(text: str) -> list[str]:
    """The "Target: ..." lines of a section, each ending in **met** or **NOT met**."""
    lines = [line for line in text.splitlines() if line.startswith("Target")]
    assert all(line.endswith(("**met**.", "**NOT met**.")) for line in lines), lines
    return lines


MESSAGE_ROW = "mean abs error per message (>= 20 tokens)"


def num(cell: str) -> float:
    return float(cell.replace(",", "").rstrip("%x"))


#: the synthetic chat of the smoke run: sessions of alternating turns, one fact a turn
CHAT_SESSIONS, CHAT_TURNS = 4, 28


def synthetic_chat() -> dict[str, object]:
    """A LoCoMo-shaped conversation (two speakers, dated sessions, QA items) written here:
    the smoke run measures section L on it without the real data set."""
    conversation: dict[str, object] = {"speaker_a": "Ann", "speaker_b": "Bo"}
    qa: list[dict[str, object]] = []
    for s in range(1, CHAT_SESSIONS + 1):
        conversation[f"session_{s}_date_time"] = f"10:00 am on {s} May, 2023"
        turns = []
        for t in range(CHAT_TURNS):
            speaker = "Ann" if t % 4 < 2 else "Bo"  # two turns each: joined into one message
            fact = f"fact{s}x{t}"
            text = f"On that day I talked about {fact} and some weather and coffee and plans."
            turns.append({"speaker": speaker, "dia_id": f"D{s}:{t}", "text": text})
            qa.append({"question": f"What about {fact}?", "answer": fact, "category": 1})
        conversation[f"session_{s}"] = turns
    qa.append({"question": "Unanswerable?", "adversarial_answer": "x", "category": 5})
    return {"sample_id": "synthetic", "conversation": conversation, "qa": qa}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, object], str]:
    tmp = tmp_path_factory.mktemp("bench")
    (tmp / "chat.json").write_text(json.dumps([synthetic_chat()]), encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    result = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--quick",
            "--runs-dir",
            str(SAMPLE_DIR),
            "--out",
            str(tmp / "report.md"),
            "--json",
            str(tmp / "raw.json"),
            "--chat-data",
            str(tmp / "chat.json"),
        ],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    report = (tmp / "report.md").read_text(encoding="utf-8")
    assert report.strip() == result.stdout.strip()
    return report, json.loads((tmp / "raw.json").read_text(encoding="utf-8")), result.stderr


def test_report_has_every_section(smoke: tuple[str, dict[str, object], str]) -> None:
    report, raw, _ = smoke
    for heading in (
        "# ARS benchmark report",
        "## A. Per-call overhead",
        "### One L2 round",
        "## B. Tokens sent",
        "### Requests above T with the default configuration",
        "## C. Estimators",
        "## D. Core per-call overhead",
        "## E. Prompt-cache cost",
        "## F. Task retention",
        "## G. Summary input budget",
        "## H. Estimator speed and error per content kind",
        "## I. Event loop stall",
        "## J. Content blocks",
        "## K. LlamaIndex memory per-call overhead",
        "## L. Multi-session chat",
        "## M. Cold",
        "## N. Soak",
    ):
        assert heading in report
    # A, L2, B, B defaults, B usage, C errors, C speed, D, E, F, G, H kinds, H fit, I stall,
    # I memory, J formats, J images, K, L, M calls, M resumed calls, M checkpointed turns,
    # M first round, M first round with the approximate estimator, N
    assert len(parse_tables(report)) == 25
    assert set(raw) == {
        "per_call_ms",
        "l2_ms",
        "l2_first_round_ms",
        "tokens",
        "estimator_speed_mb_s",
        "cache",
        "retention",
        "budget",
        "estimator_kinds",
        "loop_stall",
        "counting_memory",
        "formats",
        "images",
        "llamaindex_per_call_ms",
        "chat",
        "cold",
        "soak",
    }


def test_estimator_and_loop_stall_sections(smoke: tuple[str, dict[str, object], str]) -> None:
    """H: one row per content kind, approx against o200k, the held-out fit report and a
    target line per target; I: acall and the blocking sync call, for both default
    estimators, the counting memory, and the two target lines."""
    report, raw, _ = smoke
    kinds, fit = section_tables(report, "## H. Estimator speed")
    assert {"agent messages", "tool outputs", "chinese", "python", "json", "hex"} <= {
        row["kind"] for row in kinds
    }
    assert {"approx MB/s", "o200k MB/s", "approx error"} <= set(kinds[0])
    fit_rows = {row["measured on the held-out half"]: row["value"] for row in fit}
    h = section_text(report, "## H. Estimator speed")
    assert f"worst run <= 10% ({fit_rows['worst run']})" in h
    assert f"messages of >= 20 tokens <= 5% mean ({fit_rows[MESSAGE_ROW]})" in h
    assert len(target_lines(h)) == 4
    if FIT_CORPUS.is_dir():  # the runs the shipped weights were fitted on: the fit reproduces
        assert f"Runs fitted and measured: `{FIT_CORPUS}`." in h
        assert "The shipped weights (`ApproxEstimator.WEIGHTS`) are this fit's, to 4 decimals." in h
    else:  # a bare clone: the fit runs on the shipped samples, which give other weights
        assert f"Runs fitted and measured: `{SAMPLE_DIR}`." in h
        assert "The shipped weights (`ApproxEstimator.WEIGHTS`) are NOT this fit's." in h
    stall, memory = section_tables(report, "## I. Event loop stall")
    assert [(row["estimator"].split()[0], row["path"]) for row in stall] == [
        ("o200k", "acall"),
        ("o200k", "sync call on the loop"),
        ("approx", "acall"),
        ("approx", "sync call on the loop"),
    ]
    assert all(r["max_stall_ms"] > 0 for r in raw["loop_stall"])  # type: ignore[attr-defined]
    worst = max(num(row["max loop stall"].removesuffix(" ms")) for row in stall[::2])
    i = section_text(report, "## I. Event loop stall")
    assert f"<= 50 ms ({worst:.1f} ms, both default estimators)" in i
    assert [row["estimator"] for row in memory] == ["tiktoken:o200k_base", "approx"]
    for row in memory:  # the ratio is the extra memory over the text's size
        ratio = num(row["extra memory"].removesuffix(" MB")) / num(row["text"].removesuffix(" MB"))
        assert abs(num(row["of the text"]) - ratio) <= 0.011
    assert len(target_lines(i)) == 2


@pytest.mark.spec("R57")
def test_formats_section_against_a_recount(smoke: tuple[str, dict[str, object], str]) -> None:
    """J: the two largest shipped runs estimated in three formats (the OpenAI totals
    recounted here), within 5% of each other; images charged as the providers' examples."""
    report, _, _ = smoke
    formats, images = section_tables(report, "## J. Content blocks")
    runs = sorted(
        (read_messages(p) for p in SAMPLE_DIR.glob("*.jsonl.gz")),
        key=lambda ms: sum(len(m.text) for m in ms),
        reverse=True,
    )[:2]
    expected = {
        "approx": sum(ApproxEstimator().count(ms) for ms in runs),
        "o200k": sum(TiktokenEstimator("o200k_base").count(ms) for ms in runs),
    }
    assert [(r["estimator"], r["format"]) for r in formats] == [
        (e, f) for e in expected for f in ("OpenAI", "Anthropic blocks", "LangChain v1 blocks")
    ]
    for row in formats:
        if row["format"] == "OpenAI":
            assert num(row["tokens (all runs)"]) == expected[row["estimator"]]
        else:
            assert num(row["worst run"]) <= 5 and abs(num(row["vs OpenAI"])) <= 5
    assert all(row["documented"] == row["ARS charges"] for row in images)
    assert [line.endswith("**met**.") for line in target_lines(section_text(report, "## J."))] == [
        True,
        True,
    ]


def test_overhead_table(smoke: tuple[str, dict[str, object], str]) -> None:
    report, _, _ = smoke
    a, l2 = parse_tables(report)[:2]
    assert [row["history"] for row in a] == ["50", "100"]
    cols = list(a[0])
    ars = next(c for c in cols if c.startswith("ARS") and c.endswith("(ms)"))
    ars_name = ars.removesuffix(" (ms)")
    for row in a:
        for peer in ("LangChain", "deepagents"):
            med, ars_med = num(row[f"{peer} (ms)"]), num(row[ars])
            assert 0 < med < 1000 and 0 < ars_med < 1000
            assert num(row[f"{peer} / {ars_name}"]) == pytest.approx(
                med / ars_med, rel=0.1, abs=0.06
            )
    assert {row["policy"] for row in l2} >= {"ARS core", "LangChain", "deepagents"}
    for row in l2:
        median = num(row["median (ms)"])
        assert 0 < median <= num(row["p95 (ms)"]) + 1e-9
        low, high = map(num, row["p25-p75 (ms)"].split("-"))
        assert low - 1e-3 <= median <= high + 1e-3
        # each round's wait on the disk barrier is part of it: the rest is no more
        wait, rest = num(row["disk barrier (ms)"]), num(row["without the wait (ms)"])
        assert 0 <= wait and 0 < rest <= median + 1e-3
        if row["policy"] == "LangChain":  # it writes no file
            assert wait == 0 and rest == pytest.approx(median, abs=1e-3)
        if "/" in row["checked"]:  # every call really ran L2 / summarized
            done, total = row["checked"].split()[0].split("/")
            assert done == total


def test_token_table_against_an_o200k_recount(smoke: tuple[str, dict[str, object], str]) -> None:
    report, _, _ = smoke
    b = section_tables(report, "## B. Tokens sent")[0]
    policies = [row["policy"] for row in b]
    assert policies == [
        "no compression",
        "ARS",
        "ARS, without tiktoken",
        "ARS, o200k estimator",
        "ARS, usage-calibrated",
        "LangChain",
        "observation masking",
        "deepagents",
    ]
    rows = {row["policy"]: row for row in b}
    threshold = int(num(b[0]["T (tokens)"]))
    assert threshold == 4096

    # the oracle: the two largest shipped runs, every request counted with o200k here
    runs = sorted(
        (read_messages(p) for p in SAMPLE_DIR.glob("*.jsonl.gz")),
        key=lambda ms: sum(len(m.text) for m in ms),
        reverse=True,
    )[:2]
    est = TiktokenEstimator("o200k_base")
    totals, requests, peak = 0, 0, 0
    for messages in runs:
        system, history = messages[0], messages[1:]
        for i, m in enumerate(history):
            if m.role == "assistant":
                tokens = est.count(history[:i], system=system)
                totals, requests, peak = totals + tokens, requests + 1, max(peak, tokens)
    none = rows["no compression"]
    assert (num(none["total tokens"]), num(none["requests"]), num(none["peak"])) == (
        totals,
        requests,
        peak,
    )
    assert none["% of none"] == "100.0%" and num(none["summaries"]) == 0

    for row in rows.values():
        assert num(row["requests"]) == requests  # every policy answered every assistant turn
        assert num(row["total tokens"]) <= totals
        assert num(row["% of none"]) == pytest.approx(
            100 * num(row["total tokens"]) / totals, abs=0.06
        )
        # the total cost: request tokens plus summary-call tokens
        cost = num(row["total tokens"]) + num(row["summary-call tokens"])
        assert num(row["total cost"]) == cost
        assert num(row["cost % of none"]) == pytest.approx(100 * cost / totals, abs=0.06)
    ars = rows["ARS"]
    assert num(ars["summaries"]) > 0 and num(ars["placeholders"]) == 0
    assert num(ars["summary-call tokens"]) > 0
    # the defaults decide with o200k (tiktoken is installed here); without it, with approx
    # and its margin: either way nothing above T, counted in o200k
    assert num(ars["over T"]) == 0 and num(ars["peak"]) <= threshold
    assert num(rows["ARS, without tiktoken"]["over T"]) == 0
    exact = rows["ARS, o200k estimator"]  # decides with the tokenizer it is counted with
    assert num(exact["over T"]) == 0 and num(exact["peak"]) <= threshold
    assert num(ars["over T"]) <= num(rows["LangChain"]["over T"])
    assert num(ars["total tokens"]) < num(rows["observation masking"]["total tokens"])
    for peer in ("LangChain", "deepagents"):
        assert num(rows[peer]["summaries"]) > 0
        assert num(rows[peer]["placeholders"]) <= num(rows[peer]["summaries"])
    assert num(rows["observation masking"]["summaries"]) == 0
    assert "At T=4,096: ARS sends " in report

    # requests above T with the default configuration: B's own numbers, with/without tiktoken
    defaults = section_tables(report, "### Requests above T with the default configuration")[0]
    assert [row["T (tokens)"] for row in defaults] == ["4,096"]
    assert defaults[0]["ARS, defaults"] == rows["ARS"]["over T"]
    assert defaults[0]["ARS, defaults without tiktoken"] == rows["ARS, without tiktoken"]["over T"]
    assert num(defaults[0]["requests"]) == requests
    line = "Target: 0 requests above T (counted in o200k) at every T, with and without tiktoken"
    assert f"{line}: **met**." in report


def test_placeholders_are_rounds_without_a_summarizer_call() -> None:
    """A summary round counts as a placeholder when the summarizer was not called during it,
    whatever the summary's text says (a real summary may quote an earlier placeholder)."""
    sys.path.insert(0, str(REPO_ROOT))
    try:
        from benchmarks.tokens import TokenStats
    finally:
        sys.path.remove(str(REPO_ROOT))
    stats = TokenStats()
    before = stats.summary_calls
    stats.summary_calls += 1  # the summarizer ran (its text may quote a placeholder)
    stats.add_summary(before)
    stats.add_summary(stats.summary_calls)  # a round in which it did not run
    assert (stats.summaries, stats.placeholders) == (2, 1)


@pytest.mark.spec("R3", "R57")
def test_the_without_tiktoken_row_uses_the_engines_own_fallback() -> None:
    """B's "ARS, without tiktoken" decides with what the engine picks when tiktoken's
    import fails (the approximate estimator and its margin), and leaves tiktoken importable."""
    sys.path.insert(0, str(REPO_ROOT))
    try:
        from benchmarks.tokens import default_without_tiktoken
    finally:
        sys.path.remove(str(REPO_ROOT))
    import tiktoken

    est = default_without_tiktoken()
    assert type(est) is ApproxEstimator and est.margin == ApproxEstimator.error_margin > 0
    assert sys.modules["tiktoken"] is tiktoken
    assert type(default_estimator()) is TiktokenEstimator


def test_estimator_tables(smoke: tuple[str, dict[str, object], str]) -> None:
    report, raw, _ = smoke
    errors, speed = section_tables(report, "## C. Estimators")[:2]
    cats = {row["samples"] for row in errors}
    assert {"agent messages", "JSON", "code", "whole runs"} <= cats
    for row in errors:
        assert row["estimator"] in ("approx", "cl100k")
        assert num(row["mean abs error"]) <= num(row["max abs error"]) + 0.05
    whole = next(r for r in errors if r["samples"] == "whole runs" and r["estimator"] == "approx")
    assert num(whole["mean abs error"]) < 15
    assert {row["estimator"] for row in speed} == {"approx", "o200k", "cl100k"}
    assert all(num(row["MB/s"]) > 0.1 for row in speed)
    assert raw["estimator_speed_mb_s"].keys() == {"approx", "o200k", "cl100k"}  # type: ignore[union-attr]


def test_flatness_table(smoke: tuple[str, dict[str, object], str]) -> None:
    report, raw, _ = smoke
    d = section_tables(report, "## D. Core per-call overhead")[0]
    assert [row["history"] for row in d] == ["50", "100"]
    for row in d:
        assert 0 < num(row["core median (ms)"]) <= num(row["core p95 (ms)"]) + 1e-9
    per_call = raw["per_call_ms"]
    assert isinstance(per_call, dict)
    assert num(d[1]["core median (ms)"]) == pytest.approx(
        per_call["ARS core"]["100"]["median"], abs=0.001
    )
    assert "Flatness: median at 100 / median at 50" in report


def test_benchmark_sections_use_the_replay_library_not_the_cli() -> None:
    """Each section is its own module; none of them (nor the runner) imports the ``ars`` CLI."""
    code = (
        "import sys, json; sys.argv = ['run.py'];"
        f"import runpy; runpy.run_path({str(SCRIPT)!r}, run_name='bench');"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('ars_core', 'benchmarks')))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    loaded = set(json.loads(result.stdout))
    assert {
        "ars_core.replay",
        "benchmarks.overhead",
        "benchmarks.tokens",
        "benchmarks.estimators",
        "benchmarks.flatness",
    } <= loaded
    assert not any(m == "ars_core.cli" or m.startswith("ars_core.cli.") for m in loaded)


def _largest_sample_runs(n: int = 2) -> list[list[object]]:
    return sorted(
        (read_messages(p) for p in SAMPLE_DIR.glob("*.jsonl.gz")),
        key=lambda ms: sum(len(m.text) for m in ms),
        reverse=True,
    )[:n]


@pytest.mark.spec("R24")
def test_cache_table_against_an_o200k_recount(smoke: tuple[str, dict[str, object], str]) -> None:
    """E: "no compression" repeats the whole previous request, so its cached
    tokens are each request minus its new messages (recounted here); ARS has no
    prefix rewrite outside a summary round."""
    report, _, _ = smoke
    e = section_tables(report, "## E. Prompt-cache cost")[0]
    rows = {row["policy"]: row for row in e}
    assert list(rows) == [
        "no compression",
        "observation masking",
        "LangChain",
        "LangChain, trim None",
        "deepagents",
        "deepagents, trim None",
        "ARS",
    ]
    est = TiktokenEstimator("o200k_base")
    total = cached = 0
    for messages in _largest_sample_runs():
        system, history = messages[0], messages[1:]
        previous = None
        for i, m in enumerate(history):
            if m.role != "assistant":
                continue
            tokens = est.count(history[:i], system=system)
            total += tokens
            if previous is not None:
                cached += tokens - est.count(history[previous:i])
            previous = i
    none = rows["no compression"]
    assert num(none["cache-hit share"]) == pytest.approx(100 * cached / total, abs=0.06)
    assert num(none["effective cost"]) == pytest.approx(total - 0.9 * cached, abs=1)
    assert num(none["rewrites outside a summary round"]) == 0
    assert num(rows["ARS"]["rewrites outside a summary round"]) == 0
    assert num(rows["observation masking"]["rewrites outside a summary round"]) > 0
    assert "At T=4,096: ARS has 0 prefix rewrites" in report


@pytest.mark.spec("R58")
def test_retention_table_counts_every_summarized_view(
    smoke: tuple[str, dict[str, object], str],
) -> None:
    """F: one summarized view per summary round (B's own round counts, for the deterministic
    policies), the share is kept / views, and every fraction recorded is a share."""
    report, raw, _ = smoke
    f = section_tables(report, "## F. Task retention")[0]
    rows = {row["policy"]: row for row in f}
    assert list(rows) == [
        "ARS",
        "LangChain",
        "LangChain, trim None",
        "deepagents",
        "deepagents, trim None",
    ]
    b = {row["policy"]: row for row in section_tables(report, "## B. Tokens sent")[0]}
    for name in ("ARS", "LangChain"):
        assert rows[name]["summarized views"] == b[name]["summaries"]
    retention = raw["retention"]
    assert isinstance(retention, dict)
    for name, row in rows.items():
        views, kept = int(num(row["summarized views"])), int(num(row["task kept"]))
        fractions = retention["4"][name]["fractions"]
        assert len(fractions) == views > 0 and all(0.0 <= x <= 1.0 for x in fractions)
        assert kept == sum(x >= 0.9 for x in fractions)
        assert num(row["share"]) == pytest.approx(100 * kept / views, abs=0.06)
        assert row["worst view"] == f"{100 * min(fractions):.0f}%"
    assert "Target: ARS keeps the task in at least 95% of summarized views" in report


@pytest.mark.spec("R23", "R58")
def test_budget_table_trades_summary_tokens_for_task_retention(
    smoke: tuple[str, dict[str, object], str],
) -> None:
    """G: the default (lean rounds, "task + T/12") first, then the fixed rounds: a smaller
    fixed summary input budget reads fewer tokens and keeps no more of the task
    statement than a larger one; the default reads less than the fixed T/2."""
    report, raw, _ = smoke
    rows = section_tables(report, "## G. Summary input budget")[0]
    assert [row["summary input"] for row in rows] == [
        "task + T/12 (default)",
        "T/2 (2,048), fixed rounds",
        "T/4 (1,024), fixed rounds",
        "T/8 (512), fixed rounds",
    ]
    assert all(num(row["summarized views"]) > 0 and num(row["summaries"]) > 0 for row in rows)
    default, f = rows[0], rows[1:]
    tokens = [num(row["summary-call tokens"]) for row in f]
    assert tokens[0] > tokens[1] > tokens[2]
    assert num(default["summary-call tokens"]) < tokens[0]
    shares = [num(row["mean task share"]) for row in f]
    assert shares[0] >= shares[1] >= shares[2]
    budget = raw["budget"]["4"]  # type: ignore[index]
    assert budget["T/2"]["summary_tokens"] == tokens[0]
    assert budget["task + T/12"]["summary_tokens"] == num(default["summary-call tokens"])
    assert budget["task + T/12"]["summaries"] == num(default["summaries"])


def test_llamaindex_section(smoke: tuple[str, dict[str, object], str]) -> None:
    """K: one row per history length with both stores' medians, and the flatness
    target line computed from the SimpleChatStore medians of the table."""
    report, raw, _ = smoke
    (rows,) = section_tables(report, "## K. LlamaIndex memory")
    medians = raw["llamaindex_per_call_ms"]
    assert isinstance(medians, dict)
    sizes = [row["history"] for row in rows]
    assert sizes == [f"{int(n):,}" for n in medians["simple"]] and len(sizes) >= 2
    assert all(num(row["SimpleChatStore median (ms)"]) > 0 for row in rows)
    assert all(num(row["SQLite aget median (ms)"]) > 0 for row in rows)
    lo, hi = (
        medians["simple"][str(min(map(int, medians["simple"])))],
        medians["simple"][str(max(map(int, medians["simple"])))],
    )
    k = section_text(report, "## K. LlamaIndex memory")
    assert f"= {hi / lo:.2f}x <= 1.5x" in k and len(target_lines(k)) == 1


def test_chat_section(smoke: tuple[str, dict[str, object], str]) -> None:
    """L on the synthetic chat: one row per policy, the "no limit" answers recounted here
    (the final request is every message before the last reply), the summarizing policies
    summarized, the others did not, and a target line for each of the three targets."""
    report, raw, _ = smoke
    (rows,) = section_tables(report, "## L. Multi-session chat")
    assert [row["policy"] for row in rows] == [
        "no limit",
        "LangChain trim_messages (last)",
        "LangChain SummarizationMiddleware",
        "deepagents SummarizationMiddleware",
        "ARS",
        "ARS, lean_rounds=False",
    ]
    assert {row["T (tokens)"] for row in rows} == {"2,048"}
    by = {row["policy"]: row for row in rows}
    # the oracle: every fact but those of the last reply (two turns of Bo) is in the final
    # request of "no limit"; the unanswerable item is not counted
    answers = CHAT_SESSIONS * CHAT_TURNS
    assert by["no limit"]["answers in the final request"] == f"{100 * (answers - 2) / answers:.1f}%"
    assert by["no limit"]["of those in the chat"] == "100.0%"
    assert num(by["no limit"]["requests over T"]) > 0
    for name in ("LangChain trim_messages (last)", "ARS", "ARS, lean_rounds=False"):
        assert num(by[name]["requests over T"]) == 0
    for name, row in by.items():
        summarizes = "Summarization" in name or name.startswith("ARS")
        assert (num(row["summary rounds"]) > 0) == summarizes, name
        assert (row["fewest kept after a summary"] != "-") == summarizes, name
        share = num(row["answers in the final request"])
        assert 0 < share <= num(by["no limit"]["answers in the final request"])
    chat = raw["chat"]
    assert isinstance(chat, dict) and chat["2"]["ARS"]["answers"] == answers  # type: ignore[index]
    assert len(target_lines(section_text(report, "## L. Multi-session chat"))) == 3


def test_chat_section_skips_without_its_data(tmp_path: Path) -> None:
    """The chat data set is not shipped: without it L measures nothing and says why."""
    sys.path.insert(0, str(REPO_ROOT))
    try:
        from benchmarks import chat, run
        from benchmarks.common import Context
    finally:
        sys.path.remove(str(REPO_ROOT))
    missing = tmp_path / "absent.json"
    args = run.parse_args(["--chat-data", str(missing)])
    ctx = Context(args=args, runs=[], tmp=tmp_path, log=lambda s: None)
    data = chat.measure(ctx)
    assert data == {"skipped": data["skipped"]} and str(missing) in data["skipped"]
    text = "\n".join(chat.render(ctx, data))
    assert text.startswith("## L. Multi-session chat") and f"Skipped: {data['skipped']}." in text
    assert chat.raw(data) == {"chat": {"skipped": data["skipped"]}}
    quick = Context(args=run.parse_args(["--quick"]), runs=[], tmp=tmp_path, log=lambda s: None)
    assert chat.measure(quick) == {"skipped": "quick mode: pass --chat-data to measure it"}


def test_cold_section(smoke: tuple[str, dict[str, object], str]) -> None:
    """M in quick mode: every contender timed on fresh objects at both sizes, the first
    call of a fresh process for ARS and LangChain, a call at ~60% of T on a resumed
    thread without and with known sizes, a cold first L2 round for each, and the large
    call ran (L2, files written, memory sampled); one target line per target."""
    report, raw, _ = smoke
    calls, resumed, savers, rounds, approx = section_tables(report, "## M. Cold")
    # one agent turn on a checkpointed thread: each agent, both zones, both savers
    assert [row["agent"] for row in savers] == ["ARS middleware", "LangChain", "no middleware"]
    for row in savers:
        assert len(row) == 5 and all(num(v) > 0 for k, v in row.items() if k != "agent")
    names = ["ARS middleware", "ARS core", "LangChain", "deepagents"]
    assert [row["policy"] for row in calls] == names
    assert [row["policy"] for row in resumed] == names
    for row in resumed:
        for n in (100, 300):
            assert num(row[f"{n} messages, no known sizes (ms)"]) > 0
            assert num(row[f"{n} messages, stamped (ms)"]) > 0
    assert [row["policy"] for row in rounds] == names
    for row in calls:
        assert num(row["100 messages, new thread (ms)"]) > 0
        assert num(row["300 messages, new thread (ms)"]) > 0
    first = {row["policy"]: row["100 messages, first call of a process (ms)"] for row in calls}
    assert num(first["ARS middleware"]) > 0 and num(first["LangChain"]) > 0
    assert all(num(row["first L2 round (ms)"]) > 0 for row in rounds)
    # the same round with the approximate estimator, in turn with the exact core and LangChain
    assert [row["policy"] for row in approx] == [
        "ARS core, approximate estimator",
        "ARS core",
        "LangChain",
    ]
    assert all(num(row["first L2 round (ms)"]) > 0 for row in approx)
    cold = raw["cold"]
    assert isinstance(cold, dict)
    big = cold["big"]
    assert big["messages"] == 500 and big["level"] == "L2" and big["files"] > 1
    assert big["text"] > 1_000_000 and big["added"] >= 0
    assert cold["l2_rounds"] == 4  # one full turn of the four contenders' orders
    # the files of ARS's last cold round, written again alone: the archive and offloads
    files = cold["l2_files"]
    assert files["by_folder"]["conversation_history"] == 1
    assert files["files"] == sum(files["by_folder"].values()) > 1 and files["ms"] > 0
    assert f"What ARS's round writes: {files['files']} files" in section_text(report, "## M. Cold")
    assert len(target_lines(section_text(report, "## M. Cold"))) == 4


def test_soak_section(smoke: tuple[str, dict[str, object], str]) -> None:
    """N in quick mode: core and middleware each grew one conversation over 200 calls in
    a fresh process, ran L2 rounds, and are measured against the three targets."""
    report, raw, _ = smoke
    (rows,) = section_tables(report, "## N. Soak")
    assert [row["contender"].split(" (")[0] for row in rows] == ["ARS core", "ARS middleware"]
    soak = raw["soak"]
    assert isinstance(soak, dict) and soak["calls"] == 200
    for result in soak["results"].values():
        assert result["messages"] == 800 and result["rounds"] > 0
        assert result["chars"] > 400_000 and result["rss_end"] > 0
    # each contender's history built alone (no call), in its own process: the same text
    assert soak["alone"].keys() == soak["results"].keys()
    for kind, alone in soak["alone"].items():
        assert alone["chars"] == soak["results"][kind]["chars"] and alone["rounds"] == 0
        assert alone["rss_end"] > 0
    assert all(row["the history alone"].endswith("x") for row in rows)
    # the garbage collector's share: inside the slowest round, a full collection after the
    # first call and after the last, and a process with LangChain's agent imports alone
    for row, result in zip(rows, soak["results"].values(), strict=True):
        start, end = result["full_collect_ms"]
        assert 0 < start and 0 < end and "(GC " in row["slowest L2 round, last tenth (ms)"]
        assert all(call >= 0 and ms > 0 for call, ms in result["full_collections"])
    imports = soak["agent_imports"]
    assert imports["objects"] > 10_000 and imports["full_collect_ms"] > 0
    assert f"holds {imports['objects']:,} objects" in section_text(report, "## N. Soak")
    # the middleware's soak again in a process frozen after its first call
    frozen = soak["frozen"]
    assert frozen["kind"] == "middleware-frozen" and frozen["rounds"] > 0
    assert frozen["chars"] == soak["results"]["middleware"]["chars"]
    assert "freezes what it holds after its first call" in section_text(report, "## N. Soak")
    targets = target_lines(section_text(report, "## N. Soak"))
    # three per contender, and the middleware's RSS judged on ARS's own growth beside the
    # target as written (which counts LangChain's own messages too)
    assert len(targets) == 7
    own = [t for t in targets if t.startswith("Target (ARS's own growth")]
    assert len(own) == 1 and "ARS middleware" in own[0]
    assert (
        sum(t.startswith("Target, ARS middleware (`wrap_model_call`): RSS") for t in targets) == 1
    )


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
def test_the_l2_rounds_orders_balance_places_and_predecessors(n: int) -> None:
    """Section A's L2 rounds turn through orders of the policies in which each policy
    takes each place as often and follows each other policy as often (a round finds
    warm what the round before it touched)."""
    from benchmarks.common import balanced_orders

    orders = balanced_orders(n)
    assert all(sorted(order) == list(range(n)) for order in orders)
    places = Counter((p, i) for order in orders for i, p in enumerate(order))
    follows = Counter((a, b) for order in orders for a, b in itertools.pairwise(order))
    assert len(places) == n * n and len(set(places.values())) == 1
    assert len(follows) == n * (n - 1) and len(set(follows.values())) == 1


def test_the_cold_l2_rounds_run_in_turn_after_one_untimed_round_each() -> None:
    """Section M's first L2 rounds: every contender runs one untimed round first (a
    running worker), then one timed round each per repetition, in orders where each
    takes each place as often over a full turn."""
    from benchmarks.cold import _timed_in_turn

    calls: list[tuple[str, str]] = []  # (contender, "prepared" or "ran")

    def contender(name: str) -> Callable[[], Callable[[], None]]:
        def prepare() -> Callable[[], None]:
            calls.append((name, "prepared"))
            return lambda: calls.append((name, "ran"))

        return prepare

    names = ["ARS middleware", "ARS core", "LangChain", "deepagents"]
    timings = _timed_in_turn({name: contender(name) for name in names}, 8)
    ran = [name for name, what in calls if what == "ran"]
    assert ran[:4] == names  # the untimed round of each, first
    timed = ran[4:]
    assert all(len(timings[name].samples) == 8 for name in names) and len(timed) == 32
    turns = [timed[i : i + 4] for i in range(0, 32, 4)]
    assert all(sorted(turn) == sorted(names) for turn in turns)
    places = Counter((name, i) for turn in turns for i, name in enumerate(turn))
    assert set(places.values()) == {2}  # each place twice in two full turns of 4 orders
    # every timed call made from its own prepare (new messages, engine and folder)
    assert [what for _, what in calls[8:]] == ["prepared", "ran"] * 32
