"""HITL under faults: SIGKILLed workers, dropped database sessions, Redis down, under load.

For every scenario a fresh production layout is started: 1 daphne, 2 Celery workers
(prefork x 2 each), celery beat, Postgres database `hitl_faults` (recreated, then
migrated) and a private redis-server on a free port, without persistence, started by
this script (REDIS_URL points at it; so the Redis scenario can stop and restart it).
Default HITL settings (lease 6 s, reaper every 2 s, re-dispatch after 20 s).

Load: N concurrent langgraph_sdk clients (default 8) run M cycles in all (default 150)
against <daphne>/langgraph with an API token, like bench/peers.py:
`threads.create()` -> `runs.wait(input=...)` to the interrupt -> `runs.wait(
command={"resume": [{"type": "accept"}]})` to the end, on the graph
bench/fault_graph.py (plan -> review -> act), whose `plan` and `act` nodes append the
thread id to files in HITL_FAULT_DIR so repeated executions can be counted.

Clients honour 503 + Retry-After and try again (with `--stock-client` they do not, as
langgraph_sdk itself does not: every 503 is then a client-visible error). A `runs.wait` that got a 503 may have
created its run before the fault hit (the 503 came from waiting on it): before
repeating the POST the client lists the thread's runs and joins the new run if there
is one, as a careful client would (a blind re-POST would earn a 409). Any other HTTP
error or exception is a client error and the cycle is dropped (not ok).

Faults start ~2 s into the load, in a background thread:
  kill      8 SIGKILLs, one every 2.5 s, alternating a random prefork child of a random
            worker and a whole worker (its process group); a killed worker is started
            again after ~1 s, as a supervisor would
  pg        pg_terminate_backend() on every session of hitl_faults, 5 times over 18 s
  redis     the private redis-server stopped, 10 s later started again (empty)
  baseline  no fault

After the load (stragglers are given up 120 s after the last cycle began), and once
the fault schedule is over, the script waits up to 60 s for active runs to settle,
then counts from the database and from the graph's effect files: runs failed (status
error), stuck (threads busy or runs queued/running after those 60 s), threads done
without their review (done, but their interrupt rows are not all resolved),
answered interrupts whose thread did not finish, threads whose `act` / `plan` ran
more than once.

    .venv/bin/python bench/faults.py                       # all four scenarios
    .venv/bin/python bench/faults.py --scenarios pg,baseline --clients 8 --cycles 150

Logs (daphne, workers, beat) and per-scenario details stay in a temp dir printed at
the start. Prints figures; it is not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
sys.path.insert(0, str(ROOT))

from bench.common import (  # noqa: E402
    children,
    free_port,
    hitl_prepare,
    percentile,
    stop_processes,
    wait_port,
)
from bench.peer_servers import (  # noqa: E402
    clean_env,
    recreate_database,
    wait_http,
)

DB = "hitl_faults"
ASSISTANT = "faults"
INPUT = {"request": "faults"}
RESUME = {"resume": [{"type": "accept"}]}
SCENARIOS = {
    "kill": "8 SIGKILLs of worker children and whole workers",
    "pg": "pg_terminate_backend on all the database's sessions, 5 times in 18 s",
    "redis": "Redis down for 10 s, then back",
    "baseline": "(baseline: no fault)",
}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --- the stack --------------------------------------------------------------------------


class FaultStack:
    """daphne + 2 Celery workers + beat + a private redis-server, on database hitl_faults."""

    def __init__(self, workdir: Path, pg: str, workers: int = 2, concurrency: int = 2):
        self.workdir = workdir
        self.pg = pg
        self.concurrency = concurrency
        self.redis_port = free_port()
        self.redis_dir = workdir / "redis"
        self.effects = workdir / "effects"
        for folder in (self.redis_dir, self.effects, workdir / "var"):
            folder.mkdir(parents=True, exist_ok=True)
        self.redis: subprocess.Popen | None = None
        self.daphne: subprocess.Popen | None = None
        self.beat: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen | None] = [None] * workers
        self.spawned: list[subprocess.Popen] = []  # everything ever started, for stop()
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.env = clean_env(
            DATABASE_URL=f"{pg}/{DB}",
            REDIS_URL=f"redis://127.0.0.1:{self.redis_port}/0",
            HITL_EXECUTOR="celery",
            HITL_VAR_DIR=str(workdir / "var"),
            MEDIA_ROOT=str(workdir / "var" / "media"),
            HITL_EXTRA_GRAPHS=f"{ASSISTANT}=bench.fault_graph:graph",
            HITL_FAULT_DIR=str(self.effects),
            DJANGO_SETTINGS_MODULE="hitl.settings",
            LOG_LEVEL="INFO",
            PYTHONPATH=str(ROOT),
            PYTHONUNBUFFERED="1",
        )
        self.token = ""

    # processes

    def _spawn(self, command: list[str], logname: str, note: str = "") -> subprocess.Popen:
        logfile = self.workdir / logname
        out = logfile.open("ab")
        if note:
            out.write(
                f"\n===== bench/faults.py {time.strftime('%H:%M:%S')}: {note} =====\n".encode()
            )
            out.flush()
        proc = subprocess.Popen(
            command,
            cwd=ROOT,
            env=self.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: killpg reaches the children
        )
        out.close()
        self.spawned.append(proc)
        return proc

    def start_redis(self) -> None:
        self.redis = self._spawn(
            [
                "redis-server",
                "--port",
                str(self.redis_port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.redis_dir),
            ],
            "redis.log",
        )
        wait_port(self.redis_port, 10)

    def stop_redis(self) -> None:
        if self.redis is not None and self.redis.poll() is None:
            self.redis.terminate()
            self.redis.wait(timeout=10)
        self.redis = None

    def start_worker(self, slot: int, note: str = "") -> subprocess.Popen:
        proc = self._spawn(
            [
                str(BIN / "celery"),
                "-A",
                "hitl",
                "worker",
                "-Q",
                "runs,default",
                "-c",
                str(self.concurrency),
                "--pool",
                "prefork",
                "-n",
                f"faults{slot}@%h",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-l",
                "INFO",
            ],
            f"worker{slot}.log",
            note,
        )
        self.workers[slot] = proc
        return proc

    def start(self) -> None:
        recreate_database(self.pg, DB)
        self.start_redis()
        self.token = hitl_prepare(self.env, self.workdir / "token")
        self.daphne = self._spawn(
            [str(BIN / "daphne"), "-b", "127.0.0.1", "-p", str(self.port), "hitl.asgi:application"],
            "daphne.log",
        )
        for slot in range(len(self.workers)):
            self.start_worker(slot)
        self.beat = self._spawn(
            [str(BIN / "celery"), "-A", "hitl", "beat", "-l", "INFO"], "beat.log"
        )
        wait_http(f"{self.base_url}/langgraph/ok", self.daphne, 60, self.workdir / "daphne.log")
        deadline = time.monotonic() + 90
        for slot, proc in enumerate(self.workers):
            logfile = self.workdir / f"worker{slot}.log"
            while " ready." not in logfile.read_text(errors="replace"):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"worker {slot} did not start; see {logfile}")
                time.sleep(0.2)
        while "beat: Starting" not in (self.workdir / "beat.log").read_text(errors="replace"):
            if self.beat.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"celery beat did not start; see {self.workdir / 'beat.log'}")
            time.sleep(0.2)

    def stop(self) -> None:
        live = [p for p in self.spawned if p.poll() is None and p is not self.redis]
        stop_processes(live)
        self.stop_redis()
        for proc in self.spawned:
            with contextlib.suppress(Exception):
                proc.wait(timeout=5)


# --- faults --------------------------------------------------------------------------


def note(events: list[str], message: str) -> None:
    events.append(f"{time.strftime('%H:%M:%S')} {message}")
    log(f"fault: {message}")


def fault_kill(stack: FaultStack, abort: threading.Event, events: list[str]) -> None:
    """8 SIGKILLs, 2.5 s apart: a random prefork child, then a whole worker, in turn."""
    rng = random.Random(7)
    for n in range(8):
        if n % 2 == 0:
            slot = rng.randrange(len(stack.workers))
            parent = stack.workers[slot]
            kids = children(parent.pid) if parent is not None else []
            if kids:
                victim = rng.choice(kids)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(victim, signal.SIGKILL)
                note(events, f"SIGKILL child {victim} of worker {slot} (parent {parent.pid})")
            else:
                note(events, f"worker {slot} had no child to kill")
        else:
            slot = (n // 2) % len(stack.workers)
            proc = stack.workers[slot]
            assert proc is not None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # parent and children: nothing acks
            proc.wait(timeout=10)
            note(events, f"SIGKILL worker {slot} (process group {proc.pid})")
            if abort.wait(1.0):
                return
            new = stack.start_worker(slot, note=f"restarted after SIGKILL of {proc.pid}")
            note(events, f"worker {slot} restarted (pid {new.pid})")
        if n < 7 and abort.wait(2.5):
            return


def fault_pg(stack: FaultStack, abort: threading.Event, events: list[str]) -> None:
    """Every session of hitl_faults terminated, 5 times spread over 18 s."""
    import psycopg

    began = time.monotonic()
    with psycopg.connect(f"{stack.pg}/postgres", autocommit=True) as admin:
        for n in range(5):
            wait = began + n * 4.5 - time.monotonic()
            if wait > 0 and abort.wait(wait):
                return
            rows = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (DB,),
            ).fetchall()
            note(events, f"pg_terminate_backend: {len(rows)} sessions of {DB}")


def fault_redis(stack: FaultStack, abort: threading.Event, events: list[str]) -> None:
    stack.stop_redis()
    note(events, "redis-server stopped")
    abort.wait(10)
    stack.start_redis()
    note(events, "redis-server started again (empty)")


def fault_none(stack: FaultStack, abort: threading.Event, events: list[str]) -> None:
    pass


FAULTS = {"kill": fault_kill, "pg": fault_pg, "redis": fault_redis, "baseline": fault_none}


# --- load ----------------------------------------------------------------------------


@dataclass
class Load:
    cycles: int
    ok: int = 0
    errors: collections.Counter = field(default_factory=collections.Counter)  # by kind
    statuses: collections.Counter = field(default_factory=collections.Counter)  # HTTP errors
    retries_503: int = 0
    bodies_503: collections.Counter = field(default_factory=collections.Counter)
    joined_after_503: int = 0
    first_errors: dict[str, str] = field(default_factory=dict)
    threads: list[str] = field(default_factory=list)
    given_up: list[str] = field(default_factory=list)
    half1: list[float] = field(default_factory=list)
    half2: list[float] = field(default_factory=list)
    elapsed: float = 0.0
    stock: bool = False  # a plain langgraph_sdk client: a 503 is an error, not retried

    def error(self, kind: str, detail: str, thread_id: str | None) -> None:
        self.errors[kind] += 1
        self.first_errors.setdefault(kind, f"thread {thread_id}: {detail}"[:400])

    @property
    def client_errors(self) -> int:
        return sum(self.errors.values())


class Gave503(Exception):
    pass


def _status(exc: BaseException) -> int | None:
    import httpx

    if isinstance(exc, httpx.HTTPStatusError) and exc.response is not None:
        return exc.response.status_code
    return None


def _body(exc: BaseException) -> str:
    with contextlib.suppress(Exception):
        return exc.response.text[:200]  # type: ignore[attr-defined]
    return ""


async def _retry_after(load: Load, exc: BaseException, deadline: float) -> None:
    load.bodies_503[_body(exc)] += 1
    if load.stock:
        raise exc
    load.retries_503 += 1
    load.statuses[503] += 1
    if time.monotonic() > deadline:
        raise Gave503("still 503 after 120 s") from exc
    try:
        seconds = float(exc.response.headers.get("Retry-After") or 1)  # type: ignore[attr-defined]
    except ValueError:
        seconds = 1.0
    await asyncio.sleep(min(max(seconds, 0.1), 30))


async def _call(load: Load, make):
    """Await make() until it answers something other than 503."""
    deadline = time.monotonic() + 120
    while True:
        try:
            return await make()
        except Exception as exc:
            if _status(exc) != 503:
                raise
            await _retry_after(load, exc, deadline)


async def _wait_run(load: Load, client, thread_id: str, runs_before: int, naive: bool, **kwargs):
    """runs.wait; after a 503, join the run if the POST had created it, else POST again.

    With `naive`, POST again without looking (what a generic retry-on-503 client does).
    """
    deadline = time.monotonic() + 120
    while True:
        try:
            return await client.runs.wait(thread_id, ASSISTANT, **kwargs)
        except Exception as exc:
            if _status(exc) != 503:
                raise
            await _retry_after(load, exc, deadline)
        if naive:
            continue
        runs = await _call(load, lambda: client.runs.list(thread_id, limit=10))
        if len(runs) > runs_before:
            load.joined_after_503 += 1
            run_id = runs[0]["run_id"]  # newest first
            return await _call(load, lambda run_id=run_id: client.runs.join(thread_id, run_id))


async def drive(
    base_url: str,
    token: str,
    clients: int,
    cycles: int,
    straggle: float,
    naive: bool = False,
    stock: bool = False,
) -> Load:
    import httpx
    from langgraph_sdk import get_client

    load = Load(cycles, stock=stock)
    claimed = {"n": 0, "done": 0}
    in_flight: dict[int, str | None] = {}

    async def one_cycle(client, n: int) -> None:
        thread_id = None
        in_flight[n] = None
        try:
            t0 = time.perf_counter()
            thread = await _call(load, lambda: client.threads.create())
            thread_id = thread["thread_id"]
            in_flight[n] = thread_id
            load.threads.append(thread_id)
            first = await _wait_run(load, client, thread_id, 0, naive, input=INPUT)
            t1 = time.perf_counter()
            if not (isinstance(first, dict) and first.get("__interrupt__")):
                load.error("no interrupt after half 1", str(first)[:200], thread_id)
                return
            last = await _wait_run(load, client, thread_id, 1, naive, command=RESUME)
            t2 = time.perf_counter()
            if not (isinstance(last, dict) and last.get("done") is True):
                load.error("act did not run", str(last)[:200], thread_id)
                return
            load.ok += 1
            load.half1.append((t1 - t0) * 1000)
            load.half2.append((t2 - t1) * 1000)
        except Gave503 as exc:
            load.error("503 for 120 s", str(exc), thread_id)
        except Exception as exc:  # noqa: BLE001 - counted
            status = _status(exc)
            if status is not None:
                load.statuses[status] += 1
                load.error(f"HTTP {status}", _body(exc) or str(exc), thread_id)
            elif isinstance(exc, httpx.TransportError):
                load.error("transport", f"{type(exc).__name__}: {exc}", thread_id)
            else:
                load.error(type(exc).__name__, str(exc), thread_id)
        finally:
            in_flight.pop(n, None)
            claimed["done"] += 1
            if claimed["done"] % 25 == 0:
                log(
                    f"  {claimed['done']}/{cycles} cycles: ok {load.ok}, client errors "
                    f"{load.client_errors}, 503 retries {load.retries_503}"
                )

    async def client_loop(client) -> None:
        while claimed["n"] < cycles:
            n = claimed["n"]
            claimed["n"] += 1
            await one_cycle(client, n)

    sdk = [
        get_client(url=f"{base_url}/langgraph", api_key=token, timeout=330) for _ in range(clients)
    ]
    began = time.perf_counter()
    tasks = [asyncio.create_task(client_loop(c)) for c in sdk]
    deadline = None
    try:
        while True:
            _, pending = await asyncio.wait(tasks, timeout=1.0)
            if not pending:
                break
            if claimed["n"] >= cycles and deadline is None:
                deadline = time.monotonic() + straggle
            if deadline is not None and time.monotonic() > deadline:
                load.given_up = [t or "(no thread yet)" for t in in_flight.values()]
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                for thread_id in load.given_up:
                    load.error("given up (no answer)", f"after {straggle:.0f} s", thread_id)
                log(f"  gave up on {len(load.given_up)} straggling cycles")
                break
    finally:
        load.elapsed = time.perf_counter() - began
        for c in sdk:
            with contextlib.suppress(Exception):
                await c.aclose()
    return load


# --- measuring ---------------------------------------------------------------------------


ACTIVE_SQL = """
select count(*) from hitl_thread t
where t.status in ('busy', 'queued')
   or exists (select 1 from hitl_run r where r.thread_id = t.id and r.status in ('queued', 'running'))
"""


def settle(pg: str, seconds: float) -> int:
    """Wait up to `seconds` for every run to leave queued/running; return what is left."""
    import psycopg

    deadline = time.monotonic() + seconds
    while True:
        with psycopg.connect(f"{pg}/{DB}", autocommit=True) as conn:
            active = conn.execute(ACTIVE_SQL).fetchone()[0]
        if active == 0 or time.monotonic() > deadline:
            return active
        log(f"  {active} threads still busy / with queued or running runs; waiting")
        time.sleep(5)


def effect_counts(folder: Path, name: str) -> collections.Counter:
    path = folder / f"{name}.log"
    lines = path.read_text().split() if path.exists() else []
    return collections.Counter(lines)


def measure(pg: str, effects: Path) -> dict:
    import psycopg
    from psycopg.rows import dict_row

    acts, plans = effect_counts(effects, "act"), effect_counts(effects, "plan")
    with psycopg.connect(f"{pg}/{DB}", autocommit=True, row_factory=dict_row) as conn:

        def ids(sql: str) -> list[str]:
            return [str(r["id"]) for r in conn.execute(sql).fetchall()]

        failed_runs = conn.execute(
            "select id, thread_id, kind, attempts, error from hitl_run where status = 'error'"
        ).fetchall()
        stuck = ids(
            "select t.id from hitl_thread t where t.status in ('busy', 'queued') or exists "
            "(select 1 from hitl_run r where r.thread_id = t.id and r.status in ('queued', 'running'))"
        )
        done_unreviewed = ids(
            "select t.id from hitl_thread t where t.status = 'done' and ("
            " not exists (select 1 from hitl_humaninterrupt i where i.thread_id = t.id)"
            " or exists (select 1 from hitl_humaninterrupt i where i.thread_id = t.id"
            "            and i.status <> 'resolved'))"
        )
        answered_unfinished = ids(
            "select distinct t.id from hitl_thread t join hitl_humaninterrupt i on i.thread_id = t.id "
            "where i.status = 'resolved' and t.status <> 'done'"
        )
        extra_rows = ids(
            "select thread_id as id from hitl_humaninterrupt group by thread_id having count(*) > 1"
        )
        thread_status = dict(
            (r["status"], r["n"])
            for r in conn.execute(
                "select status, count(*) n from hitl_thread group by 1 order by 1"
            )
        )
        run_status = dict(
            (f"{r['kind']}/{r['status']}", r["n"])
            for r in conn.execute(
                "select kind, status, count(*) n from hitl_run group by 1, 2 order by 1, 2"
            )
        )
        attempts = dict(
            (r["attempts"], r["n"])
            for r in conn.execute("select attempts, count(*) n from hitl_run group by 1 order by 1")
        )
        audit = dict(
            (r["kind"], r["n"])
            for r in conn.execute(
                "select kind, count(*) n from hitl_auditevent group by 1 order by 1"
            )
        )
        done_threads = set(ids("select id from hitl_thread where status = 'done'"))
        resolved_threads = set(
            ids(
                "select distinct thread_id as id from hitl_humaninterrupt where status = 'resolved'"
            )
        )
        suspects = sorted(
            set(stuck) | set(done_unreviewed) | set(answered_unfinished)
            | {str(r["thread_id"]) for r in failed_runs}
            | {t for t, n in acts.items() if n > 1}
            | {t for t, n in plans.items() if n > 1}
            | set(ids("select distinct thread_id as id from hitl_run where attempts > 1"))
        )[:40]  # fmt: skip
        detail = {}
        for thread_id in suspects:
            detail[thread_id] = {
                "thread": conn.execute(
                    "select status, created_at, updated_at from hitl_thread where id = %s",
                    (thread_id,),
                ).fetchone(),
                "runs": conn.execute(
                    "select id, kind, status, attempts, lease_owner, created_at, dispatched_at, "
                    "started_at, finished_at, left(error, 2000) as error "
                    "from hitl_run where thread_id = %s order by created_at",
                    (thread_id,),
                ).fetchall(),
                "interrupts": conn.execute(
                    "select id, status, response_type, created_at, responded_at "
                    "from hitl_humaninterrupt where thread_id = %s order by created_at",
                    (thread_id,),
                ).fetchall(),
                "audit": conn.execute(
                    "select created_at, kind, data from hitl_auditevent where thread_id = %s "
                    "order by id",
                    (thread_id,),
                ).fetchall(),
                "plan_lines": plans.get(thread_id, 0),
                "act_lines": acts.get(thread_id, 0),
            }
    return {
        "failed_runs": failed_runs,
        "stuck": stuck,
        "done_unreviewed": done_unreviewed,
        "answered_unfinished": answered_unfinished,
        "extra_interrupt_rows": extra_rows,
        "repeated_act": sorted(t for t, n in acts.items() if n > 1),
        "repeated_plan": sorted(t for t, n in plans.items() if n > 1),
        "act_unreviewed": sorted(t for t in acts if t not in resolved_threads),
        "done_without_act": sorted(t for t in done_threads if t not in acts),
        "act_lines": sum(acts.values()),
        "plan_lines": sum(plans.values()),
        "thread_status": thread_status,
        "run_status": run_status,
        "attempts": attempts,
        "audit": audit,
        "detail": detail,
    }


LOG_PATTERNS = re.compile(
    r"Traceback|ERROR|CRITICAL|Internal Server Error|WorkerLostError|failed|"
    r"transient fault|could not|unreachable|Service Unavailable|re-sent|reaper:"
)


def log_summary(workdir: Path, limit: int = 12) -> dict[str, dict]:
    """Per log file: counts of notable lines and the first few distinct ones."""
    out: dict[str, dict] = {}
    for path in sorted(workdir.glob("*.log")):
        counts: collections.Counter = collections.Counter()
        firsts: list[str] = []
        seen: set[str] = set()
        for line in path.read_text(errors="replace").splitlines():
            match = LOG_PATTERNS.search(line)
            if not match:
                continue
            counts[match.group(0)] += 1
            key = re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}|\d+", "#", line)[:160]
            if key not in seen and len(firsts) < limit:
                seen.add(key)
                firsts.append(line[:400])
        if counts:
            out[path.name] = {"counts": dict(counts), "first": firsts}
    return out


# --- one scenario ------------------------------------------------------------------------


def run_scenario(name: str, args, root: Path) -> dict:
    workdir = root / name
    workdir.mkdir(parents=True)
    log(f"=== {name}: {SCENARIOS[name]} (logs: {workdir})")
    stack = FaultStack(workdir, args.pg)
    abort = threading.Event()
    events: list[str] = []
    try:
        stack.start()
        log(
            f"{name}: stack up (daphne :{stack.port}, workers "
            f"{[p.pid for p in stack.workers]}, redis :{stack.redis_port}); "
            f"{args.clients} clients x {args.cycles} cycles"
        )
        fault_done = {"at": None, "error": None}

        def fault_thread() -> None:
            if abort.wait(args.fault_delay):
                return
            try:
                FAULTS[name](stack, abort, events)
            except Exception as exc:  # noqa: BLE001 - reported
                fault_done["error"] = f"{type(exc).__name__}: {exc}"
                log(f"fault injection failed: {fault_done['error']}")
            fault_done["at"] = time.monotonic()

        injector = threading.Thread(target=fault_thread, daemon=True)
        began = time.monotonic()
        injector.start()
        load = asyncio.run(
            drive(
                stack.base_url,
                stack.token,
                args.clients,
                args.cycles,
                args.straggle,
                args.naive_retry,
                args.stock_client,
            )
        )
        load_end = time.monotonic()
        log(
            f"{name}: load over in {load.elapsed:.1f}s: ok {load.ok}/{args.cycles}, client errors "
            f"{load.client_errors} {dict(load.errors)}, 503 retries {load.retries_503}"
        )
        injector.join(timeout=120)
        if injector.is_alive():
            abort.set()
            injector.join(timeout=30)
        quiet_since = max(load_end, fault_done["at"] or load_end)
        left = settle(args.pg, args.settle - (time.monotonic() - quiet_since))
        log(f"{name}: {left} threads still active (waited up to {args.settle:.0f} s); measuring")
        result = measure(args.pg, stack.effects)
    finally:
        abort.set()
        stack.stop()
    result.update(
        scenario=name,
        load=load,
        events=events,
        fault_error=fault_done["error"],
        fault_span=(fault_done["at"] - began) if fault_done["at"] else None,
        logs=log_summary(workdir),
        workdir=str(workdir),
    )
    dump = {k: v for k, v in result.items() if k != "load"}
    dump["load"] = {
        k: (dict(v) if isinstance(v, collections.Counter) else v)
        for k, v in load.__dict__.items()
        if k not in ("threads", "half1", "half2")
    }
    (workdir / "result.json").write_text(json.dumps(dump, indent=2, default=str))
    return result


# --- report ------------------------------------------------------------------------------


def print_report(results: list[dict], args) -> None:
    header = (
        "| fault during the load | cycles ok | client errors (of which 500s) | 503 answers "
        "| runs failed "
        "| stuck | done without review | answered, not finished | repeated act "
        "| repeated plan | duration |"
    )
    print("\n" + header)
    print("|" + "---|" * header.count(" |"))
    for r in results:
        load: Load = r["load"]
        print(
            f"| {SCENARIOS[r['scenario']]} | {load.ok}/{load.cycles} | {load.client_errors} "
            f"({load.statuses.get(500, 0)}) | {sum(load.bodies_503.values())} "
            f"| {len(r['failed_runs'])} | {len(r['stuck'])} "
            f"| {len(r['done_unreviewed'])} | {len(r['answered_unfinished'])} "
            f"| {len(r['repeated_act'])} | {len(r['repeated_plan'])} | {load.elapsed:.1f} s |"
        )
    print(
        f"\n{os.cpu_count()} cores; {args.clients} langgraph_sdk clients, {args.cycles} cycles "
        "per scenario; 1 daphne, 2 Celery workers x 2 prefork children, beat, private Redis."
    )
    print(
        "duration = from the first cycle to the last answer (or giving up); repeated act / "
        "plan = threads whose node appended its line more than once."
    )
    for r in results:
        load = r["load"]
        print(f"\n--- {r['scenario']}: {SCENARIOS[r['scenario']]}  (logs: {r['workdir']})")
        if r["events"]:
            print("  faults: " + "; ".join(r["events"]))
        if r["fault_error"]:
            print(f"  fault injection failed: {r['fault_error']}")
        print(
            f"  cycles/s {load.ok / load.elapsed if load.elapsed else 0:.1f}; half1 p50/p99 "
            f"{percentile(load.half1, 50):.0f}/{percentile(load.half1, 99):.0f} ms, half2 p50/p99 "
            f"{percentile(load.half2, 50):.0f}/{percentile(load.half2, 99):.0f} ms"
        )
        print(
            f"  503 answers retried {load.retries_503} (of which joined an already created run "
            f"{load.joined_after_503}); HTTP error statuses {dict(load.statuses)}"
        )
        for kind, n in load.errors.most_common():
            print(f"  client error {kind}: {n}; first: {load.first_errors.get(kind, '')}")
        print(f"  threads {r['thread_status']}; runs {r['run_status']}; attempts {r['attempts']}")
        print(f"  audit {r['audit']}")
        print(
            f"  effect lines: plan {r['plan_lines']}, act {r['act_lines']}; act without a resolved "
            f"interrupt {len(r['act_unreviewed'])}; done without an act line "
            f"{len(r['done_without_act'])}; threads with >1 interrupt row "
            f"{len(r['extra_interrupt_rows'])}"
        )
        for label in ("stuck", "done_unreviewed", "answered_unfinished", "repeated_act"):
            if r[label]:
                print(f"  {label}: {', '.join(r[label][:6])}{' ...' if len(r[label]) > 6 else ''}")
        for run in r["failed_runs"][:3]:
            err = (run["error"] or "").strip().splitlines()
            print(
                f"  failed run {run['id']} ({run['kind']}, attempts {run['attempts']}): "
                f"{err[-1] if err else ''}"
            )
        for body, n in load.bodies_503.most_common():
            print(f"  503 x{n}: {body}")
        for name, summary in r["logs"].items():
            print(f"  {name}: {summary['counts']}")
            for line in summary["first"][: args.excerpts]:
                print(f"      {line[:300]}")


def main() -> None:
    global DB
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help=", ".join(SCENARIOS))
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--cycles", type=int, default=150)
    parser.add_argument("--fault-delay", type=float, default=2.0, help="s after the load starts")
    parser.add_argument("--straggle", type=float, default=120.0, help="s to wait for stragglers")
    parser.add_argument("--settle", type=float, default=60.0, help="s before counting stuck runs")
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--db", default="hitl_faults", help="the database (dropped and recreated)")
    parser.add_argument("--keep-db", action="store_true", help="leave the database behind")
    parser.add_argument(
        "--stock-client",
        action="store_true",
        help="clients do not retry a 503 (as langgraph_sdk does not): each is an error",
    )
    parser.add_argument("--excerpts", type=int, default=4, help="log lines shown per log file")
    parser.add_argument(
        "--naive-retry",
        action="store_true",
        help="after a 503 on runs.wait, POST again without checking for a created run",
    )
    args = parser.parse_args()
    DB = args.db
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    unknown = set(names) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    root = Path(tempfile.mkdtemp(prefix="hitl-faults-"))
    log(f"{os.cpu_count()} cores; scenarios {', '.join(names)}; logs under {root}")
    results = []
    failed: dict[str, str] = {}
    try:
        for name in names:
            try:
                results.append(run_scenario(name, args, root))
            except Exception as exc:  # noqa: BLE001 - reported; the other scenarios go on
                failed[name] = f"{type(exc).__name__}: {exc}"
                log(f"{name} FAILED: {failed[name][:2000]}")
    finally:
        if not args.keep_db:
            import psycopg

            with (
                contextlib.suppress(Exception),
                psycopg.connect(f"{args.pg}/postgres", autocommit=True) as conn,
            ):
                conn.execute(f'drop database if exists "{DB}" with (force)')
    print_report(results, args)
    for name, why in failed.items():
        print(f"\n{name} did not run to the end: {why[:1000]}")
    print(f"\nLogs and per-scenario result.json: {root}")


if __name__ == "__main__":
    main()
