"""Helpers shared by the benchmark scripts: ports, percentiles, the bench database,
processes, the cycle through langgraph_sdk, and the servers bench/peers.py and
bench/model_bound.py compare (langgraph dev, Aegra, HITL) started the same way for both
(the peers' install and command lines are bench/peer_servers.py's, shared with
tests/remote). What they sample while measuring is bench/samplers.py's."""

from __future__ import annotations

import asyncio
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
WEB = [str(BIN / "python"), "-m", "hitl.web"]  # daphne, on uvloop (hitl/web.py)
RESUME = {"resume": [{"type": "accept"}]}


def web_command(port: int) -> list[str]:
    """The web process's command line, as `make run` and compose start it, on `port`."""
    return [*WEB, "-b", "127.0.0.1", "-p", str(port), "hitl.asgi:application"]


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


def celery_worker_command(
    node: str, *, concurrency: int, pool: str = "prefork", level: str = "WARNING"
) -> list[str]:
    """A Celery worker of the app on both queues, without gossip, mingle and heartbeat."""
    return [
        str(BIN / "celery"),
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
        node,
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        "-l",
        level,
    ]  # fmt: skip


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
        # Celery reads an explicit `--pool prefork` as its default and takes the
        # configured pool (HITL_WORKER_POOL) instead: say which one in both places.
        env = {**env, "HITL_WORKER_POOL": pool}
        out = log.open("wb")  # kept open for the children
        self.procs: list[subprocess.Popen] = []
        self.ports = [free_port() for _ in range(web)]
        commands = [web_command(port) for port in self.ports]
        commands += [
            celery_worker_command(f"{name}{i}@%h", concurrency=concurrency, pool=pool)
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


def setup_django(database_url: str, **env: str) -> None:
    """Set up Django in this process on `database_url` (created if missing, migrated),
    without Redis unless `env` names one; the test client may use host testserver."""
    ensure_database(database_url)
    os.environ.update(
        DATABASE_URL=database_url,
        DJANGO_SETTINGS_MODULE="hitl.settings",
        LOG_LEVEL="WARNING",
        HITL_EXECUTOR="manual",
    )
    os.environ.pop("REDIS_URL", None)
    os.environ.update(env)
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    settings.ALLOWED_HOSTS = ["testserver", *settings.ALLOWED_HOSTS]
    call_command("migrate", verbosity=0)


# --- the cycle through langgraph_sdk --------------------------------------------------


def new_results() -> dict:
    return {"half1": [], "half2": [], "done": 0, "errors": 0, "first_error": None, "elapsed": 0.0}


def note_error(results: dict, message: str) -> None:
    results["errors"] += 1
    if results["first_error"] is None:
        results["first_error"] = message[:300]


async def sdk_cycles(
    base_url: str,
    api_key: str | None,
    assistant: str,
    payload: dict,
    clients: int,
    cycles: int,
    timeout: float = 300,
) -> dict:
    """`cycles` cycles from `clients` langgraph_sdk clients: threads.create ->
    runs.wait(input) to the interrupt (half1) -> runs.wait(resume) to the end (half2).
    Halves in ms; a failed cycle counts as an error."""
    from langgraph_sdk import get_client

    results = new_results()
    claimed = {"n": 0}

    async def one(client) -> None:
        while claimed["n"] < cycles:
            claimed["n"] += 1
            try:
                t0 = time.perf_counter()
                thread = await client.threads.create()
                first = await client.runs.wait(thread["thread_id"], assistant, input=payload)
                t1 = time.perf_counter()
                if not (isinstance(first, dict) and first.get("__interrupt__")):
                    note_error(results, f"first half did not pause: {str(first)[:200]}")
                    continue
                last = await client.runs.wait(thread["thread_id"], assistant, command=RESUME)
                t2 = time.perf_counter()
                if not (isinstance(last, dict) and last.get("done") is True):
                    note_error(results, f"second half did not finish: {str(last)[:200]}")
                    continue
            except Exception as exc:  # noqa: BLE001 - counted and reported
                note_error(results, f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(0.05)
                continue
            results["half1"].append((t1 - t0) * 1000)
            results["half2"].append((t2 - t1) * 1000)
            results["done"] += 1

    sdk_clients = [
        get_client(url=base_url, api_key=api_key, timeout=timeout) for _ in range(clients)
    ]
    began = time.perf_counter()
    try:
        await asyncio.gather(*(one(c) for c in sdk_clients))
    finally:
        results["elapsed"] = time.perf_counter() - began
        for c in sdk_clients:
            with contextlib.suppress(Exception):
                await c.aclose()
    return results


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
