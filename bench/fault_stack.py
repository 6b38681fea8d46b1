"""The stack bench/faults.py puts under load, and the faults it injects into it.

The stack: daphne, Celery workers, beat and a private redis-server (so that a fault can
stop and restart it), on a Postgres database recreated and migrated for each scenario.
A fault runs in a background thread and returns early once `abort` is set.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

from bench.balancer import Balancer
from bench.common import (
    BIN,
    ROOT,
    celery_worker_command,
    free_port,
    hitl_prepare,
    stop_processes,
    wait_port,
    web_command,
)
from bench.peer_servers import clean_env, log, recreate_database, wait_http
from bench.samplers import children

ASSISTANT = "faults"
SCENARIOS = {
    "kill": "8 SIGKILLs of worker children and whole workers",
    "pg": "pg_terminate_backend on all the database's sessions, 5 times in 18 s",
    "redis": "Redis down for 10 s, then back",
    "baseline": "(baseline: no fault)",
    "roll": "rolling restart: each web process, then each worker, SIGTERM and start again",
}


class FaultStack:
    """daphne + 2 Celery workers + beat + a private redis-server, on database `db`.

    With `web` > 1, that many daphne processes behind a balancer (bench/balancer.py) on
    `port`; `pool` and `concurrency` are the workers' (the README's worker: threads).
    """

    def __init__(
        self,
        workdir: Path,
        pg: str,
        db: str,
        workers: int = 2,
        concurrency: int = 2,
        *,
        web: int = 1,
        pool: str = "prefork",
        **env: str,
    ):
        self.workdir = workdir
        self.pool = pool
        self.pg = pg
        self.db = db
        self.database_url = f"{pg}/{db}"
        self.concurrency = concurrency
        self.redis_port = free_port()
        self.redis_dir = workdir / "redis"
        self.effects = workdir / "effects"
        for folder in (self.redis_dir, self.effects, workdir / "var"):
            folder.mkdir(parents=True, exist_ok=True)
        self.redis: subprocess.Popen | None = None
        self.daphne: subprocess.Popen | None = None
        self.webs: list[subprocess.Popen | None] = [None] * web
        self.beat: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen | None] = [None] * workers
        self.spawned: list[subprocess.Popen] = []  # everything ever started, for stop()
        self.port = free_port()
        self.web_ports = [self.port] if web == 1 else [free_port() for _ in range(web)]
        self.balancer = Balancer(self.port, self.web_ports) if web > 1 else None
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.env = clean_env(
            DATABASE_URL=self.database_url,
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
            HITL_WORKER_POOL=pool,
            **env,
        )
        self.token = ""
        self.roll: list[dict] = []  # what a rolling restart measured, per process

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
            celery_worker_command(
                f"faults{slot}@%h", concurrency=self.concurrency, pool=self.pool, level="INFO"
            ),
            f"worker{slot}.log",
            note,
        )
        self.workers[slot] = proc
        return proc

    def start_web(self, slot: int, note: str = "") -> subprocess.Popen:
        port = self.web_ports[slot]
        proc = self._spawn(
            web_command(port),
            "daphne.log" if slot == 0 else f"daphne{slot}.log",
            note,
        )
        self.webs[slot] = proc
        return proc

    def wait_web(self, slot: int, proc: subprocess.Popen) -> None:
        log_name = "daphne.log" if slot == 0 else f"daphne{slot}.log"
        url = f"http://127.0.0.1:{self.web_ports[slot]}/langgraph/ok"
        wait_http(url, proc, 60, self.workdir / log_name)

    def wait_worker_ready(self, slot: int, proc: subprocess.Popen, after: int = 0) -> None:
        """Until worker `slot` logs " ready." past byte `after` of its log."""
        logfile = self.workdir / f"worker{slot}.log"
        deadline = time.monotonic() + 90
        while " ready." not in logfile.read_bytes()[after:].decode(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker {slot} did not start; see {logfile}")
            time.sleep(0.2)

    def start(self) -> None:
        recreate_database(self.pg, self.db)
        self.start_redis()
        self.token = hitl_prepare(self.env, self.workdir / "token")
        for slot in range(len(self.webs)):
            self.start_web(slot)
        self.daphne = self.webs[0]
        if self.balancer is not None:
            self.balancer.start()
        for slot in range(len(self.workers)):
            self.start_worker(slot)
        self.beat = self._spawn(
            [str(BIN / "celery"), "-A", "hitl", "beat", "-l", "INFO"], "beat.log"
        )
        for slot, proc in enumerate(self.webs):
            self.wait_web(slot, proc)
        for slot, proc in enumerate(self.workers):
            self.wait_worker_ready(slot, proc)
        deadline = time.monotonic() + 90
        while "beat: Starting" not in (self.workdir / "beat.log").read_text(errors="replace"):
            if self.beat.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"celery beat did not start; see {self.workdir / 'beat.log'}")
            time.sleep(0.2)

    def stop(self) -> None:
        live = [p for p in self.spawned if p.poll() is None and p is not self.redis]
        stop_processes(live)
        if self.balancer is not None:
            self.balancer.stop()
        self.stop_redis()
        for proc in self.spawned:
            with contextlib.suppress(Exception):
                proc.wait(timeout=5)


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
    """Every session of the database terminated, 5 times spread over 18 s."""
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
                (stack.db,),
            ).fetchall()
            note(events, f"pg_terminate_backend: {len(rows)} sessions of {stack.db}")


def fault_redis(stack: FaultStack, abort: threading.Event, events: list[str]) -> None:
    stack.stop_redis()
    note(events, "redis-server stopped")
    abort.wait(10)
    stack.start_redis()
    note(events, "redis-server started again (empty)")


def fault_none(stack: FaultStack, abort: threading.Event, events: list[str]) -> None:
    pass


# The worker's line for a run's end (hitl.core.worker.execute): "run <id> <status> in <ms> ms".
RUN_END = re.compile(rb"run [0-9a-f-]{36} \w+ in [0-9.]+ ms")


def _stop_worker_timed(stack: FaultStack, slot: int) -> dict:
    """SIGTERM worker `slot` (a warm shutdown); time its exit against its last run's end."""
    proc = stack.workers[slot]
    assert proc is not None
    logfile = stack.workdir / f"worker{slot}.log"
    offset = logfile.stat().st_size
    last_end = None
    ended = 0
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    while True:
        gone = proc.poll() is not None
        now = time.monotonic()
        data = logfile.read_bytes()[offset:]
        cut = data.rfind(b"\n") + 1
        found = len(RUN_END.findall(data[:cut]))
        if found:
            ended += found
            last_end = now
        offset += cut
        if gone:
            break
        time.sleep(0.01)
    exited = time.monotonic()
    return {
        "slot": slot,
        "pid": proc.pid,
        "runs_ended_after_sigterm": ended,
        "stop_s": exited - began,
        "exit_after_last_run_s": (exited - last_end) if last_end is not None else None,
        "returncode": proc.returncode,
    }


def fault_roll(stack: FaultStack, abort: threading.Event, events: list[str]) -> None:
    """Every web process, then every worker, one at a time: stopped (SIGTERM) and started.

    A web process is first drained at the balancer (no new connections) until each of its
    open requests has begun its answer; a worker finishes what it holds (warm shutdown).
    """
    stack.roll = []
    balancer = stack.balancer
    for slot, proc in enumerate(stack.webs):
        assert proc is not None
        port = stack.web_ports[slot]
        began = time.monotonic()
        if balancer is not None:
            balancer.drain(port)
            while not balancer.settled(port) and time.monotonic() - began < 30:
                if abort.wait(0.01):
                    return
        drained = time.monotonic() - began
        open_at_stop = balancer.open_to(port) if balancer is not None else 0
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        stopped = time.monotonic() - began - drained
        new = stack.start_web(slot, note=f"rolling restart after SIGTERM of {proc.pid}")
        stack.wait_web(slot, new)
        if balancer is not None:
            balancer.undrain(port)
        stack.roll.append(
            {
                "process": f"web {slot}",
                "drain_s": drained,
                "stop_s": stopped,
                "open_at_stop": open_at_stop,
                "back_s": time.monotonic() - began,
            }
        )
        note(
            events,
            f"web {slot}: drained in {drained:.2f} s, {open_at_stop} answers in progress cut "
            f"at SIGTERM, stopped in {stopped:.2f} s, serving again after "
            f"{time.monotonic() - began:.1f} s (pid {new.pid})",
        )
        if abort.wait(2.0):
            return
    for slot in range(len(stack.workers)):
        began = time.monotonic()
        offset = (stack.workdir / f"worker{slot}.log").stat().st_size
        stopped = _stop_worker_timed(stack, slot)
        new = stack.start_worker(slot, note=f"rolling restart after SIGTERM of {stopped['pid']}")
        stack.wait_worker_ready(slot, new, after=offset)
        stopped.update(process=f"worker {slot}", back_s=time.monotonic() - began)
        stack.roll.append(stopped)
        lag = stopped["exit_after_last_run_s"]
        note(
            events,
            f"worker {slot}: {stopped['runs_ended_after_sigterm']} runs ended after SIGTERM; "
            f"exited {stopped['stop_s']:.2f} s after it, "
            + (f"{lag:.2f} s after its last run ended" if lag is not None else "no run ended")
            + f" (exit code {stopped['returncode']}); ready again after "
            f"{stopped['back_s']:.1f} s (pid {new.pid})",
        )
        if abort.wait(2.0):
            return


FAULTS = {
    "kill": fault_kill,
    "pg": fault_pg,
    "redis": fault_redis,
    "baseline": fault_none,
    "roll": fault_roll,
}
