"""HITL behind PgBouncer in transaction mode (HITL_DATABASE_POOLER=pgbouncer).

A web process and two Celery workers reach the test database only through Debian's
pgbouncer, which opens at most 10 server sessions for all of them, and every transaction
may land on another session. The approval cycle, checkpoints and history, leases,
cancels, the checkpointer's locked setup and a burst of runs all work, with no
prepared-statement or session-state error in any process's log.
tests/ops/test_pgbouncer_switch.py shows the same worker without the switch failing.
"""

from __future__ import annotations

import subprocess
import threading
from dataclasses import dataclass
from typing import Any

import httpx
import psycopg
import pytest
from django.db import connection
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from agents.pg_pool import setup_locked
from hitl.core import decisions, runs
from hitl.core.models import ApiToken, HumanInterrupt, Run, Thread
from tests.async_graphs import ASYNC_GRAPHS, TARGETS
from tests.conftest import (
    PYTHON,
    ROOT,
    Proc,
    free_port,
    service_env,
    spawn,
    start_celery_worker,
    wait_for,
    web_command,
)
from tests.ops.conftest import OPS_ENV, PGBOUNCER_SERVER_POOL, SESSION_ERRORS, port_open

pytestmark = pytest.mark.postgres

RUNS_PER_WORKER = 24
ENV = {
    **OPS_ENV,
    "HITL_EXTRA_GRAPHS": ASYNC_GRAPHS,
    "HITL_RUNS_PER_WORKER": str(RUNS_PER_WORKER),
    "HITL_DATABASE_POOLER": "pgbouncer",
}


@dataclass
class Fleet:
    base: str
    procs: list[Proc]

    def session_errors(self) -> list[str]:
        return [
            line
            for proc in self.procs
            for line in proc.output().splitlines()
            if SESSION_ERRORS.search(line)
        ]


@pytest.fixture(scope="module")
def fleet(pgbouncer, tmp_path_factory) -> Any:
    """Two workers and a web process for the module, all through the pooler."""
    folder = tmp_path_factory.mktemp("fleet")
    url = pgbouncer.url()
    procs: list[Proc] = []
    try:
        for name in ("pgb1", "pgb2"):
            procs.append(
                start_celery_worker(
                    url,
                    folder / f"{name}.log",
                    name=name,
                    pool="threads",
                    concurrency=RUNS_PER_WORKER,
                    **ENV,
                )
            )
        port = free_port()
        web = spawn(
            web_command(port),
            service_env(url, **ENV),
            folder / "daphne.log",
        )
        procs.append(web)
        wait_for(lambda: port_open(port) or web.popen.poll() is not None, 60, 0.1, "daphne")
        assert web.popen.poll() is None, web.output()[-3000:]
        yield Fleet(f"http://127.0.0.1:{port}", procs)
    finally:
        for proc in procs:
            proc.stop()


@pytest.fixture
def live(fleet, transactional_db, pgbouncer) -> Any:
    for proc in fleet.procs:
        assert proc.popen.poll() is None, "a process died:\n" + proc.output()[-3000:]
    database = connection.settings_dict["NAME"]
    before = pgbouncer.transactions(database)
    yield fleet
    # The work went through the pooler, and nobody met a session other than the one
    # they prepared or declared something in.
    assert pgbouncer.transactions(database) > before
    assert not fleet.session_errors(), "\n".join(fleet.session_errors()[:10])


@pytest.fixture(autouse=True)
def async_graphs(monkeypatch):
    from hitl.core.registry import registry

    for name, target in TARGETS.items():
        monkeypatch.setitem(registry.targets, name, target)


class Http:
    """One user's API calls to the web process."""

    def __init__(self, base: str, user):
        key = ApiToken.issue(user=user, name="pgbouncer")[1]
        self.client = httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30
        )

    def get(self, path: str) -> Any:
        response = self.client.get(path)
        assert response.status_code == 200, response.text[:2000]
        return response.json()

    def post(self, path: str, body: Any = None, status: int = 200) -> Any:
        response = self.client.post(path, json=body if body is not None else {})
        assert response.status_code == status, response.text[:2000]
        return response.json()


def failed(thread_ids) -> str | None:
    run = Run.objects.filter(thread_id__in=thread_ids, status="error").first()
    return run and run.error


def all_in(thread_ids, status: str) -> bool:
    assert not failed(thread_ids), failed(thread_ids)
    statuses = list(Thread.objects.filter(pk__in=thread_ids).values_list("status", flat=True))
    return statuses.count(status) == len(thread_ids)


def test_the_approval_cycle_runs_through_pgbouncer(live, requester, reviewer):
    asker, answerer = Http(live.base, requester), Http(live.base, reviewer)
    answers = {
        "accept": None,
        "ignore": None,
        "response": "Hold it until Monday.",
        "edit": {"args": {"to": "cfo@example.com", "subject": "Q3", "copies": 4, "urgent": True}},
    }
    threads = {
        kind: asker.post("/api/v1/threads", {"graph": "approval", "input": {"request": kind}}, 201)[
            "thread_id"
        ]
        for kind in answers
    }
    wait_for(lambda: all_in(threads.values(), "interrupted"), 60, 0.1, "every thread to pause")
    for kind, thread_id in threads.items():
        [row] = HumanInterrupt.objects.filter(thread_id=thread_id, status="pending")
        answerer.post(
            f"/api/v1/interrupts/{row.pk}/decision", {"type": kind, "args": answers[kind]}
        )
    wait_for(lambda: all_in(threads.values(), "done"), 60, 0.1, "every thread to finish")

    for kind, thread_id in threads.items():
        resume = Run.objects.get(thread_id=thread_id, kind="resume")
        assert resume.status == "success"
        assert resume.result["decision"]["type"] == kind
        assert resume.result["sent"] is (kind in ("accept", "edit"))
        # The checkpoints, read back by the web process's checkpointer.
        state = asker.get(f"/langgraph/threads/{thread_id}/state")
        assert state["values"]["decision"]["type"] == kind
        assert state["next"] == []
        history = asker.get(f"/langgraph/threads/{thread_id}/history")
        assert len(history) >= 3  # input, the pause, the end
    edited = Run.objects.get(thread_id=threads["edit"], kind="resume").result["decision"]
    assert edited["args"]["args"]["copies"] == 4  # a number stays a number


def test_a_lease_is_kept_and_a_cancel_stops_its_run_through_pgbouncer(live, requester, tmp_path):
    asker = Http(live.base, requester)
    folder = tmp_path / "gated"
    folder.mkdir()
    thread_id = asker.post(
        "/api/v1/threads",
        {"graph": "async_gated", "input": {"dir": str(folder), "gates": ["model"]}},
        201,
    )["thread_id"]
    wait_for(lambda: any(folder.glob("at-model-*")), 60, 0.1, "the run to await the model")
    run = Run.objects.get(thread_id=thread_id)

    # The worker renews its lease (2 s, every half second) while the run awaits.
    first = run.lease_expires_at
    wait_for(
        lambda: Run.objects.get(pk=run.pk).lease_expires_at > first,
        10,
        0.1,
        "the lease to be renewed",
    )
    asker.post(f"/api/v1/threads/{thread_id}/cancel")
    wait_for(
        lambda: any(f"run {run.pk} stopped: cancelled" in p.output() for p in live.procs),
        15,
        0.05,
        "the worker to stop the cancelled run",
    )
    (folder / "open-model").touch()
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert Thread.objects.get(pk=thread_id).status == "idle"
    assert not HumanInterrupt.objects.filter(thread_id=thread_id).exists()


def test_a_burst_of_runs_pauses_and_finishes_through_ten_server_sessions(
    live, requester, reviewer, pgbouncer, tmp_path
):
    count = RUNS_PER_WORKER * 2
    shared = tmp_path / "burst"
    shared.mkdir()
    started = [
        runs.run_start(
            graph="async_gated", input={"dir": str(shared), "gates": ["model"]}, user=requester
        )
        for _ in range(count)
    ]
    thread_ids = [run.thread_id for run in started]
    wait_for(
        lambda: (
            len(list(shared.glob("at-model-*"))) >= 2  # both workers hold runs
            and Run.objects.filter(thread_id__in=thread_ids, status="running").count() == count
        ),
        90,
        0.1,
        f"{count} runs in flight",
    )
    (shared / "open-model").touch()
    wait_for(lambda: all_in(thread_ids, "interrupted"), 90, 0.1, "every run to pause")
    for row in HumanInterrupt.objects.filter(thread_id__in=thread_ids):
        decisions.interrupt_resolve(interrupt_id=row.pk, user=reviewer, response_type="accept")
    wait_for(lambda: all_in(thread_ids, "done"), 90, 0.1, "every run to finish")
    assert (shared / "published.log").read_text().count("\n") == count
    assert Run.objects.filter(thread_id__in=thread_ids, kind="resume").count() == count
    assert not Run.objects.filter(thread_id__in=thread_ids).exclude(attempts=1).exists()
    # All of it on the pooler's few server sessions.
    servers = sum(
        int(p["sv_active"]) + int(p["sv_idle"]) + int(p["sv_used"])
        for p in pgbouncer.show("POOLS")
        if p["database"] == connection.settings_dict["NAME"]
    )
    assert 0 < servers <= PGBOUNCER_SERVER_POOL


def test_the_checkpointer_setup_lock_holds_through_pgbouncer(pgbouncer, test_database_url):
    """Two setups through the pooler: the second starts only once the first is over, and
    no lock is left behind on any server session."""
    kwargs = {"autocommit": True, "prepare_threshold": None, "row_factory": dict_row}
    lock_id = 0x4849_544C  # a lock of this test's own
    order: list[str] = []
    first_in = threading.Event()
    release = threading.Event()

    def first(conn) -> None:
        order.append("first in")
        first_in.set()
        release.wait(10)
        order.append("first out")

    def second(conn) -> None:
        order.append("second in")

    pools = [
        ConnectionPool(pgbouncer.url(), min_size=1, max_size=2, kwargs=kwargs, open=True)
        for _ in range(2)
    ]
    try:
        one = threading.Thread(target=setup_locked, args=(pools[0], first, lock_id))
        one.start()
        assert first_in.wait(10)
        two = threading.Thread(target=setup_locked, args=(pools[1], second, lock_id))
        two.start()
        two.join(0.5)
        assert two.is_alive() and order == ["first in"]  # waiting for the first
        release.set()
        one.join(10)
        two.join(10)
    finally:
        for pool in pools:
            pool.close()
    assert order == ["first in", "first out", "second in"]
    with psycopg.connect(test_database_url) as direct:
        held = direct.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %s",
            (lock_id,),
        ).fetchone()[0]
    assert held == 0


def test_the_switch_turns_off_what_lives_in_a_session(test_database_url):
    """What HITL_DATABASE_POOLER=pgbouncer changes, read by a fresh process."""
    script = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.HITL_DB_PREPARE, s.DATABASES['default'].get('DISABLE_SERVER_SIDE_CURSORS'))"
    )

    def read(**env: str) -> str:
        out = subprocess.run(
            [PYTHON, "-c", script],
            env=service_env(test_database_url, **env),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout.strip()

    assert read(HITL_DATABASE_POOLER="pgbouncer") == "False True"
    assert read(HITL_DATABASE_POOLER="") == "True False"
    wrong = subprocess.run(
        [PYTHON, "-c", script],
        env=service_env(test_database_url, HITL_DATABASE_POOLER="pgpool"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert wrong.returncode != 0
    assert "HITL_DATABASE_POOLER must be empty or pgbouncer" in wrong.stderr
