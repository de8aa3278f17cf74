"""Fit ApproxEstimator's weights against tiktoken o200k_base, and report its error.

Run: python benchmarks/fit_approx.py [TRAJECTORY_DIR]

The recorded runs are split in two halves by a hash of their file name: the
weights are fitted (weighted least squares) on one half plus one half of each
extra kind of text (Chinese prose, Python source, JSON, hex hashes, base64,
long punctuation runs); the error is reported on the other halves, which the
fit never saw. Every message is counted the way the estimator counts it
(text, tool-call ids, names and arguments, per-message overhead), so the
per-run error is the error of a request holding the whole run.

Prints the weights to paste into ``ApproxEstimator.WEIGHTS`` and the report
(a markdown table; the estimator section of ``benchmarks/run.py`` puts it in
``benchmarks/results.md``). The worst undercount of a large request is where
``ApproxEstimator.error_margin`` comes from.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import inspect
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ars_core import estimate as E
from ars_core.messages import Message, read_messages

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_RUNS = ROOT.parent / "shared/data/trajectories"
#: weight of the extra kinds of text against the runs in the fit
KINDS_WEIGHT = 0.5
#: o200k packs up to 64 of one punctuation character in a token: the fit is
#: constrained so that a long run costs this much per character
LONG_RUN_TOKENS_PER_CHAR = 1 / 64

Piece = tuple[str, int]  # a text and its o200k count


def _pieces(message: Message) -> tuple[int, list[str]]:
    """The texts the estimator counts in a message, and its fixed overhead."""
    texts = [message.text] if message.text else []
    fixed = E.MESSAGE_OVERHEAD
    for call in message.tool_calls:
        texts += [call.id, call.name, E.json_text(dict(call.args))]
        fixed += E.TOOL_CALL_OVERHEAD
    if message.name:
        texts.append(message.name)
        fixed += 1
    if message.tool_call_id:
        texts.append(message.tool_call_id)
    return fixed, [t for t in texts if t]


def halves(names: Sequence[str]) -> dict[str, int]:
    """Every other run by name: 0 is fitted on, 1 reported on."""
    return {name: i % 2 for i, name in enumerate(sorted(names))}


def kinds(part: int, runs: dict[str, list[list[str]]]) -> dict[str, list[str]]:
    """Extra kinds of text, half ``part`` of each (0 fits, 1 reports)."""
    rnd = random.Random(part)
    out: dict[str, list[str]] = {}
    chinese: list[str] = []
    for name in ("chinese.txt", "chinese_prose.txt"):
        paras = [
            p for p in (ROOT / "tests/data" / name).read_text("utf-8").split("\n") if p.strip()
        ]
        chinese += paras[part::2]
    out["chinese"] = chinese
    modules = ["json.decoder", "textwrap", "inspect", "argparse", "ast", "dataclasses"]
    src = "".join(inspect.getsource(importlib.import_module(m)) for m in modules[part::2])
    out["python"] = [src[i : i + 3000] for i in range(0, len(src), 3000)]
    js = []
    half = halves(list(runs))
    for name in [n for n in sorted(runs) if half[n] == part][:20]:
        texts = [t for msg in runs[name] for t in msg][:30]
        js.append(json.dumps([{"role": "tool", "content": t[:400]} for t in texts], indent=1))
        js.append(
            json.dumps(
                {"items": [{"id": i, "value": t[:80], "ok": True} for i, t in enumerate(texts)]}
            )
        )
    out["json"] = js

    def digest() -> str:
        return hashlib.sha256(str(rnd.random()).encode()).hexdigest()[: rnd.choice([7, 40, 64])]

    out["hex"] = ["\n".join(f"{digest()}  file_{i}.py" for i in range(40)) for _ in range(20)]
    out["base64"] = [
        base64.b64encode(rnd.randbytes(rnd.randint(200, 3000))).decode() for _ in range(20)
    ]
    out["punct_runs"] = [
        (
            "=" * rnd.randint(10, 120)
            + " test session starts "
            + "=" * rnd.randint(10, 120)
            + "\n"
            + "-" * rnd.randint(5, 200)
            + "\n"
            + "#" * rnd.randint(3, 60)
            + "\n"
        )
        * rnd.randint(1, 5)
        for _ in range(20)
    ] + ["=" * 1000, "-" * 500 + "\n" + "*" * 300]
    return out


def load(traj: Path) -> tuple[dict[str, list[tuple[int, list[str]]]], Any]:
    from ars_core._tiktoken_offline import load_encoding

    runs = {p.name: [_pieces(m) for m in read_messages(p)] for p in sorted(traj.glob("*.jsonl.gz"))}
    if len(runs) < 2:  # one half to fit on, one to report on
        raise SystemExit(
            f"fit_approx: {traj} holds {len(runs)} recorded run(s) (*.jsonl.gz); "
            "the fit needs at least 2"
        )
    return runs, load_encoding("o200k_base")


def fit(rows: Sequence[tuple[tuple[int, ...], int, float]]) -> np.ndarray:
    """Weighted least squares, with chars + punct + punct_repeats weights summing to
    ``LONG_RUN_TOKENS_PER_CHAR`` (substituted: the repeats weight is solved for)."""
    names = list(E.APPROX_FEATURES)
    c, p, r = names.index("chars"), names.index("punct"), names.index("punct_repeats")
    X = np.array([row[0] for row in rows], float)
    y = np.array([row[1] for row in rows], float) - LONG_RUN_TOKENS_PER_CHAR * X[:, r]
    X[:, c] -= X[:, r]
    X[:, p] -= X[:, r]
    free = [i for i in range(len(names)) if i != r]
    w = np.sqrt(np.array([row[2] for row in rows], float))
    sol, *_ = np.linalg.lstsq(X[:, free] * w[:, None], y * w, rcond=None)
    coef = np.zeros(len(names))
    coef[free] = sol
    coef[r] = LONG_RUN_TOKENS_PER_CHAR - coef[c] - coef[p]
    return coef


def fit_and_report(
    traj: Path = DEFAULT_RUNS,
) -> tuple[np.ndarray, list[str], dict[str, float]]:
    """Fit the weights on one half and report on the other: ``(weights, table lines,
    measures)``; the measures are the table's figures by name (``run_mean``,
    ``run_worst``, ``message_mean``, ``undercount`` and each extra kind)."""
    runs, enc = load(traj)

    def tok(text: str) -> int:
        return len(enc.encode_ordinary(text))

    counted = {
        name: [(fixed, [(E.approx_features(t), tok(t)) for t in texts]) for fixed, texts in msgs]
        for name, msgs in runs.items()
    }
    texts_only = {n: [t for _, t in msgs] for n, msgs in runs.items()}
    kinds_fit = {
        k: [(E.approx_features(t), tok(t)) for t in v] for k, v in kinds(0, texts_only).items()
    }
    kinds_rep = {
        k: [(E.approx_features(t), tok(t)) for t in v] for k, v in kinds(1, texts_only).items()
    }

    half = halves(list(counted))
    fit_runs = [n for n in counted if half[n] == 0]
    rows: list[tuple[tuple[int, ...], int, float]] = []
    for name in fit_runs:
        total = sum(t for _, ps in counted[name] for _, t in ps) or 1
        rows += [(f, t, 1.0 / total / len(fit_runs)) for _, ps in counted[name] for f, t in ps]
    for samples in kinds_fit.values():
        total = sum(t for _, t in samples) or 1
        rows += [(f, t, KINDS_WEIGHT / total / len(kinds_fit)) for f, t in samples]
    coef = fit(rows)

    def estimate(features: tuple[int, ...]) -> int:
        return max(1, round(float(np.dot(coef, features))))

    run_errors: list[float] = []
    message_errors: list[float] = []
    undercount = 0.0  # the worst, on requests (run prefixes) of >= 4,096 tokens
    for name in (n for n in counted if half[n] == 1):
        est = true = 0
        for fixed, ps in counted[name]:
            e = fixed + sum(estimate(f) for f, _ in ps)
            t = fixed + sum(t for _, t in ps)
            est, true = est + e, true + t
            if t >= 20:
                message_errors.append((e - t) / t)
            if true >= 4096:
                undercount = max(undercount, (true - est) / true)
        run_errors.append((est - true) / true)
    kind_errors = {
        k: sum(estimate(f) for f, _ in v) / sum(t for _, t in v) - 1 for k, v in kinds_rep.items()
    }
    ra, ma = np.abs(run_errors), np.abs(message_errors)
    lines = [
        "| measured on the held-out half | value |",
        "|:---|---:|",
        f"| runs | {len(run_errors)} |",
        f"| mean abs error per run | {ra.mean():.2%} |",
        f"| worst run | {ra.max():.2%} |",
        f"| mean signed error per run | {np.mean(run_errors):+.2%} |",
        f"| messages of >= 20 tokens | {len(ma)} |",
        f"| mean abs error per message (>= 20 tokens) | {ma.mean():.2%} |",
        f"| 90th percentile abs error per message | {np.percentile(ma, 90):.2%} |",
        f"| worst undercount of a request of >= 4,096 tokens | {undercount:.2%} |",
    ]
    lines += [f"| {k} (whole held-out sample) | {v:+.2%} |" for k, v in kind_errors.items()]
    measures = {
        "run_mean": float(ra.mean()),
        "run_worst": float(ra.max()),
        "message_mean": float(ma.mean()),
        "undercount": undercount,
        **kind_errors,
    }
    return coef, lines, measures


def main(argv: Sequence[str]) -> None:
    args = [a for a in argv if not a.startswith("--")]
    coef, lines, _ = fit_and_report(Path(args[0]) if args else DEFAULT_RUNS)
    print("    WEIGHTS: tuple[float, ...] = (")
    for name, c in zip(E.APPROX_FEATURES, coef, strict=True):
        print(f"        {c:.4f},  # {name}")
    print("    )")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
