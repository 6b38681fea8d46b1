"""Fixtures for the operations tests: test graphs, celery beat, web servers, a private Redis,
PgBouncer."""

from __future__ import annotations

import itertools
import os
import pwd
import re
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from tests.conftest import BIN, ROOT, Proc, free_port, service_env, spawn, wait_for, web_command
from tests.ops.graphs import OPS_GRAPHS, TARGETS

# Worker settings for fault tests: test graphs importable, a short lease (heartbeat every
# lease/3) so the reaper sees a dead worker's run within seconds, and no help from the
# broker: an unacked message would only come back after an hour.
OPS_ENV = {
    "HITL_EXTRA_GRAPHS": OPS_GRAPHS,
    "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    "HITL_RUN_LEASE_SECONDS": "2",
    "HITL_VISIBILITY_TIMEOUT": "3600",
}


@pytest.fixture
def ops_graphs(monkeypatch):
    """Register the test graphs in this process's registry."""
    from hitl.core.registry import registry

    for name, target in TARGETS.items():
        monkeypatch.setitem(registry.targets, name, target)


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def beat_factory(test_database_url, tmp_path, spawned) -> Callable[..., Proc]:
    """Start `celery beat` with its schedule file under tmp_path; stopped at teardown."""
    numbers = itertools.count()

    def start(**extra_env: str) -> Proc:
        number = next(numbers)
        var = tmp_path / f"beat-var-{number}"
        var.mkdir()
        env = service_env(test_database_url, HITL_VAR_DIR=str(var), **OPS_ENV)
        env.update(extra_env)
        proc = spawn(
            [str(BIN / "celery"), "-A", "hitl", "beat", "-l", "INFO"],
            env,
            tmp_path / f"beat-{number}.log",
        )
        spawned.append(proc)
        wait_for(
            lambda: "beat: Starting" in proc.output() or proc.popen.poll() is not None,
            60,
            0.1,
            "celery beat to start",
        )
        assert proc.popen.poll() is None, proc.output()[-3000:]
        return proc

    return start


@pytest.fixture
def web_factory(test_database_url, tmp_path, spawned) -> Callable[..., tuple[str, Proc]]:
    """Start daphne on a free port with extra env; returns (base_url, proc). Stopped at
    teardown."""
    numbers = itertools.count()

    def start(**extra_env: str) -> tuple[str, Proc]:
        port = free_port()
        env = service_env(test_database_url, **OPS_ENV)
        env.update(extra_env)
        proc = spawn(
            web_command(port),
            env,
            tmp_path / f"daphne-{next(numbers)}.log",
        )
        spawned.append(proc)
        wait_for(
            lambda: port_open(port) or proc.popen.poll() is not None, 60, 0.1, "daphne to listen"
        )
        assert proc.popen.poll() is None, proc.output()[-3000:]
        return f"http://127.0.0.1:{port}", proc

    return start


class RedisServer:
    """A private redis-server without persistence: a restart loses every message."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                shutil.which("redis-server") or "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.folder),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: port_open(self.port), 10, 0.05, "redis-server to listen")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        wait_for(lambda: not port_open(self.port), 10, 0.05, "redis-server to stop")


@pytest.fixture
def private_redis(tmp_path) -> Iterator[RedisServer]:
    if not shutil.which("redis-server"):
        pytest.skip("redis-server is not installed")
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.stop()


# --- PgBouncer --------------------------------------------------------------------------

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
# Server sessions PgBouncer opens to the test database, however many clients it serves.
PGBOUNCER_SERVER_POOL = 10
# What a process behind the pooler says when a session it counted on is not the one its statement got.
SESSION_ERRORS = re.compile(
    r'prepared statement "|DuplicatePreparedStatement|InvalidSqlStatementName'
    r'|cursor "[^"]*" does not exist|InvalidCursorName',
)


def pgbouncer_version() -> tuple[int, ...]:
    out = subprocess.run([PGBOUNCER, "--version"], capture_output=True, text=True, timeout=10)
    found = re.search(r"PgBouncer (\d+)\.(\d+)", out.stdout)
    assert found, out.stdout + out.stderr
    return tuple(int(n) for n in found.groups())


class PgBouncer:
    """Debian's pgbouncer in transaction mode in front of the test database's server, on a
    free port. Its clients log in as on the server (no password check of its own: the
    server's is the one that counts); it opens at most PGBOUNCER_SERVER_POOL sessions.
    Prepared statements are not tracked (1.18 cannot; later versions are told 0): the
    strictest pooler, which HITL must work behind with no help."""

    def __init__(self, folder: Path, database_url: str):
        self.folder, self.database_url = folder, database_url
        self.port = free_port()
        self.proc: Proc | None = None

    def url(self, database_url: str | None = None) -> str:
        """`database_url` (the test database's by default) through this pooler."""
        parts = urlsplit(database_url or self.database_url)
        auth = parts.netloc.rpartition("@")[0]
        return urlunsplit(parts._replace(netloc=f"{auth}@127.0.0.1:{self.port}"))

    def _config(self) -> str:
        server = urlsplit(self.database_url)
        users = self.folder / "users.txt"
        users.write_text(f'"{server.username}" "{server.password or ""}"\n')
        lines = [
            "[databases]",
            f"* = host={server.hostname} port={server.port or 5432}",
            "[pgbouncer]",
            "listen_addr = 127.0.0.1",
            f"listen_port = {self.port}",
            "unix_socket_dir =",
            "auth_type = trust",
            f"auth_file = {users}",
            f"admin_users = {server.username}",
            "pool_mode = transaction",
            f"default_pool_size = {PGBOUNCER_SERVER_POOL}",
            f"max_db_connections = {PGBOUNCER_SERVER_POOL}",
            "max_client_conn = 1000",
        ]
        if pgbouncer_version() >= (1, 21):
            lines.append("max_prepared_statements = 0")
        return "\n".join(lines) + "\n"

    def start(self, config: str | None = None) -> None:
        """Start it with this module's config, or with `config` (an ini's text)."""
        if not Path(PGBOUNCER).exists():
            pytest.fail("PgBouncer is missing: run `make pgbouncer` (apt-get install pgbouncer).")
        ini = self.folder / "pgbouncer.ini"
        ini.write_text(config or self._config())
        args = [PGBOUNCER]
        if os.geteuid() == 0:
            # PgBouncer refuses to run as root; it reads its files first, then switches.
            args += ["-u", _unprivileged_user()]
        self.proc = spawn([*args, str(ini)], dict(os.environ), self.folder / "pgbouncer.log")
        wait_for(
            lambda: port_open(self.port) or self.proc.popen.poll() is not None,
            20,
            0.05,
            "pgbouncer to listen",
        )
        assert self.proc.popen.poll() is None, self.proc.output()[-3000:]

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()

    def show(self, what: str) -> list[dict]:
        """A `SHOW <what>` of PgBouncer's admin console, as dicts."""
        admin = self.url(self.database_url.rsplit("/", 1)[0] + "/pgbouncer")
        with psycopg.connect(admin, autocommit=True, prepare_threshold=None) as conn:
            cur = conn.execute(f"SHOW {what}")
            names = [c.name for c in cur.description]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def transactions(self, database: str) -> int:
        """Transactions PgBouncer has passed to `database` so far."""
        return sum(
            int(r["total_xact_count"]) for r in self.show("STATS") if r["database"] == database
        )


def _unprivileged_user() -> str:
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise AssertionError("no unprivileged user to run pgbouncer as")


@pytest.fixture(scope="module")
def pgbouncer(test_database_url, tmp_path_factory) -> Iterator[PgBouncer]:
    """One PgBouncer per module, in transaction mode, in front of the test database."""
    bouncer = PgBouncer(tmp_path_factory.mktemp("pgbouncer"), test_database_url)
    bouncer.start()
    yield bouncer
    bouncer.stop()
