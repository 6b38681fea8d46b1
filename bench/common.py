"""Helpers shared by the benchmark scripts: ports, percentiles, the bench database,
processes, per-process CPU, and the servers bench/peers.py and bench/model_bound.py
compare (langgraph dev, Aegra, HITL) started the same way for both (the peers' install
and command lines are bench/peer_servers.py's, shared with tests/remote)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bench.peer_servers import (  # re-exported: the bench scripts' one place to import from
    aegra_command,
    aegra_venv,
    clean_env,
    langgraph_dev_command,
    langgraph_dev_venv,
    venv_versions,
    wait_http,
)

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")
CHILD_LABELS = {"celery parent": "celery children", "aegra cli": "uvicorn (aegra)"}


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


# --- per-process CPU ------------------------------------------------------------------


def proc_stat(pid: int) -> tuple[int, int] | None:
    """(utime + stime, starttime) in clock ticks, or None once the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rpartition(")")[2].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(fields[11]) + int(fields[12]), int(fields[19])


def children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                found += [int(p) for p in fh.read().split()]
    return found


def boot_ticks_now() -> float:
    with open("/proc/uptime") as fh:
        return float(fh.read().split()[0]) * 1000 / TICK_MS


class CpuSampler:
    """Server CPU over a measurement, per process category.

    Categories come from the system's process roots (each root and its descendants)
    and the Postgres backends of its databases, polled from pg_stat_activity. Each
    pid counts from its value at the start (or from 0 if it started during the
    measurement) to the last value seen; a backend that exits between two polls
    loses only its last < interval of CPU.
    """

    def __init__(self, roots: dict[str, int], databases: list[str], pg_base: str, interval=0.25):
        self.roots, self.databases, self.pg_base, self.interval = (
            roots,
            databases,
            pg_base,
            interval,
        )
        self.first: dict[int, int] = {}
        self.last: dict[int, int] = {}
        self.category: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn = None

    def _pids(self) -> dict[int, str]:
        pids: dict[int, str] = {}
        for label, root in self.roots.items():
            pids[root] = label
            stack = [root]
            while stack:
                for child in children(stack.pop()):
                    pids[child] = CHILD_LABELS.get(label, f"{label} children")
                    stack.append(child)
        if self._conn is not None and self.databases:
            rows = self._conn.execute(
                "select pid from pg_stat_activity where datname = any(%s)", (self.databases,)
            ).fetchall()
            for (pid,) in rows:
                pids[pid] = "postgres backends"
        return pids

    def _sample(self, initial: bool) -> None:
        for pid, label in self._pids().items():
            stat = proc_stat(pid)
            if stat is None:
                continue
            used, started = stat
            if pid not in self.first:
                # Present at the start: count from there; born during the run: all of it.
                self.first[pid] = 0 if not initial and started >= self.t0_ticks else used
                self.category[pid] = label
            self.last[pid] = used

    def __enter__(self):
        import psycopg

        if self.databases:
            self._conn = psycopg.connect(f"{self.pg_base}/postgres", autocommit=True)
        self.t0_ticks = boot_ticks_now()
        self._sample(initial=True)

        def loop():
            while not self._stop.wait(self.interval):
                self._sample(initial=False)

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        assert self._thread is not None
        self._thread.join()
        self._sample(initial=False)
        if self._conn is not None:
            self._conn.close()

    def ms_by_category(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for pid, first in self.first.items():
            label = self.category[pid]
            out[label] = out.get(label, 0.0) + (self.last[pid] - first) * TICK_MS
        return out


def pg_sessions(pg_base: str, databases: list[str]) -> int:
    import psycopg

    if not databases:
        return 0
    with psycopg.connect(f"{pg_base}/postgres", autocommit=True) as conn:
        conn.execute("select pg_stat_clear_snapshot()")
        row = conn.execute(
            "select coalesce(sum(sessions), 0) from pg_stat_database where datname = any(%s)",
            (databases,),
        ).fetchone()
    return int(row[0])


# --- systems --------------------------------------------------------------------------


class System:
    name = ""
    label = ""
    versions = ""
    databases: list[str] = []
    base_url = ""
    api_key: str | None = None

    def __init__(self, args):
        self.args = args
        self.procs: list[subprocess.Popen] = []
        self.workdir = Path(tempfile.mkdtemp(prefix=f"peers-{self.name}-"))

    def install(self) -> None:
        pass

    def prepare(self) -> None:
        pass

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        stop_processes(self.procs)
        self.procs = []

    def cleanup(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)

    def cpu_roots(self) -> dict[str, int]:
        return {self.name: self.procs[0].pid}

    def spawn(self, command: list[str], *, cwd: Path, env: dict[str, str], logname: str):
        logfile = self.workdir / logname
        out = logfile.open("ab")
        proc = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs.append(proc)
        return proc, logfile


# --- peer servers ----------------------------------------------------------------------


def install_langgraph_dev(system: System) -> None:
    system.venv = langgraph_dev_venv(system.args.langgraph_cli_spec)
    system.versions = venv_versions(
        system.venv, ["langgraph-cli", "langgraph-api", "langgraph-runtime-inmem", "langgraph"]
    )


def start_langgraph_dev(
    system: System,
    graphs: dict[str, str],
    *,
    run_dir: Path,
    jobs: int | None = None,
    logname: str = "langgraph-dev.log",
    **extra_env: str,
) -> None:
    """`langgraph dev` serving `graphs` (assistant -> "file:attr"), its in-memory runtime;
    `jobs` runs per worker (--n-jobs-per-worker) if given."""
    port = free_port()
    argv, env, health = langgraph_dev_command(system.venv, run_dir, graphs, port)
    if jobs:
        argv = [*argv, "--n-jobs-per-worker", str(jobs)]
    proc, logfile = system.spawn(argv, cwd=run_dir, env={**env, **extra_env}, logname=logname)
    system.base_url = f"http://127.0.0.1:{port}"
    wait_http(health, proc, 120, logfile)


def install_aegra(system: System) -> None:
    system.venv = aegra_venv(system.args.aegra_spec)
    system.versions = venv_versions(
        system.venv, ["aegra-cli", "aegra-api", "langgraph", "langgraph-checkpoint-postgres"]
    )


def start_aegra(
    system: System,
    graphs: dict[str, str],
    *,
    run_dir: Path,
    database: str,
    logname: str = "aegra.log",
    **extra_env: str,
) -> None:
    """Aegra (`aegra serve`) serving `graphs` on Postgres `database`, no Docker."""
    port = free_port()
    url = f"{system.args.pg}/{database}"
    argv, env, health = aegra_command(system.venv, run_dir, graphs, port, url)
    proc, logfile = system.spawn(argv, cwd=run_dir, env={**env, **extra_env}, logname=logname)
    system.base_url = f"http://127.0.0.1:{port}"
    wait_http(health, proc, 120, logfile)


# --- HITL -----------------------------------------------------------------------------


def hitl_env(var_dir: Path, graphs: str, **extra: str) -> dict[str, str]:
    """A HITL process's environment, serving `graphs` (HITL_EXTRA_GRAPHS)."""
    env = clean_env(
        HITL_VAR_DIR=str(var_dir),
        HITL_EXTRA_GRAPHS=graphs,
        LOG_LEVEL="WARNING",
        DJANGO_SETTINGS_MODULE="hitl.settings",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


def hitl_prepare(env: dict[str, str], token_file: Path) -> str:
    """Migrate, then create the bench user and an API token (as bench/cycles.py does)."""
    python = str(BIN / "python")
    subprocess.run([python, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    subprocess.run(
        [python, "manage.py", "demo_setup", "--username", "bench", "--token-file", str(token_file)],
        cwd=ROOT,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return token_file.read_text().strip()
