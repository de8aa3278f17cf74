"""M. Cold: every call on message objects nothing has seen (a deserialized checkpoint).

A LangGraph server (and any worker that loads a thread from its checkpointer)
builds new message objects at the start of every run, so no per-message cache
of an earlier call helps. Measured here, with fresh objects for every timed call
(built before the clock starts, as a checkpointer's deserialization would):

* a call below T at 1,000 and 10,000 messages on a thread new to a running
  worker (the engine and the process are warm, the messages are not): the ARS
  core (``Compressor.call``), the ARS middleware (``wrap_model_call``),
  LangChain's ``SummarizationMiddleware.before_model`` and deepagents'
  ``SummarizationMiddleware.wrap_model_call``;
* the same call as the first of a fresh process (imports done, not timed);
* the first L2 round at 1,000 messages on a history nothing has seen (a new
  engine or middleware and a new files folder each time) in a running worker:
  one untimed round each first (the process has run an L2 round before, as a
  worker serving other threads has; not on these messages), then the timed rounds
  of every contender in turn, in orders that turn with each repetition (a drift
  of the machine falls on all alike, and each follows each other as often); the
  same round with the approximate estimator (ARS's default without the
  ``tiktoken`` extra) in turn with the exact core and LangChain; and the files
  ARS's round writes, written again alone on the same disk;
* one agent turn on a checkpointed thread (InMemorySaver; SQLite in a new process):
  :mod:`benchmarks.cold_saver`;
* one call over 20,000 messages of about 150 MB (tool results enlarged) with
  files on the local disk: its time and the peak memory it adds, against the
  history's text.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from ars_core import (
    ApproxEstimator,
    Compressor,
    FsspecBackend,
    Message,
    SummaryConfig,
    message_from_dict,
    message_to_dict,
)
from ars_core.estimate import default_estimator
from ars_core.known_size import stamp_history

from .cold_saver import CONTENDERS, measure_savers
from .common import (
    LC,
    NO_TRIGGER_K,
    Context,
    InstantSummarizer,
    Timing,
    ars_middleware_available,
    balanced_orders,
    canned_handler,
    concatenated,
    fake_chat_model,
    fmt_ms,
    fmt_ratio,
    run_section_child,
    table,
    target,
)

KEY = "M"
NEEDS: tuple[str, ...] = ()
REPLY = Message(role="assistant", content="done")
BIG_MESSAGES = 20_000
BIG_BYTES = 150_000_000
#: timed first L2 rounds of each contender (on a history nothing has seen), in turn: three
#: full turns of the four contenders' orders
L2_ROUNDS = 12


def _sizes(ctx: Context) -> list[int]:
    return [100, 300] if ctx.args.quick else [1_000, 10_000]


def _reps(ctx: Context, n: int) -> int:
    return 3 if ctx.args.quick or n > 2_000 else 5


class Fresh:
    """One history and a way to make brand-new objects of it, core or LangChain: each
    batch has ids and texts of its own (a marker appended), as another thread's
    history would, so no cache keyed by id or by content serves it."""

    def __init__(self, runs: Sequence[Any], n: int) -> None:
        self.system, history = concatenated(runs, n)
        self.dicts = [message_to_dict(m) for m in history]
        self.lc_dicts: list[dict[str, Any]] | None = None
        self.n = n
        self.batch = 0
        #: whether the answers carry known sizes (:mod:`ars_core.known_size`)
        self.stamped = False

    def _marked(self, dicts: list[dict[str, Any]], data: bool) -> list[dict[str, Any]]:
        self.batch += 1
        out = []
        for d in dicts:
            d = json.loads(json.dumps(d))
            body = d["data"] if data else d
            if isinstance(body.get("content"), str):
                body["content"] += f" [{self.batch}]"
            if body.get("id"):
                body["id"] = f"b{self.batch}-{body['id']}"
            out.append(d)
        return out

    def core(self) -> list[Message]:
        if self.stamped:  # every answer stamped as ARS's call that produced it stamped it
            history = [message_from_dict(d) for d in self._marked(self.dicts, data=False)]
            stamped = stamp_history(history, default_estimator())
            return [message_from_dict(message_to_dict(m)) for m in stamped]  # nothing counted
        return [message_from_dict(d) for d in self._marked(self.dicts, data=False)]

    def langchain(self) -> list[Any]:
        from langchain_core.messages import messages_from_dict, messages_to_dict

        if self.stamped:
            lc = LC()
            return list(
                messages_from_dict(messages_to_dict([lc.from_core(m) for m in self.core()]))
            )
        if self.lc_dicts is None:
            lc = LC()
            history = [message_from_dict(d) for d in self.dicts]
            self.lc_dicts = messages_to_dict([lc.from_core(m) for m in history])
        return list(messages_from_dict(self._marked(self.lc_dicts, data=True)))


def _request(messages: list[Any], system: Any) -> Any:
    from langchain.agents.middleware.types import ModelRequest

    return ModelRequest(
        model=fake_chat_model(),
        messages=messages,
        system_message=system,
        tools=[],
        state={"messages": messages},
    )


def _timed(prepare: Callable[[], Callable[[], Any]], reps: int) -> Timing:
    """``reps`` samples of the call ``prepare()`` returns (``prepare`` is not timed)."""
    timing = Timing()
    for _ in range(reps):
        call = prepare()
        gc.collect()
        t0 = time.perf_counter()
        call()
        timing.samples.append(time.perf_counter() - t0)
    return timing


def _timed_in_turn(
    prepares: dict[str, Callable[[], Callable[[], Any]]], reps: int
) -> dict[str, Timing]:
    """``reps`` samples of each contender's call after one untimed call of each: one of
    each per repetition, in orders that turn with the repetitions
    (:func:`~benchmarks.common.balanced_orders`: each contender takes each place, and
    follows each other one, as often over each full turn)."""
    for prepare in prepares.values():
        prepare()()
    names = list(prepares)
    orders = balanced_orders(len(names))
    timings = {name: Timing() for name in names}
    for rep in range(reps):
        for i in orders[rep % len(orders)]:
            call = prepares[names[i]]()
            gc.collect()
            t0 = time.perf_counter()
            call()
            timings[names[i]].samples.append(time.perf_counter() - t0)
    return timings


def contenders(
    fresh: Fresh,
    *,
    threshold_k: float,
    folder: Path,
    middleware: bool,
    estimator: Callable[[], Any] | None = None,
) -> dict[str, Callable[[], Callable[[], Any]]]:
    """Each contender's ``prepare``: new message objects (and, for an L2 round, a new
    engine and files folder), returning the call to time. ``estimator`` makes the ARS
    core's estimator (its default when not given)."""
    from langchain.agents.middleware import SummarizationMiddleware as LCMiddleware
    from langchain_core.runnables.config import var_child_runnable_config

    lc = LC()
    system_lc = lc.from_core(fresh.system) if fresh.system is not None else None
    handler, _ = canned_handler()
    config = SummaryConfig(summary_threshold=threshold_k, summary_keep_messages=10)
    trigger = int(threshold_k * 1024)
    serial = iter(range(10**9))
    new_thread = threshold_k != NO_TRIGGER_K  # an L2 round: nothing of it seen before

    def chosen() -> dict[str, Any]:  # the core's estimator, a new one for each engine
        return {} if estimator is None else {"estimator": estimator()}

    core_engine = Compressor(config, backend=FsspecBackend(folder.as_uri()), **chosen())

    def core() -> Callable[[], Any]:
        k = next(serial)
        engine = core_engine
        if new_thread:
            engine = Compressor(
                config,
                backend=FsspecBackend((folder / f"core-{k}").as_uri()),
                summarizer=InstantSummarizer(),
                **chosen(),
            )
        messages = fresh.core()
        return lambda: engine.call(messages, lambda v: REPLY, system=fresh.system, thread=f"t{k}")

    out: dict[str, Callable[[], Callable[[], Any]]] = {}
    if middleware:
        from ars_langchain.middleware import ArsSummarizationMiddleware

        def make_mw(k: int) -> Any:
            return ArsSummarizationMiddleware(
                config,
                summarizer=InstantSummarizer(),
                backend=FsspecBackend((folder / f"mw-{k}").as_uri()),
                stream=False,
            )

        shared_mw = make_mw(-1)

        def ars_mw() -> Callable[[], Any]:
            k = next(serial)
            mw = make_mw(k) if new_thread else shared_mw
            request = _request(fresh.langchain(), system_lc)
            # the run's LangGraph config names a thread of its own (as a new thread's run
            # does): the middleware keeps a session per thread
            config = {"configurable": {"thread_id": f"cold-{k}"}}

            def call() -> Any:
                token = var_child_runnable_config.set(config)  # type: ignore[arg-type]
                try:
                    return mw.wrap_model_call(request, handler)
                finally:
                    var_child_runnable_config.reset(token)

            return call

        out["ARS middleware"] = ars_mw
    out["ARS core"] = core
    lc_mw = LCMiddleware(
        fake_chat_model(),
        trigger=("tokens", trigger),
        keep=("messages", 10),
        summarizer=lambda messages: "summary",
    )

    def langchain() -> Callable[[], Any]:
        messages = fresh.langchain()
        request = _request(messages, system_lc)

        def call() -> Any:
            lc_mw.before_model({"messages": messages}, None)  # type: ignore[arg-type]
            return handler(request)

        return call

    out["LangChain"] = langchain
    from deepagents.backends import FilesystemBackend
    from deepagents.middleware.summarization import SummarizationMiddleware as DAMiddleware

    def deepagents() -> Callable[[], Any]:
        k = next(serial)
        da = DAMiddleware(
            fake_chat_model(),
            backend=FilesystemBackend(root_dir=folder / f"da-{k}", virtual_mode=True),
            trigger=("tokens", trigger),
            keep=("messages", 10),
            summarizer=lambda messages: "summary",
        )
        request = _request(fresh.langchain(), system_lc)
        return lambda: da.wrap_model_call(request, handler)

    out["deepagents"] = deepagents
    return out


# ---------------------------------------------------------------- fresh processes


def _child(argv: Sequence[str]) -> None:
    """``python -m benchmarks.cold MODE N RUNS_DIR``: one measurement, printed as JSON."""
    mode, n, runs_dir = argv[0], int(argv[1]), Path(argv[2])
    from ars_core.replay import load_runs

    runs = load_runs([runs_dir])
    with tempfile.TemporaryDirectory(prefix="ars-cold-") as tmp:
        if mode == "big":
            print(json.dumps(_big_call(runs, n, Path(tmp))))
            return
        fresh = Fresh(runs, n)
        prepare = contenders(
            fresh, threshold_k=NO_TRIGGER_K, folder=Path(tmp), middleware=mode == "ARS middleware"
        )[mode]
        call = prepare()
        t0 = time.perf_counter()
        call()
        print(json.dumps({"seconds": time.perf_counter() - t0}))


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _big_call(runs: Sequence[Any], n: int, tmp: Path) -> dict[str, Any]:
    """One core call over ``n`` messages whose tool results are enlarged to about
    ``BIG_BYTES`` of text in all, T = 100K, files on the local disk."""
    system, history = concatenated(runs, n)
    base = sum(len(m.text) for m in history) or 1
    tool_chars = sum(len(m.text) for m in history if m.role == "tool") or 1
    factor = max(1, round((BIG_BYTES * n / BIG_MESSAGES - base) / tool_chars) + 1)
    big = [
        attrs.evolve(m, content=m.text * factor) if m.role == "tool" and m.text else m
        for m in history
    ]
    del history
    text = sum(len(m.text) for m in big)
    engine = Compressor(
        SummaryConfig(summary_threshold=100, summary_keep_messages=10),
        backend=FsspecBackend(tmp.as_uri()),
        summarizer=InstantSummarizer(),
    )
    gc.collect()
    before = _rss()
    peak = [before]
    done = threading.Event()

    def sample() -> None:  # the resident size while the call runs, every 5 ms
        while not done.wait(0.005):
            peak[0] = max(peak[0], _rss())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.perf_counter()
    outcome = engine.call(big, lambda v: REPLY, system=system, thread="big")
    seconds = time.perf_counter() - t0
    done.set()
    sampler.join()
    peak[0] = max(peak[0], _rss())
    files = sum(1 for p in tmp.rglob("*") if p.is_file())
    return {
        "messages": len(big),
        "text": text,
        "seconds": seconds,
        "added": peak[0] - before,
        "level": outcome.level,
        "files": files,
    }


def _subprocess(mode: str, n: int, runs_dir: Path) -> dict[str, Any]:
    return run_section_child("cold", mode, str(n), str(runs_dir))


# ---------------------------------------------------------------- the section


def measure(ctx: Context) -> dict[str, Any]:
    middleware = ars_middleware_available()
    runs_dir = ctx.runs_dir
    assert runs_dir is not None
    per_call: dict[str, dict[int, float]] = {}
    for n in _sizes(ctx):
        fresh = Fresh(ctx.runs, n)
        prepares = contenders(
            fresh, threshold_k=NO_TRIGGER_K, folder=ctx.tmp / f"cold-{n}", middleware=middleware
        )
        for name, prepare in prepares.items():
            prepare()()  # the process and the engine warm, not these messages
            per_call.setdefault(name, {})[n] = _timed(prepare, _reps(ctx, n)).median_ms
        ctx.log(
            f"  cold call at {n} messages: "
            + ", ".join(f"{k} {v[n]:.1f} ms" for k, v in per_call.items())
        )
    first_n = _sizes(ctx)[0]
    first: dict[str, float] = {}
    processes = ["ARS middleware" if middleware else "ARS core", "LangChain"]
    for name in per_call if not ctx.args.quick else processes:
        samples = [
            _subprocess(name, first_n, runs_dir)["seconds"]
            for _ in range(1 if ctx.args.quick else 3)
        ]
        first[name] = sorted(samples)[len(samples) // 2] * 1000
    ctx.log(
        "  first call of a fresh process: " + ", ".join(f"{k} {v:.1f} ms" for k, v in first.items())
    )

    resumed = _resumed(ctx, middleware)
    saver_n = _sizes(ctx)[0]
    threads = 3 if ctx.args.quick else 6
    savers = measure_savers(Fresh(ctx.runs, saver_n), threads, ctx.tmp / "savers")
    for zone, row in savers.items():
        ctx.log(
            f"  a turn on a checkpointed thread, {zone}: "
            + ", ".join(f"{k} {v:.1f} ms" for k, v in row.items())
        )

    l2_n = ctx.args.l2_size
    fresh = Fresh(ctx.runs, l2_n)
    rounds = contenders(
        fresh, threshold_k=ctx.args.l2_threshold, folder=ctx.tmp / "cold-l2", middleware=middleware
    )
    l2_rounds = 4 if ctx.args.quick else L2_ROUNDS
    l2 = {name: timing.median_ms for name, timing in _timed_in_turn(rounds, l2_rounds).items()}
    ctx.log("  cold first L2 round: " + ", ".join(f"{k} {v:.1f} ms" for k, v in l2.items()))
    written = _round_files(ctx.tmp / "cold-l2", ctx.tmp / "cold-l2-again")
    # the same round with the approximate estimator (ARS's default without ars[tiktoken]),
    # in turn with the exact core and LangChain
    approx = contenders(
        fresh,
        threshold_k=ctx.args.l2_threshold,
        folder=ctx.tmp / "cold-l2-approx",
        middleware=False,
        estimator=ApproxEstimator,
    )
    trio = {
        APPROX_CORE: approx["ARS core"],
        "ARS core": rounds["ARS core"],
        "LangChain": rounds["LangChain"],
    }
    l2_approx = {name: t.median_ms for name, t in _timed_in_turn(trio, l2_rounds).items()}
    ctx.log("  the same, in turn: " + ", ".join(f"{k} {v:.1f} ms" for k, v in l2_approx.items()))
    ctx.log(
        f"  a round's files: {written['files']} ({written['bytes'] / 1e6:.1f} MB), "
        f"written again alone in {written['ms']:.1f} ms"
    )

    big_n = 500 if ctx.args.quick else BIG_MESSAGES
    big = _subprocess("big", big_n, runs_dir)
    ctx.log(f"  one call over {big['messages']} messages: {big['seconds']:.1f} s")
    return {
        "sizes": _sizes(ctx),
        "per_call": per_call,
        "first": first,
        "first_n": first_n,
        "l2": l2,
        "l2_n": l2_n,
        "l2_rounds": l2_rounds,
        "l2_threshold": ctx.args.l2_threshold,
        "l2_files": written,
        "l2_approx": l2_approx,
        "big": big,
        "resumed": resumed,
        "savers": savers,
        "saver_n": saver_n,
    }


#: the ARS core with the approximate estimator (the default without ``ars[tiktoken]``)
APPROX_CORE = "ARS core, approximate estimator"
#: times the files of one cold round are written again alone (the median is reported)
WRITE_AGAIN = 5


def _round_files(rounds: Path, again: Path) -> dict[str, Any]:
    """What the ARS core's last cold L2 round wrote in ``rounds`` (its files, by
    folder, and their bytes), and how long writing the same files takes alone: one
    ``write_files`` call into a new folder under ``again`` on the same disk, each file
    durable as the round makes it (median of :data:`WRITE_AGAIN`)."""
    folder = max((p for p in rounds.glob("core-*") if p.is_dir()), key=lambda p: int(p.name[5:]))
    files = {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }
    by_folder: dict[str, int] = {}
    for path in files:
        kind = path.split("/")[-2] if "/" in path else "."
        by_folder[kind] = by_folder.get(kind, 0) + 1
    timing = Timing()
    for k in range(WRITE_AGAIN):
        backend = FsspecBackend((again / f"w{k}").as_uri())
        gc.collect()
        t0 = time.perf_counter()
        errors = backend.write_files((path, [data]) for path, data in files.items())
        timing.samples.append(time.perf_counter() - t0)
        assert not errors, errors
    return {
        "files": len(files),
        "by_folder": by_folder,
        "bytes": sum(map(len, files.values())),
        "ms": timing.median_ms,
    }


#: where in T the history of a resumed thread's call is (its exact count / T)
ZONE = 0.6


def _resumed(ctx: Context, middleware: bool) -> dict[str, dict[str, float]]:
    """A call at ~60% of T on a thread resumed cold (fresh objects; its UTF-8 bound
    above T, so the count decides), the answers without and with known sizes:
    ``{"name/stamped"|"name/plain": {n: ms}}``."""
    out: dict[str, dict[str, float]] = {}
    for n in _sizes(ctx):
        fresh = Fresh(ctx.runs, n)
        exact = default_estimator().count(fresh.core())
        threshold_k = exact / ZONE / 1024
        for stamped in (False, True):
            fresh.stamped = stamped
            folder = ctx.tmp / f"cold-zone-{n}-{stamped}"
            prepares = contenders(
                fresh, threshold_k=threshold_k, folder=folder, middleware=middleware
            )
            for name, prepare in prepares.items():
                prepare()()
                key = f"{name}/{'stamped' if stamped else 'plain'}"
                out.setdefault(key, {})[str(n)] = _timed(prepare, _reps(ctx, n)).median_ms
        ctx.log(
            f"  resumed call at {ZONE:.0%} of T, {n} messages: "
            + ", ".join(f"{k} {v[str(n)]:.1f} ms" for k, v in out.items())
        )
    return out


def _render_resumed(sizes: Sequence[int], resumed: dict[str, dict[str, float]]) -> list[str]:
    names = list(dict.fromkeys(k.split("/")[0] for k in resumed))
    rows = [
        [
            name,
            *(
                fmt_ms(resumed[f"{name}/{kind}"][str(n)])
                for n in sizes
                for kind in ("plain", "stamped")
            ),
        ]
        for name in names
    ]
    head = [f"{n:,} messages, {kind} (ms)" for n in sizes for kind in ("no known sizes", "stamped")]
    lines = [
        f"A call at ~{ZONE:.0%} of T on a thread resumed cold (fresh objects; the history's "
        "UTF-8 bound above T, so its count decides): the answers without known sizes, and "
        "stamped as ARS's calls stamp them (ars_core.known_size; LangChain and deepagents "
        "read no stamp, same messages):",
        "",
        *table(["policy", *head], rows),
        "",
    ]
    return lines


def _render_savers(n: int, savers: dict[str, dict[str, float]]) -> list[str]:
    """The agent turns on checkpointed threads (:mod:`benchmarks.cold_saver`)."""
    lines = [
        f"One agent turn on a checkpointed thread of {n:,} messages, resumed cold: a LangChain "
        "v1 agent (`create_agent`, a scripted model, no tools) with each middleware or none; "
        "the whole `invoke` is timed (the checkpoint read and deserialized, the middleware, the "
        "model call, the checkpoint written), by a new agent in the running process on an "
        "`InMemorySaver`, and by a new process on a SQLite checkpointer (the median over the "
        "threads, the first thread of each process left out). Each thread was grown by one run "
        "of the same agent, so its answer is stamped as ARS stamps answers where ARS ran:",
        "",
    ]
    zones = list(savers)
    kinds = ["InMemorySaver", "SQLite, new process"]
    rows = [
        [name, *(fmt_ms(savers[z][f"{name} / {kind}"]) for z in zones for kind in kinds)]
        for name in CONTENDERS
    ]
    header = ["agent", *(f"{z}, {kind} (ms)" for z in zones for kind in kinds)]
    return [*lines, *table(header, rows), ""]


def _rounds_table(medians: dict[str, float]) -> list[str]:
    """The first L2 round of each contender (ms) and its ratio to LangChain's."""
    return table(
        ["policy", "first L2 round (ms)", "vs LangChain"],
        [[k, fmt_ms(v), fmt_ratio(v, medians["LangChain"])] for k, v in medians.items()],
    )


def render(ctx: Context, data: dict[str, Any]) -> list[str]:
    sizes = data["sizes"]
    per_call = data["per_call"]
    ars = "ARS middleware" if "ARS middleware" in per_call else "ARS core"
    lines = ["## M. Cold: fresh message objects every call (a deserialized checkpoint)", ""]
    lines += [(__doc__ or "").split("\n\n", 1)[1].strip(), ""]
    rows = [
        [name, *(fmt_ms(v[n]) for n in sizes), fmt_ms(data["first"].get(name, float("nan")))]
        for name, v in per_call.items()
    ]
    lines += table(
        [
            "policy",
            *(f"{n:,} messages, new thread (ms)" for n in sizes),
            f"{data['first_n']:,} messages, first call of a process (ms)",
        ],
        rows,
    )
    lines.append("")
    for n in sizes:
        ratio = per_call[ars][n] / per_call["LangChain"][n]
        lines.append(
            target(
                f"{ars} cold call at {n:,} messages <= 2x LangChain's cold before_model "
                f"({fmt_ms(per_call[ars][n])} ms vs {fmt_ms(per_call['LangChain'][n])} ms: "
                f"{ratio:.2f}x)",
                ratio <= 2.0,
            )
        )
    lines.append("")
    if "resumed" in data:
        lines += _render_resumed(sizes, data["resumed"])
    if "savers" in data:
        lines += _render_savers(data["saver_n"], data["savers"])
    l2 = data["l2"]
    lines += [
        f"The first L2 round on {data['l2_n']:,} messages nothing has seen "
        f"(T = {data['l2_threshold']:g}K, a new engine/middleware and files folder each time), "
        "in a running worker: one untimed round of each first (not on these messages), then "
        f"the median of {data.get('l2_rounds', L2_ROUNDS)} rounds each, every contender "
        "in turn, in orders that turn with each repetition (each takes each place as often):",
        "",
    ]
    lines += _rounds_table(l2)
    lines.append("")
    ratio = l2[ars] / l2["LangChain"]
    lines.append(
        target(
            f"{ars} cold first L2 round <= 5x LangChain's and <= 50 ms "
            f"({fmt_ms(l2[ars])} ms, {ratio:.1f}x)",
            ratio <= 5 and l2[ars] <= 50,
        )
    )
    if "l2_approx" in data:
        la = data["l2_approx"]
        lines += [
            "",
            "Without the `tiktoken` extra ARS counts with its approximate estimator; the same "
            f"round with it, {data.get('l2_rounds', L2_ROUNDS)} rounds each in turn with the "
            "exact core and LangChain:",
            "",
        ]
        lines += _rounds_table(la)
    if "l2_files" in data:
        w = data["l2_files"]
        kinds = ", ".join(f"{n} in {kind}/" for kind, n in sorted(w["by_folder"].items()))
        lines += [
            "",
            f"What ARS's round writes: {w['files']} files ({kinds}; {w['bytes'] / 1e6:.1f} MB): "
            "the history archive and a file for every tool result above the offload limit "
            "(SPEC R12: every such result in the effective messages, those the round then "
            "summarizes included); deepagents writes its history file, LangChain nothing. "
            f"Writing the same files alone, with the same durability, into a new folder on "
            f"the same disk takes {w['ms']:.1f} ms here (median of {WRITE_AGAIN}): most of "
            "that is the file system creating each file, which varies with the disk.",
        ]
    big = data["big"]
    lines += [
        "",
        f"One core call over {big['messages']:,} messages, {big['text'] / 1e6:.0f} MB of text "
        f"(T = 100K, files on the local disk, {big['files']:,} files written, level "
        f"{big['level']}): {big['seconds']:.1f} s, peak memory added "
        f"{big['added'] / 1e6:.0f} MB ({big['added'] / max(1, big['text']):.1f}x the text).",
        "",
        target(
            "20,000 messages / ~150 MB in one call <= 5 s and peak memory <= 2x the text",
            big["seconds"] <= 5 and big["added"] <= 2 * big["text"],
        ),
        "",
    ]
    return lines


def raw(data: dict[str, Any]) -> dict[str, Any]:
    return {"cold": data}


if __name__ == "__main__":
    _child(sys.argv[1:])
