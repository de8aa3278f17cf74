"""C. Estimator accuracy (against tiktoken o200k) and speed.

``approx`` vs tiktoken ``o200k_base`` / ``cl100k_base`` on the runs' messages,
JSON transcripts, Python code and Chinese prose.
"""

from __future__ import annotations

import argparse as _argparse_module
import json
import json.decoder as _json_decoder
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ars_core import ApproxEstimator, TiktokenEstimator, to_openai
from ars_core.replay import Run

from .common import REPO, Context, table

KEY = "C"
NEEDS: tuple[str, ...] = ()


def estimator_samples(runs: Sequence[Run]) -> dict[str, list[str]]:
    samples: dict[str, list[str]] = {
        "agent messages": [],
        "JSON": [],
        "code": [],
        "Chinese prose": [],
    }
    for run in runs:
        for m in run.messages:
            if len(m.text) >= 200:
                samples["agent messages"].append(m.text)
        doc = [to_openai(m) for m in run.messages[:40]]
        samples["JSON"].append(json.dumps(doc, ensure_ascii=False, indent=1))
    sources = sorted((REPO / "ars_core").glob("*.py"))
    sources += [Path(_argparse_module.__file__), Path(_json_decoder.__file__)]
    samples["code"] = [p.read_text(encoding="utf-8") for p in sources]
    for name in ("chinese.txt", "chinese_prose.txt"):
        path = REPO / "tests" / "data" / name
        if path.is_file():
            paras = [
                p for p in path.read_text(encoding="utf-8").split("\n\n") if len(p.strip()) >= 40
            ]
            samples["Chinese prose"].extend(paras)
    return {k: v for k, v in samples.items() if v}


def _errors(
    samples: dict[str, list[str]], runs: Sequence[Run], ests: dict[str, Any]
) -> dict[str, dict[str, list[float]]]:
    errors: dict[str, dict[str, list[float]]] = {}
    for cat, texts in samples.items():
        errors[cat] = {"approx": [], "cl100k": []}
        for t in texts:
            ref = ests["o200k"].count_text(t)
            if ref < 20:
                continue
            for name in ("approx", "cl100k"):
                errors[cat][name].append((ests[name].count_text(t) - ref) / ref)
    # whole runs, as requests (system + messages), fresh estimators (no cache)
    errors["whole runs"] = {"approx": [], "cl100k": []}
    for run in runs:
        ref = TiktokenEstimator("o200k_base").count(list(run.messages))
        for name, cls in (
            ("approx", lambda: ApproxEstimator()),
            ("cl100k", lambda: TiktokenEstimator("cl100k_base")),
        ):
            errors["whole runs"][name].append((cls().count(list(run.messages)) - ref) / ref)
    return errors


def _speed(corpus: Sequence[str], ests: dict[str, Any]) -> dict[str, float]:
    """MB/s of ``count_text`` over ``corpus`` (``count_text`` never caches), best of 3."""
    nbytes = sum(len(t.encode("utf-8")) for t in corpus)
    speed: dict[str, float] = {}
    for name, est in ests.items():
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            for t in corpus:
                est.count_text(t)
            best = min(best, time.perf_counter() - t0)
        speed[name] = nbytes / best / 1e6
    return speed


def measure(ctx: Context) -> dict[str, Any]:
    step = max(1, len(ctx.runs) // max(1, ctx.args.estimator_runs))
    runs = ctx.runs[::step][: ctx.args.estimator_runs]
    ests: dict[str, Any] = {
        "approx": ApproxEstimator(),
        "o200k": TiktokenEstimator("o200k_base"),
        "cl100k": TiktokenEstimator("cl100k_base"),
    }
    samples = estimator_samples(runs)
    errors = _errors(samples, runs, ests)
    corpus = [t for texts in samples.values() for t in texts]
    speed = _speed(corpus, ests)
    ctx.log("  estimator speed: " + ", ".join(f"{n} {v:.1f} MB/s" for n, v in speed.items()))
    counts = {cat: len(next(iter(v.values()))) for cat, v in errors.items()}
    nbytes = sum(len(t.encode("utf-8")) for t in corpus)
    return {"errors": errors, "speed": speed, "bytes": nbytes, "counts": counts}


def render(ctx: Context, data: dict[str, Any]) -> list[str]:
    lines = ["## C. Estimators against tiktoken o200k_base", ""]
    lines.append(
        'Relative error (estimate - o200k) / o200k per sample; "agent messages" are messages of '
        'at least 200 characters, "whole runs" count each run as one request (fresh estimators).'
    )
    lines.append("")
    rows = []
    for cat, errs in data["errors"].items():
        for name in ("approx", "cl100k"):
            e = errs[name]
            if not e:
                continue
            rows.append(
                [
                    cat,
                    name,
                    f"{data['counts'][cat]:,}",
                    f"{100 * statistics.mean(e):+.1f}%",
                    f"{100 * statistics.mean(abs(x) for x in e):.1f}%",
                    f"{100 * max(abs(x) for x in e):.1f}%",
                ]
            )
    lines += table(
        ["samples", "estimator", "n", "mean error", "mean abs error", "max abs error"],
        rows,
        "llrrrr",
    )
    lines.append("")
    lines += table(["estimator", "MB/s"], [[n, f"{v:.1f}"] for n, v in data["speed"].items()], "lr")
    lines.append("")
    lines.append(
        f"Speed: `count_text` over all {data['bytes'] / 1e6:.2f} MB of samples, best of 3."
    )
    lines.append("")
    return lines


def raw(data: dict[str, Any]) -> dict[str, Any]:
    return {"estimator_speed_mb_s": data["speed"]}
