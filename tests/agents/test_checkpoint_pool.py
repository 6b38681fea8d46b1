"""The checkpointer pool's check: a round trip only for connections idle a while."""

from __future__ import annotations

import time

import psycopg
import pytest

from agents.pg_pool import CHECK_AFTER_IDLE_SECONDS, check_if_idle, mark_returned
from hitl.core.db import retry
from hitl.postgresql.base import check_pooled
from tests.conftest import end_sessions

pytestmark = pytest.mark.postgres


def test_a_dropped_connection_is_found_only_once_it_was_idle(test_database_url):
    conn = psycopg.connect(test_database_url, autocommit=True)
    end_sessions(test_database_url, [conn.info.backend_pid])
    mark_returned(conn)
    check_if_idle(conn)  # used a moment ago: no round trip, so nothing noticed
    conn._hitl_returned = time.monotonic() - CHECK_AFTER_IDLE_SECONDS
    with pytest.raises(psycopg.OperationalError):
        check_if_idle(conn)  # idle long enough: checked, and the dead session shows
    conn.close()


@pytest.mark.django_db(transaction=True)
def test_djangos_pool_replaces_a_connection_dropped_while_idle(test_database_url):
    """Django's pool checks with the same hook: a session the server dropped while it
    sat in the pool is replaced before a request uses it."""
    from django.db import connection

    pool = connection.pool
    assert (pool._check, pool._reset) == (check_pooled, mark_returned)  # hitl/postgresql
    connection.close()
    conn = pool.getconn()
    pid = conn.info.backend_pid
    pool.putconn(conn)
    end_sessions(test_database_url, [pid])
    for idle in pool._pool:
        idle._hitl_returned = time.monotonic() - CHECK_AFTER_IDLE_SECONDS
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] != pid


@pytest.mark.django_db(transaction=True)
def test_a_step_whose_session_dropped_is_written_again_not_run_again(test_database_url):
    """The run engine's saver meets a session the server dropped right after a node ran
    (used a moment ago, so not checked): the step's writes go through on another
    connection, the run goes on, and the finished node does not run again."""
    import asyncio
    import uuid
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    from agents.checkpoint import _amake

    class State(TypedDict, total=False):
        done: list[str]

    ran: list[str] = []
    dropped: list[int] = []

    async def main() -> dict:
        saver = await _amake(test_database_url, 1)
        pool = saver.conn

        def act(state: State) -> State:
            ran.append("act")
            # Every idle session of the saver's pool dies, as in a failover; each was
            # handed back a moment ago, so the step's write takes one unchecked.
            pids = [conn.info.backend_pid for conn in pool._pool]
            end_sessions(test_database_url, pids)
            for conn in pool._pool:
                mark_returned(conn)
            dropped.extend(pids)
            return {"done": ["act"]}

        graph = (
            StateGraph(State)
            .add_node("act", act)
            .add_node("after", lambda state: {"done": [*state["done"], "after"]})
            .add_edge(START, "act")
            .add_edge("act", "after")
            .add_edge("after", END)
            .compile(checkpointer=saver)
        )
        config = {"configurable": {"thread_id": str(uuid.uuid4())}}
        try:
            result = await graph.ainvoke({}, config, durability="sync")
            state = await graph.aget_state(config)
            return {"result": result, "next": state.next}
        finally:
            await pool.close()

    outcome = asyncio.run(main())
    assert dropped  # the fault happened
    assert ran == ["act"]
    assert outcome == {"result": {"done": ["act", "after"]}, "next": ()}


@pytest.mark.django_db(transaction=True)
def test_after_a_fault_djangos_pool_checks_connections_used_a_moment_ago(
    test_database_url, monkeypatch
):
    """Once this process met a dropped session, its neighbours in the pool (dropped with
    it, as a failover or pg_terminate_backend does) are replaced before use too, though
    they were handed back a moment ago."""
    from django.db import connection

    monkeypatch.setattr(retry, "_suspect_until", 0.0)
    connection.close()
    # A pool of this test's own: idle connections an earlier test left would each cost a
    # failed check here, and psycopg_pool pauses longer after each (1 s, 2 s, 4 s ...).
    connection.close_pool()
    connection.ensure_connection()  # Django opens the new pool as it does on a request
    connection.close()
    pool = connection.pool
    held = [pool.getconn() for _ in range(max(len(pool._pool), 2))]  # every idle one
    pids = [conn.info.backend_pid for conn in held]
    for conn in held:
        pool.putconn(conn)  # back in the pool just now: not checked by default
    end_sessions(test_database_url, pids)
    assert not retry.connections_suspect()
    retry.suspect_connections()  # what a request that met the fault does
    assert retry.connections_suspect()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] not in pids
    connection.close()
    # The dropped sessions this test made must not outlive it: the tests after it (and
    # this one's teardown) would get them once the suspect window has passed.
    pool.check()


@pytest.mark.django_db(transaction=True)
def test_a_checkout_after_a_failover_replaces_every_dead_session_at_once(
    test_database_url, monkeypatch
):
    """The first failed check replaces the pool's other dropped sessions too: found one
    by one, psycopg_pool would pause 1 s, 2 s, 4 s... before each next checkout, past a
    wait's or a request's deadline."""
    import psycopg_pool.pool
    from django.db import connection

    from agents import pg_pool

    monkeypatch.setattr(retry, "_suspect_until", 0.0)
    connection.close()
    connection.close_pool()  # a pool of this test's own
    connection.ensure_connection()
    connection.close()
    pool = connection.pool
    held = [pool.getconn() for _ in range(5)]
    pids = [conn.info.backend_pid for conn in held]
    for conn in held:
        pool.putconn(conn)
    # As though each sat idle a while: every checkout checks it.
    monkeypatch.setattr(pg_pool, "CHECK_AFTER_IDLE_SECONDS", 0.0)
    end_sessions(test_database_url, pids)
    paused: list[float] = []
    real_sleep = psycopg_pool.pool.sleep
    monkeypatch.setattr(
        psycopg_pool.pool, "sleep", lambda seconds: (paused.append(seconds), real_sleep(seconds))
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    connection.close()
    assert pid not in pids
    assert not [seconds for seconds in paused if seconds > 0], paused
    assert retry.connections_suspect()  # the next checkouts are checked too


@pytest.mark.django_db(transaction=True)
def test_a_read_whose_session_dropped_is_read_again(test_database_url):
    """A run's first read meets a session the server dropped a moment after it came
    back to the pool (so not checked): read again on another connection, the run
    goes on instead of going back to the queue."""
    import asyncio
    import uuid

    from langgraph.checkpoint.base import empty_checkpoint

    from agents.checkpoint import _amake

    async def main() -> tuple[list[int], object]:
        saver = await _amake(test_database_url, 1)
        pool = saver.conn
        try:
            config = {"configurable": {"thread_id": str(uuid.uuid4()), "checkpoint_ns": ""}}
            written = await saver.aput(config, empty_checkpoint(), {"step": 1}, {})
            pids = [conn.info.backend_pid for conn in pool._pool]
            end_sessions(test_database_url, pids)
            for conn in pool._pool:
                mark_returned(conn)  # handed back a moment ago: used without a check
            found = await saver.aget_tuple(written)
            return pids, found
        finally:
            await pool.close()

    pids, found = asyncio.run(main())
    assert pids  # the fault happened
    assert found is not None and found.metadata["step"] == 1
