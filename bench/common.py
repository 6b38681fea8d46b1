"""Helpers shared by the benchmark scripts: ports, percentiles, the bench database, processes."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit(f"nothing listens on {port}")


def ensure_database(database_url: str) -> None:
    import psycopg

    base, _, name = database_url.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        if not conn.execute("select 1 from pg_database where datname = %s", (name,)).fetchone():
            conn.execute(f'create database "{name}"')


def stop_processes(procs: list[subprocess.Popen]) -> None:
    """SIGTERM each process group, then SIGKILL what is still there after 15 s."""
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


class Stack:
    """Daphne web processes and Celery workers of the app, started for a benchmark."""

    def __init__(
        self,
        *,
        env: dict[str, str],
        log: Path,
        web: int = 1,
        workers: int = 1,
        concurrency: int = 2,
        pool: str = "prefork",
        name: str = "bench",
    ):
        bin_dir = Path(sys.executable).parent
        # Celery reads an explicit `--pool prefork` as its default and takes the
        # configured pool (HITL_WORKER_POOL) instead: say which one in both places.
        env = {**env, "HITL_WORKER_POOL": pool}
        out = log.open("wb")  # kept open for the children
        self.procs: list[subprocess.Popen] = []
        self.ports = [free_port() for _ in range(web)]
        commands = [
            [str(bin_dir / "daphne"), "-b", "127.0.0.1", "-p", str(port), "hitl.asgi:application"]
            for port in self.ports
        ]
        commands += [
            [
                str(bin_dir / "celery"),
                "-A",
                "hitl",
                "worker",
                "-Q",
                "runs,default",
                "-c",
                str(concurrency),
                "--pool",
                pool,
                "-n",
                f"{name}{i}@%h",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-l",
                "WARNING",
            ]  # fmt: skip
            for i in range(workers)
        ]
        for command in commands:
            self.procs.append(
                subprocess.Popen(
                    command,
                    cwd=ROOT,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        for port in self.ports:
            wait_port(port)

    def stop(self) -> None:
        stop_processes(self.procs)


def run_cycles(clients: int, cycles: int, one_cycle: Callable[[], None]) -> float:
    """Call `one_cycle` `cycles` times from `clients` threads; returns the elapsed seconds."""
    lock = threading.Lock()
    claimed = {"n": 0}

    def client() -> None:
        while True:
            with lock:
                if claimed["n"] >= cycles:
                    return
                claimed["n"] += 1
            one_cycle()

    began = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - began
