"""Shared fixtures: personas, an API client, real Celery workers and a real daphne server.

The suite runs against PostgreSQL + Redis when DATABASE_URL / REDIS_URL are set (as
`make test` does). Tests marked `postgres` need them; with HITL_REQUIRE_SERVICES=1
(CI) their absence is an error, never a silent skip.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tests.xdist_env import worker_index

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
BIN = Path(PYTHON).parent
WEB = [PYTHON, "-m", "hitl.web"]  # daphne, on uvloop (hitl/web.py)
USING_POSTGRES = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
REQUIRE_SERVICES = os.environ.get("HITL_REQUIRE_SERVICES") == "1"


def pytest_collection_modifyitems(config, items):
    if USING_POSTGRES and settings.REDIS_URL:
        return
    if REQUIRE_SERVICES:
        raise pytest.UsageError(
            "HITL_REQUIRE_SERVICES=1 but DATABASE_URL/REDIS_URL are not set: run `make test`."
        )
    skip = pytest.mark.skip(reason="needs PostgreSQL + Redis (run `make test`)")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)


def pytest_sessionstart(session):
    if not (USING_POSTGRES and settings.REDIS_URL):
        return
    if getattr(session.config.option, "dist", "no") != "no" and not os.environ.get(
        "PYTEST_XDIST_WORKER"
    ):
        return  # xdist's controller runs no test: each worker empties its own db
    import redis

    try:
        redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=3).flushdb()
    except Exception as exc:  # unreachable Redis is an error in CI, a skip reason elsewhere
        if REQUIRE_SERVICES:
            raise pytest.UsageError(
                f"Redis at {settings.REDIS_URL} is not reachable: {exc}"
            ) from exc


# Under pytest-xdist each worker takes its ports from a range of its own, below the
# ephemeral ports the OS hands out (32768-60999 on Linux): two workers never pick the same
# port between one's free_port() and its server's bind.
WORKER_PORTS = 1000
_ports_given: set[int] = set()


def free_port() -> int:
    """A port nothing listens on, for a server a test starts."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]
    low = 20000 + worker_index() * WORKER_PORTS
    for port in random.sample(range(low, low + WORKER_PORTS), WORKER_PORTS):
        if port in _ports_given:
            continue  # given before: its server may still hold it, or be about to
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _ports_given.add(port)
        return port
    _ports_given.clear()
    return free_port()


def wait_for(
    predicate: Callable[[], Any],
    timeout: float = 20.0,
    interval: float = 0.05,
    what: str = "condition",
):
    """Poll until predicate() is truthy; return its value or fail with `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


# --- databases --------------------------------------------------------------------


def end_sessions(database_url: str, pids: list[int]) -> None:
    """Drop these server sessions, as a failover does, and wait until they are gone
    (pg_terminate_backend only signals them)."""
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) pid", (pids,))
        wait_for(
            lambda: (
                not admin.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)
                ).fetchone()
            ),
            what="the sessions to end",
        )


def _test_database_url() -> str:
    from django.db import connection

    db = connection.settings_dict
    user = db.get("USER") or "postgres"
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    return f"postgres://{user}{password}@{host}:{port}/{db['NAME']}"


def _flush_that_outlasts_a_busy_worker() -> None:
    """A transactional test's teardown flush, tried again when it lost a lock race.

    TRUNCATE takes every table's lock in turn. A server or worker the test started may
    still be writing (a run the test created need not have ended), and Postgres can pick
    the flush as a deadlock's victim, or end its session. The flush then failed and the
    next test met the rows it left. Such a flush is rolled back whole, so it is tried
    again on a fresh connection when the cause was a lock or a dropped session.
    """
    import psycopg
    from django.core.management.base import CommandError
    from django.core.management.commands import flush
    from django.db import connections

    handle = flush.Command.handle
    retried = (
        psycopg.errors.DeadlockDetected,
        psycopg.errors.LockNotAvailable,
        psycopg.errors.QueryCanceled,
        psycopg.OperationalError,
    )

    @functools.wraps(handle)
    def handle_again(self, **options):
        for attempt in range(5):
            try:
                return handle(self, **options)
            except CommandError as exc:
                cause = exc.__cause__
                cause = getattr(cause, "__cause__", None) or cause  # Django's wrapper
                if attempt == 4 or not isinstance(cause, retried):
                    raise
                conn = connections[options.get("database") or "default"]
                if not conn.is_usable():
                    conn.close()
                    conn.connection = None

    flush.Command.handle = handle_again


if USING_POSTGRES:
    _flush_that_outlasts_a_busy_worker()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if USING_POSTGRES:
        reopen_dead_connections(item.config)
        replace_exhausted_pools()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item):
    close_shared_thread_connections()


def close_shared_thread_connections() -> bool:
    """After each test, before its fixtures' teardown: the Django connections on asgiref's
    one shared thread are closed.

    An async ORM call (``acount()``, ``sync_to_async``) outside a request runs on that
    thread, which outlives the test, and Django leaves its connection open there. The
    next test would inherit it: a test without database access then fails when Channels'
    ``database_sync_to_async`` checks that connection, and the session still holds the
    test database at teardown. Returns whether there was a thread to visit.
    """
    from asgiref.sync import SyncToAsync
    from django.db import connections

    executor = SyncToAsync.single_thread_executor
    if not executor._threads:
        return False
    with contextlib.suppress(TimeoutError):  # a test left it busy: its own failure says so
        executor.submit(connections.close_all).result(timeout=30)
    return True


def web_command(
    port: int, app: str = "hitl.asgi:application", launcher: list[str] = WEB
) -> list[str]:
    """The web process's command line, as `make run` and compose start it, on `port`."""
    return [*launcher, "-b", "127.0.0.1", "-p", str(port), app]


def replace_exhausted_pools() -> list[str]:
    """Before each test: a pool with every connection out is replaced by a fresh one.

    Threads an earlier test left running (or its pool's reconnects, backing off after
    the server dropped its sessions) can hold all of a pool's connections; every later
    test's setup would then wait out the pool timeout and fail in a cascade. The warning
    names the threads alive, to find the holder. A connection held by such a thread goes
    back to its own (closed) pool, which closes it. Returns the aliases replaced.
    """
    from django.db import connections

    replaced = []
    for conn in connections.all(initialized_only=True):
        pool = getattr(type(conn), "_connection_pools", {}).get(conn.alias)
        if pool is None or conn.in_atomic_block:
            continue
        stats = pool.get_stats()
        if stats.get("pool_available", 0) or stats.get("pool_size", 0) < pool.max_size:
            continue
        try:  # connections on their way back (a reset runs on the pool's workers) come soon
            pool.putconn(pool.getconn(timeout=5))
            continue
        except Exception:  # PoolTimeout: none came back
            pass
        threads = sorted(t.name for t in threading.enumerate() if t is not threading.main_thread())
        warnings.warn(
            f"every connection of the {conn.alias!r} pool is out before this test "
            f"({stats}); replacing the pool. Threads alive: {', '.join(threads) or 'none'}",
            stacklevel=1,
        )
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
            _drop_with_pool(conn)
        replaced.append(conn.alias)
    return replaced


def _drop_with_pool(conn) -> None:
    """Close a Django connection and its whole pool, whatever state either is in."""
    with contextlib.suppress(Exception):
        conn.close()
    conn.connection = None
    with contextlib.suppress(Exception):
        conn.close_pool()


def reopen_dead_connections(config) -> list[str]:
    """Before each test's fixtures: a dead Django connection is dropped, not inherited.

    Django closes unusable connections at the start and end of a request, which tests
    do not make: a session the server ended (a restart, a backend killed) would fail
    every later test's setup and teardown. Here the connection is checked (one round
    trip), and a dead one is closed with its whole pool (the server usually ended its
    neighbours too). Its test's teardown flush may not have run, so the database is
    flushed as a transactional test's teardown does: one fault costs one test.
    Returns the aliases it reopened.
    """
    from django.core.management import call_command
    from django.db import connections
    from pytest_django.plugin import blocking_manager_key

    reopened = []
    for conn in connections.all(initialized_only=True):
        if conn.connection is None or conn.in_atomic_block or conn.is_usable():
            continue
        reopened.append(conn.alias)
        # Playwright's sync API leaves an event loop running on this thread.
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
            _drop_with_pool(conn)
            if conn.settings_dict["NAME"].startswith("test_"):
                with config.stash[blocking_manager_key].unblock():
                    call_command("flush", database=conn.alias, interactive=False, verbosity=0)
                    conn.close()
    return reopened


@pytest.fixture(scope="session")
def test_database_url(django_db_setup, django_db_blocker) -> str:
    with django_db_blocker.unblock():
        return _test_database_url()


@pytest.fixture(scope="session", autouse=True)
def _checkpoints_in_test_database(django_db_setup, django_db_blocker, tmp_path_factory):
    """Point this process's checkpointer at the test database (or a temp SQLite file)."""
    from django.db import connection
    from django.db.backends.base.creation import TEST_DATABASE_PREFIX

    # pytest-django creates the test database only when a collected test uses one; a
    # session of database-free tests gets a throwaway SQLite checkpointer instead.
    database_made = str(connection.settings_dict["NAME"]).startswith(TEST_DATABASE_PREFIX)
    if USING_POSTGRES and database_made:
        with django_db_blocker.unblock():
            settings.HITL_CHECKPOINT_URL = _test_database_url()
        # Set up its tables now, outside any test's transaction: their CREATE INDEX
        # CONCURRENTLY waits for every transaction holding a snapshot, and a test's own
        # transaction would then wait for the setup it started.
        from hitl.core.runs.graphs import checkpointer, store

        checkpointer()
        store()  # the same for the store's tables
    else:
        settings.HITL_CHECKPOINT_URL = (
            f"sqlite:///{tmp_path_factory.mktemp('cp') / 'checkpoints.sqlite3'}"
        )
    yield
    # Close the checkpointer's connections so the test database can be dropped.
    from agents import checkpoint
    from hitl.core.worker.engine import engine

    engine.shutdown()

    for _, saver in list(checkpoint._cache.values()):
        close = getattr(saver.conn, "close", None)
        if close is not None:
            close()
    checkpoint._cache.clear()


@pytest.fixture(autouse=True)
def _no_cached_configuration():
    """Each test's rolled-back groups, policies and rules leave no cached copy behind."""
    from hitl.core.access import confcache

    confcache.clear()
    yield
    confcache.clear()


@pytest.fixture(autouse=True)
def _nothing_held_from_other_tests():
    """Work the manual executor held for an earlier test is not this test's to run."""
    from hitl.core import later

    later.forget_held()
    yield
    later.forget_held()


@pytest.fixture(autouse=True)
def _decisions_act_at_once(settings):
    """Browser decisions resume at once unless a test sets HITL_UNDO_SECONDS itself
    (tests/review/test_undo.py covers the grace period)."""
    settings.HITL_UNDO_SECONDS = 0


@pytest.fixture
def manual_runs(settings, request, monkeypatch):
    """Runs are not dispatched; the test executes them with `execute`."""
    settings.HITL_EXECUTOR = "manual"
    from hitl.core.worker import execute
    from hitl.core.worker.execute import execute_run

    if "transactional_db" not in request.fixturenames:
        # The process's lease thread reads the run rows on its own connection, which
        # cannot see this test's open transaction: it would stop any run longer than
        # one check as "cancelled". Transactional tests keep the real watch.
        monkeypatch.setattr(execute.leases, "watching", False)

    def execute(run) -> str:
        outcome, _ = execute_run(str(getattr(run, "pk", run)), worker="pytest")
        return outcome

    return execute


# --- personas ---------------------------------------------------------------------


@pytest.fixture
def reviewers_group(db):
    from django.contrib.auth.models import Group

    return Group.objects.get_or_create(name=settings.HITL_DEFAULT_REVIEWER_GROUP)[0]


@pytest.fixture
def finance_group(db):
    from django.contrib.auth.models import Group

    return Group.objects.get_or_create(name="finance")[0]


@functools.cache
def _password_hash(password: str) -> str:
    # Hashing costs ~0.5 s; each persona's hash is computed once per session (still the
    # real hasher, so real servers started by the tests accept the login).
    from django.contrib.auth.hashers import make_password

    return make_password(password)


def _make_user(username: str, *groups, **extra):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(username=username, password=None, **extra)
    user.password = _password_hash("pw-" + username)
    user.save(update_fields=["password"])
    for group in groups:
        user.groups.add(group)
    return user


@pytest.fixture
def reviewer(reviewers_group):
    return _make_user("rita", reviewers_group)


@pytest.fixture
def second_reviewer(reviewers_group):
    return _make_user("sam", reviewers_group)


@pytest.fixture
def finance_reviewer(finance_group):
    return _make_user("fiona", finance_group)


@pytest.fixture
def requester(db):
    return _make_user("quinn")


@pytest.fixture
def outsider(db):
    return _make_user("oscar")


@pytest.fixture
def admin_user(db):
    return _make_user("ada", is_staff=True, is_superuser=True)


# --- API client -------------------------------------------------------------------


class ApiClient:
    """Calls the JSON API with a user's token through Django's test client."""

    def __init__(self, user=None):
        from django.test import Client

        self.client = Client()
        self.headers: dict[str, str] = {}
        if user is not None:
            from hitl.core.models import ApiToken

            _, key = ApiToken.issue(user=user, name="test")
            self.headers["HTTP_AUTHORIZATION"] = f"Bearer {key}"

    def get(self, path: str, **params):
        return self.client.get(path, params, **self.headers)

    def post(self, path: str, data: Any = None, *, raw: str | bytes | None = None):
        body = raw if raw is not None else json.dumps(data if data is not None else {})
        return self.client.post(path, body, content_type="application/json", **self.headers)

    def decide(self, row, response_type: str, args: Any = None, *, expect: int | None = None):
        """Answer one interrupt row through /api/v1; with expect, insist on that status."""
        response = self.post(
            f"/api/v1/interrupts/{row.pk}/decision", {"type": response_type, "args": args}
        )
        if expect is not None:
            assert response.status_code == expect, response.content
        return response


@pytest.fixture
def media(settings, tmp_path) -> Path:
    """Uploaded files and artifacts land in this test's own folder."""
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return tmp_path / "media"


@pytest.fixture
def api_for(db) -> Callable[[Any], ApiClient]:
    return ApiClient


def decide(row, user, response_type: str = "accept", args: Any = None):
    """Answer one interrupt row through the one service every surface calls."""
    from hitl.core import decisions

    return decisions.interrupt_resolve(
        interrupt_id=row.pk, user=user, response_type=response_type, args=args
    )


# --- real processes ---------------------------------------------------------------


def service_env(database_url: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    # Browser decisions act at once unless a test asks for an undo grace period.
    env.setdefault("HITL_UNDO_SECONDS", "0")
    env.update(
        {
            "DATABASE_URL": database_url,
            "REDIS_URL": settings.REDIS_URL,
            "HITL_CHECKPOINT_URL": database_url,
            "HITL_EXECUTOR": "celery",
            "DJANGO_SETTINGS_MODULE": "hitl.settings",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


class Proc:
    def __init__(self, popen: subprocess.Popen, log: Path):
        self.popen, self.log = popen, log

    @property
    def pid(self) -> int:
        return self.popen.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> None:
        self.ask_to_stop(sig)
        self.wait_stopped(timeout)

    def ask_to_stop(self, sig: int = signal.SIGTERM) -> None:
        """Send `sig` to the process group, unless it has exited."""
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)

    def wait_stopped(self, timeout: float = 15) -> None:
        """Wait for the process to exit; past `timeout`, kill its group."""
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=5)


def stop_together(*procs: Proc) -> None:
    """Stop processes side by side: each is asked at once, then each awaited."""
    for proc in procs:
        proc.ask_to_stop()
    for proc in procs:
        proc.wait_stopped()


def spawn(args: list[str], env: dict[str, str], log: Path) -> Proc:
    handle = log.open("wb")
    popen = subprocess.Popen(
        args, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
    )
    return Proc(popen, log)


def start_celery_worker(
    database_url: str,
    log: Path,
    *,
    name: str,
    concurrency: int = 2,
    pool: str = "prefork",
    **extra_env: str,
) -> Proc:
    # Celery reads an explicit `--pool prefork` as its default and takes the configured
    # pool (HITL_WORKER_POOL, threads) instead: say which one in both places.
    extra_env.setdefault("HITL_WORKER_POOL", pool)
    proc = spawn(
        [
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
            f"{name}@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-l",
            "INFO",
        ],
        service_env(database_url, **extra_env),
        log,
    )
    wait_for(
        lambda: "ready." in proc.output() or proc.popen.poll() is not None,
        60,
        0.1,
        "celery worker to start",
    )
    if proc.popen.poll() is not None:
        raise AssertionError(f"celery worker exited:\n{proc.output()[-4000:]}")
    return proc


@pytest.fixture
def spawned(transactional_db) -> Iterator[list[Proc]]:
    """The processes a test's factories start (workers, beats, webs): stopped side by side
    at its teardown, each asked at once, then each awaited. (Stopped one factory at a
    time, a test with a worker, a beat and a web waited for each stop in turn.) They share
    the test's database, so the test is transactional, and they are stopped before its
    tables are emptied."""
    procs: list[Proc] = []
    yield procs
    stop_together(*procs)


@pytest.fixture
def worker_factory(test_database_url, tmp_path, spawned) -> Callable[..., Proc]:
    """Start real Celery worker processes against the test database; stopped at teardown."""

    def start(name: str = "w1", **kwargs) -> Proc:
        proc = start_celery_worker(
            test_database_url, tmp_path / f"celery-{name}.log", name=name, **kwargs
        )
        spawned.append(proc)
        return proc

    return start


@pytest.fixture
def celery_worker(worker_factory, transactional_db) -> Proc:
    return worker_factory("w1")


@pytest.fixture
def asgi_server(test_database_url, tmp_path, transactional_db) -> Iterator[str]:
    """A real daphne server (HTTP + WebSockets) on a free port; yields its base URL."""
    port = free_port()
    proc = spawn(
        web_command(port),
        service_env(test_database_url),
        tmp_path / "daphne.log",
    )

    def up() -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_for(up, 60, 0.1, "daphne to listen")
        yield f"http://127.0.0.1:{port}"
    finally:  # also when it never listened: no daphne outlives its test
        proc.stop()


def store_clear() -> None:
    """Empty LangGraph's store (its tables are not Django's: a flush leaves them)."""
    from hitl.core.runs.graphs import store

    kept = store()
    for namespace in kept.list_namespaces(limit=10_000):
        for item in kept.search(namespace, limit=10_000):
            kept.delete(item.namespace, item.key)
