#!/usr/bin/env python
"""ARS side by side with its peers, on recorded agent runs; a markdown report.

    python benchmarks/run.py                      # the full report (a few minutes)
    python benchmarks/run.py --quick              # small sizes, a few runs (seconds)
    python benchmarks/run.py --out report.md      # also write the report to a file
    python benchmarks/run.py --sections B         # only some sections
    nox -s benchmarks -- --quick

Sections, one module each in this folder:

A. ``overhead``: per-call overhead of ARS (its LangChain middleware, and the bare
   core ``Compressor.call``), LangChain's and deepagents' ``SummarizationMiddleware``
   below any trigger, at several history lengths; and one L2 round at 1,000
   messages with an instant fake summarizer.
B. ``tokens``: tokens sent over whole replayed runs at a few thresholds: no
   compression, ARS (L1+L2), LangChain summarization, observation masking,
   deepagents, every request counted with tiktoken ``o200k_base``.
C. ``estimators``: estimator accuracy (against o200k) and speed.
D. ``flatness``: the core's per-call overhead (median, p95) against history
   length below the threshold must stay flat (5,000 messages <= 1.5x the cost at
   500).
E. ``cache``: prompt-cache cost: cache-hit share, effective cost as providers bill
   it (cached input at 0.1x) and prefix rewrites outside summary rounds.
F. ``retention``: the share of summarized views that keep at least 90% of the
   task statement, ARS and the peers with the same summarizer.
G. ``budget``: ARS's summary input budget (T/2, T/4, T/8) against task
   retention, summary-call tokens and effective cost.
H. ``estimator_kinds``: estimator speed and error per content kind, and the
   approximate estimator's held-out fit report (``fit_approx.py``).
I. ``loop_stall``: the largest event-loop stall while ``acall`` handles a new
   10 MB tool result (a ticking coroutine measures it).
J. ``formats``: the largest runs estimated in OpenAI, Anthropic-block and
   LangChain-v1-block form, and images charged against the providers' examples.
K. ``llamaindex_flat``: the LlamaIndex memory's per-call ``get()`` overhead against
   history length below the threshold (5,000 messages <= 1.5x the cost at 500).
L. ``chat``: long multi-session chats (``--chat-data``, LoCoMo's format; not shipped):
   the answers each policy keeps in the final request, messages kept after a
   summary, summary rounds and tokens, at ``--chat-thresholds``.
M. ``cold``: every call on fresh message objects (a deserialized checkpoint): a call
   below T at 1,000 and 10,000 messages (new thread, and first call of a process),
   the first L2 round on an unseen history, one call over 20,000 messages / ~150 MB.
N. ``soak``: one conversation grown over 2,000 calls (core and middleware, each in a
   fresh process): RSS growth against the history's text (<= 2x), the median call of
   the last tenth against the first (<= 1.2x), the slowest late L2 round (<= 50 ms).

The peers are used through their public constructors; nothing of theirs is
copied.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# run as a script: import the section modules as the ``benchmarks`` package, not as
# top-level modules from this folder
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
if str(REPO) not in sys.path:  # runnable from a checkout without installing
    sys.path.insert(0, str(REPO))

from ars_core.replay import SAMPLE_DIR, load_runs  # noqa: E402
from benchmarks import (  # noqa: E402
    budget,
    cache,
    chat,
    cold,
    estimator_kinds,
    estimators,
    flatness,
    formats,
    llamaindex_flat,
    loop_stall,
    overhead,
    retention,
    soak,
    tokens,
)
from benchmarks.common import DEFAULT_RUNS_DIR, Context  # noqa: E402

#: every section, in report order
SECTIONS: tuple[ModuleType, ...] = (
    overhead,
    tokens,
    estimators,
    flatness,
    cache,
    retention,
    budget,
    estimator_kinds,
    loop_stall,
    formats,
    llamaindex_flat,
    chat,
    cold,
    soak,
)


def environment(runs_dir: Path, n_runs: int) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    def v(pkg: str) -> str:
        try:
            return version(pkg)
        except PackageNotFoundError:
            return "not installed"

    return {
        "machine": f"{platform.machine()}, {platform.processor() or platform.system()}, "
        f"Python {platform.python_version()}",
        "versions": ", ".join(
            f"{p} {v(p)}"
            for p in ("ars", "langchain", "langchain-core", "langgraph", "deepagents", "tiktoken")
        ),
        "runs": f"{n_runs} recorded runs from {runs_dir}",
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--runs-dir",
        type=Path,
        default=None,
        help=f"recorded runs (default {DEFAULT_RUNS_DIR}, else the samples in ars_core/data)",
    )
    p.add_argument("--sizes", default="100,500,1000,5000", help="history lengths for A and D")
    p.add_argument(
        "--repeat", type=int, default=30, help="timed calls per cell in A (default %(default)s)"
    )
    p.add_argument("--warmup", type=int, default=3, help="untimed calls before each cell")
    p.add_argument("--l2-size", type=int, default=1000, help="history length of the L2 round")
    p.add_argument(
        "--l2-repeat", type=int, default=60, help="L2 rounds timed (the median is reported)"
    )
    p.add_argument("--l2-threshold", type=float, default=16, help="threshold (K) of the L2 round")
    p.add_argument("--thresholds", default="8,16,32", help="thresholds (K tokens) for B")
    p.add_argument("--token-runs", type=int, default=20, help="how many (largest) runs B replays")
    p.add_argument("--estimator-runs", type=int, default=30, help="how many runs C samples")
    p.add_argument(
        "--keep", type=int, default=10, help="messages kept by the summarizing policies in B"
    )
    p.add_argument(
        "--chat-data",
        type=Path,
        default=None,
        help=f"the chats of L (default {chat.DEFAULT_CHAT_DATA}; in --quick only when given)",
    )
    p.add_argument("--chat-thresholds", default="8,16", help="thresholds (K tokens) for L")
    p.add_argument(
        "--sections",
        default=",".join(s.KEY for s in SECTIONS),
        help="which sections to run (D needs A's measurements, so A is shown too)",
    )
    p.add_argument(
        "--ars",
        choices=("auto", "middleware", "core"),
        default="auto",
        help="measure ARS in A through its LangChain middleware (auto: when importable)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: sizes 50,100, 5 calls, 2 runs, threshold 4K",
    )
    p.add_argument(
        "--soak-calls", type=int, default=None, help="calls of the soak (N; default 2,000)"
    )
    p.add_argument("--out", type=Path, default=None, help="also write the markdown report here")
    p.add_argument(
        "--json", type=Path, default=None, help="also write the raw numbers here as JSON"
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    args = p.parse_args(argv)
    if args.quick:
        args.sizes, args.repeat, args.warmup = "50,100", 5, 1
        args.l2_size, args.l2_repeat, args.l2_threshold = 100, 3, 2
        args.thresholds, args.token_runs, args.estimator_runs = "4", 2, 2
        args.chat_thresholds = "2"
    return args


def _measured(chosen: set[str]) -> list[ModuleType]:
    """The chosen sections and the ones they need, in report order."""
    keys = set(chosen)
    for section in SECTIONS:
        if section.KEY in keys:
            keys.update(section.NEEDS)
    return [s for s in SECTIONS if s.KEY in keys]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    log: Callable[[str], None] = (
        (lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    )
    runs_dir = args.runs_dir or (DEFAULT_RUNS_DIR if DEFAULT_RUNS_DIR.is_dir() else SAMPLE_DIR)
    runs = load_runs([runs_dir])
    chosen = {s.strip().upper() for s in args.sections.split(",") if s.strip()}
    lines = ["# ARS benchmark report", ""]
    lines += [f"- {k}: {v}" for k, v in environment(runs_dir, len(runs)).items()]
    lines.append("")
    raw: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ars-bench-") as tmp_name:
        ctx = Context(args=args, runs=runs, tmp=Path(tmp_name), log=log, runs_dir=runs_dir)
        for section in _measured(chosen):
            log((section.__doc__ or section.KEY).split("\n")[0])
            data = ctx.results[section.KEY] = section.measure(ctx)
            raw.update(section.raw(data))
        for section in _measured(chosen):
            lines += section.render(ctx, ctx.results[section.KEY])
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps(raw, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
