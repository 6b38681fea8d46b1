"""The stack bench/faults.py puts under load, and the faults it injects into it.

The stack: daphne, Celery workers, beat and a private redis-server (so that a fault can
stop and restart it), on a Postgres database recreated and migrated for each scenario.
A fault runs in a background thread and returns early once `abort` is set.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path

from bench.common import (
    BIN,
    ROOT,
    celery_worker_command,
    free_port,
    hitl_prepare,
    stop_processes,
    wait_port,
)
from bench.peer_servers import clean_env, log, recreate_database, wait_http
from bench.samplers import children

ASSISTANT = "faults"
SCENARIOS = {
    "kill": "8 SIGKILLs of worker children and whole workers",
    "pg": "pg_terminate_backend on all the database's sessions, 5 times in 18 s",
    "redis": "Redis down for 10 s, then back",
    "baseline": "(baseline: no fault)",
}


class FaultStack:
    """daphne + 2 Celery workers + beat + a private redis-server, on database `db`."""

    def __init__(self, workdir: Path, pg: str, db: str, workers: int = 2, concurrency: int = 2):
        self.workdir = workdir
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
        self.beat: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen | None] = [None] * workers
        self.spawned: list[subprocess.Popen] = []  # everything ever started, for stop()
        self.port = free_port()
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
            celery_worker_command(f"faults{slot}@%h", concurrency=self.concurrency, level="INFO"),
            f"worker{slot}.log",
            note,
        )
        self.workers[slot] = proc
        return proc

    def start(self) -> None:
        recreate_database(self.pg, self.db)
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


FAULTS = {"kill": fault_kill, "pg": fault_pg, "redis": fault_redis, "baseline": fault_none}
