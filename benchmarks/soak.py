"""N. Soak: one conversation grown call after call, memory and time per call.

Each call adds a user turn, a tool call, its result (300 or 3,000 characters, in
turn) and an answer; T = 8K, keep 10, files on the local disk, an instant
summarizer, and every L2 round persisted as an adapter does (the event into the
next call's state, trimmed messages replaced). ARS core (``Compressor.call``) and
the LangChain middleware (``wrap_model_call``), each in a fresh process.

Targets: RSS growth at most 2x the history's text; the median call of the last
tenth at most 1.2x the median of the first tenth; the slowest L2 round in the last
tenth (about 8,000 messages at 2,000 calls) at most 50 ms. The flatness is judged on
the median of :data:`REPEATS` runs' ratios (fresh processes, the contenders in turn),
each divided by the same ratio of a fixed reference workload timed before each call
(the machine's drift taken out; the ratios as timed are reported too); the
middleware's RSS is judged as written and, on a line of its own, on ARS's own growth
beyond LangChain's messages. The garbage collector's time inside the slowest round,
one full collection after the first and after the last call, and one in a process
that only imports LangChain's agent middleware are reported beside (a full collection
falling in a round costs what the whole process holds, imports included).

Run alone: ``python benchmarks/run.py --sections N [--soak-calls 2000]``, or one
contender: ``python -m benchmarks.soak core 2000``.
"""

from __future__ import annotations

import gc
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .common import Context, InstantSummarizer, fmt_ms, run_section_child, table

KEY = "N"
NEEDS: tuple[str, ...] = ()

#: calls of a full soak (4 messages each)
CALLS = 2_000
#: the entry threshold (K tokens) and the messages kept
THRESHOLD_K = 8
KEEP = 10
#: tool-result sizes, in turn (characters)
RESULT_CHARS = (300, 3_000)
#: targets
RSS_PER_TEXT = 2.0
LAST_OVER_FIRST = 1.2
SLOWEST_ROUND_MS = 50.0
#: runs (fresh processes) whose ratios of last to first tenth give the judged flatness
REPEATS = 5
#: the suffix of a baseline run: the contender's history built with no call
ALONE = "-alone"
#: the run that only imports LangChain's agent middleware (a full collection's floor there)
AGENT_IMPORTS = "langchain-agent-imports"
#: the suffix of a run whose process freezes what it holds after its first call
#: (``gc.freeze()``, as a server does once started: the imports leave every collection)
FROZEN = "-frozen"

_WORDS = (
    "build test module error value config path result index token cache thread agent "
    "request summary window history message file write read server client handler "
    "event round budget layout stream offset line column parse check report change"
).split()


def _rss_bytes() -> int:
    """The process's resident set now (Linux ``/proc``), 0 where unknown."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _text(rng: random.Random, chars: int, tag: str) -> str:
    out: list[str] = [tag]
    size = len(tag)
    while size < chars:
        word = rng.choice(_WORDS) + str(rng.randrange(1000))
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:chars]


def _turn(rng: random.Random, i: int) -> list[dict[str, Any]]:
    """One call's new messages, as OpenAI-format dicts (converted per contender)."""
    call_id = f"call_{i}"
    result = RESULT_CHARS[i % len(RESULT_CHARS)]
    return [
        {"role": "user", "id": f"u{i}", "content": _text(rng, 200, f"request {i}:")},
        {
            "role": "assistant",
            "id": f"a{i}",
            "content": "",
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": "bash",
                        "arguments": json.dumps({"command": f"make target{i} && ./run {i}"}),
                    },
                }
            ],
        },
        {
            "role": "tool",
            "id": f"t{i}",
            "tool_call_id": call_id,
            "name": "bash",
            "content": _text(rng, result, f"output {i}:"),
        },
        {"role": "assistant", "id": f"r{i}", "content": _text(rng, 400, f"answer {i}:")},
    ]


def _chars(messages: list[dict[str, Any]]) -> int:
    total = 0
    for m in messages:
        total += len(m.get("content") or "")
        for c in m.get("tool_calls") or ():
            total += len(c["function"]["arguments"])
    return total


class _Core:
    def __init__(self, root: Path) -> None:
        from ars_core import Compressor, FsspecBackend, Message, SummaryConfig

        self.compressor = Compressor(
            SummaryConfig(summary_threshold=THRESHOLD_K, summary_keep_messages=KEEP),
            backend=FsspecBackend(root.as_uri()),
            summarizer=InstantSummarizer(),
        )
        self.state: list[Any] = []
        self.event: Any = None
        self.reply = Message(role="assistant", content="done")

    def add(self, turn: list[dict[str, Any]]) -> None:
        from ars_core import from_openai

        self.state.extend(from_openai(m) for m in turn)

    def call(self) -> str | None:
        outcome = self.compressor.call(self.state, lambda view: self.reply, event=self.event)
        update = outcome.update
        if update is not None:
            for index, message in update.replaced:
                self.state[index] = message
            if update.event is not None or update.clear_event:
                self.event = update.event
        return outcome.level


class _Middleware:
    def __init__(self, root: Path) -> None:
        from langchain.agents.middleware.types import ModelResponse
        from langchain_core.messages import AIMessage

        from ars_core import FsspecBackend, SummaryConfig
        from ars_langchain.middleware import ArsSummarizationMiddleware

        from .common import fake_chat_model

        self.levels: list[str] = []
        self.mw = ArsSummarizationMiddleware(
            SummaryConfig(summary_threshold=THRESHOLD_K, summary_keep_messages=KEEP),
            summarizer=InstantSummarizer(),
            backend=FsspecBackend(root.as_uri()),
            stream=False,
            on_event=self._event,
        )
        self.model = fake_chat_model()
        self.response = ModelResponse(result=[AIMessage(content="done", id="canned")])
        self.state: dict[str, Any] = {"messages": []}

    def _event(self, event: Any) -> None:
        if event.phase == "completed":
            self.levels.append(event.level)

    def add(self, turn: list[dict[str, Any]]) -> None:
        from langchain_core.messages import convert_to_messages

        self.state["messages"] = [*self.state["messages"], *convert_to_messages(turn)]

    def call(self) -> str | None:
        from langchain.agents.middleware.types import ExtendedModelResponse, ModelRequest

        messages = self.state["messages"]
        request = ModelRequest(
            model=self.model,
            messages=messages,
            system_message=None,
            tools=[],
            state=self.state,
        )
        before = len(self.levels)
        result = self.mw.wrap_model_call(request, lambda req: self.response)
        if isinstance(result, ExtendedModelResponse) and result.command is not None:
            values = result.command.update or {}
            for key, value in values.items():
                if key == "messages":  # replaced by id, as add_messages does
                    by_id = {m.id: m for m in value}
                    self.state["messages"] = [by_id.get(m.id, m) for m in messages]
                else:
                    self.state[key] = value
        return self.levels[-1] if len(self.levels) > before else None


class _HistoryAlone:
    """The same history in a contender's message objects, with no call: what the
    history itself takes (``core``: ARS's records; ``middleware``: LangChain's
    messages, a new list each turn as the middleware's state gets)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.state: list[Any] = []

    def add(self, turn: list[dict[str, Any]]) -> None:
        if self.kind == "core":
            from ars_core import from_openai

            self.state.extend(from_openai(m) for m in turn)
        else:
            from langchain_core.messages import convert_to_messages

            self.state = [*self.state, *convert_to_messages(turn)]

    def call(self) -> str | None:
        return None


def agent_imports() -> dict[str, Any]:
    """What one full collection takes in a process that imports LangChain's agent
    middleware types (what any v1 agent middleware imports) and nothing of ARS: its
    objects and the median of three full collections (ms)."""
    import langchain.agents.middleware.types  # noqa: F401

    gc.collect()
    times = sorted(_full_collect_ms() for _ in range(3))
    return {"kind": AGENT_IMPORTS, "objects": len(gc.get_objects()), "full_collect_ms": times[1]}


def soak(kind: str, calls: int) -> dict[str, Any]:
    """Run one contender's soak in this process (``core``, ``middleware``, or
    ``<kind>-alone``: that form's history built with no call); its measurements."""
    if kind == AGENT_IMPORTS:
        return agent_imports()
    rng = random.Random(22)
    with tempfile.TemporaryDirectory(prefix="ars-soak-") as tmp:
        runner: _Core | _Middleware | _HistoryAlone
        if kind.endswith(ALONE):
            runner = _HistoryAlone(kind.removesuffix(ALONE))
        else:
            contender = kind.removesuffix(FROZEN)
            runner = (_Core if contender == "core" else _Middleware)(Path(tmp))
        # a first turn and call outside the measurement: imports, encodings loaded
        first = _turn(rng, 0)
        runner.add(first)
        runner.call()
        chars = _chars(first)
        gc.collect()
        if kind.endswith(FROZEN):
            gc.freeze()
        rss0 = _rss_bytes()
        start_ms = _full_collect_ms()  # the imports' objects, a 4-message history
        times: list[float] = []
        refs: list[float] = []  # the reference workload just before each call
        levels: list[str | None] = []
        collecting: list[float] = []  # the garbage collections' time inside each call
        with _Collections() as collections:
            for i in range(1, calls):
                turn = _turn(rng, i)
                chars += _chars(turn)
                runner.add(turn)
                t0 = time.perf_counter()
                _reference()
                collections.call, collections.inside = i, 0.0
                t1 = time.perf_counter()
                levels.append(runner.call())
                times.append(time.perf_counter() - t1)
                collecting.append(collections.inside)
                collections.call = None
                refs.append(t1 - t0)
        gc.collect()
        rss1 = _rss_bytes()
        end_ms = _full_collect_ms()  # and the whole history
    tenth = max(1, len(times) // 10)
    window = zip(times[-tenth:], collecting[-tenth:], levels[-tenth:], strict=True)
    last = [(t, g) for t, g, lv in window if lv == "L2"]
    slowest, slowest_gc = max(last) if last else (None, None)
    return {
        "kind": kind,
        "calls": calls,
        "messages": calls * 4,
        "chars": chars,
        "rss_start": rss0,
        "rss_end": rss1,
        "first_median_ms": statistics.median(times[:tenth]) * 1e3,
        "last_median_ms": statistics.median(times[-tenth:]) * 1e3,
        "first_ref_ms": statistics.median(refs[:tenth]) * 1e3,
        "last_ref_ms": statistics.median(refs[-tenth:]) * 1e3,
        "slowest_ms": max(times) * 1e3,
        "slowest_last_round_ms": slowest * 1e3 if slowest is not None else None,
        # the garbage collections inside that round, and every full collection of the run
        "slowest_last_round_gc_ms": slowest_gc * 1e3 if slowest_gc is not None else None,
        "full_collections": collections.full,
        "full_collect_ms": [start_ms, end_ms],
        "rounds": sum(lv == "L2" for lv in levels),
    }


def _full_collect_ms() -> float:
    """The time of one full collection of everything the process holds (ms)."""
    t0 = time.perf_counter()
    gc.collect()
    return (time.perf_counter() - t0) * 1e3


class _Collections:
    """The garbage collector's work during a soak: its time inside the current call
    (``inside``, while ``call`` is set) and each full (generation 2) collection as
    ``[call, ms]`` (``call`` 0: between calls)."""

    def __init__(self) -> None:
        self.call: int | None = None
        self.inside = 0.0
        self.full: list[list[float]] = []
        self._start = 0.0

    def __enter__(self) -> _Collections:
        gc.callbacks.append(self._note)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._note)

    def _note(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
            return
        took = time.perf_counter() - self._start
        if self.call is not None:
            self.inside += took
        if info["generation"] == 2:
            self.full.append([self.call or 0, round(took * 1e3, 1)])


def _in_process(kind: str, calls: int) -> dict[str, Any]:
    """:func:`soak` in a fresh interpreter (its RSS is its own)."""
    return run_section_child("soak", kind, str(calls))


def measure(ctx: Context) -> dict[str, Any]:
    calls = getattr(ctx.args, "soak_calls", None) or (200 if ctx.args.quick else CALLS)
    kinds = ["core"]
    try:
        import ars_langchain.middleware  # noqa: F401

        kinds.append("middleware")
    except ImportError:
        pass
    found: dict[str, Any] = {}
    alone: dict[str, Any] = {}
    imports = _in_process(AGENT_IMPORTS, calls) if "middleware" in kinds else None
    frozen = _in_process("middleware" + FROZEN, calls) if "middleware" in kinds else None
    for kind in kinds:
        found[kind] = _in_process(kind, calls)
        alone[kind] = _in_process(kind + ALONE, calls)
        found[kind]["flatness_runs"] = [_flatness(found[kind])]
        found[kind]["raw_flatness_runs"] = [_raw_flatness(found[kind])]
    # the flatness again in further fresh processes, the contenders in turn: a burst of
    # load from elsewhere during one run's first or last tenth moves that run's ratio
    for _ in range(REPEATS - 1):
        for kind in kinds:
            again = _in_process(kind, calls)
            found[kind]["flatness_runs"].append(_flatness(again))
            found[kind]["raw_flatness_runs"].append(_raw_flatness(again))
    for kind in kinds:
        r = found[kind]
        ctx.log(
            f"  soak {kind}: RSS +{(r['rss_end'] - r['rss_start']) / 1e6:.0f} MB for "
            f"{r['chars'] / 1e6:.1f} M chars (the history alone "
            f"+{(alone[kind]['rss_end'] - alone[kind]['rss_start']) / 1e6:.0f} MB); median "
            f"{r['first_median_ms']:.2f} -> {r['last_median_ms']:.2f} ms; last/first over "
            f"{len(r['flatness_runs'])} runs "
            + " ".join(f"{x:.2f}" for x in r["flatness_runs"])
            + " (as timed "
            + " ".join(f"{x:.2f}" for x in r["raw_flatness_runs"])
            + ")"
        )
    return {
        "calls": calls,
        "results": found,
        "alone": alone,
        "agent_imports": imports,
        "frozen": frozen,
    }


_REFERENCE_VALUES = [random.Random(i).random() for i in range(600)]


def _reference() -> list[str]:
    """A fixed pure-Python workload (a dict of 600 strings, sorted; about 0.3 ms): its
    time gauges how fast the machine runs Python at that moment."""
    table = {i: str(x) for i, x in enumerate(_REFERENCE_VALUES)}
    return sorted(table.values())


def _raw_flatness(r: dict[str, Any]) -> float:
    """One run's median call of the last tenth over that of the first."""
    first, last = r["first_median_ms"], r["last_median_ms"]
    return float(last / first) if first else 0.0


def _flatness(r: dict[str, Any]) -> float:
    """:func:`_raw_flatness` divided by the same ratio of the reference workload timed
    just before each call (the machine's own drift between the two tenths taken out)."""
    raw, first, last = _raw_flatness(r), r.get("first_ref_ms"), r.get("last_ref_ms")
    return raw * first / last if first and last else raw


def _judged_flatness(r: dict[str, Any], name: str = "flatness_runs") -> tuple[float, list[float]]:
    """The median of the runs' ratios (``flatness_runs``: speed-normalized;
    ``raw_flatness_runs``: as timed) and every run's (one run: the results of one)."""
    runs = [float(x) for x in r.get(name) or [_flatness(r)]]
    return statistics.median(runs), runs


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def _own_growth(kind: str, name: str, growth: int, history: int | None, chars: int) -> list[str]:
    """The middleware's RSS target judged on what ARS adds: the target as written counts
    LangChain's own messages too (a new list each turn, as the agent's state gets it),
    which no middleware makes smaller; that verdict stays on the line before."""
    if kind != "middleware" or history is None or not chars:
        return []
    own = (growth - history) / chars
    return [
        f"Target (ARS's own growth, beyond what LangChain's messages take alone), {name}: "
        f"{own:.2f}x the history's text (<= {RSS_PER_TEXT:g}x): "
        f"**{_verdict(own <= RSS_PER_TEXT)}**."
    ]


def render(ctx: Context, data: dict[str, Any]) -> list[str]:
    calls = data["calls"]
    lines = ["## N. Soak: one conversation, call after call", ""]
    lines.append(
        f"{calls:,} calls on one conversation, each adding a user turn, a tool call, its "
        f"result ({' or '.join(f'{c:,}' for c in RESULT_CHARS)} characters in turn) and an "
        f"answer ({calls * 4:,} messages at the end); T = {THRESHOLD_K}K, keep {KEEP}, files "
        "on the local disk, an instant summarizer, each L2 round persisted as an adapter "
        "does. Each contender in a fresh process; RSS measured after the first call and "
        "after the last (growth against the characters of the history's text). \"The "
        'history alone" is the same history built in the same message objects in a fresh '
        "process with no call (what the conversation itself takes: ARS's records for the "
        "core, LangChain's messages for the middleware); ARS's own growth is the rest. "
        "The RSS, the per-call medians and the slowest round are the first run's; the "
        f"per-call flatness is judged on the median of {REPEATS} runs' ratios (last tenth's "
        "median over the first's), each run in a fresh process, the contenders in turn: "
        "each run's ratio divided by the same ratio of a fixed reference workload (a dict "
        "of 600 strings sorted, about 0.3 ms) timed just before each call, which takes out "
        "how fast the machine ran Python in each tenth (a shared machine's speed drifts by "
        "a third within seconds; the calling thread's CPU time drifts with it). The "
        "ratios as timed are shown beside. "
        "The middleware's RSS target as written counts LangChain's own messages too (a new "
        "list each turn, as the agent's state holds them); the line after it judges ARS's "
        "own growth beyond them against the same bound. "
        '"GC" is the time the garbage collector ran inside that slowest round; "a full '
        'collection" is one full collection of everything the process holds, timed after '
        "the first call (the imports' objects and a 4-message history) and after the last; "
        "the full collections the collector ran itself during the run are listed by call."
    )
    imports = data.get("agent_imports")
    if imports:
        lines += [
            "",
            "A process that imports only LangChain's agent middleware types (what any "
            f"LangChain v1 agent middleware imports) holds {imports['objects']:,} objects; "
            f"one full collection there takes {fmt_ms(imports['full_collect_ms'])} ms before "
            "any message exists. A round the collector's full collection falls in takes at "
            "least that long in such a process, whichever middleware runs it.",
        ]
    frozen = data.get("frozen")
    if frozen and frozen["slowest_last_round_ms"] is not None:
        lines += [
            "",
            "The middleware's soak again in a process that freezes what it holds after its "
            "first call (`gc.freeze()`, as a server can once started: the imports' objects "
            "leave every later collection; see docs/deployment.md): slowest L2 round of the "
            f"last tenth {fmt_ms(frozen['slowest_last_round_ms'])} ms (GC "
            f"{fmt_ms(frozen['slowest_last_round_gc_ms'] or 0.0)}); a full collection after "
            f"the last call {fmt_ms(frozen['full_collect_ms'][1])} ms; full collections in "
            f"the run: {_full_collections(frozen['full_collections'])}.",
        ]
    lines.append("")
    names = {
        "core": "ARS core (`Compressor.call`)",
        "middleware": "ARS middleware (`wrap_model_call`)",
    }
    rows = []
    verdicts: list[str] = []
    for kind, r in data["results"].items():
        growth = r["rss_end"] - r["rss_start"]
        ratio = growth / r["chars"] if r["chars"] else 0.0
        base = data.get("alone", {}).get(kind)
        history = base["rss_end"] - base["rss_start"] if base else None
        flat, runs = _judged_flatness(r)
        raw_flat, raw_runs = _judged_flatness(r, "raw_flatness_runs")
        spread = "; runs " + " / ".join(f"{x:.2f}" for x in runs) if len(runs) > 1 else ""
        spread += "; as timed " + " / ".join(f"{x:.2f}" for x in raw_runs)
        slowest, collecting = r["slowest_last_round_ms"], r.get("slowest_last_round_gc_ms")
        start_full, end_full = r.get("full_collect_ms") or (None, None)
        rows.append(
            [
                names[kind],
                f"{r['rss_start'] / 1e6:.0f} -> {r['rss_end'] / 1e6:.0f}",
                f"{growth / 1e6:.1f} MB / {r['chars'] / 1e6:.1f} M = {ratio:.2f}x",
                "-" if history is None else f"{history / 1e6:.1f} MB = {history / r['chars']:.2f}x",
                "-" if history is None else f"{(growth - history) / r['chars']:.2f}x",
                f"{fmt_ms(r['first_median_ms'])} -> {fmt_ms(r['last_median_ms'])} "
                f"(judged {flat:.2f}x{spread})",
                "-" if slowest is None else f"{fmt_ms(slowest)} (GC {fmt_ms(collecting or 0.0)})",
                "-" if end_full is None else f"{fmt_ms(start_full)} -> {fmt_ms(end_full)}",
                _full_collections(r.get("full_collections") or []),
                str(r["rounds"]),
            ]
        )
        verdicts += [
            f"Target, {names[kind]}: RSS growth {ratio:.2f}x the history's text"
            + (
                ""
                if history is None
                else f" (the history alone takes {history / r['chars']:.2f}x, ARS's own growth "
                f"beyond it {(growth - history) / r['chars']:.2f}x)"
            )
            + f", from the first call to the last ({r['rss_end'] / 1e6:.0f} MB at the end)"
            + f" (<= {RSS_PER_TEXT:g}x): **{_verdict(ratio <= RSS_PER_TEXT)}**.",
            *_own_growth(kind, names[kind], growth, history, r["chars"]),
            f"Target, {names[kind]}: median call of the last tenth {flat:.2f}x the first"
            + (f" (the median of {len(runs)} runs' ratios)" if len(runs) > 1 else "")
            + f" (as timed, without the reference: {raw_flat:.2f}x)"
            + f" (<= {LAST_OVER_FIRST:g}x): **{_verdict(flat <= LAST_OVER_FIRST)}**.",
            f"Target, {names[kind]}: slowest L2 round of the last tenth "
            + (
                f"{fmt_ms(slowest)} ms (<= {SLOWEST_ROUND_MS:g} ms): "
                f"**{_verdict(slowest <= SLOWEST_ROUND_MS)}**."
                if slowest is not None
                else "(none ran): **NOT met**."
            ),
        ]
    header = [
        "contender",
        "RSS (MB)",
        "growth / text",
        "the history alone",
        "ARS's own / text",
        "median per call, first -> last tenth (ms)",
        "slowest L2 round, last tenth (ms)",
        "a full collection, first -> last call (ms)",
        "full collections in the run: call (ms)",
        "L2 rounds",
    ]
    lines += [*table(header, rows), ""]
    lines += verdicts
    lines.append("")
    return lines


def _full_collections(found: list[list[float]]) -> str:
    """The full collections of a run, each as ``call (ms)`` (``between calls`` when
    none was running)."""
    return ", ".join(f"{int(c) or 'between calls'} ({fmt_ms(ms)})" for c, ms in found) or "none"


def raw(data: dict[str, Any]) -> dict[str, Any]:
    return {"soak": data}


if __name__ == "__main__":
    print(json.dumps(soak(sys.argv[1], int(sys.argv[2]))))
