"""The fleet soak: many workers, many threads, kills and store faults; nothing lost.

The coordinator plays LangGraph server's queue: every thread has a next turn;
any idle worker takes any ready thread's next run, and two runs of one thread
never run at once, except the races the plan asks for (one turn delivered to
two workers at the same moment, as an at-least-once queue can). A run that
fails, is disconnected or dies with its worker is handed again to another
worker, with the same user message (same id), as a retrying queue does.

Faults, on a schedule spread over the soak: SIGKILL of a worker at a kill point
its run carries (mid-archive, mid-offload, mid-summary, between the L2 round and
the checkpoint) and at random moments; a slow S3 (latency on every request) and
5xx bursts through :class:`~tests.soak.proxy.FaultProxy` (a fifth of the threads
keep their files in LangGraph's PostgreSQL store instead, as on LangGraph's
server); every PostgreSQL
connection of the workers terminated (``pg_terminate_backend``); a client that
disconnects from its streaming run.

At the end the invariants are checked from the stores themselves (the
checkpoints in PostgreSQL, the objects in the bucket) and the workers' logs
(:func:`check`), and the figures are printed (:meth:`Report.lines`).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import random
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from tests.soak.proxy import FaultProxy
from tests.soak.worker import FILE_RE, Settings, main

#: modules the fork server imports once, so a new worker starts in milliseconds
PRELOAD = [
    "tests.soak.warm",
    "langchain.agents",
    "langgraph.checkpoint.postgres",
    "psycopg_pool",
    "s3fs",
    "ars_langchain.middleware",
    "ars_langchain.testing",
]
KILL_POINTS = ("archive", "offload", "summary", "checkpoint")
PREFIX = "ars"
APP_NAME = "soak-worker"


@dataclass
class Plan:
    """How big the soak is and which faults it injects."""

    workers: int = 4
    threads: int = 50
    turns: int = 8
    threshold_k: float = 2.0  # T = 2,048 tokens: several L2 rounds per thread
    keep: int = 4
    kill_share: float = 0.1  # runs that carry a kill point
    random_kills: int = 8  # SIGKILLs at random moments
    disconnect_share: float = 0.03
    races: int = 3  # turns delivered to two workers at once, spread over the soak
    pg_drops: int = 3
    s3_bursts: int = 3
    burst_size: int = 10
    slow_s3: tuple[float, float] = (0.3, 0.45)  # share of runs during which S3 is slow
    latency: float = 0.03
    broken: str = ""
    seed: int = 20261202
    deadline: float = 900.0

    @property
    def threshold(self) -> int:
        return int(self.threshold_k * 1024)


@dataclass
class ThreadRun:
    name: str
    files: str = "s3"  # or "store": LangGraph's PostgreSQL store (no backend given)
    turn: int = 0
    in_flight: int = 0
    results: list[str] = field(default_factory=list)


@dataclass
class Report:
    plan: Plan
    runs: int = 0
    ok_runs: int = 0
    retries: int = 0
    kills: int = 0
    kill_points_hit: Counter[str] = field(default_factory=Counter)
    random_kills: int = 0
    disconnects: int = 0
    races: int = 0
    pg_drops: int = 0
    s3_errors: int = 0
    l2_rounds: int = 0
    files_checked: int = 0
    store_files_checked: int = 0
    seconds: float = 0.0
    ars_times: list[float] = field(default_factory=list)
    warm_times: list[float] = field(default_factory=list)  # a worker's first call left out
    violations: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        def p(times: list[float], q: float) -> float:
            ordered = sorted(times) or [0.0]
            return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000

        return [
            f"workers {self.plan.workers}, threads {self.plan.threads}, "
            f"turns {self.plan.turns} each, T {self.plan.threshold} tokens"
            + (f", broken: {self.plan.broken}" if self.plan.broken else ""),
            f"runs {self.runs} ({self.ok_runs} completed, {self.retries} retried), "
            f"L2 rounds {self.l2_rounds}",
            f"kills {self.kills} (at kill points {dict(self.kill_points_hit)}, "
            f"random {self.random_kills}), client disconnects {self.disconnects}, "
            f"races {self.races}",
            f"S3 errors injected {self.s3_errors}, PostgreSQL connection drops {self.pg_drops}",
            f"files checked {self.files_checked} ({self.store_files_checked} in the "
            f"PostgreSQL store), violations {len(self.violations)}",
            f"ARS's own time per model call: p50 {p(self.ars_times, 0.5):.1f} ms, "
            f"p95 {p(self.ars_times, 0.95):.1f} ms ({len(self.ars_times)} calls); "
            f"without each worker's first call p50 {p(self.warm_times, 0.5):.1f} ms, "
            f"p95 {p(self.warm_times, 0.95):.1f} ms; soak {self.seconds:.0f} s",
        ]


class Fleet:
    """The coordinator: workers, the queue, the faults."""

    def __init__(self, plan: Plan, pg_url: str, s3: Any, workdir: Path) -> None:
        self.plan = plan
        self.pg_url = pg_url
        self.s3 = s3
        self.workdir = workdir
        self.rng = random.Random(plan.seed)
        self.bucket = s3.create_bucket()
        self.proxy = FaultProxy(s3.endpoint_url).start()
        self.report = Report(plan)
        self.ctx = multiprocessing.get_context("forkserver")
        self.ctx.set_forkserver_preload(PRELOAD)
        self.workers: dict[str, tuple[Any, Connection, dict[str, Any] | None]] = {}
        self.spawned = 0
        #: in every thread id of this soak (the session's database holds every soak's)
        self.tag = f"soak-{self.bucket[-6:]}-"
        self.threads = [
            ThreadRun(
                f"{self.tag}{i:03d}" if i % 5 else f"team/{self.tag}{i:03d}",
                files="store" if i % 5 == 2 else "s3",
            )
            for i in range(plan.threads)
        ]
        from langgraph.store.postgres import PostgresStore

        with PostgresStore.from_conn_string(pg_url) as store:
            store.setup()
        self.run_seq = 0
        self.race_due = 0  # planned races not dispatched yet

    # ------------------------------------------------------------ workers

    def s3_options(self, through_proxy: bool) -> dict[str, Any]:
        options = dict(self.s3.storage_options())
        endpoint = self.proxy.url if through_proxy else self.s3.endpoint_url
        options["client_kwargs"] = {**options.get("client_kwargs", {}), "endpoint_url": endpoint}
        options["skip_instance_cache"] = True
        return options

    def pg_url_for_workers(self) -> str:
        sep = "&" if "?" in self.pg_url else "?"
        return f"{self.pg_url}{sep}application_name={APP_NAME}"

    def spawn(self) -> None:
        self.spawned += 1
        name = f"w{self.spawned:03d}"
        settings = Settings(
            name=name,
            pg_url=self.pg_url_for_workers(),
            s3_url=f"s3://{self.bucket}/{PREFIX}",
            s3_options=self.s3_options(through_proxy=True),
            log_path=str(self.workdir / f"{name}.jsonl"),
            threshold_k=self.plan.threshold_k,
            keep=self.plan.keep,
            broken=self.plan.broken,
        )
        ours, theirs = self.ctx.Pipe()
        proc = self.ctx.Process(target=main, args=(settings, theirs), name=name, daemon=True)
        proc.start()
        theirs.close()
        ready = ours.recv()  # the worker built its agent
        assert ready == {"ready": name}, ready
        self.workers[name] = (proc, ours, None)

    # ------------------------------------------------------------ the queue

    def next_job(self, thread: ThreadRun, raced: bool) -> dict[str, Any]:
        self.run_seq += 1
        plan = self.plan
        last_turn = thread.turn == plan.turns - 1
        kill_at = None
        disconnect = None
        if not raced and self.rng.random() < plan.kill_share:
            kill_at = self.rng.choice(KILL_POINTS)
        elif not raced and not last_turn and self.rng.random() < plan.disconnect_share:
            disconnect = self.rng.randint(1, 3)
        return {
            "run": f"r{self.run_seq:05d}",
            "thread": thread.name,
            "files": thread.files,
            "turn": thread.turn,
            "message_id": f"{thread.name}:u{thread.turn}",
            "text": f"Turn {thread.turn} of {thread.name}: check section {thread.turn} "
            f"of the build report and tell me if release {thread.turn + 1}.0 can ship.",
            "report_size": self.rng.choice([1500, 4000, 9000, 16000]),
            "kill_at": kill_at,
            "disconnect_after": disconnect,
        }

    def dispatch(self, name: str, thread: ThreadRun, job: dict[str, Any]) -> None:
        proc, conn, _ = self.workers[name]
        conn.send(job)
        self.workers[name] = (proc, conn, {**job, "_thread": thread})
        thread.in_flight += 1
        self.report.runs += 1

    def idle(self) -> list[str]:
        return [n for n, (_, _, job) in self.workers.items() if job is None]

    def busy(self) -> list[str]:
        return [n for n, (_, _, job) in self.workers.items() if job is not None]

    def ready_threads(self) -> list[ThreadRun]:
        return [t for t in self.threads if t.turn < self.plan.turns and t.in_flight == 0]

    def finish(self, name: str, status: str) -> None:
        proc, conn, job = self.workers[name]
        assert job is not None
        thread: ThreadRun = job["_thread"]
        thread.in_flight -= 1
        thread.results.append(status)
        if status == "ok":
            self.report.ok_runs += 1
        elif status == "disconnected":
            self.report.disconnects += 1
        if thread.in_flight == 0:
            if "ok" in thread.results:
                thread.turn += 1
            else:
                self.report.retries += 1  # the queue hands the same turn out again
            thread.results = []
        self.workers[name] = (proc, conn, None)

    # ------------------------------------------------------------ faults

    def faults_at(self, done_share: float, schedule: dict[str, list[float]]) -> None:
        for kind, points in schedule.items():
            while points and points[0] <= done_share:
                points.pop(0)
                if kind == "pg":
                    self.drop_pg_connections()
                elif kind == "s3":
                    self.proxy.fail_next(self.plan.burst_size)
                elif kind == "race":
                    self.race_due += 1
                elif kind == "kill":
                    busy = self.busy()
                    if busy:
                        self.workers[self.rng.choice(busy)][0].kill()
                        self.report.random_kills += 1
        lo, hi = self.plan.slow_s3
        self.proxy.latency = self.plan.latency if lo <= done_share < hi else 0.0

    def drop_pg_connections(self) -> None:
        import psycopg

        with psycopg.connect(self.pg_url, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s",
                (APP_NAME,),
            )
        self.report.pg_drops += 1

    def schedule(self) -> dict[str, list[float]]:
        def spread(n: int, end: float = 0.9) -> list[float]:
            return sorted(self.rng.uniform(0.05, end) for _ in range(n))

        return {
            "pg": spread(self.plan.pg_drops),
            "s3": spread(self.plan.s3_bursts),
            "kill": spread(self.plan.random_kills),
            # early enough that threads with a turn after the raced one are left (a
            # thread's last turn is never raced): every planned race is run
            "race": spread(self.plan.races, end=0.6),
        }

    # ------------------------------------------------------------ the soak

    def run(self) -> Report:
        start = time.monotonic()
        for _ in range(self.plan.workers):
            self.spawn()
        total = self.plan.threads * self.plan.turns
        schedule = self.schedule()
        try:
            while any(t.turn < self.plan.turns for t in self.threads):
                if time.monotonic() - start > self.plan.deadline:
                    raise TimeoutError(f"the soak passed its deadline: {self.report.lines()}")
                self.fill()
                self.wait_one()
                done = sum(t.turn for t in self.threads) / total
                self.faults_at(done, schedule)
        finally:
            self.report.s3_errors = self.proxy.injected
            self.stop()
            self.report.seconds = time.monotonic() - start
        return self.report

    def fill(self) -> None:
        for thread in self.ready_threads():
            idle = self.idle()
            if self.race_due and thread.turn < self.plan.turns - 1:
                # one turn delivered twice at once: hold the queue until two workers
                # are free, so the planned races happen whatever the machine's timing
                if len(idle) < 2:
                    return
                self.race_due -= 1
                self.report.races += 1
                job = self.next_job(thread, raced=True)
                self.dispatch(idle[0], thread, job)
                self.dispatch(idle[1], thread, {**job, "run": job["run"] + "b"})
                continue
            if not idle:
                return
            self.dispatch(idle[0], thread, self.next_job(thread, raced=False))

    def wait_one(self) -> None:
        conns = {conn: name for name, (_, conn, job) in self.workers.items() if job is not None}
        sentinels = {
            proc.sentinel: name for name, (proc, _, job) in self.workers.items() if job is not None
        }
        if not conns:
            return
        for ready in wait([*conns, *sentinels], timeout=120):
            name = conns.get(ready) or sentinels.get(ready)  # type: ignore[call-overload]
            if name is None or name not in self.workers:
                continue
            proc, conn, job = self.workers[name]
            if job is None:
                continue
            try:
                result = conn.recv() if conn.poll() else None
            except (EOFError, OSError):
                result = None
            if result is not None:
                self.finish(name, result["status"])
                continue
            if proc.is_alive():
                continue
            proc.join()  # died with its run: the run is retried on another worker
            self.report.kills += 1
            if job.get("kill_at"):
                self.report.kill_points_hit[job["kill_at"]] += 1
            self.finish(name, "killed")
            del self.workers[name]
            conn.close()
            self.spawn()

    def stop(self) -> None:
        for _proc, conn, _ in self.workers.values():
            try:
                conn.send(None)
            except OSError:
                pass
        for proc, conn, _ in self.workers.values():
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
            conn.close()
        self.workers.clear()
        self.proxy.stop()


# ---------------------------------------------------------------- the invariants


def read_logs(workdir: Path) -> list[dict[str, Any]]:
    records = []
    for path in sorted(workdir.glob("w*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:  # the line a SIGKILL cut
                continue
    return records


def archive_digest_ok(data: bytes, name: str) -> bool:
    lines = [ln for ln in data.split(b"\n") if ln]
    digest = hashlib.sha256(lines[0])
    digest.update(b"".join(hashlib.sha256(ln).digest() for ln in lines[1:]))
    return name.endswith(f"-{digest.hexdigest()[:16]}.jsonl")


def content_ok(path: str, data: bytes) -> bool:
    """The file's bytes match the content hash its name holds."""
    from ars_core.paths import text_sha256

    name = path.rsplit("/", 1)[-1]
    if "conversation_history/" in path:
        return archive_digest_ok(data, name)
    return text_sha256(data.decode("utf-8", "surrogatepass")) in name


def check(fleet: Fleet) -> Report:
    """Every invariant of the soak, from the stores and the logs (see the module doc)."""
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(fleet.pg_url) as store:
        return _check(fleet, store)


def _check(fleet: Fleet, store: Any) -> Report:
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.postgres import PostgresSaver

    from ars_core import FsspecBackend, read_history
    from ars_core.adapter import encode_text
    from ars_langchain.store import StoreFileBackend

    report, plan = fleet.report, fleet.plan
    bad = report.violations
    records = read_logs(fleet.workdir)
    client = fleet.s3.client()
    keys = {
        o["Key"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=fleet.bucket)
        for o in page.get("Contents", [])
    }
    raw: dict[str, bytes] = {}

    def body(key: str) -> bytes:
        if key not in raw:
            raw[key] = client.get_object(Bucket=fleet.bucket, Key=key)["Body"].read()
        return raw[key]

    root = FsspecBackend(f"s3://{fleet.bucket}/{PREFIX}", storage_options=fleet.s3_options(False))
    scopes = {t.name: root.scoped(t.name) for t in fleet.threads}
    folder_of = {b.scope: name for name, b in scopes.items()}
    checked: set[str] = set()

    # the threads whose files are in LangGraph's PostgreSQL store: one item per file
    stores = {
        t.name: StoreFileBackend(store).scoped(t.name) for t in fleet.threads if t.files == "store"
    }
    label_of = {b.namespace[-1]: name for name, b in stores.items()}
    items = {  # this soak's items (and any of no thread's namespace)
        f"store:{'/'.join(it.namespace)}/{it.key}": it
        for it in store.search(("ars",), limit=1_000_000)
        if fleet.tag in "/".join(it.namespace) or len(it.namespace) != 3
    }
    for where, item in items.items():
        namespace = tuple(item.namespace)
        if len(namespace) != 3 or namespace[:2] != ("ars", "threads"):
            bad.append(f"store item outside every thread's namespace: {where}")
        elif namespace[2] not in label_of:
            bad.append(f"store item of no store thread: {where}")
        elif "conversation_history/" in item.key:
            header, _ = read_history(stores[label_of[namespace[2]]].read_text(item.key))
            if header.get("thread") not in (None, label_of[namespace[2]]):
                bad.append(f"{where} is an archive of thread {header.get('thread')!r}")
    backends = {**scopes, **stores}

    def location(thread: str, path: str) -> str:
        if thread in stores:
            return f"store:{'/'.join(stores[thread].namespace)}/{path}"
        return f"{PREFIX}/threads/{scopes[thread].scope}/{path}"

    def data(thread: str, key: str, path: str) -> bytes:
        if key.startswith("store:"):
            return encode_text(stores[thread].read_text(path))
        return body(key)

    def check_file(thread: str, path: str, where: str) -> None:
        key = location(thread, path)
        if key not in keys and key not in items:
            bad.append(f"{thread}: {where} names {path}, which its folder does not hold")
            return
        if key in checked:
            return
        checked.add(key)
        if not content_ok(path, data(thread, key, path)):
            bad.append(f"{thread}: {path} does not match its content hash")

    # no temporary file left; every file lies in a thread's folder; archives name their thread
    for key in keys:
        if ".ars-tmp" in key:
            bad.append(f"temporary file left behind: {key}")
        parts = key.split("/")
        if len(parts) < 4 or parts[1] != "threads" or parts[2] not in folder_of:
            bad.append(f"file outside every thread's folder: {key}")
            continue
        if "conversation_history/" in key:
            header, _ = read_history(body(key).decode("utf-8", "surrogatepass"))
            if header.get("thread") not in (None, folder_of[parts[2]]):
                bad.append(f"{key} is an archive of thread {header.get('thread')!r}")

    views = [r for r in records if r["kind"] == "view"]
    for view in views:  # files named to the model: in the thread's own folder, whole
        for path in view["files"]:
            check_file(view["thread"], path, f"a view of run {view['run']}")
        if view["tokens"] > plan.threshold:
            bad.append(f"run {view['run']} sent {view['tokens']} tokens (T {plan.threshold})")

    ended = {r["run"] for r in records if r["kind"] == "end"}
    timed: set[str] = set()
    rounds: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in records:
        if r["kind"] == "event":
            event = r["event"]
            rounds[(r["run"], str(event.get("round_id")))].append(str(event.get("phase")))
            if event.get("phase") == "completed" and event.get("level") == "L2":
                report.l2_rounds += 1
        elif r["kind"] == "ars_time":
            report.ars_times.append(r["seconds"])
            if r["worker"] in timed:
                report.warm_times.append(r["seconds"])
            timed.add(r["worker"])
    for (run, round_id), phases in rounds.items():
        if run in ended and "started" in phases and not {"completed", "failed"} & set(phases):
            bad.append(f"run {run}: round {round_id} started and never ended ({phases})")

    with PostgresSaver.from_conn_string(fleet.pg_url) as saver:
        for thread in fleet.threads:
            snap = saver.get_tuple({"configurable": {"thread_id": thread.name}})
            if snap is None:
                bad.append(f"{thread.name}: no checkpoint")
                continue
            values = snap.checkpoint["channel_values"]
            messages = values.get("messages", [])
            for turn in range(plan.turns):
                mid = f"{thread.name}:u{turn}"
                found = [m for m in messages if isinstance(m, HumanMessage) and m.id == mid]
                if len(found) != 1:
                    bad.append(
                        f"{thread.name}: user turn {turn} is in the checkpoint {len(found)}x"
                    )
            event = values.get("_summarization_event")
            cutoff = 0
            if event:
                cutoff = event["cutoff"]
                events = (
                    snap.checkpoint["channel_values"].get("_summarization_event")
                    for snap in saver.list({"configurable": {"thread_id": thread.name}})
                )
                covered = archived_ids(thread.name, events, backends[thread.name], check_file, bad)
                lost = [
                    i for i, m in enumerate(messages[:cutoff]) if m.id not in covered.get(i, set())
                ]
                if lost:
                    bad.append(f"{thread.name}: messages {lost} of [0, {cutoff}) are in no archive")
                summary = str(event.get("summary_message", {}).get("content", ""))
                for path in FILE_RE.findall(summary):
                    check_file(thread.name, path, "the summary")
            final = [v for v in views if v["thread"] == thread.name and v["turn"] == plan.turns - 1]
            last_runs = [v["run"] for v in final if v["run"] in ended]
            if last_runs:
                seen = {i for v in final if v["run"] == last_runs[-1] for i in v["ids"]}
                missing = [
                    m.id for m in messages[cutoff:-1] if m.id not in seen and m.id is not None
                ]
                if missing:
                    bad.append(f"{thread.name}: messages {missing} are in no view and no archive")
    report.files_checked = len(checked)
    report.store_files_checked = sum(1 for key in checked if key.startswith("store:"))
    return report


def archived_ids(
    thread: str, events: Any, backend: Any, check_file: Any, bad: list[str]
) -> dict[int, set[str | None]]:
    """Position -> ids of the message archived there, over ``events`` (every event any
    checkpoint of the thread recorded: each round archives ``[previous_cutoff, cutoff)``);
    each file of each archive chain is checked whole."""
    from ars_core import read_archive, read_history

    covered: dict[int, set[str | None]] = defaultdict(set)
    seen: set[str] = set()
    for event in events:
        if not event or event["file_path"] in seen:
            continue
        path = event["file_path"]
        seen.add(path)
        check_file(thread, path, "an event")
        next_path: str | None = path
        chain: set[str] = set()
        try:
            while next_path and next_path not in chain:
                chain.add(next_path)
                check_file(thread, next_path, "an archive chain")
                header, _ = read_history(backend.read_text(next_path))
                start = header.get("chain_start", header["start"])
                next_path = header.get("continues")
            for offset, message in enumerate(read_archive(backend, path)):
                covered[start + offset].add(message.id)
        except Exception as exc:
            bad.append(f"{thread}: the archive chain of {path} fails: {exc!r}")
    return covered
